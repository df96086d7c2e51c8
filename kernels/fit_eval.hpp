// One evaluation of the forward model and its chi^2 for ONE spectrum, with the per-arm
// multiplicative polynomial continuum profiled out (variable projection, Golub & Pereyra 2003):
//   model_i = P_a(x_i) * T(u_i(v); labels),   P_a = sum_j a_aj Leg_j(x_i)  for pixel i in arm a,
// (a polynomial of degree cont_deg in the arm's x in [-1, 1]; the GPU's lane form uses the
// Legendre basis Leg_j, the CPU's SIMD form the Chebyshev basis: the same space, so the same fit),
//   u_i(v) = (ln lambda_obs,i - ln D(v) - lnlam0) / dlnlam   (template grid coordinate).
// For fixed (v, labels) the continuum a is the weighted least-squares solution. The gradient of
// the profiled chi^2 is J^T W r (A^T W r = 0 at the optimum a) and its Gauss-Newton Hessian is the
// Schur complement H = J^T W J - C^T G^-1 C, with A_ij = Leg_j T_i, G = A^T W A, C = A^T W J.
// Its inverse is the covariance of (v, labels[, vsini]) marginalised over the continuum.
// Parameters theta = [VRAD km/s, label_0 .. label_{L-1}, VSINI km/s] (src/fit/params.hpp is the
// table): VSINI sits at index 1 + L and is fitted (a Jacobian column) only when w->fit_vsini;
// otherwise it is held at theta[1 + L]. Rotation: T(u) is replaced by its convolution with the
// Gray rotation kernel on the template grid (convolve.hpp rotation_weights). Both the rotation
// and the arm's Gaussian LSF (folded into the basis) are convolutions in ln lambda, so applying
// the rotation to the LSF-convolved basis equals applying it before the LSF; with a resolution
// matrix it is applied on the template grid before the matrix. Pixels are the good ones only.
#pragma once
#include <cmath>
#include <type_traits>
#include <utility>

#include "kernels/convolve.hpp"
#include "kernels/emulator_eval.hpp"
#include "kernels/grid.hpp"
#include "kernels/hd.hpp"
#include "kernels/linalg.hpp"
#include "kernels/physics.hpp"
#include "kernels/team.hpp"

namespace velox::kern {

constexpr int kMaxArms = 4;
constexpr int kMaxSeg = kMaxArms;  // velocity segments (per-arm VRAD): one per arm, or B/R halves
constexpr int kMaxCont = 16;       // continuum coefficients per arm (degree <= 15)
constexpr int kMaxParams = 2 + kMaxLabels;  // VRAD, labels, VSINI
constexpr int kMaxRotHalf = 40;             // rotation kernel half-width, template pixels
constexpr int kMaxRotTaps = 2 * kMaxRotHalf + 1;

// Index of VSINI in theta for L labels, and the number of fitted parameters.
VX_HD VX_INLINE int vsini_index(int n_label) { return 1 + n_label; }
VX_HD VX_INLINE int n_fit_params(int n_label, int fit_vsini) {
  return 1 + n_label + (fit_vsini ? 1 : 0);
}

// The CPU backend's inputs of one fit (FitData::cpu), defined by the CPU backend
// (src/backend/cpu/isa/simd_forms.hpp); opaque here.
struct CpuFitExtras;

// What one arm's kept rows (FitData::Tv) hold: the template's grid rows s0 .. s1 convolved with
// the rotation kernel at vsini (km/s; the kernel, its width included, follows from it), from
// basis `basis` and the emulator coefficients of generation `gen` (EvalWork::c_gen).
// basis == nullptr: nothing kept.
struct KeptRows {
  const float* basis;
  unsigned gen;
  double vsini;
  int s0, s1;
};

// One spectrum's usable pixels, arms contiguous: arm a owns [arm_start[a], arm_start[a+1]).
struct FitData {
  int n_pix = 0;
  int n_arms = 0;
  int arm_start[kMaxArms + 1] = {};
  const double* lnlam = nullptr;  // [n_pix] ln(vacuum observed wavelength / A)
  const double* xleg = nullptr;   // [n_pix] Legendre coordinate in [-1, 1] within the arm
  // The continuum's Legendre argument is xleg * xleg_scale + xleg_off (1 and 0 except in a
  // segment_view, which maps the segment's own range onto [-1, 1] to keep G well conditioned).
  double xleg_scale = 1.0, xleg_off = 0.0;
  const float* flux = nullptr;        // [n_pix]
  const float* ivar = nullptr;        // [n_pix], all > 0
  const float* basis[kMaxArms] = {};  // per arm: basis at the arm's resolution, [n_tpix][K+1]
  // Optional resolution-matrix forward model per arm (DESI): the model is evaluated on the arm's
  // full pixel grid (full_lnlam[a][n_full[a]]) and the used pixel i gets
  //   model_i = sum_k rmat[a][k * n_full[a] + j] * model_full[j + k - ndiag/2],  j = full_idx[i].
  // rmat rows are the instrument's resolution-matrix rows with the template LSF folded in
  // (src/fit/resolution.cpp), stored diagonal-major as the DESI files store the matrix ([ndiag]
  // [n_full]): consecutive pixels' weights of one diagonal are adjacent (a GPU warp's lanes and
  // the CPU's vector lanes read them together). n_full[a] == 0: the arm has no matrix (Gaussian
  // LSF in the basis).
  int n_full[kMaxArms] = {};
  int ndiag[kMaxArms] = {};
  int full_off[kMaxArms] = {};  // offset of the arm in the full-grid scratch
  const double* full_lnlam[kMaxArms] = {};
  const float* rmat[kMaxArms] = {};
  const int* full_idx = nullptr;  // [n_pix] index of each used pixel in its arm's grid
  // The rows from their fold parameters (kernels/fold.hpp): with fold set, the pipeline's entry
  // points first write each used pixel's row into rmat_w (the worker's scratch, arms in order,
  // each [ndiag][n_full]; rmat[a] points into it). fold[3 i ..]: pixel i's row centroid [px from
  // the central tap], Gaussian variance [px^2] and sum (pixels of matrix arms; null: rmat holds
  // the rows already).
  const double* fold = nullptr;
  float* rmat_w = nullptr;
  double* Tf = nullptr;   // scratch [sum n_full] template on the full grids
  double* dTf = nullptr;  // scratch [sum n_full][np]; the CPU's chi^2 grid keeps its
                          // stencils there until the LM (per arm the fractions, then
                          // the taps; grid_stencils_at, ccf.hpp)
  // Scratch [n_tpix][np] for the rotated model: the template (and its label derivatives) on the
  // grid rows an arm spans, computed once per evaluation. nullptr: per-pixel sums instead.
  double* Tg = nullptr;
  // Kept rows of the single-lane teams (the GPU's warp, V == 1; issue 51 "do each piece of work
  // once"): per arm k = tv_arm0 + a, Tv + k * tv_stride holds [n_tpix] template grid rows
  // convolved with the rotation kernel, described by tv_keep[k]. Velocity-only evaluations
  // compute them once per coefficients and VSINI and then take 4 taps per pixel (the CPU's
  // CpuFitExtras::VelocityRows alike). nullptr: each evaluation sums the basis again.
  double* Tv = nullptr;
  long long tv_stride = 0;
  KeptRows* tv_keep = nullptr;
  int tv_arm0 = 0;
  // The CPU backend's inputs (CpuFitExtras; nullptr on the GPU, whose FitData copies stay
  // small), and the index of this view's arm 0 in their per-arm arrays (a segment_view's arm).
  const CpuFitExtras* cpu = nullptr;
  int cpu_arm0 = 0;
  // Velocity segments (per-arm VRAD with the labels fixed): segment s owns the used pixels
  // [seg_start[s], seg_start[s+1]), all inside arm seg_arm[s]. n_seg == 0: none.
  int n_seg = 0;
  int seg_start[kMaxSeg + 1] = {};
  int seg_arm[kMaxSeg] = {};
  // 1: the instrument resolves rotation here, VSINI is fitted (with PipelineConfig::fit_vsini).
  int fit_vsini = 0;
};

// The pixels of segment s as a one-arm FitData (pointers into d; the continuum is profiled over
// the segment alone). Scratch arrays indexed by pixel must be offset by seg_start[s] too.
VX_HD VX_INLINE FitData segment_view(const FitData& d, int s) {
  const int a = d.seg_arm[s], i0 = d.seg_start[s];
  FitData v;
  v.n_pix = d.seg_start[s + 1] - i0;
  v.n_arms = 1;
  v.arm_start[0] = 0;
  v.arm_start[1] = v.n_pix;
  v.lnlam = d.lnlam + i0;
  v.xleg = d.xleg + i0;
  // Pixels are in wavelength order within an arm: map [xleg[i0], xleg[i1-1]] onto [-1, 1].
  const double x0 = d.xleg[i0], x1 = d.xleg[i0 + v.n_pix - 1];
  v.xleg_scale = x1 > x0 ? 2.0 / (x1 - x0) : 1.0;
  v.xleg_off = x1 > x0 ? -(x1 + x0) / (x1 - x0) : 0.0;
  v.flux = d.flux + i0;
  v.ivar = d.ivar + i0;
  v.basis[0] = d.basis[a];
  v.cpu = d.cpu;
  v.cpu_arm0 = d.cpu_arm0 + a;
  v.n_full[0] = d.n_full[a];
  v.ndiag[0] = d.ndiag[a];
  v.full_off[0] = d.full_off[a];
  v.full_lnlam[0] = d.full_lnlam[a];
  v.rmat[0] = d.rmat[a];
  v.full_idx = d.full_idx ? d.full_idx + i0 : nullptr;
  v.Tf = d.Tf;
  v.dTf = d.dTf;
  v.Tg = d.Tg;
  v.Tv = d.Tv;
  v.tv_stride = d.tv_stride;
  v.tv_keep = d.tv_keep;
  v.tv_arm0 = d.tv_arm0 + a;
  v.fit_vsini = d.fit_vsini;
  return v;
}

// Apply an arm's resolution matrix rows to full-grid values v[n_full][stride] (component c) for
// used pixel i.
VX_HD VX_INLINE double apply_rmat(const FitData& d, int a, int i, const double* v, int stride,
                                  int c) {
  const int nd = d.ndiag[a], half = nd / 2, j = d.full_idx[i], n = d.n_full[a];
  const float* row = d.rmat[a] + j;  // weight k at row[k * n]
  double s = 0.0;
  for (int k = 0; k < nd; ++k) {
    const int jj = j + k - half;
    if (jj >= 0 && jj < n) s += row[(size_t)k * n] * v[(size_t)jj * stride + c];
  }
  return s;
}

// apply_rmat for the np components c = 0 .. np-1 of v[n_full][np] at once (out[np]): the same
// sums, each in the order of k, with the row's bounds found once instead of tested per tap and
// per component (the CPU teams' form; on the GPU a lane keeps apply_rmat's one accumulator).
template <int NP>
VX_HD VX_INLINE void apply_rmat_np(const FitData& d, int a, int i, const double* v, double* out) {
  const int nd = d.ndiag[a], half = nd / 2, j = d.full_idx[i], n = d.n_full[a];
  const float* row = d.rmat[a] + j;  // weight k at row[k * n]
  const int k_lo = half - j > 0 ? half - j : 0, k_hi = n - j + half < nd ? n - j + half : nd;
  double s[NP];
  for (int q = 0; q < NP; ++q) s[q] = 0.0;
  for (int k = k_lo; k < k_hi; ++k) {
    const double r = row[(size_t)k * n];
    const double* vk = v + (size_t)(j + k - half) * NP;
    for (int q = 0; q < NP; ++q) s[q] += r * vk[q];
  }
  for (int q = 0; q < NP; ++q) out[q] = s[q];
}

#if defined(VX_VEC8) && !defined(__CUDA_ARCH__)
// __builtin_shufflevector (constant lane indices): clang, and GCC from 12.
#if defined(__clang__) || (defined(__GNUC__) && __GNUC__ >= 12)
#define VX_HAVE_SHUFFLEVECTOR 1
#else
#define VX_HAVE_SHUFFLEVECTOR 0
#endif
// f(std::integral_constant<int, u>) for u = 0 .. N-1 in order (compile-time indices).
template <class F, int... I>
VX_INLINE void static_for_seq(F&& f, std::integer_sequence<int, I...>) {
  (f(std::integral_constant<int, I>{}), ...);
}
template <int N, class F>
VX_INLINE void static_for(F&& f) {
  static_for_seq(f, std::make_integer_sequence<int, N>{});
}
// Whether apply_rmat_np_block has its explicit vector form for NP > 1 (AVX-512 with
// __builtin_shufflevector; then apply_rmat_rows takes blocks of 8 pixels for every NP).
constexpr bool kRmatBlockVecNP = VX_HAVE_SHUFFLEVECTOR && kVecD == 8;
#if VX_HAVE_SHUFFLEVECTOR
// 8 pixels' weights r spread over their NP lanes, vector u of the P NP flat sums (8 lanes):
// lane e takes pixel (8 u + e) / NP's weight (apply_rmat_np_block).
template <int NP, int U, int... E>
VX_INLINE VxVecD spread_weights(const VxVecD& r, std::integer_sequence<int, E...>) {
  static_assert(sizeof...(E) == 8 && kVecD == 8, "8 lanes (AVX-512)");
  return __builtin_shufflevector(r, r, ((U * 8 + E) / NP)...);
}
#endif
#endif

// apply_rmat_np for P used pixels i .. i + P - 1 at once (out[(i + p) NP + q]), every row
// complete (the full grid's padding makes the used pixels' rows complete): each pixel's sums are
// apply_rmat_np's, the same products added in the same order (up to the compiler's fused
// multiply-adds, below); the P pixels' accumulators are independent, so one pixel's chain of
// dependent additions does not hold up the next.
template <int NP, int P>
VX_HD VX_INLINE void apply_rmat_np_block(const FitData& d, int a, int i, const double* v,
                                         double* out) {
  const int nd = d.ndiag[a], half = nd / 2, n = d.n_full[a], j0 = d.full_idx[i];
  double s[P][NP];
  for (int p = 0; p < P; ++p)
    for (int q = 0; q < NP; ++q) s[p][q] = 0.0;
  bool consecutive = true;
  for (int p = 1; p < P; ++p) consecutive = consecutive && d.full_idx[i + p] == j0 + p;
    // Adjacent pixels (the usual case) load each diagonal's weights and values together: the same
    // products in the same order as apply_rmat, but with fused multiply-adds the last bits can
    // differ from it (VRAD by 3.5e-13 km/s on the DESI-layout stars); 8% faster DESI fits
    // (CHANGELOG). For NP = 1, and with AVX-512 for NP > 1, the host sums on explicit vector
    // lanes (next).
#if defined(VX_VEC8) && !defined(__CUDA_ARCH__)
  // Host, one component: the P pixels' sums on native double vectors, explicitly (kVecD lanes,
  // one unaligned load of the weights, converted, and one of the values per diagonal and
  // vector). Each lane's sum is the scalar one, r_k v_k added in the order of k, each a fused
  // multiply-add where the level has FMA. The compiler's own vectorisation of the loop below kept
  // the values in registers across diagonals and rebuilt each vector from scalars (shuffles);
  // this form, with the kernel objects' -fno-math-errno (cmake/cpu_isa.cmake), made the DESI
  // backend 1-2% faster (docs/performance.md, twelfth session).
  if constexpr (NP == 1 && P % kVecD == 0) {
    if (consecutive) {
      typedef float FD __attribute__((vector_size(kVecD * sizeof(float))));
      constexpr int U = P / kVecD;
      VxVecD acc[U];
      for (int u = 0; u < U; ++u) acc[u] = VxVecD{};
      const float* r0 = d.rmat[a] + j0;
      const double* v0 = v + (j0 - half);
      for (int k = 0; k < nd; ++k) {
        const float* rk = r0 + (size_t)k * n;
        for (int u = 0; u < U; ++u) {
          FD rf;
          VxVecD vv;
          __builtin_memcpy(&rf, rk + u * kVecD, sizeof rf);
          __builtin_memcpy(&vv, v0 + k + u * kVecD, sizeof vv);
          acc[u] += __builtin_convertvector(rf, VxVecD) * vv;
        }
      }
      for (int u = 0; u < U; ++u) __builtin_memcpy(out + i + u * kVecD, &acc[u], sizeof acc[u]);
      return;
    }
  }
#if VX_HAVE_SHUFFLEVECTOR
  // Host, NP components (the Jacobian's columns), 8 pixels: adjacent pixels' rows read
  // contiguous values, v[(j0 + k - half) NP ...] for P NP doubles, so the P x NP sums are P NP /
  // kVecD vectors, each multiplied by the pixels' weights spread over their NP lanes (a constant
  // permutation of the diagonal's 8 weights, converted once: spread_weights). Each lane's sum is
  // apply_rmat_np's, r_k v_k added in the order of k, each a fused multiply-add where the level
  // has FMA. GCC's own vectorisation of the loop below rebuilt the weights lane by lane: this
  // form made the DESI backend 7-11% faster with AVX-512; with AVX2 (two registers of weights, a
  // two-source shuffle) it was 5% slower, so AVX2 and SSE2 keep the loop below
  // (docs/performance.md, fourteenth session).
  if constexpr (NP > 1 && P == 8 && kRmatBlockVecNP) {
    if (consecutive) {
      constexpr int V = kVecD, U = P * NP / V;
      typedef float F8 __attribute__((vector_size(8 * sizeof(float))));
      VxVecD acc[U];
      for (int u = 0; u < U; ++u) acc[u] = VxVecD{};
      const float* r0 = d.rmat[a] + j0;
      const double* v0 = v + (size_t)(j0 - half) * NP;
      for (int k = 0; k < nd; ++k) {
        F8 rf;
        __builtin_memcpy(&rf, r0 + (size_t)k * n, sizeof rf);
        const VxVec8 r8 = __builtin_convertvector(rf, VxVec8);  // VxVecD here (kVecD == 8)
        VxVecD rd;
        __builtin_memcpy(&rd, &r8, sizeof rd);
        const double* vk = v0 + (size_t)k * NP;
        static_for<U>([&](auto uc) {
          constexpr int u = decltype(uc)::value;
          VxVecD vv;
          __builtin_memcpy(&vv, vk + u * V, sizeof vv);
          acc[u] += spread_weights<NP, u>(rd, std::make_integer_sequence<int, 8>{}) * vv;
        });
      }
      for (int u = 0; u < U; ++u)
        __builtin_memcpy(out + (size_t)i * NP + u * V, &acc[u], sizeof acc[u]);
      return;
    }
  }
#endif
#endif
  if (consecutive) {
    for (int k = 0; k < nd; ++k) {
      const float* rk = d.rmat[a] + (size_t)k * n + j0;
      const double* vk = v + (size_t)(j0 + k - half) * NP;
      for (int p = 0; p < P; ++p) {
        const double r = rk[p];
        const double* vp = vk + (size_t)p * NP;
        for (int q = 0; q < NP; ++q) s[p][q] += r * vp[q];
      }
    }
  } else {
    for (int k = 0; k < nd; ++k)
      for (int p = 0; p < P; ++p) {
        const int j = d.full_idx[i + p];
        const double r = d.rmat[a][(size_t)k * n + j];
        const double* vk = v + (size_t)(j + k - half) * NP;
        for (int q = 0; q < NP; ++q) s[p][q] += r * vk[q];
      }
  }
  for (int p = 0; p < P; ++p)
    for (int q = 0; q < NP; ++q) out[(size_t)(i + p) * NP + q] = s[p][q];
}

// The rows of the used pixels [i0, i1) of arm a applied to the np components of v (out[i][np];
// the CPU teams' form): the component count at compile time (NP = 1 .. kMaxParams, the
// accumulators in registers), blocks of pixels whose rows are complete through
// apply_rmat_np_block, the others one at a time. The same sums as apply_rmat pixel by pixel and
// component by component (bit for bit where the compiler fuses no multiply-adds differently).
template <int NP = 1>
VX_HD VX_INLINE void apply_rmat_rows(const FitData& d, int a, int i0, int i1, const double* v,
                                     int np, double* out) {
  if constexpr (NP < kMaxParams) {
    if (np != NP) return apply_rmat_rows<NP + 1>(d, a, i0, i1, v, np, out);
  } else if (np != NP) {
    for (int i = i0; i < i1; ++i)
      for (int q = 0; q < np; ++q) out[(size_t)i * np + q] = apply_rmat(d, a, i, v, np, q);
    return;
  }
  // 8 pixels per block on the host where apply_rmat_np_block has its explicit vector forms
  // (kRmatBlockVecNP), otherwise 4 for NP > 1.
#if defined(VX_VEC8) && !defined(__CUDA_ARCH__)
  constexpr int P = NP == 1 || kRmatBlockVecNP ? 8 : 4;
#else
  constexpr int P = NP == 1 ? 8 : 4;
#endif
  const int nd = d.ndiag[a], half = nd / 2, n = d.n_full[a];
  auto complete = [&](int i) {
    const int j = d.full_idx[i];
    return j - half >= 0 && j - half + nd <= n;
  };
  int i = i0;
  for (; i + P <= i1; i += P) {
    bool all = true;
    for (int p = 0; p < P; ++p) all = all && complete(i + p);
    if (all) {
      apply_rmat_np_block<NP, P>(d, a, i, v, out);
    } else {
      for (int p = 0; p < P; ++p) apply_rmat_np<NP>(d, a, i + p, v, out + (size_t)(i + p) * NP);
    }
  }
  for (; i < i1; ++i) apply_rmat_np<NP>(d, a, i, v, out + (size_t)i * NP);
}

// Per-spectrum shared workspace (one per spectrum; lives in shared memory on the GPU).
struct EvalWork {
  double c[kMaxComp];
  double dc[kMaxLabels * kMaxComp];
  double gchol[kMaxArms][kMaxCont * kMaxCont];  // Cholesky factor of G per arm
  double cont[kMaxArms][kMaxCont];              // profiled continuum coefficients per arm
  double red[kMaxCont * kMaxCont + kMaxCont];   // reduction buffer
  double* emu;  // emulator scratch (emulator_scratch_size doubles); nullptr: serial coefficients
  // The model's rotation: fit_vsini = 1 adds the VSINI Jacobian column; limb_eps is the linear
  // limb-darkening coefficient of the Gray profile. rot/drot: the kernel at the last evaluation's
  // VSINI (rot_half = M taps each side, 0 = identity) and its derivative per km/s.
  int fit_vsini = 0;
  double limb_eps = 0.6;
  int rot_half = 0;
  double rot[kMaxRotTaps];
  double drot[kMaxRotTaps];
  double chi2;
  double chi2_arm[kMaxArms];  // chi^2 per arm
  double grad[kMaxParams];
  double hess[kMaxParams * kMaxParams];
  int ok;
  unsigned c_gen;  // bumped whenever c, dc change (emulator_coeffs_into): FitData::tv_keep's key
  int n_eval[3];   // evaluate() calls of the stellar model: [0] chi^2 only, [1] with the Jacobian,
                   // [2] velocity-only (VOnly) with its Jacobian column; counted for `velox bench`
};

// Cubic-interpolation stencil of an observed pixel on the template grid at ln D = lnd: the taps
// are t0-1 .. t0+2 with fraction f. Pixels are pre-masked to the template coverage; the clamp only
// guards memory.
VX_HD VX_INLINE void grid_stencil(const GridView& g, double lnlam, double lnd, int* t0, double* f) {
  const double u = (lnlam - lnd - g.lnlam0) / g.dlnlam;
  int k = (int)floor(u);
  double fr = u - k;
  if (k < 1) {
    k = 1;
    fr = 0.0;
  }
  if (k > g.n_tpix - 3) {
    k = g.n_tpix - 3;
    fr = 1.0;
  }
  *t0 = k;
  *f = fr;
}

// sum_tap w[tap] r[tap] over a cubic stencil's 4 values r (template values or rows); W, R:
// doubles or floats, or host vectors of doubles (lane by lane).
template <class W, class R>
VX_HD VX_INLINE auto taps4(const W* w, const R* r) {
  return w[0] * r[0] + w[1] * r[1] + w[2] * r[2] + w[3] * r[3];
}

// The template t interpolated at a stencil, first interior tap k and fraction f (grid_stencil):
// taps4 of the cubic weights at t + k - 1 (the chi^2 grid's fixed templates, kern::fixed_taps).
VX_HD VX_INLINE double fixed_tap(const float* t, int k, double f) {
  double w[4];
  cubic_weights_of(f, w);
  return taps4(w, t + k - 1);
}

// grid_stencil's taps t0 - 1 .. t0 + 2 (t0 returned) and the cubic weights wt[4] with their
// derivatives dwt[4] at its fraction: the preamble of every form of the template at a pixel.
VX_HD VX_INLINE int stencil_weights(const GridView& g, double lnlam, double lnd, double* wt,
                                    double* dwt) {
  int t0;
  double f;
  grid_stencil(g, lnlam, lnd, &t0, &f);
  cubic_weights(f, wt, dwt);
  return t0;
}

// Index of (j, k), j <= k < n, in a packed upper triangle (row by row): the continuum normal
// matrices are reduced packed, nc (nc + 1) / 2 slots instead of nc^2.
VX_HD VX_INLINE int tri_index(int j, int k, int n) { return j * n - j * (j - 1) / 2 + (k - j); }

// Columns of slot t of "normal equations" reduced with team.reduce_gram over rows [x_0..x_{n-1},
// y]: t < n(n+1)/2 is x_j x_k (j <= k, packed as tri_index), then n slots x_j y.
VX_HD VX_INLINE void normal_pair(int t, int n, int* a, int* b) {
  const int ntri = n * (n + 1) / 2;
  if (t >= ntri) {
    *a = t - ntri;
    *b = n;
    return;
  }
  int j = 0;
  while (t >= n - j) {
    t -= n - j;
    ++j;
  }
  *a = j;
  *b = j + t;
}

// The symmetric nc x nc matrix m from its packed upper triangle (tri_index order).
VX_HD VX_INLINE void unpack_tri(const double* packed, int nc, double* m) {
  for (int j = 0; j < nc; ++j)
    for (int k = j; k < nc; ++k) m[j * nc + k] = m[k * nc + j] = packed[tri_index(j, k, nc)];
}

// Arm a's continuum: w->gchol[a] holds G (replaced by its Cholesky factor), q = A^T W f;
// w->cont[a] = G^-1 q. False (cont untouched) if G is singular.
VX_HD VX_INLINE bool solve_continuum(EvalWork* w, int a, int nc, const double* q) {
  if (!cholesky(w->gchol[a], nc)) return false;
  for (int j = 0; j < nc; ++j) w->cont[a][j] = q[j];
  cholesky_solve(w->gchol[a], nc, w->cont[a]);
  return true;
}

// chi^2, gradient and Hessian to zero before a profile (both forms).
VX_HD VX_INLINE void profile_reset(EvalWork* w, int np) {
  w->chi2 = 0.0;
  w->ok = 1;
  for (int p = 0; p < np; ++p) w->grad[p] = 0.0;
  for (int p = 0; p < np * np; ++p) w->hess[p] = 0.0;
}

// Pass 2 of the continuum profile (both forms): slot t's design columns, over the rows
// [T P_0 .. T P_deg | J_0 .. J_{np-1} | r] (r in column nc + np). Slots: [1] chi^2, [np(np+1)/2]
// J^T W J (packed), [np] J^T W r, [nc*np] C = A^T W J (C_jq at j*np + q).
VX_HD VX_INLINE void profile_pass2_pair(int t, int nc, int np, int* ca, int* cb) {
  const int ptri = np * (np + 1) / 2, cr = nc + np;
  if (t == 0) {
    *ca = *cb = cr;
  } else if (t <= ptri + np) {
    normal_pair(t - 1, np, ca, cb);  // J_q J_s, then J_q r (column np -> cr)
    *ca += nc;
    *cb += nc;
  } else {
    const int u = t - 1 - ptri - np;
    *ca = u / np;
    *cb = nc + u % np;
  }
}

// Adds arm a's pass-2 sums (red, profile_pass2_pair's layout) to chi^2 and, with need_jac, to
// the profiled gradient J^T W r and Hessian J^T W J - C^T G^-1 C (G's Cholesky factor in
// w->gchol[a]). col: kMaxCont doubles of scratch (not red).
VX_HD VX_INLINE void profile_pass2_add(EvalWork* w, int a, int nc, int np, bool need_jac,
                                       const double* red, double* col) {
  w->chi2 += red[0];
  w->chi2_arm[a] = red[0];
  if (!need_jac) return;
  const int ptri = np * (np + 1) / 2;
  const double* jtj = red + 1;
  const double* jtr = jtj + ptri;
  const double* cm = jtr + np;
  for (int q = 0; q < np; ++q) {
    w->grad[q] += jtr[q];
    for (int s = q; s < np; ++s) {
      const double v = jtj[tri_index(q, s, np)];
      w->hess[q * np + s] += v;
      if (s != q) w->hess[s * np + q] += v;
    }
  }
  // Schur complement: H -= C^T G^-1 C, column by column.
  for (int s = 0; s < np; ++s) {
    for (int j = 0; j < nc; ++j) col[j] = cm[j * np + s];
    cholesky_solve(w->gchol[a], nc, col);
    for (int q = 0; q < np; ++q) {
      double v = 0.0;
      for (int j = 0; j < nc; ++j) v += cm[j * np + q] * col[j];
      w->hess[q * np + s] -= v;
    }
  }
}
VX_HD VX_INLINE void profile_pass2_add(EvalWork* w, int a, int nc, int np, bool need_jac) {
  double col[kMaxCont];
  profile_pass2_add(w, a, nc, np, need_jac, w->red, col);
}

// The emulator's PCA coefficients and their label derivatives at `labels` into w->c, w->dc.
template <class Team>
VX_HD void emulator_coeffs_into(const Team& team, const EmulatorView& em, const double* labels,
                                EvalWork* w) {
  if (w->emu) {
    emulator_coeffs_team(team, em, labels, w->emu, w->c, w->dc);
    team.single([&] { ++w->c_gen; });
  } else {
    team.single([&] {
      emulator_coeffs(em, labels, w->c, w->dc);
      ++w->c_gen;
    });
  }
  team.sync();
}

// Template and derivatives at one pixel from its 4 stencil rows b0, b0 + K1, b0 + 2 K1,
// b0 + 3 K1 (basis [row][K1]) with cubic weights wt and their derivatives dwt:
//   bk = sum_tap wt[tap] B[tap][k], t = sum_k c_k bk, dtu = sum_k c_k dbk (dbk with dwt),
//   dl[l] = sum_k dc[l][k] bk.
// The component sums run in V partial sums (component k in lane k % V for k below the last
// multiple of V, the rest in lanes 0.. after it; lane_sum at the end): V = 1 is the plain chain
// (the GPU's lanes are pixels), the CPU's V lanes are SIMD lanes. JM: 0 value only, 1 + dtu,
// 2 + dl; -1 = jm at run time. NL > 0: the label count at compile time (no run-time loop bound
// in the inner loop), 0: L at run time.
template <int V, int NL, int JM>
VX_HD VX_INLINE void component_sums(const float* b0, int K1, const double* c, const double* dc,
                                    int L, int jm_rt, const double* wt, const double* dwt,
                                    double* t_out, double* dtu_out, double* dl_out) {
  const int nl = NL > 0 ? NL : L;
  const int jm = JM >= 0 ? JM : jm_rt;
  constexpr int NLA = NL > 0 ? NL : kMaxLabels;
  double t[V], dtu[V], dl[NLA][V];
  for (int p = 0; p < V; ++p) {
    t[p] = dtu[p] = 0.0;
    for (int l = 0; l < NLA; ++l) dl[l][p] = 0.0;
  }
  const float* b1 = b0 + K1;
  const float* b2 = b1 + K1;
  const float* b3 = b2 + K1;
  auto body = [&](int k, int p) {
    const double x0 = b0[k], x1 = b1[k], x2 = b2[k], x3 = b3[k];
    const double bk = wt[0] * x0 + wt[1] * x1 + wt[2] * x2 + wt[3] * x3;
    t[p] += c[k] * bk;
    if (jm >= 1) {
      const double dbk = dwt[0] * x0 + dwt[1] * x1 + dwt[2] * x2 + dwt[3] * x3;
      dtu[p] += c[k] * dbk;
      if (jm >= 2)
        for (int l = 0; l < nl; ++l) dl[l][p] += dc[l * K1 + k] * bk;
    }
  };
  const int KV = K1 - K1 % V;
  for (int kb = 0; kb < KV; kb += V)
    for (int p = 0; p < V; ++p) body(kb + p, p);
  for (int k = KV; k < K1; ++k) body(k, k - KV);
  *t_out = lane_sum<V>(t);
  if (jm >= 1) *dtu_out = lane_sum<V>(dtu);
  if (jm >= 2)
    for (int l = 0; l < nl; ++l) dl_out[l] = lane_sum<V>(dl[l]);
}

// sum_k v_k b_k in V partial sums (component k to sum k % V for k below the last multiple of
// V, the rest to 0, 1, ...; lane_sum at the end). Unroll: the last components' sums indexed at
// compile time, so that the GPU keeps t in registers (indexed by k - KV, t takes a 32 B stack
// frame in a kernel that inlines it: the staged engine's stage kernels); the same sums in the
// same order. Off for the warp kernel, whose evaluate_template<false> spills more with it.
template <int V, bool Unroll = false>
VX_HD VX_INLINE double row_dot(const double* v, const float* b, int K1) {
  double t[V];
  for (int p = 0; p < V; ++p) t[p] = 0.0;
  const int KV = K1 - K1 % V;
  for (int kb = 0; kb < KV; kb += V)
    for (int p = 0; p < V; ++p) t[p] += v[kb + p] * b[kb + p];
  if constexpr (Unroll) {
    VX_UNROLL
    for (int p = 0; p < V; ++p)
      if (KV + p < K1) t[p] += v[KV + p] * b[KV + p];
  } else {
    for (int k = KV; k < K1; ++k) t[k - KV] += v[k] * b[k];
  }
  return lane_sum<V>(t);
}

// One basis row's template and label derivatives: bc = sum_k c_k B[k], bdc[l] = sum_k dc[l][k]
// B[k] (LJ: with the labels), in one pass over the row with V partial sums per product (as
// component_sums).
template <int V, int NL, bool LJ>
VX_HD VX_INLINE void row_sums(const float* br, int K1, const double* c, const double* dc, int L,
                              double* bc, double* bdc) {
  const int nl = NL > 0 ? NL : L;
  const int KV = K1 - K1 % V;
  constexpr int NLA = NL > 0 ? NL : kMaxLabels;
  double t[V], dl[NLA][V];
  for (int p = 0; p < V; ++p) {
    t[p] = 0.0;
    for (int l = 0; l < NLA; ++l) dl[l][p] = 0.0;
  }
  auto body = [&](int k, int p) {
    const double b = br[k];
    t[p] += c[k] * b;
    if (LJ)
      for (int l = 0; l < nl; ++l) dl[l][p] += dc[l * K1 + k] * b;
  };
  for (int kb = 0; kb < KV; kb += V)
    for (int p = 0; p < V; ++p) body(kb + p, p);
  for (int k = KV; k < K1; ++k) body(k, k - KV);
  *bc = lane_sum<V>(t);
  if (LJ)
    for (int l = 0; l < nl; ++l) bdc[l] = lane_sum<V>(dl[l]);
}

// f(IntC<NL>, IntC<JM>) for the label count L and the Jacobian mode jm (0, 1, 2) as
// compile-time values: the CPU's instantiations of the pixel loops.
template <class F>
VX_HD VX_INLINE void dispatch_labels_jac(int L, int jm, F&& f) {
  dispatch_labels(L, [&](auto nlc) {
    if (jm == 0)
      f(nlc, IntC<0>{});
    else if (jm == 1)
      f(nlc, IntC<1>{});
    else
      f(nlc, IntC<2>{});
  });
}

// The grid rows a rotated evaluation of points ll[0 .. n) needs at ln D = lnd: the first taps
// of the first and last points' cubic stencils lo_t <= hi_t (points in wavelength order), and
// the rows [r0, r1] that their stencils convolved with the M-tap kernel touch (clamped to the
// grid).
VX_HD VX_INLINE void rotated_row_span(const GridView& g, const double* ll, int n, double lnd, int M,
                                      int* lo_t, int* hi_t, int* r0, int* r1) {
  int ta, tb;
  double fa;
  grid_stencil(g, ll[0], lnd, &ta, &fa);
  grid_stencil(g, ll[n - 1], lnd, &tb, &fa);
  *lo_t = ta < tb ? ta : tb;
  *hi_t = ta < tb ? tb : ta;
  *r0 = *lo_t - 1 - M > 0 ? *lo_t - 1 - M : 0;
  *r1 = *hi_t + 2 + M < g.n_tpix - 1 ? *hi_t + 2 + M : g.n_tpix - 1;
}

// One pixel of the rotated model (both forms of template_at_pixels): the cubic stencil at ln D
// = lnd convolved with the M-tap rotation kernel w->rot spans the 2M + 4 grid rows t0 - 1 - M ..
// t0 + 2 + M (clamped at the grid's ends). fetch(row, &bc, bdc) gives a row's template B_r.c and
// label derivatives B_r.dc_l, weighted by sum_tap wt[tap] rot[r - tap] (value), dwt (velocity)
// and drot (vsini). Writes t_out and, with need_jac, dt_out[np].
template <bool VOnly, bool UnrollLabels = false, class Fetch>
VX_HD VX_INLINE void rotated_pixel(const GridView& g, const EvalWork* w, double lnlam, double lnd,
                                   double du_dv, int M, int L, bool need_jac, bool jac_vsini,
                                   double* t_out, double* dt_out, Fetch&& fetch) {
  double wt[4], dwt[4];
  const int t0 = stencil_weights(g, lnlam, lnd, wt, dwt);
  double t = 0.0, dtu = 0.0, dvs = 0.0, dl[kMaxLabels] = {0.0, 0.0, 0.0, 0.0};
  const int R = 2 * M + 4;
  for (int r = 0; r < R; ++r) {
    double cw = 0.0, cdw = 0.0, cvw = 0.0;
    for (int tap = 0; tap < 4; ++tap) {
      const int m = r - tap;  // kernel index (0 .. 2M)
      if (m < 0 || m > 2 * M) continue;
      cw += wt[tap] * w->rot[m];
      cdw += dwt[tap] * w->rot[m];
      cvw += wt[tap] * w->drot[m];
    }
    int row = t0 - 1 - M + r;
    row = row < 0 ? 0 : (row > g.n_tpix - 1 ? g.n_tpix - 1 : row);
    // UnrollLabels: bdc and dl are indexed below kMaxLabels with a test (the same operations as
    // below L), so that the GPU keeps them in registers where fetch writes bdc the same way (the
    // staged engine's rows_pixels: no stack frame). The warp kernel's evaluation keeps the loops
    // to L: unrolled there, its spills grew past cuda.ptxas_budget's 256 B.
    double bc, bdc[kMaxLabels];
    fetch(row, &bc, bdc);
    t += cw * bc;
    if (need_jac) {
      dtu += cdw * bc;
      dvs += cvw * bc;
      if (!VOnly && UnrollLabels) {
        VX_UNROLL
        for (int l = 0; l < kMaxLabels; ++l)
          if (l < L) dl[l] += cw * bdc[l];
      } else if (!VOnly) {
        for (int l = 0; l < L; ++l) dl[l] += cw * bdc[l];
      }
    }
  }
  *t_out = t;
  if (need_jac) {
    dt_out[0] = dtu * du_dv;
    if (!VOnly && UnrollLabels) {
      VX_UNROLL
      for (int l = 0; l < kMaxLabels; ++l)
        if (l < L) dt_out[1 + l] = dl[l];
    } else if (!VOnly) {
      for (int l = 0; l < L; ++l) dt_out[1 + l] = dl[l];
    }
    if (jac_vsini) dt_out[1 + L] = dvs;
  }
}

// rotated_pixel from the grid rows Tg[row][np] (row template, label derivatives), the CPU's
// form: the combined weights cw, cdw, cvw over the 2M + 4 rows first (the same sums as
// rotated_pixel), then the rows in one pass with NL (labels) and JM (0 value, 1 + velocity,
// 2 + labels) at compile time: the 1 + NL row columns as one short vector per row.
template <int NL, int JM>
VX_HD VX_INLINE void rotated_pixel_rows(const GridView& g, const EvalWork* w, double lnlam,
                                        double lnd, double du_dv, int M, const double* Tg, int np,
                                        bool jac_vsini, double* t_out, double* dt_out) {
  double wt[4], dwt[4];
  const int t0 = stencil_weights(g, lnlam, lnd, wt, dwt);
  const int R = 2 * M + 4;
  double cw[kMaxRotTaps + 3], cdw[kMaxRotTaps + 3], cvw[kMaxRotTaps + 3];
  for (int r = 0; r < R; ++r) cw[r] = cdw[r] = cvw[r] = 0.0;
  for (int tap = 0; tap < 4; ++tap)
    for (int m = 0; m <= 2 * M; ++m) {
      cw[tap + m] += wt[tap] * w->rot[m];
      if (JM >= 1) {
        cdw[tap + m] += dwt[tap] * w->rot[m];
        cvw[tap + m] += wt[tap] * w->drot[m];
      }
    }
  constexpr int NC = JM >= 2 ? 1 + NL : 1;  // row columns read: value (+ labels)
  double a[NC], dtu = 0.0, dvs = 0.0;
  for (int c = 0; c < NC; ++c) a[c] = 0.0;
  const int base = t0 - 1 - M;
  for (int r = 0; r < R; ++r) {
    int row = base + r;
    row = row < 0 ? 0 : (row > g.n_tpix - 1 ? g.n_tpix - 1 : row);
    const double* tr = Tg + (size_t)row * np;
    for (int c = 0; c < NC; ++c) a[c] += cw[r] * tr[c];
    if (JM >= 1) {
      dtu += cdw[r] * tr[0];
      dvs += cvw[r] * tr[0];
    }
  }
  *t_out = a[0];
  if (JM >= 1) {
    dt_out[0] = dtu * du_dv;
    for (int c = 1; c < NC; ++c) dt_out[c] = a[c];
    if (jac_vsini) dt_out[1 + NL] = dvs;
  }
}

// Legendre's P_0 .. P_deg at x, each times s, into z[0 .. deg] (legendre's recursion and
// operations, so z[j] = s * p[j] bit for bit; no array of its own: z may be a team's staging
// row). Returns sum_j a[j] P_j (j ascending) when a is given, else 0.
VX_HD VX_INLINE double legendre_scaled(double x, int deg, double s, double* z,
                                       const double* a = nullptr) {
  double p2 = 1.0, p1 = x, sum = 0.0;
  z[0] = s * p2;
  if (a) sum += a[0] * p2;
  if (deg >= 1) {
    z[1] = s * p1;
    if (a) sum += a[1] * p1;
  }
  for (int n = 2; n <= deg; ++n) {
    const double p = legendre_next(n, x, p1, p2);
    z[n] = s * p;
    if (a) sum += a[n] * p;
    p2 = p1;
    p1 = p;
  }
  return sum;
}

// Doubles of one arm's reduction buffer (profile_arm_lanes' red): pass 1's packed Gram and q, or
// pass 2's sums (profile_pass2_pair's layout), whichever is larger.
constexpr int kArmRed = kMaxCont * kMaxCont + kMaxCont;

// Arm a of profile_continuum_lanes: pass 1 (G, q from the weighted Legendre design rows), the
// continuum solve into w->gchol[a] and w->cont[a], then pass 2's sums into red[kArmRed] (slot 0
// chi^2; with need_jac J^T W J, J^T W r and C, profile_pass2_pair's layout), to be added by
// profile_pass2_add. *ok (read by every worker): 0 if G is singular (pass 2 skipped). Arms touch
// only their own entries of w, so the staged engine runs a request's arms at once, each with its
// own red and ok (kernels/rows_stage.hpp).
template <class Team>
VX_HD void profile_arm_lanes(const Team& team, const FitData& d, int a, int cont_deg, int np,
                             bool need_jac, const double* T, const double* dT, EvalWork* w,
                             double* red, int* ok) {
  const int nc = cont_deg + 1;
  const int i0 = d.arm_start[a], n = d.arm_start[a + 1] - i0;
  // Pass 1: G = A^T W A (packed upper triangle), q = A^T W f, from the weighted design rows
  // sqrt(ivar) [T P_0 .. T P_deg | f].
  const int ntri = nc * (nc + 1) / 2;
  team.reduce_gram(
      n, nc + 1, ntri + nc, red,
      [&](int ii, double* z) {
        const int i = i0 + ii;
        const double s = sqrt((double)d.ivar[i]), st = s * T[i];
        legendre_scaled(d.xleg[i] * d.xleg_scale + d.xleg_off, cont_deg, st, z);
        z[nc] = s * d.flux[i];
      },
      [&](int t, int* ca, int* cb) { normal_pair(t, nc, ca, cb); });
  team.single([&] {
    unpack_tri(red, nc, w->gchol[a]);
    *ok = solve_continuum(w, a, nc, red + ntri);
  });
  team.sync();
  if (!*ok) return;
  // Pass 2: chi^2, J^T W J (packed upper triangle), J^T W r and C = A^T W J with J = P * dT,
  // from the weighted rows sqrt(ivar) [T P_0 .. T P_deg | J_0 .. J_{np-1} | r].
  // Layout of red: [1] chi^2, [ptri] J^T W J, [np] J^T W r, [nc*np] C (C_jq at j*np + q).
  const int ptri = np * (np + 1) / 2;
  const int m = 1 + (need_jac ? ptri + np + nc * np : 0);
  const int cr = nc + np;  // column of r
  const double* ca_ = w->cont[a];
  team.reduce_gram(
      n, nc + np + 1, m, red,
      [&](int ii, double* z) {
        const int i = i0 + ii;
        const double s = sqrt((double)d.ivar[i]), st = s * T[i];
        // z[0 .. deg] = s T P_j, read with the Jacobian only (the chi^2-only slot reads column
        // cr alone); written either way since legendre_scaled returns the continuum with them.
        const double cont =
            legendre_scaled(d.xleg[i] * d.xleg_scale + d.xleg_off, cont_deg, st, z, ca_);
        z[cr] = s * (d.flux[i] - cont * T[i]);
        if (!need_jac) return;
        const double sc = s * cont;
        for (int q = 0; q < np; ++q) z[nc + q] = sc * dT[i * np + q];
      },
      [&](int t, int* ca, int* cb) { profile_pass2_pair(t, nc, np, ca, cb); });
}

// profile_continuum for teams whose workers are single lanes (Team::kVec == 1: the GPU's
// WarpTeam and its CPU emulation LaneTeam): the packed Gram sums of the design rows, one row per
// lane, one FMA chain per sum, arm by arm (profile_arm_lanes). Kept as the GPU's form: the CPU's
// SIMD form below (Legendre moments, rows built kVec at a time) raises the warp kernel's register
// pressure (ptxas spill loads 8 -> 1500 B on sm_90, cuda.ptxas_budget). The sums are the same;
// LaneTeam vs SerialTeam tests compare the two forms on real spectra.
// Profile the continuum and build chi^2 (and, with need_jac, the profiled gradient and Hessian)
// from T/dT. Sets w->ok = 0 if a continuum normal matrix is singular.
template <class Team>
VX_HD void profile_continuum_lanes(const Team& team, const FitData& d, int cont_deg, int np,
                                   bool need_jac, const double* T, const double* dT, EvalWork* w) {
  const int nc = cont_deg + 1;
  team.single([&] { profile_reset(w, np); });
  team.sync();
  for (int a = 0; a < d.n_arms; ++a) {
    profile_arm_lanes(team, d, a, cont_deg, np, need_jac, T, dT, w, w->red, &w->ok);
    if (!w->ok) return;
    team.single([&] { profile_pass2_add(w, a, nc, np, need_jac); });
    team.sync();
  }
}

// Whether the team's host SIMD form of the rotated model applies to d (Team::convolved_rows: the
// CPU backend's convolved-row scratch is set); false for every other team.
template <class Team>
VX_HD VX_INLINE bool host_convolved_rows(const Team& team, const FitData& d) {
  if constexpr (host_simd<Team>())
    return team.convolved_rows(d);
  else
    return false;
}

// A velocity-only evaluation of arm a at the points ll[0 .. n_eval) from the kept rows
// (FitData::Tv, single-lane teams): the template's grid rows convolved with the rotation kernel
// w->rot (M = w->rot_half taps each side; the rows themselves when M = 0), recomputed only when
// the coefficients (w->c_gen), VSINI or the rows the points need changed, then 4 taps per point:
//   t = sum_tap wt[tap] Tc[t0 - 1 + tap],  dt/dv = du_dv sum_tap dwt[tap] Tc[t0 - 1 + tap],
// which is rotated_pixel's sum in another order: Tc[x] = sum_m rot[m] B_clamp(x + m - M).c.
// The rows are kKeptRowsPad wider each side than needed, so that the next velocities (Newton
// steps, the moments grid: a few rows away) reuse them. With M > 0 the rows before convolution go
// through Tg[n_tpix] (one row per element: d.Tg, or the arm's own part of it when a request's arms
// run at once, eval_template_arm). Writes t_out and, with need_jac, dt_out (np = 1). The team by
// value: by reference, a caller out of line would keep its team in a stack frame. Unroll:
// row_dot's (the stage kernels'). Each row's value depends on the row alone (not on the span it
// was computed with), so that evaluations that find their rows kept or not get the same bits.
constexpr int kKeptRowsPad = 64;

// kept_rows_pixels' first part: arm a's kept rows made to cover the grid rows [r0, r1] (unless
// they do at w's coefficients and VSINI, computed over [r0 - kKeptRowsPad, r1 + kKeptRowsPad]
// clamped to the grid). Returns the rows, Tc[n_tpix].
template <bool Unroll = false, class Team>
VX_HD VX_INLINE const double* kept_rows_cover(const Team& team, const GridView& g, const FitData& d,
                                              int a, const EvalWork* w, const float* B, int K1,
                                              double vsini, int r0, int r1, double* Tg) {
  const int M = w->rot_half, S = g.n_tpix, k = d.tv_arm0 + a;
  KeptRows* kr = d.tv_keep + k;
  double* Tc = d.Tv + (size_t)k * d.tv_stride;
  const bool kept =
      kr->basis == B && kr->gen == w->c_gen && kr->vsini == vsini && kr->s0 <= r0 && kr->s1 >= r1;
  if (!kept) {
    const int p0 = r0 - kKeptRowsPad > 0 ? r0 - kKeptRowsPad : 0;
    const int p1 = r1 + kKeptRowsPad < S - 1 ? r1 + kKeptRowsPad : S - 1;
    constexpr int RV = 4;  // row_dot's partial sums: the rotated model's row products
    if (M == 0) {
      team.for_each(p1 - p0 + 1, [&](int rr) {
        Tc[p0 + rr] = row_dot<RV, Unroll>(w->c, B + (size_t)(p0 + rr) * K1, K1);
      });
    } else {
      const int q0 = p0 - M > 0 ? p0 - M : 0, q1 = p1 + M < S - 1 ? p1 + M : S - 1;
      team.for_each(q1 - q0 + 1, [&](int rr) {
        Tg[q0 + rr] = row_dot<RV, Unroll>(w->c, B + (size_t)(q0 + rr) * K1, K1);
      });
      team.sync();
      team.for_each(p1 - p0 + 1, [&](int rr) {
        const int x = p0 + rr;
        double t = 0.0;
        for (int m = 0; m <= 2 * M; ++m) {
          int row = x + m - M;
          row = row < 0 ? 0 : (row > S - 1 ? S - 1 : row);
          t += w->rot[m] * Tg[row];
        }
        Tc[x] = t;
      });
    }
    team.sync();
    team.single([&] { *kr = KeptRows{B, w->c_gen, vsini, p0, p1}; });
  }
  return Tc;
}

// kept_rows_pixels' second part: the points' 4 taps from the rows Tc at ln D = lnd.
template <class Team>
VX_HD VX_INLINE void kept_rows_taps(const Team& team, const GridView& g, const double* Tc,
                                    const double* ll, int n_eval, double lnd, double du_dv,
                                    bool need_jac, double* t_out, double* dt_out) {
  team.for_each(n_eval, [&](int j) {
    double wt[4], dwt[4];
    const double* tc = Tc + stencil_weights(g, ll[j], lnd, wt, dwt) - 1;
    t_out[j] = taps4(wt, tc);
    if (need_jac) dt_out[j] = du_dv * taps4(dwt, tc);
  });
}

template <bool Unroll = false, class Team>
VX_HD void kept_rows_pixels(Team team, const GridView& g, const FitData& d, int a,
                            const EvalWork* w, const float* B, int K1, double vsini,
                            const double* ll, int n_eval, double lnd, double du_dv, bool need_jac,
                            double* t_out, double* dt_out, double* Tg) {
  int lo_t, hi_t, r0, r1;
  rotated_row_span(g, ll, n_eval, lnd, 0, &lo_t, &hi_t, &r0, &r1);
  const double* Tc = kept_rows_cover<Unroll>(team, g, d, a, w, B, K1, vsini, r0, r1, Tg);
  kept_rows_taps(team, g, Tc, ll, n_eval, lnd, du_dv, need_jac, t_out, dt_out);
}

// Where arm a's template is evaluated: with a resolution matrix (rm) at the n_eval points ll of
// its full grid (values at Tf + full_off[a]), else at its used pixels i0 .. i0 + n_eval (ll =
// lnlam + i0, values at T + i0).
struct ArmPoints {
  bool rm;
  int i0, n_eval;
  const double* ll;
};
VX_HD VX_INLINE ArmPoints arm_points(const FitData& d, int a) {
  ArmPoints p;
  p.rm = d.n_full[a] > 0;
  p.i0 = d.arm_start[a];
  p.n_eval = p.rm ? d.n_full[a] : d.arm_start[a + 1] - p.i0;
  p.ll = p.rm ? d.full_lnlam[a] : d.lnlam + p.i0;
  return p;
}

// Arm a's used pixels from its full-grid model t_out[n_full] and Jacobian dt_out[n_full][np]
// through the resolution matrix, one pixel per worker (the single-lane teams' form of
// apply_rmat_rows): T[i], and with need_jac dT[i][0 .. np). The staged engine's pixel stage
// (rows_stage.hpp) calls it; template_at_pixels keeps the same loop written in place: through this
// function the warp kernel's evaluate_template<false> spilled 52/208 B instead of 40/148 B
// (ptxas, sm_90), on the per-pixel hot path.
template <class Team>
VX_HD VX_INLINE void apply_rmat_lanes(const Team& team, const FitData& d, int a,
                                      const double* t_out, const double* dt_out, int np,
                                      bool need_jac, double* T, double* dT) {
  const int i0 = d.arm_start[a];
  team.for_each(d.arm_start[a + 1] - i0, [&](int ii) {
    const int i = i0 + ii;
    T[i] = apply_rmat(d, a, i, t_out, 1, 0);
    if (need_jac)
      for (int q = 0; q < np; ++q) dT[i * np + q] = apply_rmat(d, a, i, dt_out, np, q);
  });
}

// Template value and derivatives at every pixel: T[n_pix], dT[n_pix][np] with
// np = n_fit_params(L, w->fit_vsini): dT[.][0] = dT/dv, dT[.][1+l] = dT/dlabel_l and, when VSINI
// is fitted, dT[.][1+L] = dT/dvsini. With em == nullptr, T = 1 (continuum-only model).
// VOnly: the velocity column alone (np = 1), for fits of v with the labels fixed: the emulator
// coefficients are not recomputed, w->c must hold those of theta's labels (emulator_coeffs_into).
template <bool VOnly = false, class Team>
VX_HD void template_at_pixels(const Team& team, const EmulatorView* em, const GridView& g,
                              const FitData& d, const double* theta, bool need_jac, EvalWork* w,
                              double* T, double* dT) {
  const int np = em && !VOnly ? n_fit_params(em->n_label, w->fit_vsini) : 1;
  if (!em) {
    team.for_each(d.n_pix, [&](int i) {
      T[i] = 1.0;
      if (need_jac) dT[i * np] = 0.0;
    });
    team.sync();
    return;
  }
  if (!VOnly) emulator_coeffs_into(team, *em, theta + 1, w);
  const int K1 = em->n_comp, L = em->n_label;
  const bool jac_vsini = !VOnly && w->fit_vsini;
  team.single([&] {
    w->rot_half = rotation_weights(theta[vsini_index(L)], w->limb_eps, g.dlnlam, kMaxRotHalf,
                                   w->rot, w->drot);
  });
  team.sync();
  const int M = w->rot_half;
  const double lnd = ln_doppler(theta[0]);
  const double du_dv = -dln_doppler_dv(theta[0]) / g.dlnlam;
  // Template (and derivatives) at one ln(lambda): t and dt[np]. NL, JM: component_sums (the
  // CPU's SIMD form: V partial sums, L and the Jacobian mode at compile time).
  constexpr int V = Team::kVec;
  auto model_at = [&](auto nlc, auto jmc, const float* B, double lnlam, double* t_out,
                      double* dt_out) {
    constexpr int NL = decltype(nlc)::value, JM = decltype(jmc)::value;
    double wt[4], dwt[4];
    const int t0 = stencil_weights(g, lnlam, lnd, wt, dwt);
    const float* b0 = B + (size_t)(t0 - 1) * K1;
    double dtu = 0.0;
    component_sums<V, NL, JM>(b0, K1, w->c, w->dc, L, need_jac ? (VOnly ? 1 : 2) : 0, wt, dwt,
                              t_out, &dtu, dt_out + 1);
    if (need_jac) {
      dt_out[0] = dtu * du_dv;
      if (jac_vsini) dt_out[1 + L] = 0.0;  // the identity kernel does not change with vsini
    }
  };
  // The single-lane form (the GPU's warp, V == 1): one FMA chain per sum and run-time flags,
  // no per-thread arrays beyond dl (registers on the GPU: the SIMD form's compile-time
  // instantiations raise the warp kernel's register pressure, ptxas spills 188 -> 1564 B).
  auto model_at_lane = [&](const float* B, double lnlam, double* t_out, double* dt_out) {
    double wt[4], dwt[4];
    const int t0 = stencil_weights(g, lnlam, lnd, wt, dwt);
    const float* b0 = B + (size_t)(t0 - 1) * K1;
    double t = 0.0, dtu = 0.0, dl[kMaxLabels] = {0.0, 0.0, 0.0, 0.0};
    for (int k = 0; k < K1; ++k) {
      const double bk =
          wt[0] * b0[k] + wt[1] * b0[K1 + k] + wt[2] * b0[2 * K1 + k] + wt[3] * b0[3 * K1 + k];
      t += w->c[k] * bk;
      if (need_jac) {
        const double dbk = dwt[0] * b0[k] + dwt[1] * b0[K1 + k] + dwt[2] * b0[2 * K1 + k] +
                           dwt[3] * b0[3 * K1 + k];
        dtu += w->c[k] * dbk;
        if (!VOnly)
          for (int l = 0; l < L; ++l) dl[l] += w->dc[l * K1 + k] * bk;
      }
    }
    *t_out = t;
    if (need_jac) {
      dt_out[0] = dtu * du_dv;
      if (!VOnly)
        for (int l = 0; l < L; ++l) dt_out[1 + l] = dl[l];
      if (jac_vsini) dt_out[1 + L] = 0.0;
    }
  };
  // The same with the rotation kernel: the cubic stencil convolved with the M-tap kernel spans
  // the 2M + 4 grid rows t0 - 1 - M .. t0 + 2 + M (clamped at the grid's ends). fetch(row, &bc,
  // bdc) gives a row's template B_r.c and label derivatives B_r.dc_l, which are weighted by the
  // combined weights sum_tap wt[tap] rot[r - tap] (value), dwt (velocity) and drot (vsini).
  auto model_at_rot = [&](double lnlam, double* t_out, double* dt_out, auto fetch) {
    rotated_pixel<VOnly>(g, w, lnlam, lnd, du_dv, M, L, need_jac, jac_vsini, t_out, dt_out, fetch);
  };
  const bool label_jac = need_jac && !VOnly;
  // A row's products from the basis directly (per pixel) ...
  // RV partial sums per product (component k to lane k % RV, lane_sum at the end): independent
  // FMA chains instead of one chain as long as K1, in a fixed order for each team: the CPU's
  // V lanes in one pass over the row; on the GPU 4, one product at a time (registers).
  constexpr int RV = V > 4 ? V : 4;
  auto row_products = [&](const float* B, int row, double* bc, double* bdc) {
    const float* br = B + (size_t)row * K1;
    if constexpr (V == 1) {
      *bc = row_dot<RV>(w->c, br, K1);
      if (label_jac)
        for (int l = 0; l < L; ++l) bdc[l] = row_dot<RV>(w->dc + l * K1, br, K1);
    } else if (label_jac) {
      row_sums<RV, 0, true>(br, K1, w->c, w->dc, L, bc, bdc);
    } else {
      row_sums<RV, 0, false>(br, K1, w->c, w->dc, L, bc, bdc);
    }
  };
  const int jm = need_jac ? (VOnly ? 1 : 2) : 0;
  for (int a = 0; a < d.n_arms; ++a) {
    // Without a matrix the model is evaluated at the used pixels directly; with one, on the
    // arm's full grid first (one instantiation of the heavy loop either way).
    const ArmPoints pts = arm_points(d, a);
    const bool rm = pts.rm;
    const int i0 = pts.i0, n_eval = pts.n_eval;
    const double* ll = pts.ll;
    double* t_out = rm ? d.Tf + d.full_off[a] : T + i0;
    double* dt_out = rm ? d.dTf + (size_t)d.full_off[a] * np : dT + (size_t)i0 * np;
    const float* B = d.basis[a];
    if (VOnly && V == 1 && d.Tv && (M == 0 || d.Tg)) {
      kept_rows_pixels(team, g, d, a, w, B, K1, theta[vsini_index(L)], ll, n_eval, lnd, du_dv,
                       need_jac, t_out, dt_out, d.Tg);
    } else if (M == 0 && !(VOnly && host_convolved_rows(team, d))) {
      if constexpr (V == 1) {
        team.for_each(n_eval, [&](int j) { model_at_lane(B, ll[j], &t_out[j], &dt_out[j * np]); });
      } else if constexpr (host_simd<Team>()) {
        team.unrotated_pixels(g, w, B, K1, L, ll, n_eval, lnd, du_dv, jm, jac_vsini, np, t_out,
                              dt_out);
      } else {
        auto pixels = [&](auto nlc, auto jmc) {
          team.for_each(n_eval,
                        [&](int j) { model_at(nlc, jmc, B, ll[j], &t_out[j], &dt_out[j * np]); });
        };
        dispatch_labels_jac(L, jm, pixels);  // L and the Jacobian mode at compile time
      }
    } else if (host_convolved_rows(team, d)) {
      // The CPU's rotated model: grid rows, convolved rows, then 4 taps per pixel. Velocity-only
      // evaluations (also unrotated) keep the convolved rows for the next one: only the Doppler
      // shift changes between them.
      if constexpr (host_simd<Team>())
        team.rotated_pixels(g, d, a, w, B, K1, L, ll, n_eval, lnd, du_dv, jm, jac_vsini, np, t_out,
                            dt_out, VOnly);
    } else if (d.Tg) {
      // ... or once per grid row the arm spans, into d.Tg (each row serves the 2M + 4 stencils
      // that touch it: fewer products when pixels are closer than 2M + 4 rows).
      int lo_t, hi_t, r0, r1;
      rotated_row_span(g, ll, n_eval, lnd, M, &lo_t, &hi_t, &r0, &r1);
      double* Tg = d.Tg;
      if constexpr (V == 1) {
        team.for_each(r1 - r0 + 1, [&](int rr) {
          const int row = r0 + rr;
          row_products(B, row, &Tg[(size_t)row * np], &Tg[(size_t)row * np + 1]);
        });
      } else if constexpr (host_simd<Team>()) {
        team.grid_row_sums(w, B, K1, L, label_jac, r0, r1, np, Tg);
      } else {
        // V rows at a time, one row per lane (no horizontal sums): each lane sums its row's
        // components in order.
        auto grid_rows = [&](auto nlc, auto jmc) {
          constexpr int NL = decltype(nlc)::value;
          constexpr bool LJ = decltype(jmc)::value == 2;
          constexpr int NA = LJ ? 1 + NL : 1;
          const int nr = r1 - r0 + 1, nb = nr - nr % V;
          team.for_each(nb / V, [&](int blk) {
            const int rb = blk * V;
            double acc[NA][V];
            for (int q = 0; q < NA; ++q)
              for (int p = 0; p < V; ++p) acc[q][p] = 0.0;
            const float* b0 = B + (size_t)(r0 + rb) * K1;
            for (int k = 0; k < K1; ++k) {
              double cq[NA];
              cq[0] = w->c[k];
              for (int l = 1; l < NA; ++l) cq[l] = w->dc[(l - 1) * K1 + k];
              for (int p = 0; p < V; ++p) {
                const double b = b0[(size_t)p * K1 + k];
                for (int q = 0; q < NA; ++q) acc[q][p] += cq[q] * b;
              }
            }
            for (int p = 0; p < V; ++p)
              for (int q = 0; q < NA; ++q) Tg[(size_t)(r0 + rb + p) * np + q] = acc[q][p];
          });
          team.for_each(nr - nb, [&](int rr) {  // the last rows, one at a time
            double* tg = Tg + (size_t)(r0 + nb + rr) * np;
            row_sums<RV, NL, LJ>(B + (size_t)(r0 + nb + rr) * K1, K1, w->c, w->dc, L, tg, tg + 1);
          });
        };
        dispatch_labels_jac(L, label_jac ? 2 : 0, grid_rows);
      }
      team.sync();
      if constexpr (V == 1) {
        team.for_each(n_eval, [&](int j) {
          model_at_rot(ll[j], &t_out[j], &dt_out[j * np], [&](int row, double* bc, double* bdc) {
            *bc = Tg[(size_t)row * np];
            if (label_jac)
              for (int l = 0; l < L; ++l) bdc[l] = Tg[(size_t)row * np + 1 + l];
          });
        });
      } else {
        auto pixels = [&](auto nlc, auto jmc) {
          team.for_each(n_eval, [&](int j) {
            rotated_pixel_rows<decltype(nlc)::value, decltype(jmc)::value>(
                g, w, ll[j], lnd, du_dv, M, Tg, np, jac_vsini, &t_out[j], &dt_out[j * np]);
          });
        };
        dispatch_labels_jac(L, jm, pixels);
      }
      team.sync();  // Tg is reused by the next arm
    } else {
      team.for_each(n_eval, [&](int j) {
        model_at_rot(ll[j], &t_out[j], &dt_out[j * np],
                     [&](int row, double* bc, double* bdc) { row_products(B, row, bc, bdc); });
      });
    }
    if (!rm) continue;
    team.sync();
    if constexpr (V > 1) {  // CPU teams: blocks of pixels (apply_rmat_rows), the same sums
      apply_rmat_rows(d, a, i0, d.arm_start[a + 1], t_out, 1, T);
      if (need_jac) apply_rmat_rows(d, a, i0, d.arm_start[a + 1], dt_out, np, dT);
    } else {
      team.for_each(d.arm_start[a + 1] - i0, [&](int ii) {
        const int i = i0 + ii;
        T[i] = apply_rmat(d, a, i, t_out, 1, 0);
        if (need_jac)
          for (int q = 0; q < np; ++q) dT[i * np + q] = apply_rmat(d, a, i, dt_out, np, q);
      });
    }
  }
  team.sync();
}

// The per-pixel inputs of V consecutive used pixels ib .. ib + V - 1 (cnt of them valid):
// Legendre argument x, sqrt(ivar) s (0 past the end), template t and flux f.
// Sqrt false: s = ivar itself (0 past the end).
template <int V, bool Sqrt = true>
VX_HD VX_INLINE void lanes_in(const FitData& d, const double* T, int ib, int cnt, double* x,
                              double* s, double* t, double* f) {
  if (cnt == V) {  // contiguous loads
    for (int p = 0; p < V; ++p) x[p] = d.xleg[ib + p] * d.xleg_scale + d.xleg_off;
    for (int p = 0; p < V; ++p) s[p] = Sqrt ? sqrt((double)d.ivar[ib + p]) : (double)d.ivar[ib + p];
    for (int p = 0; p < V; ++p) t[p] = T[ib + p];
    for (int p = 0; p < V; ++p) f[p] = d.flux[ib + p];
    return;
  }
  for (int p = 0; p < V; ++p) {
    const int i = ib + (p < cnt ? p : 0);
    x[p] = d.xleg[i] * d.xleg_scale + d.xleg_off;
    s[p] = p < cnt ? (Sqrt ? sqrt((double)d.ivar[i]) : (double)d.ivar[i]) : 0.0;
    t[p] = T[i];
    f[p] = d.flux[i];
  }
}

// Profile the continuum and build chi^2 (and, with need_jac, the profiled gradient and Hessian)
// from T/dT. Sets w->ok = 0 if a continuum normal matrix is singular.
template <class Team>
VX_HD void profile_continuum_simd(const Team& team, const FitData& d, int cont_deg, int np,
                                  bool need_jac, const double* T, const double* dT, EvalWork* w) {
  const int nc = cont_deg + 1;
  constexpr int V = Team::kVec;
  team.single([&] { profile_reset(w, np); });
  team.sync();
  for (int a = 0; a < d.n_arms; ++a) {
    const int i0 = d.arm_start[a], n = d.arm_start[a + 1] - i0;
    // Pass 1: G = A^T W A, q = A^T W f and f^T W f. The continuum's basis here is Chebyshev's
    // (chebyshev_v: the same polynomial space as the lane form's Legendre basis, so the same
    // chi^2 and Hessian up to rounding; a one-FMA recursion). Rows are built V pixels at a time
    // (Z[c * V + p]; lanes past the arm's end get weight 0), so that the recursion and the
    // products run on SIMD lanes on the CPU. With moments (2 deg + 4 <= kMaxGramRow), G comes
    // from the 2 deg + 1 moments mu_l = sum_i ivar T^2 C_l by C_j C_k = (C_{j+k} + C_{|j-k|}) / 2:
    // 2 deg + 1 sums instead of (deg + 1)(deg + 2) / 2. Its rows [C_0 .. C_{2 deg} | ivar T^2 |
    // ivar T f | ivar f^2] carry the weights in the last three columns (slots C_l u, C_j v,
    // C_0 e): no sqrt(ivar). Without moments, the rows are sqrt(ivar) [T C_0 .. T C_deg | f]
    // (packed Gram).
    // Layout of w->red: moments [nmom] mu, [nc] q, [1] f^T W f; direct [ntri] G, [nc] q, [1].
    const int nmom = 2 * cont_deg + 1;
    const bool moments = nmom + 3 <= kMaxGramRow;
    const int ng = moments ? nmom : nc * (nc + 1) / 2;
    // The team's register-accumulator form of the moments pass where it exists.
    bool pass1_done = false;
    if constexpr (host_simd<Team>())
      if (moments) pass1_done = team.continuum_moments(cont_deg, d, T, i0, n, w->red);
    if (moments && !pass1_done) {
      const int cu = nmom, cv = nmom + 1, ce = nmom + 2;  // columns ivar T^2, ivar T f, ivar f^2
      team.reduce_gram_v(
          n, nmom + 3, ng + nc + 1, w->red,
          [&](int ii0, int cnt, double* Z) {
            double x[V], iv[V], t[V], f[V];
            lanes_in<V, false>(d, T, i0 + ii0, cnt, x, iv, t, f);
            chebyshev_v<V>(x, nmom - 1, Z);
            for (int p = 0; p < V; ++p) {
              const double ivt = iv[p] * t[p], ivf = iv[p] * f[p];
              Z[cu * V + p] = ivt * t[p];
              Z[cv * V + p] = ivt * f[p];
              Z[ce * V + p] = ivf * f[p];
            }
          },
          [&](int t, int* ca, int* cb) {
            if (t < nmom) {  // mu_t
              *ca = t;
              *cb = cu;
            } else if (t < nmom + nc) {  // q_j
              *ca = t - nmom;
              *cb = cv;
            } else {  // f^T W f
              *ca = 0;
              *cb = ce;
            }
          });
    } else if (!moments) {
      team.reduce_gram_v(
          n, nc + 1, ng + nc + 1, w->red,
          [&](int ii0, int cnt, double* Z) {
            double x[V], s[V], t[V], f[V];
            lanes_in<V>(d, T, i0 + ii0, cnt, x, s, t, f);
            chebyshev_v<V>(x, nc - 1, Z);
            for (int p = 0; p < V; ++p) Z[nc * V + p] = s[p] * f[p];
            for (int p = 0; p < V; ++p) t[p] *= s[p];
            for (int j = 0; j < nc; ++j)
              for (int p = 0; p < V; ++p) Z[j * V + p] *= t[p];
          },
          [&](int t, int* ca, int* cb) {
            if (t < ng) {
              normal_pair(t, nc, ca, cb);
            } else {
              *ca = t - ng < nc ? t - ng : nc;  // q_j, then f^T W f
              *cb = nc;
            }
          });
    }
    team.single([&] {
      double* gm = w->gchol[a];
      if (moments) {
        // G_jk = sum ivar T^2 C_j C_k = (mu_{j+k} + mu_{|j-k|}) / 2.
        for (int j = 0; j < nc; ++j)
          for (int k = j; k < nc; ++k)
            gm[j * nc + k] = gm[k * nc + j] = 0.5 * (w->red[j + k] + w->red[k - j]);
      } else {
        unpack_tri(w->red, nc, gm);
      }
      if (!(w->ok = solve_continuum(w, a, nc, w->red + ng))) return;
      if (!need_jac) {
        // chi^2 at the profiled continuum without a second pass: f^T W f - q . a (the residual
        // is W-orthogonal to the continuum space). Relative rounding ~1e-16 of f^T W f.
        double qa = 0.0;
        for (int j = 0; j < nc; ++j) qa += w->red[ng + j] * w->cont[a][j];
        const double c2 = fmax(w->red[ng + nc] - qa, 0.0);
        w->chi2 += c2;
        w->chi2_arm[a] = c2;
      }
    });
    team.sync();
    if (!w->ok) return;
    if (!need_jac) continue;
    // Pass 2 (with the Jacobian only): chi^2, J^T W J, J^T W r and C = A^T W J with J = P * dT,
    // from the weighted rows sqrt(ivar) [T P_0 .. T P_deg | J_0 .. J_{np-1} | r]
    // (profile_pass2_pair's layout).
    const int m = 1 + np * (np + 1) / 2 + np + nc * np;
    const int cr = nc + np;  // column of r
    const double* ca_ = w->cont[a];
    team.reduce_gram_v(
        n, nc + np + 1, m, w->red,
        [&](int ii0, int cnt, double* Z) {
          double x[V], s[V], t[V], f[V], cont[V];
          const int ib = i0 + ii0;
          lanes_in<V>(d, T, ib, cnt, x, s, t, f);
          chebyshev_v<V>(x, cont_deg, Z);  // C_j in the first nc columns
          for (int p = 0; p < V; ++p) cont[p] = 0.0;
          for (int j = 0; j < nc; ++j)
            for (int p = 0; p < V; ++p) cont[p] += ca_[j] * Z[j * V + p];
          for (int p = 0; p < V; ++p) Z[cr * V + p] = s[p] * (f[p] - cont[p] * t[p]);
          for (int p = 0; p < V; ++p) t[p] *= s[p];
          for (int j = 0; j < nc; ++j)
            for (int p = 0; p < V; ++p) Z[j * V + p] *= t[p];
          for (int p = 0; p < V; ++p) cont[p] *= s[p];
          for (int q = 0; q < np; ++q) {
            double* zq = Z + (nc + q) * V;
            for (int p = 0; p < cnt; ++p) zq[p] = cont[p] * dT[(size_t)(ib + p) * np + q];
          }
        },
        [&](int t, int* ca, int* cb) { profile_pass2_pair(t, nc, np, ca, cb); });
    team.single([&] { profile_pass2_add(w, a, nc, np, need_jac); });
    team.sync();
  }
}

// Profile the continuum and build chi^2 (profile_continuum_simd's contract), in the team's form.
// VX_NOINLINE: one GPU copy for evaluate and the CCF refinement (see evaluate, kernels/lm.hpp).
template <class Team>
VX_HD VX_NOINLINE void profile_continuum(const Team& team, const FitData& d, int cont_deg, int np,
                                         bool need_jac, const double* T, const double* dT,
                                         EvalWork* w) {
  if constexpr (Team::kVec == 1)
    profile_continuum_lanes(team, d, cont_deg, np, need_jac, T, dT, w);
  else
    profile_continuum_simd(team, d, cont_deg, np, need_jac, T, dT, w);
}

// The continuum sum_j c[j] P_j(x), j <= deg, in Chebyshev's basis (Cheb: the CPU's SIMD forms)
// or Legendre's (the lane forms, which the GPU runs): the basis into an array, then the products
// summed from 0 in order. Legendre's keeps no array: the same recurrence (legendre_next) and sums
// term by term, so that a GPU lane has no stack frame for it. Chebyshev's (the CPU's SIMD teams)
// keeps the array form, whose rounding with fused multiply-adds the CPU's catalogs were checked
// with.
template <bool Cheb>
VX_HD VX_INLINE double continuum_at(double x, int deg, const double* c) {
  if constexpr (Cheb) {
    double p[kMaxCont];
    chebyshev(x, deg, p);
    double s = 0.0;
    for (int j = 0; j <= deg; ++j) s += c[j] * p[j];
    return s;
  } else {
    double p2 = 1.0, p1 = x, s = 0.0;
    s += c[0] * p2;
    if (deg >= 1) s += c[1] * p1;
    for (int n = 2; n <= deg; ++n) {
      const double p = legendre_next(n, x, p1, p2);
      s += c[n] * p;
      p2 = p1;
      p1 = p;
    }
    return s;
  }
}

// The profiled continuum with coefficients c at pixel i, in the basis of the team's
// profile_continuum form (Chebyshev for SIMD teams, Legendre for single lanes).
template <class Team>
VX_HD VX_INLINE double continuum_at_pixel(const FitData& d, int i, int cont_deg, const double* c) {
  return continuum_at<(Team::kVec > 1)>(d.xleg[i] * d.xleg_scale + d.xleg_off, cont_deg, c);
}

// Model flux (continuum x template) at every pixel after an evaluation: model[n_pix].
template <class Team>
VX_HD void model_at_pixels(const Team& team, const FitData& d, int cont_deg, const double* T,
                           const EvalWork* w, double* model) {
  for (int a = 0; a < d.n_arms; ++a) {
    const int i0 = d.arm_start[a];
    team.for_each(d.arm_start[a + 1] - i0, [&](int ii) {
      const int i = i0 + ii;
      model[i] = continuum_at_pixel<Team>(d, i, cont_deg, w->cont[a]) * T[i];
    });
  }
  team.sync();
}

}  // namespace velox::kern
