// The host preparation's inner loops (prep_slot.hpp), compiled once per instruction-set level
// (cmake/cpu_isa.cmake: baseline, x86-64-v3, x86-64-v4, each with -ffp-contract=off so that every
// level computes the same bits). As in backend/cpu/isa/fit_slot.cpp, nothing here has external
// linkage but kernels(), and nothing of the standard library beyond <cmath> is used (its inline
// functions would be shared between the levels); the test cpu_isa.objects checks both.
#if !defined(VELOX_ISA_TU) || !defined(VELOX_ISA_LEVEL)
#error "compile through cmake/cpu_isa.cmake (VELOX_ISA_TU, VELOX_ISA_LEVEL)"
#endif
#include "fit/isa/prep_slot.hpp"

#include <cmath>

#include "kernels/emulator_eval.hpp"
#include "kernels/fold_row.hpp"
#include "kernels/team.hpp"

namespace {

using velox::prep::FoldMoments;
// Doubles in one native register (8 with AVX-512, 4 with AVX2, 2 with SSE2): one row per lane of
// the fold (64-byte vectors below AVX-512 make GCC keep the lanes in memory).
typedef velox::kern::VxVecD V;
constexpr int kLanes = velox::kern::kVecD;
typedef long long M __attribute__((vector_size(sizeof(V))));  // their lane masks

// mask ? a : b lane by lane, as bit operations (by reference: a vector argument or result would
// change the ABI with the level).
template <class Vt, class Mt>
inline void sel(Vt& out, const Mt& mask, const Vt& a, const Vt& b) {
  Mt am, bm;
  __builtin_memcpy(&am, &a, sizeof am);
  __builtin_memcpy(&bm, &b, sizeof bm);
  const Mt r = (am & mask) | (bm & ~mask);
  __builtin_memcpy(&out, &r, sizeof out);
}

// The most diagonals folded (fit/resolution.hpp kMaxResolutionDiagonals): the fit's own bound.
constexpr int kMaxDiag = velox::kern::kFoldMaxDiag;
// Centroid tolerance of the sampled Gaussian [px]: 1e-7 px is 5e-6 km/s on DESI pixels, and the
// rows are stored in single precision (relative 6e-8) anyway.
constexpr double kCentroidTol = velox::kern::kFoldTolF64;

inline long lmin(long a, long b) { return a < b ? a : b; }
inline long lmax(long a, long b) { return a > b ? a : b; }

// Row i's moments for the rows [a, b), one pass per diagonal (only the weights inside the arm:
// the edge rows), added to zero.
void moments_by_diagonal(const float* res, long n, int ndiag, long a, long b, double* m0,
                         double* m1, double* m2) {
  for (long i = a; i < b; ++i) m0[i] = m1[i] = m2[i] = 0.0;
  const long half = ndiag / 2;
  for (long k = 0; k < ndiag; ++k) {
    const long o = k - half;
    const double od = static_cast<double>(o), od2 = od * od;
    const float* rd = res + static_cast<size_t>(ndiag - 1 - k) * n + o;
    for (long i = lmax(a, -o), hi = lmin(b, n - o); i < hi; ++i) {
      const double r = rd[i];
      m0[i] += r;
      m1[i] += r * od;
      m2[i] += r * od2;
    }
  }
}

void moments(const float* res, long n, int ndiag, long row_lo, long row_hi, double* m0, double* m1,
             double* m2) {
  // Row i: weight of model[i + o] is res[d * n + i + o] with o = k - half, d = ndiag - 1 - k,
  // added in the order k = 0 .. ndiag-1 to what m0, m1, m2 hold. A non-finite weight makes the
  // row's sum non-finite: such rows are unusable. The rows whose weights all lie inside the arm
  // take kLanes rows per native vector with the sums in registers across the diagonals (each
  // row's additions in the same order as one diagonal at a time); the edge rows go diagonal by
  // diagonal.
  const long half = ndiag / 2;
  const long in_lo = lmax(row_lo, half), in_hi = lmin(row_hi, n - (ndiag - 1 - half));
  if (in_lo >= in_hi) {
    moments_by_diagonal(res, n, ndiag, row_lo, row_hi, m0, m1, m2);
    return;
  }
  moments_by_diagonal(res, n, ndiag, row_lo, in_lo, m0, m1, m2);
  typedef velox::kern::VxVecDF FD;  // kLanes floats
  long i = in_lo;
  for (; i + kLanes <= in_hi; i += kLanes) {
    V a0 = {}, a1 = {}, a2 = {};
    for (long k = 0; k < ndiag; ++k) {
      const double od = static_cast<double>(k - half), od2 = od * od;
      FD rf;
      __builtin_memcpy(&rf, res + static_cast<size_t>(ndiag - 1 - k) * n + (k - half) + i,
                       sizeof rf);
      const V r = __builtin_convertvector(rf, V);
      a0 += r;
      a1 += r * od;
      a2 += r * od2;
    }
    __builtin_memcpy(m0 + i, &a0, sizeof(V));
    __builtin_memcpy(m1 + i, &a1, sizeof(V));
    __builtin_memcpy(m2 + i, &a2, sizeof(V));
  }
  moments_by_diagonal(res, n, ndiag, i, row_hi, m0, m1, m2);
}

// The complete row whose moments row i takes: the nearest with all ndiag weights inside the arm.
inline long borrowed(const FoldMoments& f, long i) {
  const long h = f.ndiag / 2;
  return f.n > 2 * h ? lmin(lmax(i, h), f.n - 1 - h) : i;
}
inline bool usable(const FoldMoments& f, long i) {
  return std::isfinite(f.m0[i]) && f.m0[i] > 1e-6;
}

// Rows per chunk of write_rows (a multiple of every level's lanes, double and float).
constexpr int kChunk = 64;

// The Gaussian rows' arithmetic in T: native vectors of T (V), their lane masks (M, of I), and
// the centroid tolerance [px]. FP32 (twice the lanes, and a shorter exp) for the rows whose
// centroid lies within kFloatMaxMu px of the central tap and sigma^2 >= kPlainMinVar, whose
// weights then stay within FP32's range; its tolerance, 2e-6 px (1e-4 km/s on DESI's pixels), is
// what the centroid's FP32 sums resolve (their rounding, ~5e-7 px, is below it).
template <class T>
struct Lanes;
template <>
struct Lanes<double> {
  typedef velox::kern::VxVecD V;
  typedef long long I;
  typedef I M __attribute__((vector_size(sizeof(V))));
  static constexpr int kN = velox::kern::kVecD;
  static constexpr double kTol = kCentroidTol;
};
template <>
struct Lanes<float> {
  typedef velox::kern::VxVecF V;
  typedef int I;
  typedef I M __attribute__((vector_size(sizeof(V))));
  static constexpr int kN = velox::kern::kVecF;
  static constexpr float kTol = velox::kern::kFoldTolF32;
};
// Which rows take which step, in which precision: kernels/fold_row.hpp.
constexpr double kFloatMaxMu = velox::kern::kFoldFloatMaxMu;
constexpr double kPlainMinVar = velox::kern::kFoldPlainMinVar;
constexpr double kPlainMaxVar = velox::kern::kFoldPlainMaxVar;

inline void exp_lanes(velox::kern::VxVecD& x) { velox::kern::exp_vec(x); }
// x = exp(x) lane by lane in FP32 (x clamped to [-87, 87]): x = n ln2 + r, |r| <= ln2/2 (ln2 in
// two parts), exp(r) by Cephes' expf polynomial (Moshier 1992: about 1 ulp), 2^n from the
// exponent bits.
inline void exp_lanes(velox::kern::VxVecF& x) {
  typedef velox::kern::VxVecF F;
  typedef int II __attribute__((vector_size(sizeof(F))));
  x = x < 87.0f ? x : F{} + 87.0f;
  x = x > -87.0f ? x : F{} - 87.0f;
  F h;  // round to nearest (half away from 0) through truncation
  for (int p = 0; p < velox::kern::kVecF; ++p) h[p] = x[p] < 0 ? -0.5f : 0.5f;
  const II ni = __builtin_convertvector(x * 1.44269504088896341f + h, II);
  const F n = __builtin_convertvector(ni, F);
  const F p = velox::kern::expf_reduced((x - n * 0.693359375f) - n * -2.12194440e-4f);
  const II e = (ni + 127) << 23;
  F s;
  __builtin_memcpy(&s, &e, sizeof s);
  x = p * s;
}

// The sampled Gaussians of ng <= kChunk rows, one per lane in groups of kLanes: centroids mu_r
// [px from the central tap], variances var_r [px^2], weights normalised to s0_r, row r written to
// dst[r][k * k_step] (k = 0 .. ndiag-1).
// ND > 0: ndiag is ND, known at compile time (DESI's 11: the taps' loops unrolled, the weights in
// registers); ND = 0: ndiag_rt. The same operations in the same order either way.
template <int ND, class T, bool kNewton>
void gaussian_rows(int ndiag_rt, int ng, const double* mu_r, const double* var_r,
                   const double* s0_r, float* const* dst, ptrdiff_t k_step) {
  typedef typename Lanes<T>::V V;
  typedef typename Lanes<T>::M M;
  constexpr int kLanes = Lanes<T>::kN;
  constexpr T kTol = Lanes<T>::kTol;
  constexpr int kGroups = kChunk / kLanes;
  const int ndiag = ND > 0 ? ND : ndiag_rt;
  const int half = ndiag / 2, n_groups = (ng + kLanes - 1) / kLanes;
  alignas(64) V w[kMaxDiag], wf[kGroups][kMaxDiag];
  alignas(64) V mu[kGroups], dx[kGroups], q[kGroups], c[kGroups], norm[kGroups], vr[kGroups];
  M active[kGroups];
  for (int gi = 0; gi < n_groups; ++gi) {
    alignas(64) T v_l[kLanes], m_l[kLanes];
    for (int g = 0; g < kLanes; ++g) {  // idle lanes: a harmless row
      const int r = gi * kLanes + g;
      v_l[g] = r < ng ? static_cast<T>(var_r[r]) : T(1);
      m_l[g] = r < ng ? static_cast<T>(mu_r[r]) : T(0);
      active[gi][g] = r < ng ? -1 : 0;
    }
    __builtin_memcpy(&vr[gi], v_l, sizeof(V));
    // 1 / sqrt(var) on the lanes (IEEE: the same bits as one lane at a time)
    for (int g = 0; g < kLanes; ++g) v_l[g] = T(1) / std::sqrt(v_l[g]);
    __builtin_memcpy(&mu[gi], m_l, sizeof(V));
    __builtin_memcpy(&dx[gi], v_l, sizeof(V));
    q[gi] = -dx[gi] * dx[gi];
    exp_lanes(q[gi]);  // exp(-dx^2): each tap ratio over the previous one
    c[gi] = mu[gi], norm[gi] = V{} + T(1);
    for (int k = 0; k < ndiag; ++k) wf[gi][k] = V{};
  }
  // Sampling a narrow Gaussian at integer offsets pulls its centroid towards 0 (0.04 px for
  // sigma 0.46, i.e. ~2 km/s on DESI pixels), and a band that cuts a wide one's wings pushes it
  // out: move the centre until the sampled centroid is the row's (1-4 steps to the tolerance for
  // most rows, at most 8; kNewton: the Newton step, write_rows' kPlainMinVar). A lane that
  // converges keeps its centre, so the later steps recompute its weights bit for bit. Every group
  // takes every step of the chunk, converged or not: with no branch that depends on a group's
  // own lanes, the groups' independent chains (each step is latency-bound: the exp's Horner
  // chain, the taps' recurrence, the sums) overlap in the core; a per-group test (mispredicted:
  // it depends on the lanes) made this loop 14% slower, although it skips 11% of the group steps.
  //
  // After kRepack steps the few rows still moving (5% of a DESI spectrum's rows take all 8 steps)
  // are gathered into as few groups as they fill, and only those take the remaining steps; their
  // weights go back to their rows at the end. A row's arithmetic is its own lane's alone, so its
  // lane does not change its bits.
  constexpr int kRepack = 3;
  constexpr T kMaxStep = T(0.25);  // px: the Newton step's bound
  const T hd = static_cast<T>(half);
  alignas(64) V wf2[kGroups][kMaxDiag], mu2[kGroups], dx2[kGroups], q2[kGroups], c2[kGroups],
      norm2[kGroups], vr2[kGroups];
  M active2[kGroups];
  int from_g[kChunk], from_l[kChunk], n_moved = 0;  // compact lane j holds row lane from_*[j]
  V(*WF)[kMaxDiag] = wf;
  V *MU = mu, *DX = dx, *Q = q, *C = c, *NORM = norm, *VR = vr;
  M* ACT = active;
  int n_step_groups = n_groups;
  for (int it = 0; it < 8; ++it) {
    if (it == kRepack) {
      for (int gi = 0; gi < n_groups; ++gi)
        for (int g = 0; g < kLanes; ++g)
          if (active[gi][g]) from_g[n_moved] = gi, from_l[n_moved++] = g;
      const int n2 = (n_moved + kLanes - 1) / kLanes;
      if (n2 < n_groups) {
        for (int j = 0; j < n2 * kLanes; ++j) {
          const int gj = j / kLanes, lj = j % kLanes;
          if (j < n_moved) {
            const int gi = from_g[j], g = from_l[j];
            mu2[gj][lj] = mu[gi][g], dx2[gj][lj] = dx[gi][g], q2[gj][lj] = q[gi][g];
            c2[gj][lj] = c[gi][g], norm2[gj][lj] = norm[gi][g], vr2[gj][lj] = vr[gi][g];
            for (int k = 0; k < ndiag; ++k) wf2[gj][k][lj] = wf[gi][k][g];
            active2[gj][lj] = -1;
          } else {  // an idle lane: a harmless row (q = exp(-1) for dx = 1)
            mu2[gj][lj] = T(0), dx2[gj][lj] = T(1), q2[gj][lj] = T(0.36787944117144233);
            c2[gj][lj] = T(0), norm2[gj][lj] = T(1), vr2[gj][lj] = T(1);
            for (int k = 0; k < ndiag; ++k) wf2[gj][k][lj] = T(0);
            active2[gj][lj] = 0;
          }
        }
        WF = wf2, MU = mu2, DX = dx2, Q = q2, C = c2, NORM = norm2, VR = vr2, ACT = active2;
        n_step_groups = n2;
      } else {
        n_moved = 0;  // nothing gained: every group steps on
      }
    }
    M any_active = {};
    for (int gi = 0; gi < n_step_groups; ++gi) {
      // w[k] = exp(-(x_k^2 - x_h^2) / 2), x_k = (k - half - c) dx, from the central tap
      // outwards: each ratio w[k+1]/w[k] = exp(-(x_k + dx/2) dx) is the last one times q. In FP64,
      // with |c| <= half and dx < 1/0.3 the weights stay within 1e-181 .. 1e61: no overflow, no
      // underflow. In FP32 the largest weight is exp(x_h^2 / 2) at most, x_h = c dx: below
      // exp(10) for the plain step's rows (|c| <~ 2.3, dx^2 <= 4) and exp(4.2) for the Newton
      // step's (|c| <= half, dx^2 < 1/3); the far taps may underflow to 0, as they would round to.
      const V xh = -C[gi] * DX[gi];
      V r_up = -(xh + T(0.5) * DX[gi]) * DX[gi];
      exp_lanes(r_up);
      w[half] = V{} + T(1);
      V r = r_up;
      for (int k = half + 1; k < ndiag; ++k, r *= Q[gi]) w[k] = w[k - 1] * r;
      r = Q[gi] / r_up;
      for (int k = half - 1; k >= 0; --k, r *= Q[gi]) w[k] = w[k + 1] * r;
      V nm = {}, m1 = {}, m2 = {};
      for (int k = 0; k < ndiag; ++k) {
        const T o = static_cast<T>(k - half);
        nm += w[k];
        m1 += w[k] * o;
        if constexpr (kNewton) m2 += w[k] * (o * o);
      }
      V c_new;  // the next centre
      M done;   // the lanes whose weights are within the tolerance
      if constexpr (kNewton) {
        // The sampled centroid m1/nm misses MU by e / nm and moves with the centre at the rate
        // var_w / var (var_w = D / nm^2, the weights' own variance): the Newton step
        // e var nm / D, with that rate kept within [0.1, 10], the step within kMaxStep and the
        // centre within the taps. Where the rate exceeds 2 (sigma^2 < 0.125 px^2 and a centroid
        // near a half pixel: the weights on two taps) the plain step diverges, and where it is
        // small (sigma > 2 px, the band cutting the wings) it crawls.
        const V e = MU[gi] * nm - m1, lim = nm * nm * VR[gi];
        V D = m2 * nm - m1 * m1;
        D = D > T(0.1) * lim ? D : T(0.1) * lim;  // also a D <= 0
        D = D < T(10) * lim ? D : T(10) * lim;
        V dc = e * VR[gi] * nm / D;
        dc = dc < kMaxStep ? dc : V{} + kMaxStep;
        dc = dc > -kMaxStep ? dc : V{} - kMaxStep;
        c_new = C[gi] + dc;
        c_new = c_new < hd ? c_new : V{} + hd;
        c_new = c_new > -hd ? c_new : V{} - hd;
        done = (e < kTol * nm) & (e > -kTol * nm);
      } else {
        const V dc = MU[gi] - m1 / nm;
        c_new = C[gi] + dc;
        done = (dc < kTol) & (dc > -kTol);
      }
      // A lane that converges keeps its centre from now on, so every later step computes the
      // same weights from it, bit for bit: the last step's weights are those of the step where
      // each lane converged (or of the last step, for a lane that never does).
      for (int k = 0; k < ndiag; ++k) WF[gi][k] = w[k];
      NORM[gi] = nm;
      ACT[gi] &= ~done;
      sel(C[gi], ACT[gi], c_new, C[gi]);
      any_active |= ACT[gi];
    }
    typename Lanes<T>::I any = 0;
    for (int g = 0; g < kLanes; ++g) any |= any_active[g];
    if (any == 0) break;
  }
  for (int j = 0; j < n_moved && WF == wf2; ++j) {  // the gathered rows' weights back
    const int gj = j / kLanes, lj = j % kLanes, gi = from_g[j], g = from_l[j];
    norm[gi][g] = norm2[gj][lj];
    for (int k = 0; k < ndiag; ++k) wf[gi][k][g] = wf2[gj][k][lj];
  }
  for (int gi = 0; gi < n_groups; ++gi) {
    const int r0 = gi * kLanes, nl = ng - r0 < kLanes ? ng - r0 : kLanes;
    alignas(64) T s0[kLanes];
    for (int g = 0; g < kLanes; ++g) s0[g] = g < nl ? static_cast<T>(s0_r[r0 + g]) : T(0);
    V scale;
    __builtin_memcpy(&scale, s0, sizeof scale);
    scale /= norm[gi];
    bool consecutive = nl == kLanes;  // rows side by side in the output: one store per tap
    for (int g = 1; g < nl && consecutive; ++g) consecutive = dst[r0 + g] == dst[r0] + g;
    if (consecutive) {
      typedef float FD __attribute__((vector_size(kLanes * sizeof(float))));
      for (int k = 0; k < ndiag; ++k) {
        const FD o = __builtin_convertvector(scale * wf[gi][k], FD);
        __builtin_memcpy(dst[r0] + k * k_step, &o, sizeof o);
      }
      continue;
    }
    for (int g = 0; g < nl; ++g)
      for (int k = 0; k < ndiag; ++k)
        dst[r0 + g][k * k_step] = static_cast<float>(scale[g] * wf[gi][k][g]);
  }
}

// gaussian_rows for ng rows (none: nothing), DESI's 11 diagonals unrolled.
template <class T, bool kNewton>
void gaussian_rows_for(int ndiag, int ng, const double* mu_r, const double* var_r,
                       const double* s0_r, float* const* dst, ptrdiff_t k_step) {
  if (ng == 0) return;
  if (ndiag == 11)
    gaussian_rows<11, T, kNewton>(ndiag, ng, mu_r, var_r, s0_r, dst, k_step);
  else
    gaussian_rows<0, T, kNewton>(ndiag, ng, mu_r, var_r, s0_r, dst, k_step);
}

// The fold's per-row parameters (prep::Kernels::fold_params): p[3 r ..] = the centroid [px from
// the central tap], the Gaussian's variance [px^2] and the sum of row rows[r].
void fold_params(const FoldMoments& fm, const size_t* rows, size_t count, const double* wave,
                 const double* fwhm_pp, double fwhm_fixed, double* p) {
  const double fwhm_to_sigma = 1.0 / std::sqrt(8.0 * std::log(2.0));
  const long n = fm.n;
  alignas(64) double sum_c[kChunk], s1_c[kChunk], s2_c[kChunk], dl_c[kChunk], ft_c[kChunk];
  alignas(64) double m_c[kChunk], var_c[kChunk];
  for (size_t c0 = 0; c0 < count; c0 += kChunk) {
    const int nc = count - c0 < kChunk ? static_cast<int>(count - c0) : kChunk;
    // The rows' centroids [px] and the Gaussians' variances [px^2]. The first and last `half`
    // rows reach beyond the arm, where the matrix stores nothing: their stored weights lose part
    // of the row and pull its centroid inward. They take the shape and weight of the nearest
    // complete row (the LSF varies slowly along an arm).
    // The moments and pixel widths gathered first (scalar: indirect loads), then the arithmetic
    // in a loop over contiguous arrays, which the compiler puts on vector lanes (three divisions
    // per row; the same operations per row either way).
    // A run of consecutive rows whose weights all lie inside the arm (most chunks): each row is
    // its own complete row (borrowed(i) == i), so the same values by contiguous loads (rows
    // increase: prepare_spectrum's and fold_resolution_rows' lists).
    const long r_first = static_cast<long>(rows[c0]), r_last = static_cast<long>(rows[c0 + nc - 1]);
    const long h = fm.ndiag / 2;
    if (r_last - r_first == nc - 1 && r_first >= h && r_first >= 1 && r_last < n - h &&
        r_last + 1 < n) {
      const double *m0 = fm.m0 + r_first, *m1 = fm.m1 + r_first, *m2 = fm.m2 + r_first;
      const double* w = wave + r_first;
      for (int j = 0; j < nc; ++j) {
        sum_c[j] = m0[j];
        s1_c[j] = m1[j];
        s2_c[j] = m2[j];
        dl_c[j] = (w[j + 1] - w[j - 1]) * 0.5;
        ft_c[j] = fwhm_pp ? fwhm_pp[c0 + j] : fwhm_fixed;
      }
    } else {
      for (int j = 0; j < nc; ++j) {
        const long i = static_cast<long>(rows[c0 + j]);
        const long ib = borrowed(fm, i);
        const long ir = usable(fm, ib) ? ib : i;
        sum_c[j] = fm.m0[ir];
        s1_c[j] = fm.m1[ir];
        s2_c[j] = fm.m2[ir];
        // The pixel's width [A]: half the span of its neighbours (exact: a power of two), or the
        // one-sided step at the arm's ends.
        const long i0 = lmax(0L, i - 1), i1 = lmin(n - 1, i + 1);
        dl_c[j] = i1 - i0 == 2   ? (wave[i1] - wave[i0]) * 0.5
                  : i1 - i0 == 1 ? wave[i1] - wave[i0]
                                 : 0.0;
        ft_c[j] = fwhm_pp ? fwhm_pp[c0 + j] : fwhm_fixed;
      }
    }
    for (int j = 0; j < nc; ++j) {
      const double sum = sum_c[j];
      const double m = s1_c[j] / sum;
      const double v_raw = s2_c[j] / sum - m * m;
      const double var_row = v_raw > 0.0 ? v_raw : 0.0;
      const double fwhm_t = ft_c[j];
      const double sig_t = fwhm_t > 0 ? fwhm_t * fwhm_to_sigma / dl_c[j] : 0.0;
      m_c[j] = m;
      var_c[j] = var_row - sig_t * sig_t;
    }
    // Interleaved afterwards: stores of stride 3 kept the loop above off the vector lanes.
    double* pc = p + 3 * c0;
    for (int j = 0; j < nc; ++j) {
      pc[3 * j] = m_c[j];
      pc[3 * j + 1] = var_c[j];
      pc[3 * j + 2] = sum_c[j];
    }
  }
}

// The rows of fold parameters p[count][3] (fold_params), row r written to dst(r)[k * k_step].
template <class Dst>
void expand(const double* p, size_t count, int ndiag, const Dst& dst_of, ptrdiff_t k_step) {
  const int half = ndiag / 2;
  // Gaussian rows kLanes at a time, one row per lane of a native vector: every step of a row's
  // centroid iteration is the same sequence of operations for every row (the taps' recurrence
  // starts at the central tap, whatever the centre), so the rows' chains run side by side, and a
  // row's arithmetic is that of the row alone (its floats do not depend on its batch-mates).
  // [0]: the rows computed in FP32 with the plain step, [1]: in FP32 with the Newton step, [2]:
  // in FP64 with the Newton step (kPlainMinVar)
  alignas(64) double mu_l[3][kChunk], var_l[3][kChunk], s0_l[3][kChunk];
  float* dst[3][kChunk];
  for (size_t c0 = 0; c0 < count; c0 += kChunk) {
    const int nc = count - c0 < kChunk ? static_cast<int>(count - c0) : kChunk;
    int ng[3] = {0, 0, 0};  // the chunk's Gaussian rows of each kind
    for (int j = 0; j < nc; ++j) {
      float* o = dst_of(c0 + j);
      const double* pr = p + 3 * (c0 + j);
      const double m = pr[0], var = pr[1], sum = pr[2];
      if (var > 0.09 && std::fabs(m) <= static_cast<double>(half)) {
        // sigma > 0.3 px with the centroid within the taps: a sampled Gaussian in a lane,
        // normalised to the row's sum
        const int t = std::fabs(m) > kFloatMaxMu || var < kPlainMinVar ? 2
                      : var > kPlainMaxVar                             ? 1
                                                                       : 0;
        mu_l[t][ng[t]] = m;
        var_l[t][ng[t]] = var;
        s0_l[t][ng[t]] = sum;
        dst[t][ng[t]] = o;
        ++ng[t];
      } else {
        // A centroid beyond the taps (the recurrence from the central tap could overflow
        // there), a row narrower than 0.3 px, a one-diagonal matrix: this row alone, as the
        // fit's own form builds it (kernels/fold_row.hpp).
        velox::kern::fold_row(pr, ndiag, o, k_step);
      }
    }
    gaussian_rows_for<float, false>(ndiag, ng[0], mu_l[0], var_l[0], s0_l[0], dst[0], k_step);
    gaussian_rows_for<float, true>(ndiag, ng[1], mu_l[1], var_l[1], s0_l[1], dst[1], k_step);
    gaussian_rows_for<double, true>(ndiag, ng[2], mu_l[2], var_l[2], s0_l[2], dst[2], k_step);
  }
}

void expand_rows(const double* p, size_t count, int ndiag, const int* col, float* out,
                 ptrdiff_t row_step, ptrdiff_t k_step) {
  expand(
      p, count, ndiag, [&](size_t r) { return out + static_cast<ptrdiff_t>(col[r]) * row_step; },
      k_step);
}

void write_rows(const FoldMoments& fm, const size_t* rows, size_t count, const double* wave,
                const double* fwhm_pp, double fwhm_fixed, float* out, ptrdiff_t row_step,
                ptrdiff_t k_step, long offset) {
  alignas(64) double p[3 * kChunk];
  for (size_t c0 = 0; c0 < count; c0 += kChunk) {
    const size_t nc = count - c0 < static_cast<size_t>(kChunk) ? count - c0 : kChunk;
    fold_params(fm, rows + c0, nc, wave, fwhm_pp ? fwhm_pp + c0 : nullptr, fwhm_fixed, p);
    expand(
        p, nc, fm.ndiag,
        [&](size_t r) { return out + (static_cast<long>(rows[c0 + r]) - offset) * row_step; },
        k_step);
  }
}

// Batcher's odd-even merge sort network for 32 values: its 191 compare-exchange pairs, in order.
struct SortNet32 {
  unsigned char a[191], b[191];
  constexpr SortNet32() : a(), b() {
    int c = 0;
    for (int p = 1; p < 32; p <<= 1)
      for (int k = p; k >= 1; k >>= 1)
        for (int j = k % p; j + k < 32; j += 2 * k)
          for (int i = 0; i < k && i + j + k < 32; ++i)
            if ((i + j) / (2 * p) == (i + j + k) / (2 * p)) {
              a[c] = static_cast<unsigned char>(i + j);
              b[c] = static_cast<unsigned char>(i + j + k);
              ++c;
            }
  }
};
constexpr SortNet32 kSortNet;
static_assert(kSortNet.b[190] != 0, "191 compare-exchanges");

// The same network pruned to what slot 15 (the median of 31 values and a +inf in slot 31) needs:
// the compare-exchanges with slot 31 are dropped (+inf stays there), then, from the last one
// back, those whose outputs no kept one reads. 152 of the 191: the same median, bit for bit.
struct MedianNet32 {
  unsigned char a[191], b[191];
  int n;
  constexpr MedianNet32() : a(), b(), n(0) {
    bool keep[191] = {};
    unsigned need = 1u << 15;
    for (int c = 190; c >= 0; --c) {
      const unsigned pair = (1u << kSortNet.a[c]) | (1u << kSortNet.b[c]);
      if (kSortNet.b[c] == 31 || !(need & pair)) continue;
      keep[c] = true;
      need |= pair;
    }
    for (int c = 0; c < 191; ++c)
      if (keep[c]) a[n] = kSortNet.a[c], b[n] = kSortNet.b[c], ++n;
  }
};
constexpr MedianNet32 kMedianNet;
static_assert(kMedianNet.n == 152, "152 compare-exchanges");

// Native float vectors: 16 lanes with AVX-512, 8 with AVX2, 4 with SSE2.
using velox::kern::kVecF;
typedef velox::kern::VxVecF FV;

// Sorts x[0..31] lane by lane (each lane its own 32 values): the network's compare-exchanges on
// vector lanes, each a min and a max (only comparisons: the values are exact).
inline void sort32(FV* x) {
#pragma GCC unroll 191
  for (int c = 0; c < 191; ++c) {
    const FV u = x[kSortNet.a[c]], v = x[kSortNet.b[c]];
    x[kSortNet.a[c]] = u < v ? u : v;
    x[kSortNet.b[c]] = u < v ? v : u;
  }
}

// Slot 15 of x[0..31] sorted lane by lane, x[31] = +inf (the other slots are left partly sorted).
inline void median31(FV* x) {
#pragma GCC unroll 152
  for (int c = 0; c < kMedianNet.n; ++c) {
    const FV u = x[kMedianNet.a[c]], v = x[kMedianNet.b[c]];
    x[kMedianNet.a[c]] = u < v ? u : v;
    x[kMedianNet.b[c]] = u < v ? v : u;
  }
}

// The model ivar of pixel k from its median F (prepare_spectrum's formula).
inline void model_ivar_at(size_t k, double F, const double* sigma, double scale, float* ivar) {
  const double sm = scale * sigma[k] * F;
  // 1 / (1/ivar + sm^2) with one division
  const double iv = ivar[k];
  ivar[k] = static_cast<float>(iv / (1.0 + iv * sm * sm));
}

// model_ivar_at for the kVecF pixels k .. k + kVecF - 1 from their medians F[], on vector lanes
// (the same operations per pixel).
inline void model_ivar_block(size_t k, const float* F, const double* sigma, double scale,
                             float* ivar) {
  typedef velox::kern::VxVecD D;
  typedef velox::kern::VxVecDF DF;  // kVecD floats
  constexpr int kD = velox::kern::kVecD;
  static_assert(2 * kD == kVecF, "a float block is two double vectors");
  for (int h = 0; h < 2; ++h) {
    DF ff, ivf;
    D sg;
    __builtin_memcpy(&ff, F + h * kD, sizeof ff);
    __builtin_memcpy(&ivf, ivar + k + h * kD, sizeof ivf);
    __builtin_memcpy(&sg, sigma + k + h * kD, sizeof sg);
    D f = __builtin_convertvector(ff, D);
    f = f < 0.0 ? -f : f;
    const D sm = scale * sg * f;
    const D iv = __builtin_convertvector(ivf, D);
    const DF out = __builtin_convertvector(iv / (1.0 + iv * sm * sm), DF);
    __builtin_memcpy(ivar + k + h * kD, &out, sizeof out);
  }
}

void model_ivar(const float* fl, const double* sigma, double scale, size_t n, float* ivar) {
  // Pixel k's window: the used pixels [k - 15, k + 16) within [0, n), sorted; its median is
  // element m/2 (m values, the upper median). kVecF pixels at a time, one per lane: the window's
  // values and +inf up to 32 slots, sorted by a network (no data-dependent branches, and no
  // chain from one pixel to the next as in a sliding sorted window).
  constexpr size_t kHalf = 15, kBlock = kVecF;
  FV x[32];
  FV lane;  // 0, 1, .. kVecF - 1
  for (int q = 0; q < kVecF; ++q) lane[q] = static_cast<float>(q);
  const FV inf = FV{} + INFINITY;
  if (n >= 2 * kHalf + kBlock) {
    // Pixels whose window is full (31 values: median slot 15) load their slots as vectors (the
    // last block overlaps the one before it).
    const size_t full_hi = n - kHalf;
    alignas(64) float med[kBlock];
    for (size_t k0 = kHalf; k0 < full_hi; k0 += kBlock) {
      const size_t k = k0 + kBlock <= full_hi ? k0 : full_hi - kBlock;
      for (int j = 0; j < 31; ++j) __builtin_memcpy(&x[j], fl + k - kHalf + j, sizeof(FV));
      x[31] = inf;
      median31(x);
      __builtin_memcpy(med, &x[15], sizeof(FV));
      if (k == k0) {
        model_ivar_block(k, med, sigma, scale, ivar);
        continue;
      }
      for (size_t q = 0; q < kBlock; ++q)  // the last block, overlapping the one before
        if (k + q >= k0) model_ivar_at(k + q, std::fabs(med[q]), sigma, scale, ivar);
    }
    // The first and last 15 pixels: edge pixel e (0 .. 14) from either end has the 16 + e
    // pixels nearest that end as its window (n >= 31), so slot j of lane e is the j-th pixel from
    // the end where j < 16 + e, else +inf.
    for (int end = 0; end < 2; ++end)
      for (size_t e0 = 0; e0 < kHalf; e0 += kBlock) {
        for (int j = 0; j < 32; ++j) {
          const float v = j < 31 ? fl[end == 0 ? j : n - 1 - j] : INFINITY;
          x[j] = lane + static_cast<float>(e0 + kHalf + 1) > static_cast<float>(j) ? FV{} + v : inf;
        }
        sort32(x);
        for (size_t q = 0; q < kBlock && e0 + q < kHalf; ++q) {
          const size_t e = e0 + q;
          model_ivar_at(end == 0 ? e : n - 1 - e, std::fabs(x[(e + kHalf + 1) / 2][q]), sigma,
                        scale, ivar);
        }
      }
    return;
  }
  // A short arm: every window filled lane by lane.
  for (size_t k0 = 0; k0 < n; k0 += kBlock) {
    alignas(64) float slots[32][kBlock];
    int mid[kBlock];
    for (size_t q = 0; q < kBlock; ++q) {
      const size_t k = k0 + q < n ? k0 + q : n - 1;  // past the end: a copy of the last
      const size_t a = k >= kHalf ? k - kHalf : 0, b = k + kHalf + 1 < n ? k + kHalf + 1 : n;
      for (size_t j = 0; j < 32; ++j) slots[j][q] = a + j < b ? fl[a + j] : INFINITY;
      mid[q] = static_cast<int>(b - a) / 2;
    }
    __builtin_memcpy(x, slots, sizeof x);
    sort32(x);
    for (size_t q = 0; q < kBlock && k0 + q < n; ++q)
      model_ivar_at(k0 + q, std::fabs(x[mid[q]][q]), sigma, scale, ivar);
  }
}

size_t select_pixels(const float* flux, const float* ivar, const int* mask, const char* range,
                     size_t n, char* use) {
  // Branch-free, so that the compiler puts it on vector lanes: |x| <= FLT_MAX is isfinite(x).
  constexpr float kMax = 3.40282346638528859812e+38F;
  size_t n2 = 0;
  if (mask) {
    for (size_t j = 0; j < n; ++j) {
      const float f = flux[j], iv = ivar[j];
      const bool ok = (std::fabs(f) <= kMax) & (iv <= kMax) & (iv > 0) & (mask[j] == 0);
      use[j] = ok ? range[j] : 0;
      n2 += use[j] == 2;
    }
  } else {
    for (size_t j = 0; j < n; ++j) {
      const float f = flux[j], iv = ivar[j];
      const bool ok = (std::fabs(f) <= kMax) & (iv <= kMax) & (iv > 0);
      use[j] = ok ? range[j] : 0;
      n2 += use[j] == 2;
    }
  }
  return n2;
}

void pack_pixels(const velox::prep::PackIn& in, const size_t* __restrict idx, size_t m,
                 const velox::prep::PackOut& out) {
  // Branch-free per pixel (the zero point a select, the invariant tests hoisted), over runs of
  // consecutive pixels (the used pixels are runs between masked ones): contiguous loads, which
  // the compiler puts on vector lanes (through idx it kept every pixel scalar: perf, 14% of a
  // DESI preparation). The same operations as one pixel at a time.
  const double* __restrict lw = in.ln_wave;
  const double* __restrict wv = in.wave;
  const float* __restrict fl = in.flux;
  const float* __restrict iv = in.ivar;
  const double split = in.split_A, zb = in.zp_b, zr = in.zp_r, lo = in.lo, span = in.hi - in.lo;
  const bool leg = in.hi > in.lo;
  const long off = in.has_full ? in.full_off : 0;
  for (size_t k = 0; k < m;) {
    size_t e = k + 1;
    while (e < m && idx[e] == idx[e - 1] + 1) ++e;
    const size_t j0 = idx[k], len = e - k;
    const double* __restrict l = lw + j0;
    const double* __restrict w = wv + j0;
    const float* __restrict f = fl + j0;
    const float* __restrict v = iv + j0;
    double* __restrict o_ln = out.lnlam + k;
    double* __restrict o_x = out.xleg + k;
    float* __restrict o_f = out.flux + k;
    float* __restrict o_i = out.ivar + k;
    int* __restrict o_fi = out.full_idx + k;
    int* __restrict o_ip = out.input_pixel + k;
    // One loop per output (in one loop of all the streams GCC kept the pixels scalar).
    for (size_t t = 0; t < len; ++t) o_ln[t] = l[t] - (w[t] < split ? zb : zr);
    __builtin_memcpy(o_f, f, len * sizeof(float));
    __builtin_memcpy(o_i, v, len * sizeof(float));
    for (size_t t = 0; t < len; ++t) o_ip[t] = static_cast<int>(j0 + t);
    if (leg)
      for (size_t t = 0; t < len; ++t) o_x[t] = 2.0 * (l[t] - lo) / span - 1.0;
    else
      for (size_t t = 0; t < len; ++t) o_x[t] = 0.0;
    const int fi0 = static_cast<int>(static_cast<long>(j0) + off);
    if (in.has_full)
      for (size_t t = 0; t < len; ++t) o_fi[t] = fi0 + static_cast<int>(t);
    else
      for (size_t t = 0; t < len; ++t) o_fi[t] = -1;
    k = e;
  }
}

void sn_values(const float* __restrict flux, const float* __restrict ivar, size_t n,
               float* __restrict sn) {
  for (size_t i = 0; i < n; ++i) sn[i] = flux[i] * std::sqrt(ivar[i]);
}

const velox::prep::Kernels kKernels = {&moments,    &write_rows,    &fold_params, &expand_rows,
                                       &model_ivar, &select_pixels, &pack_pixels, &sn_values};

}  // namespace

namespace velox::prep_isa::VELOX_ISA_LEVEL {

const prep::Kernels& kernels() { return kKernels; }

}  // namespace velox::prep_isa::VELOX_ISA_LEVEL
