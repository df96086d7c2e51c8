// The "team" abstraction: the group of workers that cooperates on ONE spectrum.
// Every per-spectrum kernel is written once against this interface and instantiated for
//  - SerialTeam (CPU backend, all tests): a plain loop, one spectrum per CPU thread;
//  - a CUDA block team (backend/cuda, issue 4): threads stride over pixels, __syncthreads()
//    marks phase boundaries and reductions go through shared memory.
// Model: Kokkos TeamPolicy / AMReX ParallelFor. Interface:
//   team.for_each(n, f)            f(i) for i in [0, n), any order, any worker
//   team.reduce_sum(n, m, out, f)  out[0..m) = sum_i of f(i, acc) contributions (acc has m slots,
//                                  zeroed); result visible to every worker afterwards
//   team.reduce_grid(n, n_o, width, out, f)
//                                  out[o*width + k] = sum_i f(i, o, acc) contributions (acc has
//                                  `width` <= 4 slots for output o): a reduction per output
//                                  column, e.g. CCF lags; the GPU gives each column its own
//                                  thread (register accumulators, no atomics)
//   team.sync()                    all writes before are visible to all workers after
//   team.single(f)                 f() runs once (one worker); sync() after it to publish
#pragma once
#include "kernels/hd.hpp"

namespace velox::kern {

struct SerialTeam {
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
    // Pixels outer, columns inner: the template is read contiguously on the CPU.
    for (int k = 0; k < n_o * width; ++k) out[k] = 0.0;
    for (int i = 0; i < n; ++i)
      for (int o = 0; o < n_o; ++o) f(i, o, out + o * width);
  }
  VX_HD void sync() const {}
  template <class F>
  VX_HD void single(F&& f) const {
    f();
  }
};

}  // namespace velox::kern
