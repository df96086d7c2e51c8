// The CUDA fit kernels. Three engines, selected by VELOX_GPU_ENGINE (docs/gpu.md):
//  - warp (default): kernels/fit_pipeline.hpp with one warp per spectrum (kern::WarpTeam).
//    Persistent warps: fit_kernel_slots() warps are launched, and each takes the next spectrum of
//    the batch from a device counter until none is left, so slow spectra do not leave SMs idle
//    at the end of a wave.
//  - kinds: the batched engine's rounds (kernels/engine.hpp) as a CUDA graph: a control kernel
//    (one thread per slot steps its fit and refills finished slots), then one kernel per request
//    kind (an evaluation: one per stage) over the slots that asked for it, repeated by a
//    conditional while node until no slot has a request. The host does not take part in a round.
//  - staged: the same rounds driven from the host, with the round's full evaluations served by
//    the row stages (kernels/rows_stage.hpp): the template rows of all of them as one cuBLAS
//    DGEMM per arm model. The host reads each round's counts to size the launches and GEMMs.
// Included only by .cu files; no physics here.
#pragma once
#include <cuda_runtime.h>

#include <string>
#include <vector>

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

// The staged engine over `n_slots` slots on one stream (VELOX_GPU_ENGINE=staged; docs/gpu.md
// "Template rows as one GEMM"): each round the control kernel steps every slot, the host reads
// the round's counts (one small copy and a wait on the stream), then launches the serve kernels
// of the kinds with requests, the coarse CCF and the chi^2 grid with a warp per (request,
// template) (kern::TemplateItems), and the row stages: the emulator's row weights and its
// phase-2 sums for all requests as two cuBLAS DGEMMs, coefficients, one DGEMM per arm model over
// its requests' columns (the basis in FP64), pixels, continuum. cuBLAS is loaded at run time
// (dlopen of libcublas.so.13, .12 or .so), so that the other engines run without it.
// Synchronous: run() returns when the batch is done (the backend calls it on a thread of its
// own). Throws std::runtime_error on CUDA or cuBLAS errors and when the rounds reach their cap.
class StagedEngine {
 public:
  StagedEngine(int n_slots, cudaStream_t stream);
  ~StagedEngine();
  StagedEngine(const StagedEngine&) = delete;
  StagedEngine& operator=(const StagedEngine&) = delete;
  // Fit every spectrum of `b` (device pointers, b.n_slots == n_slots). basis_d[g]: arm model g's
  // basis in FP64 ([n_tpix][K+1], device), in b.basis' order; max_arms: the most arms of a
  // spectrum of the batch (the row buffers' size).
  void run(const kern::BatchView& b, const std::vector<const double*>& basis_d, int max_arms);
  // Device bytes of the row buffers for n_slots slots of max_arms arms (rows_buffer_bound) and
  // of the emulator product's rows and sums (kern::rows_emu_ld) for emulator em.
  static size_t row_buffer_bytes(int n_slots, int max_arms, int n_tpix,
                                 const kern::EmulatorView& em);
  // Device bytes of the continuum stage's sums and flags per (request, arm) (kern::RowsRound::
  // arm_red, arm_ok; counted in row_buffer_bytes).
  static size_t arm_buffer_bytes(int n_slots);
  // Device bytes of the per-template items' buffers (kern::TemplateItems: kItemsPerSlot items per
  // slot, each t_stride doubles (kern::template_items_stride) and an EvalWork).
  static size_t item_buffer_bytes(int n_slots, long long t_stride);
  // Per-template items (request, template) served at once per slot: a round at a batch's start,
  // when every slot asks for its chi^2 grid, takes n_ccf / 4 chunks of 4 x n_slots warps.
  static constexpr int kItemsPerSlot = 4;
  long rounds() const { return rounds_; }  // of the last run
  long gemms() const { return gemms_; }
  long emu_gemms() const { return emu_gemms_; }
  long item_chunks() const { return item_chunks_; }
  // With VELOX_GPU_STAGE_TIMES=1 in the environment at construction: the device time of each
  // stage of the rounds so far (CUDA events at the stage boundaries of every round; a few
  // microseconds of overhead per round), as text; empty otherwise.
  std::string stage_report() const;

 private:
  void release();
  void grow(void** p, size_t* cap, size_t bytes);
  int n_slots_;
  cudaStream_t stream_;
  void* blas_ = nullptr;      // BlasHandle (cublas_rt.hpp)
  void* clock_ = nullptr;     // StageClock (VELOX_GPU_STAGE_TIMES=1), fit_kernel.cu
  void* ctl_ = nullptr;       // kern::EngineCtl, device
  void* rows_ = nullptr;      // kern::RowsRound, device
  int* list_ = nullptr;       // [kNumReqKinds][n_slots], device
  int* slot_spec_ = nullptr;  // [n_slots], device
  int* rlist_ = nullptr;      // [n_slots] the row requests' slots, device
  int* col_ = nullptr;        // [n_slots][kMaxArms], device
  void* groups_ = nullptr;    // g_count, g_lo, g_hi (ints), g_coef, g_out (long long), device
  size_t groups_cap_ = 0;
  double* coef_ = nullptr;
  size_t coef_cap_ = 0;  // bytes
  double* out_ = nullptr;
  size_t out_cap_ = 0;       // bytes
  void* staging_ = nullptr;  // pinned: control, round plan and group arrays up and down
  size_t staging_cap_ = 0;
  void* items_ = nullptr;  // kern::TemplateItems: [cap][t_stride] doubles, then cap workspaces
  size_t items_cap_ = 0;   // bytes
  void* emu_ = nullptr;    // kern::RowsRound::emu_rows, then emu_sums
  size_t emu_cap_ = 0;     // bytes
  void* arm_ = nullptr;    // kern::RowsRound::arm_red, then arm_ok
  size_t arm_cap_ = 0;     // bytes
  long rounds_ = 0, gemms_ = 0, emu_gemms_ = 0, item_chunks_ = 0;
};

}  // namespace velox
