// Template emulator evaluation: labels -> basis coefficients c[K+1] and their analytic
// derivatives. The model spectrum (template grid, normalised flux) is
//   T(t; labels) = sum_k c_k(labels) * B[t][k],   c_0 = 1 (B[.][0] is the mean spectrum),
// with each c_k (k >= 1) a quadratic polynomial in the scaled labels plus a Gaussian-process /
// kernel-ridge interpolant over the training stars:
//   c_k(x) = sum_p phi_p(x) beta[p][k]
//            + sum_i exp(-0.5 sum_l (x_l - X_il)^2 inv_len2_l) alpha[i][k]
// x_l = (label_l - shift_l) / scale_l. Labels are (log10 TEFF [K], LOGG [dex], FEH [dex]
// [, ALPHAFE [dex]]). Sources: PCA + GP emulators as in rvspecfit's interpolation and
// Czekala et al. (2015, Starfish); kernel ridge regression (Rasmussen & Williams 2006, ch. 2).
#pragma once
#include <cmath>

#include "kernels/hd.hpp"
#include "kernels/team.hpp"

namespace velox::kern {

constexpr int kMaxLabels = 4;
constexpr int kMaxComp = 96;  // K + 1 at most
// Zero floats after the last row of a basis the pixel loops read (ArmModel::basis): the CPU's
// FP32 component sums load whole float vectors (up to 16) (src/backend/cpu/isa/simd_forms.hpp
// component_sums_f32).
constexpr int kBasisPad = 16;

struct EmulatorView {
  int n_train = 0;                    // N training stars
  int n_comp = 0;                     // K + 1 (mean + K components)
  int n_label = 0;                    // L
  int n_poly = 0;                     // quadratic terms: 1 + L + L(L+1)/2
  const double* train_x = nullptr;    // [N][L] scaled labels of the training stars
  const double* alpha = nullptr;      // [N][K+1] GP weights (column 0 unused, zero)
  const double* poly_coef = nullptr;  // [P][K+1] polynomial mean coefficients (column 0 unused)
  double inv_len2[kMaxLabels] = {};   // 1 / length_scale^2 in scaled-label units
  double shift[kMaxLabels] = {};
  double scale[kMaxLabels] = {};
};

VX_HD VX_INLINE int n_poly_terms(int n_label) { return 1 + n_label + n_label * (n_label + 1) / 2; }

// Doubles of per-spectrum scratch emulator_coeffs_team() needs: one row of weights (value and
// L derivatives) per polynomial term and per training star, then the K x (1 + L) sums.
VX_HD VX_INLINE long long emulator_scratch_size(const EmulatorView& e) {
  return (long long)(e.n_poly + e.n_train + e.n_comp) * (1 + e.n_label);
}

// Quadratic polynomial terms phi(p) and d phi_p / d x_l (dphi(l, p)) at scaled labels x[L],
// written through the references phi(p) and dphi(l, p) (arrays, or a row-weight matrix:
// emulator_rows). Order: 1, x_0..x_{L-1}, then x_l x_m for l <= m (row-major over l).
template <class Phi, class DPhi>
VX_HD VX_INLINE void poly_terms_at(const double* x, int n_label, Phi&& phi, DPhi&& dphi) {
  const int np = n_poly_terms(n_label);
  for (int l = 0; l < n_label; ++l)
    for (int p = 0; p < np; ++p) dphi(l, p) = 0.0;
  // The label loops run to kMaxLabels with a test (the same operations as to n_label), so that
  // the GPU keeps x in registers.
  int p = 0;
  phi(p++) = 1.0;
  VX_UNROLL
  for (int l = 0; l < kMaxLabels; ++l)
    if (l < n_label) {
      dphi(l, p) = 1.0;
      phi(p++) = x[l];
    }
  VX_UNROLL
  for (int l = 0; l < kMaxLabels; ++l) {
    VX_UNROLL
    for (int m = l; m < kMaxLabels; ++m)
      if (m < n_label) {  // l <= m < n_label
        phi(p) = x[l] * x[m];
        dphi(l, p) += x[m];
        dphi(m, p) += x[l];
        ++p;
      }
  }
}

// poly_terms_at into arrays phi[P] and dphi[l][P].
VX_HD VX_INLINE void poly_terms(const double* x, int n_label, double* phi, double* dphi) {
  const int np = n_poly_terms(n_label);
  poly_terms_at(
      x, n_label, [&](int p) -> double& { return phi[p]; },
      [&](int l, int p) -> double& { return dphi[l * np + p]; });
}

// c[K+1] and dc[L][K+1] = d c / d label (physical label units) at physical labels[L].
// Serial over training stars (cheap next to the pixel loops: N*(K+1)*(L+1) flops).
VX_HD VX_INLINE void emulator_coeffs(const EmulatorView& e, const double* labels, double* c,
                                     double* dc) {
  const int L = e.n_label, K1 = e.n_comp, P = e.n_poly;
  double x[kMaxLabels];
  for (int l = 0; l < L; ++l) x[l] = (labels[l] - e.shift[l]) / e.scale[l];
  double phi[1 + kMaxLabels + kMaxLabels * (kMaxLabels + 1) / 2];
  double dphi[kMaxLabels * (1 + kMaxLabels + kMaxLabels * (kMaxLabels + 1) / 2)];
  poly_terms(x, L, phi, dphi);
  for (int k = 0; k < K1; ++k) {
    c[k] = 0.0;
    for (int l = 0; l < L; ++l) dc[l * K1 + k] = 0.0;
  }
  for (int p = 0; p < P; ++p) {
    const double* b = e.poly_coef + p * K1;
    for (int k = 1; k < K1; ++k) {
      c[k] += phi[p] * b[k];
      for (int l = 0; l < L; ++l) dc[l * K1 + k] += dphi[l * P + p] * b[k];
    }
  }
  for (int i = 0; i < e.n_train; ++i) {
    const double* xi = e.train_x + i * L;
    double d2 = 0.0, g[kMaxLabels];
    for (int l = 0; l < L; ++l) {
      const double d = x[l] - xi[l];
      d2 += d * d * e.inv_len2[l];
      g[l] = -d * e.inv_len2[l];
    }
    if (d2 > 60.0) continue;  // exp(-30) ~ 1e-13: no contribution at double precision
    const double kv = exp(-0.5 * d2);
    const double* a = e.alpha + i * K1;
    for (int k = 1; k < K1; ++k) {
      const double ka = kv * a[k];
      c[k] += ka;
      for (int l = 0; l < L; ++l) dc[l * K1 + k] += g[l] * ka;
    }
  }
  c[0] = 1.0;
  for (int l = 0; l < L; ++l) {
    dc[l * K1 + 0] = 0.0;
    const double inv_s = 1.0 / e.scale[l];
    for (int k = 1; k < K1; ++k) dc[l * K1 + k] *= inv_s;
  }
}

// f(IntC<L>) for the label count L = 1 .. kMaxLabels as a compile-time value: the CPU's
// instantiations of loops over the labels (registers instead of run-time-sized arrays).
template <class F>
VX_HD VX_INLINE void dispatch_labels(int L, F&& f) {
  static_assert(kMaxLabels == 4, "dispatch_labels instantiates L = 1 .. 4");
  if (L <= 1)
    f(IntC<1>{});
  else if (L == 2)
    f(IntC<2>{});
  else if (L == 3)
    f(IntC<3>{});
  else
    f(IntC<4>{});
}

// exp_vec's Taylor coefficients after 1/13!: 1/12!, 1/11!, ..., 1/2!, 1, 1 (Horner from r^13 down;
// also kernels/fold_row.hpp's scalar form).
struct ExpTaylor {
  double c[13];
};
VX_HD VX_INLINE constexpr ExpTaylor exp_taylor() {
  return {{1.0 / 479001600.0, 1.0 / 39916800.0, 1.0 / 3628800.0, 1.0 / 362880.0, 1.0 / 40320.0,
           1.0 / 5040.0, 1.0 / 720.0, 1.0 / 120.0, 1.0 / 24.0, 1.0 / 6.0, 0.5, 1.0, 1.0}};
}

#if defined(VX_VEC8)
// Phase 2 of emulator_coeffs_team on the CPU (host only) for NL labels and NV 8-column vectors
// (K = n_comp - 1 <= 8 NV coefficients): the same products and the same order over the rows as
// its reduce_grid form, so bitwise equal, with the (1 + NL) x NV accumulators held in registers
// (the reduce_grid form loads and stores its column-major accumulators at every row).
// sums[o * (1 + NL) + k] as reduce_grid writes them.
template <int NL, int NV>
VX_INLINE void emulator_combine_regs(const EmulatorView& e, const double* rows, double* sums) {
  constexpr int W = 1 + NL;
  // In native vectors (kVecD columns each, NVD of them), CH per pass over the rows so that the
  // W x CH accumulators fit the registers: all with AVX-512's 32, 3 (12 registers) with AVX2's
  // and SSE2's 16. Each column is still summed over the rows in order.
  typedef VxVecD D;
  constexpr int NVD = NV * 8 / kVecD, CH = kVecD == 8 ? NVD : 3;
  const int K1 = e.n_comp, P = e.n_poly, nc = K1 - 1;
  for (int v0 = 0; v0 < NVD; v0 += CH) {
    D acc[W][CH];
    for (int k = 0; k < W; ++k)
      for (int v = 0; v < CH; ++v) acc[k][v] = D{};
    const int c0 = kVecD * v0;  // first column of this pass
    const bool tail = c0 + kVecD * CH > nc;
    for (int r = 0; r < P + e.n_train; ++r) {
      const double* w = rows + (long long)r * W;
      if (r >= P && w[0] == 0.0) continue;
      const double* brow =
          (r < P ? e.poly_coef + (long long)r * K1 : e.alpha + (long long)(r - P) * K1) + 1 + c0;
      D b[CH];
      if (!tail) {
        __builtin_memcpy(b, brow, sizeof b);
      } else {
        alignas(64) double last[kVecD * CH];
        for (int q = 0; q < kVecD * CH; ++q) last[q] = c0 + q < nc ? brow[q] : 0.0;
        __builtin_memcpy(b, last, sizeof b);
      }
      for (int k = 0; k < W; ++k)
        for (int v = 0; v < CH; ++v) acc[k][v] += w[k] * b[v];
    }
    for (int k = 0; k < W; ++k) {
      alignas(64) double a[kVecD * CH];
      __builtin_memcpy(a, acc[k], sizeof a);
      for (int o = c0; o < nc && o < c0 + kVecD * CH; ++o) sums[o * W + k] = a[o - c0];
    }
  }
}

// x = exp(x) lane by lane for a GCC/clang vector of doubles (host only; the emulator's GP kernel
// values, x = -d2/2 >= -30, and the host's resolution-matrix fold), x in [-708, 700]: x = n ln2
// + r with |r| <= ln2/2 (ln2 in two parts, Cody & Waite 1980), exp(r) by its Taylor series to
// r^13/13! (truncation < 2e-17 relative at |r| = 0.347), 2^n from the exponent bits. Agrees with
// libm's exp to a few ulp (test_kernels).
// Vec: L doubles; II: L ints; IL: L long longs (exp_vec picks them).
template <class Vec, class II, class IL>
VX_INLINE void exp_vec_as(Vec& x) {
  constexpr int L = static_cast<int>(sizeof(Vec) / sizeof(double));
  // n through 32-bit integers (|n| <= 1100): a double-to-int32 conversion is one instruction from
  // SSE2 on, the conversion to int64 only with AVX-512DQ (without it, one scalar per lane).
  Vec h;  // round to nearest (half away from 0) through truncation
  for (int p = 0; p < L; ++p) h[p] = x[p] < 0 ? -0.5 : 0.5;
  const II ni = __builtin_convertvector(x * 1.4426950408889634 + h, II);
  const Vec n = __builtin_convertvector(ni, Vec);
  const Vec r = (x - n * 0.693147180369123816490) - n * 1.90821492927058770002e-10;
  Vec p = Vec{} + 1.0 / 6227020800.0;  // 1/13!
  const ExpTaylor t = exp_taylor();
  for (int k = 0; k < 13; ++k) p = p * r + t.c[k];
  const IL e = (__builtin_convertvector(ni, IL) + 1023) << 52;
  Vec s;
  __builtin_memcpy(&s, &e, sizeof s);
  x = p * s;
}
template <class Vec>
VX_INLINE void exp_vec(Vec& x) {
  constexpr int L = static_cast<int>(sizeof(Vec) / sizeof(double));
  typedef int II __attribute__((vector_size(L * 4)));
  typedef long long IL __attribute__((vector_size(L * 8)));
  exp_vec_as<Vec, II, IL>(x);
}
// exp_vec for 8 doubles (kern::VxVec8).
VX_INLINE void exp_v8(VxVec8& x) { exp_vec(x); }

// emulator_combine_regs<NL, NV> for the run-time K (NV = 1 .. 6: up to 48 coefficients); false
// for larger K (then the reduce_grid form runs).
template <int NL, int NV = 1>
VX_INLINE bool emulator_combine_for(const EmulatorView& e, const double* rows, double* sums) {
  if constexpr (NV > 6) {
    return false;
  } else {
    if (e.n_comp - 1 <= 8 * NV) {
      emulator_combine_regs<NL, NV>(e, rows, sums);
      return true;
    }
    return emulator_combine_for<NL, NV + 1>(e, rows, sums);
  }
}
#endif

// Phase 2's term of row r for coefficient 1 + o: acc[q] += w[q] coef(r, 1 + o) for q <= nl, with
// w row r's weights (value, then nl label derivatives) and coef = poly_coef then alpha; a row
// whose value weight is zero (a GP kernel value below exp(-30)) adds nothing and is skipped.
template <class Acc>
VX_HD VX_INLINE void emulator_term(const EmulatorView& e, const double* w, int r, int o, int nl,
                                   Acc&& acc) {
  const int P = e.n_poly, K1 = e.n_comp;
  if (r >= P && w[0] == 0.0) return;
  const double* brow = r < P ? e.poly_coef + (long long)r * K1 : e.alpha + (long long)(r - P) * K1;
  const double b = brow[1 + o];
  acc[0] += w[0] * b;
  for (int l = 0; l < nl; ++l) acc[1 + l] += w[1 + l] * b;
}

// Phase 1 of emulator_coeffs_team at scaled labels x[L]: the row weights of every polynomial term
// and training star, element (r, q) (r < P + N; q = 0 the value phi_r or GP kernel value k_i, q =
// 1 + l its derivative with respect to x_l) at rows[r * rs + q * cs]. One worker per training
// star; a star with d2 > 60 (exp(-30) ~ 1e-13: no contribution at double precision) gets a zero
// row, which phase 2 skips. Visible to every worker on return.
template <class Team>
VX_HD void emulator_rows(const Team& team, const EmulatorView& e, const double* x, double* rows,
                         long long rs, long long cs) {
  const int L = e.n_label, P = e.n_poly;
  team.single([&] {  // the polynomial terms' rows, written in place (no array of their own)
    poly_terms_at(
        x, L, [&](int p) -> double& { return rows[p * rs]; },
        [&](int l, int p) -> double& { return rows[p * rs + (1 + l) * cs]; });
  });
  // Training star i's row: its GP kernel value kv and kv's derivatives with respect to x_l.
  // The label loops below run to kMaxLabels with a test, so that the GPU keeps x in registers
  // (no stack frame for the staged engine's row kernel); the same operations as to L.
  auto kernel_row = [&](int i, double kv) {
    double* r = rows + (long long)(P + i) * rs;
    r[0] = kv;
    VX_UNROLL
    for (int l = 0; l < kMaxLabels; ++l)
      if (l < L) r[(1 + l) * cs] = -(x[l] - e.train_x[i * L + l]) * e.inv_len2[l] * kv;
  };
  int i_first = 0;  // training stars before it were done 8 at a time (CPU)
#if defined(VX_VEC8)
  if constexpr (Team::kVec > 1) {
    // The same row weights, 8 training stars per step with exp_v8 (libm's exp is the GPU's).
    for (; i_first + 8 <= e.n_train; i_first += 8) {
      VxVec8 d2 = {}, arg;
      for (int l = 0; l < L; ++l)
        for (int p = 0; p < 8; ++p) {
          const double d = x[l] - e.train_x[(i_first + p) * L + l];
          d2[p] += d * d * e.inv_len2[l];
        }
      arg = -0.5 * d2;
      for (int p = 0; p < 8; ++p) arg[p] = d2[p] > 60.0 ? 0.0 : arg[p];
      exp_v8(arg);
      const VxVec8& kv8 = arg;
      for (int p = 0; p < 8; ++p) kernel_row(i_first + p, d2[p] > 60.0 ? 0.0 : kv8[p]);
    }
  }
#endif
  team.for_each(e.n_train - i_first, [&](int ii) {
    const int i = i_first + ii;
    const double* xi = e.train_x + i * L;
    double d2 = 0.0;
    VX_UNROLL
    for (int l = 0; l < kMaxLabels; ++l)
      if (l < L) {
        const double d = x[l] - xi[l];
        d2 += d * d * e.inv_len2[l];
      }
    kernel_row(i, d2 > 60.0 ? 0.0 : exp(-0.5 * d2));
  });
  team.sync();
}

// The emulator's scaled labels x_l = (label_l - shift_l) / scale_l.
VX_HD VX_INLINE void emulator_scaled(const EmulatorView& e, const double* labels, double* x) {
  VX_UNROLL
  for (int l = 0; l < kMaxLabels; ++l)
    if (l < e.n_label) x[l] = (labels[l] - e.shift[l]) / e.scale[l];
}

// Phase 3 of emulator_coeffs_team: c[K+1] and dc[L][K+1] from phase 2's sums, coefficient k >= 1
// and output q (0 value, 1 + l derivative by x_l) at sums[(k - 1) * os + q * qs]. Visible to
// every worker on return.
template <class Team>
VX_HD void emulator_finish(const Team& team, const EmulatorView& e, const double* sums,
                           long long os, long long qs, double* c, double* dc) {
  const int L = e.n_label, K1 = e.n_comp;
  team.for_each(K1, [&](int k) {
    c[k] = k == 0 ? 1.0 : sums[(k - 1) * os];
    for (int l = 0; l < L; ++l)
      dc[l * K1 + k] = k == 0 ? 0.0 : sums[(k - 1) * os + (1 + l) * qs] / e.scale[l];
  });
  team.sync();
}

// Phase 2 as a matrix product on the host, in phase 2's order (the staged engine's host executor;
// the device calls cuBLAS): for each of n_req requests (column block q0 = i W, W = 1 + L, of the
// rows and sums, leading dimension ld), sums(q0 + q, o) = sum_r rows(q0 + q, r) coef(r, 1 + o)
// over r in increasing order, rows whose value weight is zero skipped (as phase 2 skips them):
// rows(q, r) at rows[r * ld + q], sums(q, o) at sums[o * ld + q], coef = poly_coef then alpha.
// The same sums as emulator_coeffs_team's single-lane form (reduce_grid), bit for bit.
inline void emulator_gemm_host(const EmulatorView& e, int n_req, long long ld, const double* rows,
                               double* sums) {
  const int L = e.n_label, K1 = e.n_comp, P = e.n_poly, W = 1 + L;
  for (int i = 0; i < n_req; ++i)
    for (int o = 0; o < K1 - 1; ++o) {
      double acc[1 + kMaxLabels] = {};
      for (int r = 0; r < P + e.n_train; ++r)
        emulator_term(e, rows + (long long)r * ld + (long long)i * W, r, o, L, acc);
      for (int q = 0; q < W; ++q) sums[(long long)o * ld + (long long)i * W + q] = acc[q];
    }
}

// emulator_coeffs() spread over a team (kernels/team.hpp): the same sums in the same order
// (polynomial terms, then training stars, for every coefficient), in phases:
//  1. row weights (emulator_rows): rows[r][0] = phi_r or the GP kernel value k_i, rows[r][1+l] =
//     its derivative with respect to the scaled label x_l (one worker per training star);
//  2. c[k] = sum_r rows[r][0] coef[r][k] and dc[l][k] = sum_r rows[r][1+l] coef[r][k] / scale_l
//     with coef = poly_coef then alpha: team.reduce_grid, one column per coefficient (one lane
//     each on the GPU, coalesced reads of the coefficient rows);
//  3. c and dc from the sums (emulator_finish).
// The staged engine runs phase 2 for all of a round's requests as one matrix product
// (kernels/rows_stage.hpp). scratch: emulator_scratch_size(e) doubles. c[K+1] and dc[L][K+1] as
// in emulator_coeffs(); they are visible to every worker on return.
template <class Team>
VX_HD void emulator_coeffs_team(const Team& team, const EmulatorView& e, const double* labels,
                                double* scratch, double* c, double* dc) {
  const int L = e.n_label, K1 = e.n_comp, P = e.n_poly, W = 1 + L;
  double* rows = scratch;
  double* sums = scratch + (long long)(P + e.n_train) * W;
  double x[kMaxLabels];
  emulator_scaled(e, labels, x);
  emulator_rows(team, e, x, rows, W, 1);
  // NL: the label count at compile time on the CPU (the column loop then vectorizes), 0 = L.
  auto combine = [&](auto nlc) {
    constexpr int NL = decltype(nlc)::value;
    const int nl = NL > 0 ? NL : L;
    team.reduce_grid(P + e.n_train, K1 - 1, W, sums, [&](int r, int o, auto acc) {
      emulator_term(e, rows + (long long)r * W, r, o, nl, acc);
    });
  };
  if constexpr (Team::kVec > 1) {
    bool done = false;
#if defined(VX_VEC8)
    dispatch_labels(
        L, [&](auto nlc) { done = emulator_combine_for<decltype(nlc)::value>(e, rows, sums); });
#endif
    if (!done) dispatch_labels(L, combine);
  } else {
    combine(IntC<0>{});
  }
  emulator_finish(team, e, sums, W, 1, c, dc);
}

}  // namespace velox::kern
