// The CUDA "team": one thread block cooperates on one spectrum (see kernels/team.hpp for the
// interface). Threads stride over pixels; reductions accumulate with atomicAdd into the output
// slots (shared or global memory), which keeps per-thread state at a few registers whatever the
// number of slots (up to ~270 for the continuum normal matrix): no local arrays, no spills.
// Only included by the CUDA backend (.cu). The host branches exist so that nvcc's host pass of
// these __host__ __device__ members compiles; they are never executed on the host.
#pragma once
#include "kernels/hd.hpp"

namespace velox::kern {

// acc[k] += v from many threads at once.
struct AtomicSlot {
  double* p;
  VX_HD void operator+=(double v) const {
#if defined(__CUDA_ARCH__)
    atomicAdd(p, v);
#else
    *p += v;
#endif
  }
};
struct AtomicAcc {
  double* p;
  VX_HD AtomicSlot operator[](int k) const { return AtomicSlot{p + k}; }
};

struct BlockTeam {
  template <class F>
  VX_HD void for_each(int n, F&& f) const {
#if defined(__CUDA_ARCH__)
    for (int i = threadIdx.x; i < n; i += blockDim.x) f(i);
#else
    for (int i = 0; i < n; ++i) f(i);
#endif
  }
  template <class F>
  VX_HD void reduce_sum(int n, int m, double* out, F&& f) const {
#if defined(__CUDA_ARCH__)
    __syncthreads();  // every thread has read the previous contents of `out`
    for (int k = threadIdx.x; k < m; k += blockDim.x) out[k] = 0.0;
    __syncthreads();
    const AtomicAcc acc{out};
    for (int i = threadIdx.x; i < n; i += blockDim.x) f(i, acc);
    __syncthreads();
#else
    for (int k = 0; k < m; ++k) out[k] = 0.0;
    const AtomicAcc acc{out};
    for (int i = 0; i < n; ++i) f(i, acc);
#endif
  }
  template <class F>
  VX_HD void reduce_grid(int n, int n_o, int width, double* out, F&& f) const {
    // One thread per output column; its `width` sums stay in registers: no atomics.
#if defined(__CUDA_ARCH__)
    __syncthreads();
    for (int o = threadIdx.x; o < n_o; o += blockDim.x) {
      double acc[4] = {0.0, 0.0, 0.0, 0.0};
      for (int i = 0; i < n; ++i) f(i, o, acc);
      for (int k = 0; k < width; ++k) out[o * width + k] = acc[k];
    }
    __syncthreads();
#else
    for (int k = 0; k < n_o * width; ++k) out[k] = 0.0;
    for (int i = 0; i < n; ++i)
      for (int o = 0; o < n_o; ++o) f(i, o, out + o * width);
#endif
  }
  VX_HD void sync() const {
#if defined(__CUDA_ARCH__)
    __syncthreads();
#endif
  }
  template <class F>
  VX_HD void single(F&& f) const {
#if defined(__CUDA_ARCH__)
    if (threadIdx.x == 0) f();
#else
    f();
#endif
  }
};

}  // namespace velox::kern
