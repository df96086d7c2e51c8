// The CPU kernel's SIMD forms (host code with the GCC/clang vector types of kernels/team.hpp):
// the FP32 template sums, the rotated model from convolved grid rows, the continuum moments pass
// and the phased CCF, their CPU-only inputs (CpuFitExtras), and SimdTeam, the serial team that
// carries them. The shared kernels select these forms through the team interface
// (kern::host_simd<Team>(), kernels/team.hpp); the CUDA backend never includes this header.
// One-definition rule: the helpers are VX_INLINE (internal linkage in the per-ISA objects,
// kernels/hd.hpp), and SimdTeam's members are local to an object that instantiates it on a local
// type (fit_slot.cpp).
#pragma once
#include <cstring>
#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include "kernels/batch.hpp"

#if !defined(VX_VECF) || !defined(VX_VEC8)
#error "backend/cpu/isa/simd_forms.hpp: host code with GCC/clang vector types only"
#endif

namespace velox::kern {

// CPU-only inputs of one spectrum's fit (FitData::cpu; the CPU backend fills them from its
// BatchView, cpu::cpu_fit_extras): behind one pointer so that the GPU's FitData, which the warp
// kernel copies onto its stack (segment_view), does not grow.
struct CpuFitExtras {
  // Scratch [np][n_tpix] for the rotated model's grid rows convolved with the rotation kernel
  // (rotated_rows_cpu); with it, FitData::Tg is used column-major, [np][n_tpix], too.
  double* Tr = nullptr;
  // Per arm: the basis transposed, [K+1][n_tpix] (nullptr: rows from FitData::basis).
  const float* basis_t[kMaxArms] = {};
  // Per arm: the first ccf_ph_geom.n_tmpl coarse CCF templates de-interleaved by the lag step
  // (CcfPhases, kernels/ccf.hpp; nullptr: the direct form).
  const float* ccf_ph[kMaxArms] = {};
  CcfPhases ccf_ph_geom;
  // Velocity-only evaluations (labels and VSINI held: the VRAD_SKEW/KURT grid, the arms'
  // velocities, fit_velocity_held) at one set of coefficients differ only in the Doppler shift:
  // arm a's convolved rows are computed once, for the rows its pixels reach plus kVRowsPad each
  // side, kept in column 1 + a of Tr (a velocity-only evaluation uses column 0 alone), and reused
  // while the coefficients, the rotation kernel and the basis are the same
  // (SimdTeam::rotated_pixels). Per spectrum (fit_slot.cpp makes these extras per fit).
  struct VelocityRows {
    const float* basis = nullptr;  // nullptr: nothing kept
    int s0 = 0, s1 = -1, M = -1;   // convolved rows [s0, s1], rotation half-width
    double c[kMaxComp];
    double rot[2 * kMaxRotHalf + 1];
  };
  mutable VelocityRows vrows[kMaxArms];
  int tr_cols = 0;  // columns of Tr (the batch's np; 0 without Tr)
  // The host's SIMD form of the resolution rows (BatchView::host_fold; SimdTeam::fold_arm).
  HostFoldRows host_fold = nullptr;
};

namespace cpu {

VX_INLINE double* cpu_Tr(const FitData& d) { return d.cpu ? d.cpu->Tr : nullptr; }
VX_INLINE const float* cpu_basis_t(const FitData& d, int a) {
  return d.cpu ? d.cpu->basis_t[d.cpu_arm0 + a] : nullptr;
}
VX_INLINE const float* cpu_ccf_ph(const FitData& d, int a) {
  return d.cpu ? d.cpu->ccf_ph[d.cpu_arm0 + a] : nullptr;
}

// The CPU-only inputs of spectrum s in slot `slot` (FitData::cpu after kern::batch_views; the
// GPU leaves it nullptr).
VX_INLINE void cpu_fit_extras(const BatchView& b, int s, int slot, CpuFitExtras* x) {
  const BatchSpectrum& bs = b.spec[s];
  for (int a = 0; a < kMaxArms; ++a) {
    const bool on = a < bs.n_arms;
    x->basis_t[a] = on && b.basis_t ? b.basis_t[bs.model[a]] : nullptr;
    x->ccf_ph[a] = on && b.ccf_ph ? b.ccf_ph[bs.model[a]] : nullptr;
  }
  x->ccf_ph_geom = b.ccf_ph_geom;
  // Only for a spectrum that fits VSINI (the slot's scratch may be there from an earlier one):
  // which form a velocity-only evaluation takes must not depend on what the worker fitted before.
  const bool vsini = bs.fit_vsini && b.cfg.fit_vsini;
  x->Tr = vsini && b.Tr && b.Tg && b.slot_grid > 0 ? b.Tr + (long long)slot * slot_counts(b).Tg
                                                   : nullptr;
  x->tr_cols = x->Tr ? (int)(slot_counts(b).Tg / b.slot_grid) : 0;
  x->host_fold = b.host_fold;
}

// Rows kept beyond a velocity-only evaluation's own (CpuFitExtras::VelocityRows): 64 template
// rows, 960 km/s at dlnlam 5e-5, so that the other velocities of the VRAD_SKEW/KURT grid (+-6
// sigma) and of an arm's Newton steps find them.
constexpr int kVRowsPad = 64;

// component_sums in FP32 for the CPU (host only: kVecF floats per vector operation, 16 with
// AVX-512, twice the doubles' width, and the float basis is used as stored): the same sums, with
// c and dc rounded to float and zero-padded to KP (a multiple of 16), the weights rounded to
// float, kVecF partial sums per product (component k to lane k % kVecF) added as a tree at the
// end. Reads b0[0 .. 3 K1 + KP): up to 15 floats past the 4th row, which the basis arrays carry
// as padding (kBasisPad); those are multiplied by the zero padding of c and dc. The model's
// relative rounding is ~1e-7, far below any survey's noise (docs/performance.md: the effect on
// the accuracy figures).

// Sum of a float vector's lanes.
VX_INLINE float hsum_f(const VxVecF& v) {
  // Halves added as vectors down to 4 lanes, then ((a0 + a2) + (a1 + a3)).
  typedef float F8 __attribute__((vector_size(32)));
  typedef float F4 __attribute__((vector_size(16)));
  F4 c;
  if constexpr (kVecF == 16) {
    F8 a, b;
    __builtin_memcpy(&a, &v, sizeof a);
    __builtin_memcpy(&b, reinterpret_cast<const char*>(&v) + sizeof a, sizeof b);
    a += b;
    F4 x, y;
    __builtin_memcpy(&x, &a, sizeof x);
    __builtin_memcpy(&y, reinterpret_cast<const char*>(&a) + sizeof x, sizeof y);
    c = x + y;
  } else if constexpr (kVecF == 8) {
    F4 x, y;
    __builtin_memcpy(&x, &v, sizeof x);
    __builtin_memcpy(&y, reinterpret_cast<const char*>(&v) + sizeof x, sizeof y);
    c = x + y;
  } else {
    __builtin_memcpy(&c, &v, sizeof c);
  }
  return (c[0] + c[2]) + (c[1] + c[3]);
}
// c[K1] and dc[L][K1] rounded to float and zero-padded to KP components (K1 rounded up to a
// multiple of 16): cf[KP], dcf[L][KP].
struct CoeffsF32 {
  int KP;
  alignas(64) float cf[kMaxComp + 16];
  alignas(64) float dcf[kMaxLabels * (kMaxComp + 16)];
};
VX_INLINE void coeffs_f32(const double* c, const double* dc, int K1, int L, CoeffsF32* o) {
  const int KP = (K1 + 15) / 16 * 16;
  o->KP = KP;
  for (int k = 0; k < KP; ++k) {
    o->cf[k] = k < K1 ? (float)c[k] : 0.0f;
    for (int l = 0; l < L; ++l) o->dcf[l * KP + k] = k < K1 ? (float)dc[l * K1 + k] : 0.0f;
  }
}

// One basis row's template and label derivatives in FP32 (row_sums' products): bc = sum_k cf_k
// br[k], bdc[l] = sum_k dcf[l][k] br[k] over KP components (kVecF per vector operation, whole
// vectors read as in component_sums_f32).
template <int NL, bool LJ>
VX_INLINE void row_sums_f32(const float* br, int KP, const float* cf, const float* dcf, double* bc,
                            double* bdc) {
  typedef VxVecF F;
  constexpr int NLA = NL > 0 ? NL : 1;
  F t = {}, dl[NLA] = {};
  for (int kb = 0; kb < KP; kb += kVecF) {
    F b;
    __builtin_memcpy(&b, br + kb, sizeof b);
    t += *reinterpret_cast<const F*>(cf + kb) * b;
    if (LJ)
      for (int l = 0; l < NL; ++l) dl[l] += *reinterpret_cast<const F*>(dcf + l * KP + kb) * b;
  }
  *bc = hsum_f(t);
  if (LJ)
    for (int l = 0; l < NL; ++l) bdc[l] = hsum_f(dl[l]);
}

// Horizontal sums of N float vectors at once (N <= kVecF): out[q] = sum of v[q]'s lanes. The
// vectors are padded with zeros to M (a power of two) and folded pairwise, each fold (two
// shuffles and one add) halving the partial sums per quantity and doubling the quantities per
// vector, until one vector holds every quantity at lane q: log2(kVecF) + ... folds instead of
// N separate hsum_f trees (component_sums_f32's 5 sums per pixel).
template <int G>
VX_INLINE VxVecF fold_f(const VxVecF& x, const VxVecF& y) {
  // x and y hold W / G quantities of G partial sums each; the result holds 2 W / G quantities
  // (x's, then y's) of G / 2 partial sums.
  constexpr int W = kVecF, Q = W / G;
  typedef int I __attribute__((vector_size(sizeof(VxVecF))));
  I lo, hi;
  for (int q = 0; q < 2 * Q; ++q)
    for (int s = 0; s < G / 2; ++s) {
      const int src = (q < Q ? 0 : W) + (q % Q) * G + s;
      lo[q * (G / 2) + s] = src;
      hi[q * (G / 2) + s] = src + G / 2;
    }
#if defined(__clang__)
  // clang has no run-time-mask __builtin_shuffle (the sanitizer build): the same lanes by index.
  VxVecF r;
  for (int p = 0; p < W; ++p)
    r[p] = (lo[p] < W ? x[lo[p]] : y[lo[p] - W]) + (hi[p] < W ? x[hi[p]] : y[hi[p] - W]);
  return r;
#else
  return __builtin_shuffle(x, y, lo) + __builtin_shuffle(x, y, hi);
#endif
}
template <int M, int G>
VX_INLINE void fold_levels(VxVecF* v) {
  // M vectors of group size G -> fold until one vector of group size 1.
  if constexpr (G > 1) {
    if constexpr (M > 1) {
      for (int k = 0; k < M / 2; ++k) v[k] = fold_f<G>(v[2 * k], v[2 * k + 1]);
      fold_levels<M / 2, G / 2>(v);
    } else {
      v[0] = fold_f<G>(v[0], v[0]);
      fold_levels<1, G / 2>(v);
    }
  }
}
template <int N>
VX_INLINE void hsum_n(const VxVecF* v, double* out) {
  constexpr int M = N <= 1 ? 1 : N <= 2 ? 2 : N <= 4 ? 4 : N <= 8 ? 8 : 16;
  static_assert(M <= kVecF, "hsum_n: at most kVecF vectors");
  VxVecF a[M];
  for (int q = 0; q < M; ++q) a[q] = q < N ? v[q] : VxVecF{};
  fold_levels<M, kVecF>(a);
  for (int q = 0; q < N; ++q) out[q] = a[0][q];
}

// component_sums for the CPU in FP32 (above), with the cubic weights w0..w3 and their
// derivatives d0..d3 rounded to float by the caller (stencil_block).
template <int NL, int JM>
VX_INLINE void component_sums_f32(const float* b0, int K1, int KP, const float* cf,
                                  const float* dcf, float w0, float w1, float w2, float w3,
                                  float d0, float d1, float d2, float d3, double* t_out,
                                  double* dtu_out, double* dl_out) {
  typedef VxVecF F;
  constexpr int NLA = NL > 0 ? NL : 1;
  F t = {}, dtu = {}, dl[NLA] = {};
  const float* b1 = b0 + K1;
  const float* b2 = b1 + K1;
  const float* b3 = b2 + K1;
  for (int kb = 0; kb < KP; kb += kVecF) {
    F x0, x1, x2, x3;  // unaligned loads
    __builtin_memcpy(&x0, b0 + kb, sizeof x0);
    __builtin_memcpy(&x1, b1 + kb, sizeof x1);
    __builtin_memcpy(&x2, b2 + kb, sizeof x2);
    __builtin_memcpy(&x3, b3 + kb, sizeof x3);
    const F bk = w0 * x0 + w1 * x1 + w2 * x2 + w3 * x3;
    const F c = *reinterpret_cast<const F*>(cf + kb);
    t += c * bk;
    if (JM >= 1) {
      const F dbk = d0 * x0 + d1 * x1 + d2 * x2 + d3 * x3;
      dtu += c * dbk;
      if (JM >= 2)
        for (int l = 0; l < NL; ++l) dl[l] += *reinterpret_cast<const F*>(dcf + l * KP + kb) * bk;
    }
  }
  if constexpr (JM >= 2 && 2 + NL <= kVecF) {
    VxVecF v[2 + NLA];
    v[0] = t;
    v[1] = dtu;
    for (int l = 0; l < NL; ++l) v[2 + l] = dl[l];
    double o[2 + NLA];
    hsum_n<2 + NL>(v, o);
    *t_out = o[0];
    *dtu_out = o[1];
    for (int l = 0; l < NL; ++l) dl_out[l] = o[2 + l];
  } else if constexpr (JM == 1) {
    const VxVecF v[2] = {t, dtu};
    double o[2];
    hsum_n<2>(v, o);
    *t_out = o[0];
    *dtu_out = o[1];
  } else {
    *t_out = hsum_f(t);
    if (JM >= 1) *dtu_out = hsum_f(dtu);
    if (JM >= 2)
      for (int l = 0; l < NL; ++l) dl_out[l] = hsum_f(dl[l]);
  }
}

// The cubic stencils of PB consecutive evaluation points ll[j0 ..] at ln D = lnd
// (stencil_weights), written as arrays so that the loop over the points vectorizes: first taps
// k0[p] and the float weights w[tap][p], dw[tap][p]. Points past cnt repeat the last one.
template <int PB>
VX_INLINE void stencil_block(const GridView& g, const double* ll, int j0, int cnt, double lnd,
                             int* k0, float (*wf)[PB], float (*df)[PB]) {
  for (int p = 0; p < PB; ++p) {
    double wt[4], dwt[4];
    k0[p] = stencil_weights(g, ll[j0 + (p < cnt ? p : cnt - 1)], lnd, wt, dwt);
    for (int tap = 0; tap < 4; ++tap) {
      wf[tap][p] = (float)wt[tap];
      df[tap][p] = (float)dwt[tap];
    }
  }
}

// The rotated model on the CPU (host only), in three steps over the arm's grid rows instead of
// the 2M + 4 rows of every pixel's convolved stencil (rotated_pixel_rows):
//  1. rows [r0, r1] of the template and its label derivatives, column-major into
//     Tg[c * S + row] (S = n_tpix; c = 0 value, 1 + l labels): row_sums_f32;
//  2. the rows the pixels' cubic stencils touch, [s0, s1], convolved with the rotation kernel:
//     Tr[c * S + row] = sum_m rot[m] Tg[c][clamp(row + m - M)] (and the VSINI derivative column
//     Tr[NC * S + row] with drot), kVecD rows per vector operation;
//  3. each pixel: the 4-tap cubic interpolation of the convolved rows, for the value, the
//     velocity (dwt), the labels and VSINI.
// Convolution and interpolation are both linear, so this is rotated_pixel_rows' sum in another
// order (the rows clamped at the grid's ends alike). NL labels, JM Jacobian mode as in
// component_sums; cf/dcf the FP32 coefficients (CoeffsF32).
template <int NL, int JM>
VX_INLINE void rotated_rows_cpu(const GridView& g, const EvalWork* w, const float* B,
                                const float* BT, int K1, const CoeffsF32& cw, int r0, int r1,
                                int s0, int s1, int M, bool jac_vsini, double* Tg, double* Tr) {
  constexpr bool LJ = JM >= 2;
  constexpr int NC = LJ ? 1 + NL : 1;  // row columns: value (+ labels)
  const int S = g.n_tpix;
  int row0 = r0;
  if (BT) {
    // kVecF rows per vector operation from the transposed basis (component k's row BT[k]):
    // sums over k in order, no horizontal sums.
    typedef VxVecF F;
    for (; row0 + kVecF - 1 <= r1; row0 += kVecF) {
      F acc[NC];
      for (int c = 0; c < NC; ++c) acc[c] = F{};
      for (int k = 0; k < K1; ++k) {
        F b;
        __builtin_memcpy(&b, BT + (size_t)k * S + row0, sizeof b);
        acc[0] += cw.cf[k] * b;
        for (int c = 1; c < NC; ++c) acc[c] += cw.dcf[(c - 1) * cw.KP + k] * b;
      }
      for (int c = 0; c < NC; ++c)
        for (int p = 0; p < kVecF; ++p) Tg[c * S + row0 + p] = acc[c][p];
    }
  }
  for (int row = row0; row <= r1; ++row) {
    double bc, bdc[NL > 0 ? NL : 1];
    row_sums_f32<NL, LJ>(B + (size_t)row * K1, cw.KP, cw.cf, cw.dcf, &bc, bdc);
    Tg[row] = bc;
    if (LJ)
      for (int l = 0; l < NL; ++l) Tg[(1 + l) * S + row] = bdc[l];
  }
  const bool dv = JM >= 1 && jac_vsini;  // the VSINI column
  const int nk = 2 * M + 1;
  auto clampr = [&](int r) { return r < 0 ? 0 : (r > S - 1 ? S - 1 : r); };
  // Interior rows (no clamping): [lo, hi] with lo - M >= 0 and hi + M <= S - 1.
  const int lo = s0 - M >= 0 ? s0 : M, hi = s1 + M <= S - 1 ? s1 : S - 1 - M;
  auto edge_row = [&](int row) {
    for (int c = 0; c < NC; ++c) {
      double a = 0.0;
      for (int m = 0; m < nk; ++m) a += w->rot[m] * Tg[c * S + clampr(row + m - M)];
      Tr[c * S + row] = a;
    }
    if (dv) {
      double a = 0.0;
      for (int m = 0; m < nk; ++m) a += w->drot[m] * Tg[clampr(row + m - M)];
      Tr[NC * S + row] = a;
    }
  };
  int row = s0;
  for (; row < lo && row <= s1; ++row) edge_row(row);
  typedef VxVecD D;
  for (; row + kVecD - 1 <= hi; row += kVecD) {
    D acc[NC], av = {};
    for (int c = 0; c < NC; ++c) acc[c] = D{};
    for (int m = 0; m < nk; ++m) {
      const double* src = Tg + row + m - M;
      for (int c = 0; c < NC; ++c) {
        D x;
        __builtin_memcpy(&x, src + c * S, sizeof x);
        acc[c] += w->rot[m] * x;
        if (c == 0 && dv) av += w->drot[m] * x;
      }
    }
    for (int c = 0; c < NC; ++c) __builtin_memcpy(Tr + c * S + row, &acc[c], sizeof acc[c]);
    if (dv) __builtin_memcpy(Tr + NC * S + row, &av, sizeof av);
  }
  for (; row <= s1; ++row) edge_row(row);
}

// Step 3 of rotated_rows_cpu: pixel j's template and derivatives from the convolved rows Tr.
template <int NL, int JM>
VX_INLINE void rotated_pixel_cpu(const GridView& g, double lnlam, double lnd, double du_dv,
                                 const double* Tr, bool jac_vsini, double* t_out, double* dt_out) {
  double wt[4], dwt[4];
  const int t0 = stencil_weights(g, lnlam, lnd, wt, dwt);
  const int S = g.n_tpix;
  const double* r = Tr + t0 - 1;
  *t_out = taps4(wt, r);
  if (JM >= 1) {
    dt_out[0] = taps4(dwt, r) * du_dv;
    constexpr int NC = JM >= 2 ? 1 + NL : 1;
    for (int c = 1; c < NC; ++c) dt_out[c] = taps4(wt, r + c * S);
    if (jac_vsini) dt_out[1 + NL] = taps4(wt, r + NC * S);
  }
}

// Pass 1 of profile_continuum_simd with moments for a compile-time continuum degree D (host
// only): mu_l = sum ivar T^2 C_l (l <= 2D), q_j = sum ivar T f C_j (j <= D) and f^T W f, with
// C_l the Chebyshev polynomials (chebyshev_v), 8 partial sums (pixel i in lane i % 8) and the
// reduce_gram_v form's final lane_sum order. The recursion runs in registers (one multiply-add
// per order, no row array) and the 2D + 1 + D + 1 + 1 accumulators are compile-time vectors.
// Writes red[0 .. 3D + 3).
template <int D>
VX_INLINE void pass1_moments(const FitData& d, const double* T, int i0, int n, double* red) {
  constexpr int V = 8, NM = 2 * D + 1;
  VxVec8 mu[NM], q[D + 1], e = {};
  for (int l = 0; l < NM; ++l) mu[l] = VxVec8{};
  for (int j = 0; j <= D; ++j) q[j] = VxVec8{};
  const VxVec8 one = VxVec8{} + 1.0;
  for (int ii0 = 0; ii0 < n; ii0 += V) {
    const int cnt = n - ii0 < V ? n - ii0 : V;
    alignas(64) double x[V], iv[V], t[V], f[V];
    lanes_in<V, false>(d, T, i0 + ii0, cnt, x, iv, t, f);
    VxVec8 X, u, v, wf;
    __builtin_memcpy(&X, x, sizeof X);
    for (int p = 0; p < V; ++p) {
      const double ivt = iv[p] * t[p], ivf = iv[p] * f[p];
      u[p] = ivt * t[p];
      v[p] = ivt * f[p];
      wf[p] = ivf * f[p];
    }
    mu[0] += u;
    q[0] += v;
    e += wf;
    mu[1] += X * u;
    q[1] += X * v;
    const VxVec8 Y = X + X;
    VxVec8 c2 = one, c1 = X;
#pragma GCC unroll 32
    for (int l = 2; l < NM; ++l) {
      const VxVec8 c = Y * c1 - c2;
      mu[l] += c * u;
      if (l <= D) q[l] += c * v;
      c2 = c1;
      c1 = c;
    }
  }
  alignas(64) double a[V];
  for (int l = 0; l < NM; ++l) {
    __builtin_memcpy(a, &mu[l], sizeof a);
    red[l] = lane_sum<V>(a);
  }
  for (int j = 0; j <= D; ++j) {
    __builtin_memcpy(a, &q[j], sizeof a);
    red[NM + j] = lane_sum<V>(a);
  }
  __builtin_memcpy(a, &e, sizeof a);
  red[NM + D + 1] = lane_sum<V>(a);
}

// pass1_moments<D> for the run-time degree deg (D = 1 .. 9, the degrees with moments); false
// for others (then the reduce_gram_v form runs).
template <int D = 1>
VX_INLINE bool pass1_moments_for(int deg, const FitData& d, const double* T, int i0, int n,
                                 double* red) {
  if constexpr (D > 9) {
    return false;
  } else {
    if (deg == D) {
      pass1_moments<D>(d, T, i0, n, red);
      return true;
    }
    return pass1_moments_for<D + 1>(deg, d, T, i0, n, red);
  }
}

// cross_correlate's per-lag sums for one arm (host only) from the de-interleaved template
// (CcfPhases): 8 lags per vector operation, lags outside and pixels inside, so each lag is still
// summed over the pixels in increasing order. Pixel i at lag o reads t[k] and t[k + 1] with
// k = kk - o s, kk = t0[i] - lag_lo: with kk = m s + r, t[k] is phase r's element m - o, which
// the reversed storage puts at ascending addresses in o. Lags with k outside [0, n_tpix - 2]
// get weight 0 (as in the direct form). part[o * 4 + 0..3] as reduce_grid writes them.
VX_INLINE void ccf_sums_phased(const CcfPhases& c, const float* ph_j, int n_tpix, int i0, int n,
                               int lag_lo, int n_out, const int* t0, const double* frac,
                               const double* fn, const double* wts, double fmean, double* part) {
  const int s = c.step;
  typedef VxVecD D;
  constexpr int V = kVecD;
  // V-lag blocks per pass over the pixels: 4 NB accumulators in registers (16 with AVX-512's
  // 32 registers, 12 with AVX2's and SSE2's 16).
  constexpr int NB = V == 8 ? 4 : 3, LP = V * NB;
  static_assert(LP <= kCcfPassLags, "CcfPhases::pad covers kCcfPassLags lags per pass");
  // For kk = q s + r: the last valid lag is q (k >= 0), the first q - hf[r] (k <= n_tpix - 2).
  int hf[kMaxCcfStep];
  for (int r = 0; r < s; ++r) hf[r] = (n_tpix - 2 - r) / s;
  alignas(64) double iota_a[V];
  for (int p = 0; p < V; ++p) iota_a[p] = p;
  D iota;
  __builtin_memcpy(&iota, iota_a, sizeof iota);
  for (int ob0 = 0; ob0 < n_out; ob0 += LP) {
    D S[NB][4], ov[NB];
    for (int bk = 0; bk < NB; ++bk) {
      for (int k = 0; k < 4; ++k) S[bk][k] = D{};
      ov[bk] = iota + (double)(ob0 + V * bk);  // the block's lag indices
    }
    for (int ii = 0; ii < n; ++ii) {
      const int i = i0 + ii;
      const int kk = t0[i] - lag_lo;
      if (kk < 0) continue;  // k < 0 at every lag o >= 0
      const int q = kk / s, r = kk - q * s;
      const int o_hi = q, o_lo = q - hf[r] > 0 ? q - hf[r] : 0;
      if (o_hi < ob0 || o_lo > ob0 + LP - 1 || o_lo > o_hi) continue;
      const float* a = ph_j + (long long)r * c.len + c.pad + c.mlen - 1 - q + ob0;
      const float* b = r + 1 < s ? a + c.len : ph_j + c.pad + c.mlen - 2 - q + ob0;
      const double fm = fn[i] - fmean, wv = wts[i], fx = frac[i];
      const D lo = D{} + (double)o_lo, hi = D{} + (double)o_hi;
#pragma GCC unroll 4
      for (int bk = 0; bk < NB; ++bk) {
        VxVecDF af, bf;
        __builtin_memcpy(&af, a + V * bk, sizeof af);
        __builtin_memcpy(&bf, b + V * bk, sizeof bf);
        const D t0v = __builtin_convertvector(af, D);
        const D t1v = __builtin_convertvector(bf, D);
        const D tv = t0v + fx * (t1v - t0v);
        const D wi = (ov[bk] >= lo && ov[bk] <= hi) ? D{} + wv : D{};
        S[bk][0] += wi;
        S[bk][1] += wi * tv;
        S[bk][2] += wi * tv * tv;
        S[bk][3] += wi * fm * tv;
      }
    }
    for (int bk = 0; bk < NB; ++bk)
      for (int p = 0; p < V && ob0 + V * bk + p < n_out; ++p)
        for (int k = 0; k < 4; ++k) part[(ob0 + V * bk + p) * 4 + k] = S[bk][k][p];
  }
}

// kern::fixed_taps (kernels/ccf.hpp) kVecD stencils at a time: the stencils' first taps k
// (int, or taps held as doubles) and fractions as vectors, the four taps t[k - 1 .. k + 2] as one
// 16-byte load per stencil, transposed (AVX2, AVX-512; lane by lane otherwise: hardware gathers
// were slower), the cubic weights and the 4-tap sums in kern::fixed_tap's own expressions
// (cubic_weights_of, taps4) on vectors, so that each lane equals the scalar form; the last
// n mod kVecD stencils take fixed_tap itself.
template <class K>
VX_INLINE void fixed_taps_cpu(const float* t, int n, const double* frac, const K* k, double* out) {
  typedef VxVecD D;
  constexpr int V = kVecD;
  typedef int I __attribute__((vector_size(V * sizeof(int))));
  int i = 0;
  for (; i + V <= n; i += V) {
    D f;
    I ki;
    __builtin_memcpy(&f, frac + i, sizeof f);
    if constexpr (sizeof(K) == sizeof(double)) {
      D kd;
      __builtin_memcpy(&kd, k + i, sizeof kd);
      ki = __builtin_convertvector(kd, I);
    } else {
      __builtin_memcpy(&ki, k + i, sizeof ki);
    }
    // The four taps t[k - 1 .. k + 2] of each lane, one 16-byte load per lane, transposed.
    int kk[V];
    __builtin_memcpy(kk, &ki, sizeof kk);
    D r[4];
#if defined(__AVX512F__)
    static_assert(V == 8, "AVX-512: 8 doubles per vector");
    __m512 A = _mm512_castps128_ps512(_mm_loadu_ps(t + kk[0] - 1));
    __m512 B = _mm512_castps128_ps512(_mm_loadu_ps(t + kk[4] - 1));
    A = _mm512_insertf32x4(A, _mm_loadu_ps(t + kk[1] - 1), 1);
    B = _mm512_insertf32x4(B, _mm_loadu_ps(t + kk[5] - 1), 1);
    A = _mm512_insertf32x4(A, _mm_loadu_ps(t + kk[2] - 1), 2);
    B = _mm512_insertf32x4(B, _mm_loadu_ps(t + kk[6] - 1), 2);
    A = _mm512_insertf32x4(A, _mm_loadu_ps(t + kk[3] - 1), 3);
    B = _mm512_insertf32x4(B, _mm_loadu_ps(t + kk[7] - 1), 3);
    // Lane p's tap q is at 4 p + q of A:B; X: taps 0 and 1 of lanes 0..7, Y: taps 2 and 3.
    const __m512i i01 = _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 1, 5, 9, 13, 17, 21, 25, 29);
    const __m512i i23 =
        _mm512_setr_epi32(2, 6, 10, 14, 18, 22, 26, 30, 3, 7, 11, 15, 19, 23, 27, 31);
    typedef float F16 __attribute__((vector_size(64)));
    F16 xy[2];
    const __m512 X = _mm512_permutex2var_ps(A, i01, B), Y = _mm512_permutex2var_ps(A, i23, B);
    __builtin_memcpy(&xy[0], &X, sizeof X);
    __builtin_memcpy(&xy[1], &Y, sizeof Y);
    for (int q = 0; q < 4; ++q) {
      VxVecDF h;
      __builtin_memcpy(&h, reinterpret_cast<const float*>(&xy[q / 2]) + 8 * (q % 2), sizeof h);
      r[q] = __builtin_convertvector(h, D);
    }
#elif defined(__AVX2__)
    static_assert(V == 4, "AVX2: 4 doubles per vector");
    __m128 c0 = _mm_loadu_ps(t + kk[0] - 1), c1 = _mm_loadu_ps(t + kk[1] - 1);
    __m128 c2 = _mm_loadu_ps(t + kk[2] - 1), c3 = _mm_loadu_ps(t + kk[3] - 1);
    _MM_TRANSPOSE4_PS(c0, c1, c2, c3);
    const __m128 c[4] = {c0, c1, c2, c3};
    for (int q = 0; q < 4; ++q) {
      VxVecDF h;
      __builtin_memcpy(&h, &c[q], sizeof h);
      r[q] = __builtin_convertvector(h, D);
    }
#else
    for (int q = 0; q < 4; ++q)
      for (int p = 0; p < V; ++p) r[q][p] = t[kk[p] + q - 1];
#endif
    D w[4];
    cubic_weights_of(f, w);  // kern::fixed_tap's expressions, lane by lane
    const D o = taps4(w, r);
    __builtin_memcpy(out + i, &o, sizeof o);
  }
  for (; i < n; ++i) out[i] = fixed_tap(t, (int)k[i], frac[i]);
}

// SerialTeam with the CPU's SIMD forms above (kHostSimd: kern::host_simd<Team>() selects them in
// template_at_pixels, profile_continuum_simd, cross_correlate and fixed_taps; kernels/team.hpp).
// Local: a type local to the translation unit that instantiates the team (fit_slot.cpp passes its
// own team), so that these members, and every kernel instantiated on the team, have internal
// linkage in the per-ISA objects.
template <class Local = void>
struct SimdTeam : SerialTeam {
  static constexpr bool kHostSimd = true;
  static_assert(kVec == 8, "the SIMD forms read 8 pixels per step (pass1_moments)");

  // fold_rows for arm pixels [i0, i1) of d (kernels/fold.hpp): the host's SIMD form
  // (prep::Kernels::expand_rows, compiled without fused multiply-adds at every level); false
  // where the batch gives none (fold_rows then takes the team-generic fold_row).
  [[gnu::always_inline]] bool fold_arm(const FitData& d, int i0, int i1, int nd, int n,
                                       float* out) const {
    if (!d.cpu || !d.cpu->host_fold) return false;
    d.cpu->host_fold(d.fold + 3 * (long long)i0, (size_t)(i1 - i0), nd, d.full_idx + i0, out, 1, n);
    return true;
  }

  // The unrotated template at the points ll[0 .. n_eval) at ln D = lnd from the basis B[row][K1]
  // and w->c, w->dc (template_at_pixels' M == 0 case): t_out[n_eval] and, for jm >= 1 (1 the
  // velocity, 2 with the L labels), dt_out[n_eval][np]. FP32 component sums (component_sums_f32:
  // c and dc as float, zero-padded, CoeffsF32), the stencils PB points at a time (stencil_block).
  [[gnu::always_inline]] void unrotated_pixels(const GridView& g, const EvalWork* w, const float* B,
                                               int K1, int L, const double* ll, int n_eval,
                                               double lnd, double du_dv, int jm, bool jac_vsini,
                                               int np, double* t_out, double* dt_out) const {
    const bool need_jac = jm > 0;
    CoeffsF32 cw;
    coeffs_f32(w->c, w->dc, K1, L, &cw);
    auto pixels = [&](auto nlc, auto jmc) {
      constexpr int NL = decltype(nlc)::value, JM = decltype(jmc)::value;
      constexpr int PB = 16;
      for (int j0 = 0; j0 < n_eval; j0 += PB) {
        const int cnt = n_eval - j0 < PB ? n_eval - j0 : PB;
        int k0[PB];
        alignas(64) float wf[4][PB], df[4][PB];
        stencil_block<PB>(g, ll, j0, cnt, lnd, k0, wf, df);
        for (int p = 0; p < cnt; ++p) {
          const int j = j0 + p;
          double dtu = 0.0;
          double* dt = &dt_out[j * np];
          component_sums_f32<NL, JM>(B + (size_t)(k0[p] - 1) * K1, K1, cw.KP, cw.cf, cw.dcf,
                                     wf[0][p], wf[1][p], wf[2][p], wf[3][p], df[0][p], df[1][p],
                                     df[2][p], df[3][p], &t_out[j], &dtu, dt + 1);
          if (need_jac) {
            dt[0] = dtu * du_dv;
            if (jac_vsini) dt[1 + L] = 0.0;  // the identity kernel does not change with vsini
          }
        }
      }
    };
    dispatch_labels_jac(L, jm, pixels);  // L and the Jacobian mode at compile time
  }

  // Whether d carries the convolved-row scratch of rotated_pixels (CpuFitExtras::Tr).
  [[gnu::always_inline]] bool convolved_rows(const FitData& d) const { return d.Tg && cpu_Tr(d); }

  // The rotated template (M = w->rot_half taps each side) at arm a's points ll[0 .. n_eval), as
  // unrotated_pixels writes it (jac_vsini: the VSINI column too): grid rows, convolved rows,
  // then 4 taps per pixel (rotated_rows_cpu, rotated_pixel_cpu). Needs convolved_rows(d).
  // vonly (a velocity-only evaluation, jm <= 1, jac_vsini false): the arm's convolved rows are
  // kept for the next velocity-only evaluation at the same coefficients and rotation
  // (CpuFitExtras::VelocityRows; M = 0 too, where the rows are the template's own).
  [[gnu::always_inline]] void rotated_pixels(const GridView& g, const FitData& d, int a,
                                             const EvalWork* w, const float* B, int K1, int L,
                                             const double* ll, int n_eval, double lnd, double du_dv,
                                             int jm, bool jac_vsini, int np, double* t_out,
                                             double* dt_out, bool vonly = false) const {
    const int M = w->rot_half;
    int lo_t, hi_t, r0, r1;
    rotated_row_span(g, ll, n_eval, lnd, M, &lo_t, &hi_t, &r0, &r1);
    const int ga = d.cpu_arm0 + a, S = g.n_tpix;
    if (vonly && jm <= 1 && !jac_vsini && 1 + ga < d.cpu->tr_cols) {
      CpuFitExtras::VelocityRows& vr = d.cpu->vrows[ga];
      double* Trc = cpu_Tr(d) + (size_t)(1 + ga) * S;
      const int s0 = lo_t - 1, s1 = hi_t + 2, nk = 2 * M + 1;
      const bool kept = vr.basis == B && vr.M == M && vr.s0 <= s0 && vr.s1 >= s1 &&
                        std::memcmp(vr.c, w->c, sizeof(double) * K1) == 0 &&
                        std::memcmp(vr.rot, w->rot, sizeof(double) * nk) == 0;
      if (!kept) {
        const int p0 = s0 - kVRowsPad > 0 ? s0 - kVRowsPad : 0;
        const int p1 = s1 + kVRowsPad < S - 1 ? s1 + kVRowsPad : S - 1;
        const int q0 = p0 - M > 0 ? p0 - M : 0, q1 = p1 + M < S - 1 ? p1 + M : S - 1;
        CoeffsF32 cw;
        coeffs_f32(w->c, w->dc, K1, 0, &cw);
        rotated_rows_cpu<0, 0>(g, w, B, cpu_basis_t(d, a), K1, cw, q0, q1, p0, p1, M, false, d.Tg,
                               Trc);
        vr.basis = B, vr.M = M, vr.s0 = p0, vr.s1 = p1;
        std::memcpy(vr.c, w->c, sizeof(double) * K1);
        std::memcpy(vr.rot, w->rot, sizeof(double) * nk);
      }
      if (jm == 1)
        for (int j = 0; j < n_eval; ++j)
          rotated_pixel_cpu<0, 1>(g, ll[j], lnd, du_dv, Trc, false, &t_out[j], &dt_out[j * np]);
      else
        for (int j = 0; j < n_eval; ++j)
          rotated_pixel_cpu<0, 0>(g, ll[j], lnd, du_dv, Trc, false, &t_out[j], &dt_out[j * np]);
      return;
    }
    // Any other evaluation writes Tr's columns and d.Tg: nothing kept stays valid.
    for (auto& vr : d.cpu->vrows) vr.basis = nullptr;
    CoeffsF32 cw;
    coeffs_f32(w->c, w->dc, K1, jm == 2 ? L : 0, &cw);
    auto rows_pixels = [&](auto nlc, auto jmc) {
      constexpr int NL = decltype(nlc)::value, JM = decltype(jmc)::value;
      rotated_rows_cpu<NL, JM>(g, w, B, cpu_basis_t(d, a), K1, cw, r0, r1, lo_t - 1, hi_t + 2, M,
                               jac_vsini, d.Tg, cpu_Tr(d));
      for (int j = 0; j < n_eval; ++j)
        rotated_pixel_cpu<NL, JM>(g, ll[j], lnd, du_dv, cpu_Tr(d), jac_vsini, &t_out[j],
                                  &dt_out[j * np]);
    };
    dispatch_labels_jac(L, jm, rows_pixels);
  }

  // Grid rows r0 .. r1 of the template and, with label_jac, its L label derivatives:
  // Tg[row][np] = [B_row.c, B_row.dc_0 ..] in FP32 row products (row_sums_f32), one row at a
  // time over its contiguous components (template_at_pixels' rotated model without
  // convolved_rows).
  [[gnu::always_inline]] void grid_row_sums(const EvalWork* w, const float* B, int K1, int L,
                                            bool label_jac, int r0, int r1, int np,
                                            double* Tg) const {
    CoeffsF32 cw;
    coeffs_f32(w->c, w->dc, K1, label_jac ? L : 0, &cw);
    auto grid_rows = [&](auto nlc, auto jmc) {
      constexpr int NL = decltype(nlc)::value;
      constexpr bool LJ = decltype(jmc)::value == 2;
      this->for_each(r1 - r0 + 1, [&](int rr) {
        double* tg = Tg + (size_t)(r0 + rr) * np;
        row_sums_f32<NL, LJ>(B + (size_t)(r0 + rr) * K1, cw.KP, cw.cf, cw.dcf, tg, tg + 1);
      });
    };
    dispatch_labels_jac(L, label_jac ? 2 : 0, grid_rows);
  }

  // Pass 1 of profile_continuum_simd with moments over the pixels i0 .. i0 + n - 1 of d into
  // red[0 .. 3 deg + 3) (pass1_moments); false (red untouched) for a degree without this form.
  [[gnu::always_inline]] bool continuum_moments(int deg, const FitData& d, const double* T, int i0,
                                                int n, double* red) const {
    return pass1_moments_for(deg, d, T, i0, n, red);
  }

  // kern::fixed_taps (kernels/ccf.hpp): the chi^2 grid's template values (fixed_taps_cpu).
  template <class K>
  [[gnu::always_inline]] void fixed_taps(const float* t, int n, const double* frac, const K* k,
                                         double* out) const {
    fixed_taps_cpu(t, n, frac, k, out);
  }

  // cross_correlate's per-lag sums of arm a for template j, part[n_out][4], from the
  // de-interleaved templates (ccf_sums_phased); false (part untouched) when d has no phase table
  // for this template and lag step.
  [[gnu::always_inline]] bool ccf_sums(const GridView& g, const FitData& d, int a, int j,
                                       int lag_lo, int n_out, int lag_step, const int* t0,
                                       const double* frac, const double* fn, const double* wts,
                                       double fmean, double* part) const {
    const float* ph = cpu_ccf_ph(d, a);
    const CcfPhases c = d.cpu ? d.cpu->ccf_ph_geom : CcfPhases{};
    if (!(ph && j < c.n_tmpl && lag_step == c.step && c.step <= kMaxCcfStep &&
          n_out + kCcfPassLags + 8 <= c.pad))
      return false;
    const int i0 = d.arm_start[a];
    ccf_sums_phased(c, ph + (long long)j * c.step * c.len, g.n_tpix, i0, d.arm_start[a + 1] - i0,
                    lag_lo, n_out, t0, frac, fn, wts, fmean, part);
    return true;
  }
};

}  // namespace cpu
}  // namespace velox::kern
