// The CUDA fit kernels. Two engines, selected by VELOX_GPU_ENGINE (docs/gpu.md):
//  - warp (default): kernels/fit_pipeline.hpp with one warp per spectrum (kern::WarpTeam).
//    Persistent warps: fit_kernel_slots() warps are launched, and each takes the next spectrum of
//    the batch from a device counter until none is left, so slow spectra do not leave SMs idle
//    at the end of a wave.
//  - kinds: the batched engine's rounds (kernels/engine.hpp) as a CUDA graph: a control kernel
//    (one thread per slot steps its fit and refills finished slots), then one kernel per request
//    kind (an evaluation: one per stage) over the slots that asked for it, repeated by a
//    conditional while node until no slot has a request. The host does not take part in a round.
// Included only by .cu files; no physics here.
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

// The batched engine over `n_slots` slots on one stream: its control block, lists and graph,
// made once and reused batch after batch. Throws std::runtime_error on CUDA errors (a driver
// without conditional graph nodes, CUDA 12.4, among them).
class EngineLauncher {
 public:
  EngineLauncher(int n_slots, cudaStream_t stream);
  ~EngineLauncher();
  EngineLauncher(const EngineLauncher&) = delete;
  EngineLauncher& operator=(const EngineLauncher&) = delete;
  // Fit every spectrum of `b` (device pointers, b.n_slots == n_slots) on the stream.
  // Asynchronous, as launch_fit_batch.
  void launch(const kern::BatchView& b);
  // After the stream has finished a launch: throws if the rounds stopped at their cap with fits
  // unfinished (a machine that never ends: a bug), naming the rounds run.
  void check_finished() const;

 private:
  void release();
  int n_slots_;
  cudaStream_t stream_;
  void* ctl_ = nullptr;        // kern::EngineCtl, device
  int* list_ = nullptr;        // [kNumReqKinds][n_slots], device
  int* slot_spec_ = nullptr;   // [n_slots], device
  void* staging_ = nullptr;    // pinned: the BatchView up, the end state down
  void* graph_ = nullptr;      // cudaGraph_t
  void* exec_ = nullptr;       // cudaGraphExec_t
};

}  // namespace velox
