// The "team" abstraction: the group of workers that cooperates on ONE spectrum.
// Every per-spectrum kernel is written once against this interface and instantiated for
//  - SerialTeam (tests, velox.model): a plain loop, one spectrum per thread, every sum in FP64;
//    the CPU backend runs kern::cpu::SimdTeam, a SerialTeam with the host SIMD forms
//    (src/backend/cpu/isa/simd_forms.hpp, selected by host_simd<Team>() below);
//  - WarpTeam (CUDA backend, kernels/team_cuda.hpp): the 32 lanes of one warp, shuffle
//    reductions, __syncwarp() at phase boundaries, no atomics and no block barriers;
//  - LaneTeam (CPU, tests): emulates WarpTeam's decomposition lane by lane (the same pixel-to-lane
//    assignment, per-lane partial sums, the same xor-butterfly order of the shuffle reduction),
//    so CI tests the GPU's parallel decomposition without a GPU.
// Model: Kokkos TeamPolicy / AMReX ParallelFor. Interface:
//   team.for_each(n, f)            f(i) for i in [0, n), any order, any worker
//   team.reduce_sum(n, m, out, f)  out[0..m) = sum_i of f(i, acc) contributions (acc has m slots,
//                                  zeroed; m <= kMaxReduce); result visible to every worker
//                                  afterwards
//   team.reduce_grid(n, n_o, width, out, f)
//                                  out[o*width + k] = sum_i f(i, o, acc) contributions (acc has
//                                  `width` <= kMaxGridWidth slots for output o, indexed acc[k]:
//                                  take it as `auto`, the CPU passes a strided view), summed over i
//                                  in increasing order for every team: a reduction per output
//                                  column (CCF lags, emulator coefficients); the GPU gives each
//                                  column its own lane (register accumulators)
//   team.reduce_gram(n, R, m, out, row, pair)
//                                  out[k] = sum_i z_i[a_k] * z_i[b_k] for k < m (m <=
//                                  kMaxGramSlots), where row(i, z) writes pixel i's row vector
//                                  z[R] (R <= kMaxGramRow, zeroed before) and pair(k, &a, &b)
//                                  names slot k's two columns: every normal-equation sum of the
//                                  fit (continuum G = A^T W A, J^T W J, ...) is such a Gram sum of
//                                  weighted design rows. Summed over i in increasing order for
//                                  every team (CPU and GPU results agree up to FMA contraction).
//                                  The GPU stages 32 rows in shared memory and gives each lane up
//                                  to 5 slots: register accumulators, no atomics, no shuffles.
//   team.reduce_gram_v(n, R, m, out, rowv, pair)
//                                  the same sums with rows written kVec at a time:
//                                  rowv(i0, cnt, Z) writes Z[c * kVec + p] for the rows i0 + p,
//                                  p < cnt (Z zeroed before; lanes p >= cnt must be written as
//                                  zero rows or left alone), so that the row arithmetic runs on
//                                  kVec pixels at once (SIMD lanes on the CPU)
//   Team::kVec                     pixels a worker handles together in reduce_gram_v and the
//                                  number of partial sums of per-pixel dot products
//                                  (template_at_pixels): the CPU's vector width in doubles
//                                  (SerialTeam 8: one AVX-512 register, two AVX2, four SSE2);
//                                  1 on the GPU, where the lanes of a warp are the parallelism
//   team.sync()                    all writes before are visible to all workers after
//   team.single(f)                 f() runs once (one worker); sync() after it to publish
//   Team::kHostSimd                (kVec > 1 only) true for a CPU team that carries the host SIMD
//                                  forms (host_simd<Team>()): the kernels then call its members
//                                  unrotated_pixels, convolved_rows, rotated_pixels and
//                                  grid_row_sums (template_at_pixels), continuum_moments
//                                  (profile_continuum_simd), ccf_sums (cross_correlate),
//                                  fixed_taps (the chi^2 grid's fixed templates) and fold_arm
//                                  (fold_rows: the resolution-matrix rows)
//                                  instead of their team-generic forms. The CPU backend's
//                                  SimdTeam (src/backend/cpu/isa/simd_forms.hpp) defines them;
//                                  SerialTeam has none
#pragma once
#include "kernels/hd.hpp"

namespace velox::kern {

constexpr int kMaxReduce = 4;      // reduce_sum slots (small sums: counts, means, norms)
constexpr int kMaxGridWidth = 5;   // 1 + kMaxLabels (emulator coefficients and derivatives)
constexpr int kGridAccMax = 2048;  // SerialTeam::reduce_grid's column-major accumulators
constexpr int kWarpLanes = 32;
// reduce_gram: rows of at most kMaxCont + kMaxParams + 1 = 16 + 5 + 1 values; slots: the packed
// continuum normal equations, 16 * 17 / 2 + 16 = 152, at most 5 per lane (kernels/fit_eval.hpp).
constexpr int kMaxGramRow = 22;
constexpr int kGramStride = 23;  // row stride of the GPU's staging tile (odd: fewer bank conflicts)
constexpr int kGramSlotsPerLane = 5;
constexpr int kMaxGramSlots = kGramSlotsPerLane * kWarpLanes;

// Sum of V partial sums (V a power of two) as a tree over adjacent pairs: ((a0 + a1) + (a2 +
// a3)) + ...; the fixed order of every V-lane sum (reduce_gram_v, template_at_pixels).
template <int V>
VX_HD VX_INLINE double lane_sum(const double* a) {
  static_assert(V == 1 || V == 2 || V == 4 || V == 8 || V == 16, "lane_sum: V = 1, 2, 4, 8, 16");
  if constexpr (V == 1) {
    return a[0];
  } else {
    // Written out (no loop): the partial sums stay in registers.
    return lane_sum<V / 2>(a) + lane_sum<V / 2>(a + V / 2);
  }
}

// A compile-time int as a value (dispatch of run-time sizes to template instantiations).
template <int N>
struct IntC {
  static constexpr int value = N;
};

// 8 doubles as one GCC/clang vector (host code only): lowered to one AVX-512, two AVX2 or four
// SSE2 operations per use by the instruction-set level the translation unit is compiled for.
#if !defined(__CUDACC__) && (defined(__GNUC__) || defined(__clang__))
typedef double VxVec8 __attribute__((vector_size(64), aligned(64)));
#define VX_VEC8 ::velox::kern::VxVec8
// Floats in one native register of the translation unit's instruction set (the CPU's FP32
// template sums, src/backend/cpu/isa/simd_forms.hpp): 16 with AVX-512, 8 with AVX, 4 otherwise. A
// 64-byte float vector lowered to two AVX2 registers made those sums slower than SSE2 (horizontal
// sums through memory). Per-ISA translation units give their helpers internal linkage (hd.hpp), so
// the width may differ between them.
#if defined(__AVX512F__)
typedef float VxVecF __attribute__((vector_size(64), aligned(64)));
#elif defined(__AVX__)
typedef float VxVecF __attribute__((vector_size(32), aligned(32)));
#else
typedef float VxVecF __attribute__((vector_size(16), aligned(16)));
#endif
constexpr int kVecF = static_cast<int>(sizeof(VxVecF) / sizeof(float));
#define VX_VECF ::velox::kern::VxVecF
// Doubles in one native register (8, 4 or 2), and floats of the same lane count: the loops
// whose accumulators must stay in registers (the CCF's lags, the rotated rows) use these, so
// that AVX2 and SSE2 (16 registers) do not spill 64-byte vectors.
typedef double VxVecD __attribute__((vector_size(sizeof(VxVecF)), aligned(sizeof(VxVecF))));
constexpr int kVecD = static_cast<int>(sizeof(VxVecD) / sizeof(double));
typedef float VxVecDF __attribute__((vector_size(sizeof(VxVecF) / 2)));
#endif

struct SerialTeam {
  static constexpr int kVec = 8;
  static constexpr bool kHostSimd = false;  // the team-generic forms, every sum in FP64
  template <class F>
  VX_HD void for_each(int n, F&& f) const {
    for (int i = 0; i < n; ++i) f(i);
  }
  template <class F>
  VX_HD void reduce_sum(int n, int m, double* out, F&& f) const {
    for (int k = 0; k < m; ++k) out[k] = 0.0;
    for (int i = 0; i < n; ++i) f(i, out);
  }
  template <class F>
  VX_HD void reduce_grid(int n, int n_o, int width, double* out, F&& f) const {
    // Rows outer, columns inner: the template / coefficient rows are read contiguously, and
    // the column loop vectorizes (f branch-free): the accumulators are held column-major
    // (acc[k * n_o + o], f sees a strided view) and transposed into out at the end. Each
    // column is summed over i in increasing order, as every team does.
    if (n_o * width <= kGridAccMax) {
      struct Col {
        double* a;
        int s;
        VX_HD double& operator[](int k) const { return a[k * s]; }
      };
      alignas(64) double acc[kGridAccMax];
      for (int k = 0; k < n_o * width; ++k) acc[k] = 0.0;
      for (int i = 0; i < n; ++i)
        for (int o = 0; o < n_o; ++o) f(i, o, Col{acc + o, n_o});
      for (int o = 0; o < n_o; ++o)
        for (int k = 0; k < width; ++k) out[o * width + k] = acc[k * n_o + o];
      return;
    }
    for (int k = 0; k < n_o * width; ++k) out[k] = 0.0;
    for (int i = 0; i < n; ++i)
      for (int o = 0; o < n_o; ++o) f(i, o, out + o * width);
  }
  template <class Row, class Pair>
  VX_HD void reduce_gram(int n, int R, int m, double* out, Row&& row, Pair&& pair) const {
    int pa[kMaxGramSlots], pb[kMaxGramSlots];
    for (int k = 0; k < m; ++k) {
      pair(k, &pa[k], &pb[k]);
      out[k] = 0.0;
    }
    double z[kMaxGramRow];
    for (int i = 0; i < n; ++i) {
      for (int c = 0; c < R; ++c) z[c] = 0.0;
      row(i, z);
      for (int k = 0; k < m; ++k) out[k] += z[pa[k]] * z[pb[k]];
    }
  }
  // kVec rows per step, transposed (Z[c][p]): slot k accumulates kVec independent partial sums
  // (pixel i goes to lane i % kVec), one vector multiply-add per slot and step, combined
  // pairwise at the end in a fixed order.
  template <class RowV, class Pair>
  VX_HD void reduce_gram_v(int n, int R, int m, double* out, RowV&& rowv, Pair&& pair) const {
    constexpr int V = kVec;
    int pa[kMaxGramSlots], pb[kMaxGramSlots];
    alignas(64) double acc[kMaxGramSlots * V];
    alignas(64) double Z[kMaxGramRow * V];
    for (int k = 0; k < m; ++k) {
      pair(k, &pa[k], &pb[k]);
      pa[k] *= V;
      pb[k] *= V;
      for (int p = 0; p < V; ++p) acc[k * V + p] = 0.0;
    }
    for (int i0 = 0; i0 < n; i0 += V) {
      for (int c = 0; c < R * V; ++c) Z[c] = 0.0;
      rowv(i0, n - i0 < V ? n - i0 : V, Z);
      for (int k = 0; k < m; ++k) {
#if defined(VX_VEC8)
        // Native vector operations per slot, 8 / kVecD of them (GCC's loop vectorizer would
        // otherwise vectorize over the slots, with gathers; one 8-double vector, two registers
        // with AVX2, went through the stack: the AVX2 DESI backend 25% slower).
        for (int h = 0; h < V; h += kVecD) {
          VxVecD x, y, a;
          __builtin_memcpy(&x, Z + pa[k] + h, sizeof x);
          __builtin_memcpy(&y, Z + pb[k] + h, sizeof y);
          __builtin_memcpy(&a, acc + k * V + h, sizeof a);
          a += x * y;
          __builtin_memcpy(acc + k * V + h, &a, sizeof a);
        }
#else
        const double* x = Z + pa[k];
        const double* y = Z + pb[k];
        double* a = acc + k * V;
        for (int p = 0; p < V; ++p) a[p] += x[p] * y[p];
#endif
      }
    }
    for (int k = 0; k < m; ++k) out[k] = lane_sum<V>(acc + k * V);
  }
  VX_HD void sync() const {}
  template <class F>
  VX_HD void single(F&& f) const {
    f();
  }
};

// True for a team that carries the CPU's host SIMD forms (Team::kHostSimd, above); the
// single-lane teams (the GPU's warp, LaneTeam) have no such member.
template <class Team>
VX_HD constexpr bool host_simd() {
  if constexpr (Team::kVec > 1)
    return Team::kHostSimd;
  else
    return false;
}

// WarpTeam's decomposition on the CPU (host only; used by tests). Lane l handles items
// l, l + 32, ...; reduce_sum keeps one partial sum per lane and combines them in the order of
// WarpTeam's __shfl_xor_sync butterfly (offsets 16, 8, 4, 2, 1); reduce_grid gives each column
// to one lane, which sums over i in order. Results therefore match WarpTeam's up to the device
// compiler's FMA contraction.
struct LaneTeam {
  static constexpr int kVec = 1;
  template <class F>
  void for_each(int n, F&& f) const {
    for (int lane = 0; lane < kWarpLanes; ++lane)
      for (int i = lane; i < n; i += kWarpLanes) f(i);
  }
  template <class F>
  void reduce_sum(int n, int m, double* out, F&& f) const {
    double acc[kWarpLanes][kMaxReduce];
    for (int lane = 0; lane < kWarpLanes; ++lane) {
      for (int k = 0; k < m; ++k) acc[lane][k] = 0.0;
      for (int i = lane; i < n; i += kWarpLanes) f(i, acc[lane]);
    }
    for (int k = 0; k < m; ++k) {
      double v[kWarpLanes];
      for (int lane = 0; lane < kWarpLanes; ++lane) v[lane] = acc[lane][k];
      for (int off = kWarpLanes / 2; off > 0; off /= 2) {
        double nv[kWarpLanes];
        for (int lane = 0; lane < kWarpLanes; ++lane) nv[lane] = v[lane] + v[lane ^ off];
        for (int lane = 0; lane < kWarpLanes; ++lane) v[lane] = nv[lane];
      }
      out[k] = v[0];
    }
  }
  template <class F>
  void reduce_grid(int n, int n_o, int width, double* out, F&& f) const {
    for (int o = 0; o < n_o; ++o) {
      double acc[kMaxGridWidth] = {0.0, 0.0, 0.0, 0.0, 0.0};
      for (int i = 0; i < n; ++i) f(i, o, acc);
      for (int k = 0; k < width; ++k) out[o * width + k] = acc[k];
    }
  }
  template <class Row, class Pair>
  void reduce_gram(int n, int R, int m, double* out, Row&& row, Pair&& pair) const {
    // WarpTeam's tile: 32 rows staged (lane l writes row base + l), then the lane owning slot k
    // (k % 32) sums its column pair over the staged rows in order.
    double tile[kWarpLanes * kGramStride];
    double acc[kMaxGramSlots];
    int pa[kMaxGramSlots], pb[kMaxGramSlots];
    for (int k = 0; k < m; ++k) {
      pair(k, &pa[k], &pb[k]);
      acc[k] = 0.0;
    }
    for (int base = 0; base < n; base += kWarpLanes) {
      for (int lane = 0; lane < kWarpLanes; ++lane) {
        double* z = tile + lane * kGramStride;
        for (int c = 0; c < R; ++c) z[c] = 0.0;
        if (base + lane < n) row(base + lane, z);
      }
      const int cnt = n - base < kWarpLanes ? n - base : kWarpLanes;
      for (int k = 0; k < m; ++k)
        for (int p = 0; p < cnt; ++p)
          acc[k] += tile[p * kGramStride + pa[k]] * tile[p * kGramStride + pb[k]];
    }
    for (int k = 0; k < m; ++k) out[k] = acc[k];
  }
  template <class RowV, class Pair>
  void reduce_gram_v(int n, int R, int m, double* out, RowV&& rowv, Pair&& pair) const {
    reduce_gram(
        n, R, m, out, [&](int i, double* z) { rowv(i, 1, z); }, pair);
  }
  void sync() const {}
  template <class F>
  void single(F&& f) const {
    f();
  }
};

}  // namespace velox::kern
