// The "team" abstraction: the group of workers that cooperates on ONE spectrum.
// Every per-spectrum kernel is written once against this interface and instantiated for
//  - SerialTeam (CPU backend, all tests): a plain loop, one spectrum per CPU thread;
//  - a CUDA block team (backend/cuda, issue 4): threads stride over pixels, __syncthreads()
//    marks phase boundaries and reductions go through shared memory.
// Model: Kokkos TeamPolicy / AMReX ParallelFor. Interface:
//   team.for_each(n, f)            f(i) for i in [0, n), any order, any worker
//   team.reduce_sum(n, m, out, f)  out[0..m) = sum_i of f(i, acc) contributions (acc has m slots,
//                                  zeroed); result visible to every worker afterwards
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
  VX_HD void sync() const {}
  template <class F>
  VX_HD void single(F&& f) const {
    f();
  }
};

}  // namespace velox::kern
