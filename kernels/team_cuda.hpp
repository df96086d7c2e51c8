// The CUDA team: the 32 lanes of ONE warp cooperate on one spectrum (interface in
// kernels/team.hpp). Lanes stride over pixels; reduce_sum keeps per-lane partial sums and
// combines them with a __shfl_xor_sync butterfly (no atomics, no shared-memory traffic);
// reduce_grid gives each output column its own lane; sync() is __syncwarp(). No block barriers:
// the warps of a block fit different spectra independently (src/backend/cuda/fit_kernel.cu).
// kernels/team.hpp's LaneTeam emulates this decomposition on the CPU for the tests.
// Only included by the CUDA backend (.cu). The host branches exist so that nvcc's host pass of
// these __host__ __device__ members compiles; they are never executed on the host.
#pragma once
#include "kernels/hd.hpp"
#include "kernels/team.hpp"

namespace velox::kern {

struct WarpTeam {
  static constexpr int kVec = 1;
  int lane;      // threadIdx.x % 32
  double* tile;  // this warp's staging tile for reduce_gram: [32][kGramStride], shared memory

  template <class F>
  VX_HD void for_each(int n, F&& f) const {
    for (int i = lane; i < n; i += kWarpLanes) f(i);
  }
  template <class F>
  VX_HD void reduce_sum(int n, int m, double* out, F&& f) const {
#if defined(__CUDA_ARCH__)
    __syncwarp();  // every lane has read the previous contents of `out`
    double acc[kMaxReduce] = {0.0, 0.0, 0.0, 0.0};
    for (int i = lane; i < n; i += kWarpLanes) f(i, acc);
#pragma unroll
    for (int k = 0; k < kMaxReduce; ++k) {
      double v = acc[k];
      for (int off = kWarpLanes / 2; off > 0; off /= 2) v += __shfl_xor_sync(0xffffffffu, v, off);
      if (lane == 0 && k < m) out[k] = v;
    }
    __syncwarp();
#else
    for (int k = 0; k < m; ++k) out[k] = 0.0;
    for (int i = 0; i < n; ++i) f(i, out);
#endif
  }
  template <class F>
  VX_HD void reduce_grid(int n, int n_o, int width, double* out, F&& f) const {
#if defined(__CUDA_ARCH__)
    __syncwarp();
#endif
    for (int o = lane; o < n_o; o += kWarpLanes) {
      double acc[kMaxGridWidth] = {0.0, 0.0, 0.0, 0.0, 0.0};
      for (int i = 0; i < n; ++i) f(i, o, acc);
      for (int k = 0; k < width; ++k) out[o * width + k] = acc[k];
    }
#if defined(__CUDA_ARCH__)
    __syncwarp();
#endif
  }
  template <class Row, class Pair>
  VX_HD void reduce_gram(int n, int R, int m, double* out, Row&& row, Pair&& pair) const {
#if defined(__CUDA_ARCH__)
    __syncwarp();  // every lane has read the previous contents of `out`
    double acc[kGramSlotsPerLane];
    int pa[kGramSlotsPerLane], pb[kGramSlotsPerLane];
#pragma unroll
    for (int j = 0; j < kGramSlotsPerLane; ++j) {
      acc[j] = 0.0;
      pa[j] = pb[j] = 0;
      if (lane + j * kWarpLanes < m) pair(lane + j * kWarpLanes, &pa[j], &pb[j]);
    }
    double* z = tile + lane * kGramStride;
    for (int base = 0; base < n; base += kWarpLanes) {
      for (int c = 0; c < R; ++c) z[c] = 0.0;
      if (base + lane < n) row(base + lane, z);
      __syncwarp();
      const int cnt = n - base < kWarpLanes ? n - base : kWarpLanes;
#pragma unroll
      for (int j = 0; j < kGramSlotsPerLane; ++j)
        if (lane + j * kWarpLanes < m)
          for (int p = 0; p < cnt; ++p)
            acc[j] += tile[p * kGramStride + pa[j]] * tile[p * kGramStride + pb[j]];
      __syncwarp();  // the tile is rewritten next round
    }
#pragma unroll
    for (int j = 0; j < kGramSlotsPerLane; ++j)
      if (lane + j * kWarpLanes < m) out[lane + j * kWarpLanes] = acc[j];
    __syncwarp();
#else
    SerialTeam{}.reduce_gram(n, R, m, out, row, pair);
#endif
  }
  template <class RowV, class Pair>
  VX_HD void reduce_gram_v(int n, int R, int m, double* out, RowV&& rowv, Pair&& pair) const {
    reduce_gram(n, R, m, out, [&](int i, double* z) { rowv(i, 1, z); }, pair);
  }
  VX_HD void sync() const {
#if defined(__CUDA_ARCH__)
    __syncwarp();
#endif
  }
  template <class F>
  VX_HD void single(F&& f) const {
    if (lane == 0) f();
  }
};

}  // namespace velox::kern
