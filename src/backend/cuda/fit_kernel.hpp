// The CUDA fit kernel: kernels/fit_pipeline.hpp with one warp per spectrum (kern::WarpTeam).
// Persistent warps: fit_kernel_slots() warps are launched, and each takes the next spectrum of
// the batch from a device counter until none is left, so slow spectra do not leave SMs idle at
// the end of a wave. Included only by .cu files; no physics here.
#pragma once
#include <cuda_runtime.h>

#include "kernels/batch.hpp"

namespace velox {

// Warps per block of the fit kernel.
constexpr int kFitWarpsPerBlock = 4;

// Warps that are resident at once on `device` (occupancy x SMs): the slot count a batch's
// per-slot scratch is sized for. Throws std::runtime_error on CUDA errors.
int fit_kernel_slots(int device);

// Fit every spectrum of `b` (device pointers; b.n_slots warps, each with its own slot scratch)
// on `stream`. `d_counter` is one device int that the launch zeroes (asynchronously) and the
// warps use to take spectra. Asynchronous: synchronise `stream` before reading b.results.
void launch_fit_batch(const kern::BatchView& b, int* d_counter, cudaStream_t stream);

}  // namespace velox
