// The CUDA fit kernels (fit_kernel.hpp): the warp kernel, kern::fit_one (kernels/fit_pipeline.hpp,
// the source the CPU backend runs) with one warp per spectrum, persistent warps taking spectra
// from a device counter; and the batched engine's kernels (kernels/engine.hpp) with the graph
// that repeats its rounds. One translation unit, so that both share one compiled copy of the
// out-of-line device functions (evaluate and its stages, profile_continuum, the steps). No
// physics here: this file only maps threads and warps to slots and spectra, and launches.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <type_traits>
#include <string>

#include "backend/cuda/cublas_rt.hpp"
#include "backend/cuda/fit_kernel.hpp"
#include "kernels/engine.hpp"
#include "kernels/team_cuda.hpp"

namespace velox {

namespace {

constexpr int kThreadsPerBlock = kFitWarpsPerBlock * kern::kWarpLanes;
// VELOX_FIT_BLOCKS_PER_SM resident blocks of 128 threads per SM: 4 (16 warps, 25% occupancy)
// lets ptxas use 128 registers per thread (65536 / 512). Measured on an H100 (docs/gpu.md): 4 is
// 5% faster than 6 (80 registers, more spills). cuda.ptxas_budget checks the stack and spills.
#ifndef VELOX_FIT_BLOCKS_PER_SM
#define VELOX_FIT_BLOCKS_PER_SM 4
#endif
constexpr int kMinBlocksPerSM = VELOX_FIT_BLOCKS_PER_SM;

size_t align256(size_t n) { return (n + 255) & ~size_t{255}; }

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw std::runtime_error(std::string("CUDA: ") + what + ": " + cudaGetErrorString(e));
}

__global__ void __launch_bounds__(kThreadsPerBlock, kMinBlocksPerSM)
    fit_batch_kernel(kern::BatchView b, int* next_spectrum) {
  // Per warp: the spectrum's FitData and the slot's scratch views, written by lane 0 (as
  // per-lane locals they would cost every lane ~400 bytes of stack). Raw storage: __shared__
  // objects cannot be constructed.
  __shared__ alignas(kern::FitData) unsigned char d_raw[kFitWarpsPerBlock][sizeof(kern::FitData)];
  __shared__ alignas(kern::PipelineScratch) unsigned char
      sc_raw[kFitWarpsPerBlock][sizeof(kern::PipelineScratch)];
  __shared__ const float* tmpl[kFitWarpsPerBlock][kern::kMaxArms];
  __shared__ int spectrum[kFitWarpsPerBlock];
  // reduce_gram's staging tiles (32 design rows per warp).
  __shared__ double tile[kFitWarpsPerBlock][kern::kWarpLanes * kern::kGramStride];
  const int warp = threadIdx.x / kern::kWarpLanes;
  const kern::WarpTeam team{static_cast<int>(threadIdx.x % kern::kWarpLanes), tile[warp]};
  const int slot = blockIdx.x * kFitWarpsPerBlock + warp;
  if (slot >= b.n_slots) return;  // the whole warp leaves
  kern::FitData& d = *reinterpret_cast<kern::FitData*>(d_raw[warp]);
  kern::PipelineScratch& sc = *reinterpret_cast<kern::PipelineScratch*>(sc_raw[warp]);
  for (;;) {
    if (team.lane == 0) spectrum[warp] = atomicAdd(next_spectrum, 1);
    __syncwarp();
    const int s = spectrum[warp];
    if (s >= b.n_spec) return;
    if (team.lane == 0) kern::batch_views(b, s, slot, &d, &sc, tmpl[warp]);
    __syncwarp();
    kern::fit_one(team, b.em, b.grid, d, tmpl[warp], b.n_ccf, b.ccf_labels, b.cfg, sc,
                  &b.shared[slot], &b.results[s]);
    __syncwarp();  // every lane has read spectrum[warp], d and sc before lane 0 rewrites them
  }
}

// ---- The batched engine (kernels/engine.hpp) ----------------------------------------------

constexpr int kEngineStepThreads = 128;  // control: one thread per slot
constexpr int kServeWarps = 4;           // serve kernels: warps per block, one request per warp
constexpr int kServeThreads = kServeWarps * kern::kWarpLanes;
// The rounds' cap: a fit needs ~100-300 rounds and a batch at most ~16 fits per slot in turn, so
// a run past 2^22 rounds is a machine that never ends; the host then reports it.
constexpr int kEngineMaxRounds = 1 << 22;

__global__ void engine_init_kernel(kern::EngineCtl* ctl) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i == 0) {
    ctl->next_spectrum = 0;
    ctl->rounds = 0;
    ctl->n_active = 0;
  }
  if (i < ctl->b.n_slots) kern::engine_begin_slot(ctl, i);
}

__global__ void engine_reset_kernel(kern::EngineCtl* ctl) {
  const int k = threadIdx.x;
  if (k < kern::kNumReqKinds) ctl->count[k] = 0;
  if (k == 0) {
    ctl->n_active = 0;
    ++ctl->rounds;
  }
}

__global__ void __launch_bounds__(kEngineStepThreads) engine_step_kernel(kern::EngineCtl* ctl) {
  const int slot = blockIdx.x * blockDim.x + threadIdx.x;
  if (slot < ctl->b.n_slots) kern::engine_step<kern::WarpTeam>(ctl, slot);
}

__global__ void engine_cond_kernel(const kern::EngineCtl* ctl, cudaGraphConditionalHandle h) {
  cudaGraphSetConditional(h, ctl->n_active > 0 && ctl->rounds < kEngineMaxRounds ? 1u : 0u);
}

// Requests 0 .. n - 1 of a serve kernel: one warp per request (grid-stride), with the warp's
// views (FitData, PipelineScratch, CCF template sets) and reduce_gram tile in shared memory;
// serve(team, idx, d, sc, tmpl) serves one.
template <class Serve>
__device__ __forceinline__ void serve_per_warp(int n, Serve&& serve) {
  __shared__ alignas(kern::FitData) unsigned char d_raw[kServeWarps][sizeof(kern::FitData)];
  __shared__ alignas(kern::PipelineScratch) unsigned char
      sc_raw[kServeWarps][sizeof(kern::PipelineScratch)];
  __shared__ const float* tmpl[kServeWarps][kern::kMaxArms];
  __shared__ double tile[kServeWarps][kern::kWarpLanes * kern::kGramStride];
  const int warp = threadIdx.x / kern::kWarpLanes;
  const kern::WarpTeam team{static_cast<int>(threadIdx.x % kern::kWarpLanes), tile[warp]};
  auto* d = reinterpret_cast<kern::FitData*>(d_raw[warp]);
  auto* sc = reinterpret_cast<kern::PipelineScratch*>(sc_raw[warp]);
  for (int idx = blockIdx.x * kServeWarps + warp; idx < n; idx += gridDim.x * kServeWarps)
    serve(team, idx, d, sc, tmpl[warp]);
}

// Every request of kind Kind this round, pass Stage.
template <int Kind, int Stage>
__global__ void __launch_bounds__(kServeThreads, kMinBlocksPerSM)
    engine_serve_kernel(const kern::EngineCtl* ctl) {
  serve_per_warp(ctl->count[Kind], [&](const kern::WarpTeam& team, int idx, kern::FitData* d,
                                       kern::PipelineScratch* sc, const float** tmpl) {
    kern::engine_serve<Kind>(team, ctl, Stage, idx, d, sc, tmpl);
  });
}

// ---- The staged engine (kernels/rows_stage.hpp) -------------------------------------------

// Round start of the staged engine: the kinds' counts, the row requests and every group.
__global__ void staged_reset_kernel(kern::EngineCtl* ctl, int n_groups) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < kern::kNumReqKinds) ctl->count[i] = 0;
  if (i == 0) {
    ctl->n_active = 0;
    ++ctl->rounds;
    ctl->rows->count = 0;
  }
  if (i < n_groups) kern::rows_reset_group(ctl->rows, i);
}

// Plan every row request of the round (kern::rows_plan) and prepare every other evaluation
// and moments grid (kern::engine_eval_prep, engine_vgrid_prep): one thread each.
__global__ void __launch_bounds__(kEngineStepThreads)
    engine_plan_kernel(const kern::EngineCtl* ctl) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < ctl->rows->count) kern::engine_plan_rows(ctl, i);
  if (i < ctl->count[kern::kReqEval]) kern::engine_eval_prep(ctl, i);
  if (i < ctl->count[kern::kReqVGrid]) kern::engine_vgrid_prep(ctl, i);
}

// Every emulator request (kReqEmu) of the round in the emulator product, stage Stage (0 its row
// weights, 1 its coefficients from the product's sums; kern::engine_serve_emu).
template <int Stage>
__global__ void __launch_bounds__(kServeThreads, kMinBlocksPerSM)
    engine_emu_kernel(const kern::EngineCtl* ctl) {
  serve_per_warp(ctl->count[kern::kReqEmu], [&](const kern::WarpTeam& team, int e, kern::FitData*,
                                                kern::PipelineScratch*, const float**) {
    kern::engine_serve_emu(team, ctl, Stage, e);
  });
}

// Every row request of the round, stage Stage (-1 the emulator's row weights, 0 coefficients,
// 1 pixels).
template <int Stage>
__global__ void __launch_bounds__(kServeThreads, kMinBlocksPerSM)
    engine_rows_kernel(const kern::EngineCtl* ctl) {
  serve_per_warp(ctl->rows->count, [&](const kern::WarpTeam& team, int idx, kern::FitData* d,
                                       kern::PipelineScratch* sc, const float** tmpl) {
    kern::engine_serve_rows(team, ctl, Stage, idx, d, sc, tmpl);
  });
}

// The continuum per (request, arm) of the row requests (Rows) or of the round's other evaluations:
// one warp per item (kern::engine_cont_arm).
template <bool Rows>
__global__ void __launch_bounds__(kServeThreads, kMinBlocksPerSM)
    engine_cont_arm_kernel(const kern::EngineCtl* ctl) {
  const int n = Rows ? ctl->rows->count : ctl->count[kern::kReqEval];
  serve_per_warp(n * kern::kMaxArms, [&](const kern::WarpTeam& team, int item, kern::FitData* d,
                                         kern::PipelineScratch* sc, const float** tmpl) {
    kern::engine_cont_arm<Rows>(team, ctl, item, d, sc, tmpl);
  });
}

// The template stage of the round's other evaluations (velocity-only, segments, continuum-only):
// one warp per (request, arm) (kern::engine_eval_arm).
__global__ void __launch_bounds__(kServeThreads, kMinBlocksPerSM)
    engine_eval_arm_kernel(const kern::EngineCtl* ctl) {
  serve_per_warp(ctl->count[kern::kReqEval] * kern::kMaxArms,
                 [&](const kern::WarpTeam& team, int item, kern::FitData* d,
                     kern::PipelineScratch* sc, const float** tmpl) {
                   kern::engine_eval_arm(team, ctl, item, d, sc, tmpl);
                 });
}

// Clipping: one warp per (request, arm) (kern::engine_clip_arm), on the model of the request's
// evaluation earlier in the fit.
__global__ void __launch_bounds__(kServeThreads, kMinBlocksPerSM)
    engine_clip_arm_kernel(const kern::EngineCtl* ctl) {
  serve_per_warp(ctl->count[kern::kReqClip] * kern::kMaxArms,
                 [&](const kern::WarpTeam& team, int item, kern::FitData* d,
                     kern::PipelineScratch* sc, const float** tmpl) {
                   kern::engine_clip_arm(team, ctl, item, d, sc, tmpl);
                 });
}

// The moments grids' kept rows: one warp per (request, arm) (kern::engine_vgrid_rows).
__global__ void __launch_bounds__(kServeThreads, kMinBlocksPerSM)
    engine_vgrid_rows_kernel(const kern::EngineCtl* ctl) {
  serve_per_warp(ctl->count[kern::kReqVGrid] * kern::kMaxArms,
                 [&](const kern::WarpTeam& team, int item, kern::FitData* d,
                     kern::PipelineScratch* sc, const float** tmpl) {
                   kern::engine_vgrid_rows(team, ctl, item, d, sc, tmpl);
                 });
}

// Then their points first .. first + n - 1: one warp per (request, point), n <= ctl->items.cap
// (kern::engine_vgrid_item).
__global__ void __launch_bounds__(kServeThreads, kMinBlocksPerSM)
    engine_vgrid_items_kernel(const kern::EngineCtl* ctl, int first, int n) {
  serve_per_warp(n, [&](const kern::WarpTeam& team, int idx, kern::FitData* d,
                        kern::PipelineScratch* sc, const float** tmpl) {
    kern::engine_vgrid_item(team, ctl, first, idx, d, sc, tmpl);
  });
}

// Then each request's chi^2 from its arms' sums: one thread per request.
template <bool Rows>
__global__ void __launch_bounds__(kEngineStepThreads)
    engine_cont_finish_kernel(const kern::EngineCtl* ctl) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < (Rows ? ctl->rows->count : ctl->count[kern::kReqEval]))
    kern::engine_cont_finish<Rows>(ctl, i);
}

// Items first .. first + n - 1 of the round's requests of kind Kind (kern::TemplateItems: the
// chi^2 grid or the coarse CCF): one warp per (request, template), n <= ctl->items.cap.
template <int Kind>
__global__ void __launch_bounds__(kServeThreads, kMinBlocksPerSM)
    engine_items_kernel(const kern::EngineCtl* ctl, int first, int n) {
  serve_per_warp(n, [&](const kern::WarpTeam& team, int idx, kern::FitData* d,
                        kern::PipelineScratch* sc, const float** tmpl) {
    kern::engine_serve_item<Kind>(team, ctl, first, idx, d, sc, tmpl);
  });
}

// Time per stage of the staged engine's rounds on its stream (VELOX_GPU_STAGE_TIMES=1): an event
// at each of a round's kStages + 1 boundaries; a round's intervals are summed once the next
// round's wait has passed (its events are complete then). Intervals where the stream waits for
// the host count too: "host" is the time from the round's counts arriving to the next launch.
// The two buffer sets' engines run at once on two streams, so an interval is the stream's time,
// which includes waiting for the other set's kernels: per-set totals overlap, and the shares say
// where a round's time goes, not the device's busy time. A diagnostic: an event error skips the
// interval (never fails a batch).
struct StageClock {
  static constexpr int kStages = 18;
  static constexpr const char* kNames[kStages] = {
      "step+plan",     "counts down",  "host",           "fold",
      "ccf prep",      "ccf",          "grid",           "emulator",
      "rows: layout",  "rows: coef",   "rows: GEMMs",    "rows: pixels",
      "rows: continuum", "eval: template", "eval: continuum", "clip",
      "arm pixels",    "velocity grid"};
  cudaStream_t stream;
  cudaEvent_t ev[2][kStages + 1] = {};
  int cur = 0;
  bool full[2] = {false, false};  // the set's round marked every boundary
  double ms[kStages] = {};
  long batches = 0, rounds = 0;
  explicit StageClock(cudaStream_t s) : stream(s) {
    try {
      for (auto& set : ev)
        for (auto& e : set) check(cudaEventCreate(&e), "cudaEventCreate (stage times)");
    } catch (...) {
      destroy();
      throw;
    }
  }
  ~StageClock() { destroy(); }
  void destroy() {
    for (auto& set : ev)
      for (auto& e : set)
        if (e) cudaEventDestroy(e);
  }
  // A round's boundaries go to one of the two event sets, in turn.
  void begin_round() { cur ^= 1; }
  void mark(int k) {
    if (cudaEventRecord(ev[cur][k], stream) != cudaSuccess) cudaGetLastError();
  }
  // After a round's wait: the previous round's intervals (complete); last: the run's final
  // round, whose step and counts are complete too.
  void passed_wait(bool last) {
    const int prev = cur ^ 1;
    if (full[prev]) add(prev, kStages);
    full[prev] = false;
    if (last) {
      add(cur, 2);
    } else {
      full[cur] = true;
      ++rounds;
    }
  }
  void add(int set, int n) {
    for (int k = 0; k < n; ++k) {
      float t = 0.0f;
      if (cudaEventElapsedTime(&t, ev[set][k], ev[set][k + 1]) == cudaSuccess)
        ms[k] += t;
      else
        cudaGetLastError();  // clear it: the diagnostic loses one interval
    }
  }
  // A run's start: no round of an earlier run (which may have stopped mid-round) is pending.
  void begin_run() {
    full[0] = full[1] = false;
    ++batches;
  }
  std::string report() const {
    double total = 0.0;
    for (double t : ms) total += t;
    char line[160];
    std::snprintf(line, sizeof line, "%ld batches, %ld rounds, %.1f ms of device time:", batches,
                  rounds, total);
    std::string out = line;
    for (int k = 0; k < kStages; ++k) {
      std::snprintf(line, sizeof line, "\n  %-16s %10.1f ms %5.1f%%  %8.1f us/full round", kNames[k],
                    ms[k], total > 0 ? 100.0 * ms[k] / total : 0.0,
                    rounds > 0 ? 1e3 * ms[k] / rounds : 0.0);
      out += line;
    }
    return out;
  }
};

}  // namespace

StagedEngine::StagedEngine(int n_slots, cudaStream_t stream) : n_slots_(n_slots), stream_(stream) {
  try {
    blas_ = new BlasHandle(stream_);
    const size_t ns = static_cast<size_t>(n_slots);
    check(cudaMalloc(&ctl_, sizeof(kern::EngineCtl)), "cudaMalloc (engine control)");
    check(cudaMalloc(&rows_, sizeof(kern::RowsRound)), "cudaMalloc (row stages)");
    check(cudaMalloc(&list_, sizeof(int) * kern::kNumReqKinds * ns), "cudaMalloc (engine lists)");
    check(cudaMalloc(&slot_spec_, sizeof(int) * ns), "cudaMalloc (engine slots)");
    check(cudaMalloc(&rlist_, sizeof(int) * ns), "cudaMalloc (row list)");
    check(cudaMalloc(&col_, sizeof(int) * kern::kMaxArms * ns), "cudaMalloc (row columns)");
    if (const char* t = std::getenv("VELOX_GPU_STAGE_TIMES"); t && std::string(t) == "1")
      clock_ = new StageClock(stream_);
  } catch (...) {
    release();
    throw;
  }
}

StagedEngine::~StagedEngine() { release(); }

void StagedEngine::release() {
  delete static_cast<BlasHandle*>(blas_);
  delete static_cast<StageClock*>(clock_);
  clock_ = nullptr;
  for (void* p : {ctl_, rows_, static_cast<void*>(list_), static_cast<void*>(slot_spec_),
                  static_cast<void*>(rlist_), static_cast<void*>(col_), groups_,
                  static_cast<void*>(coef_), static_cast<void*>(out_), items_, emu_, arm_})
    if (p) cudaFree(p);
  if (staging_) cudaFreeHost(staging_);
  blas_ = ctl_ = rows_ = groups_ = staging_ = nullptr;
  list_ = slot_spec_ = rlist_ = col_ = nullptr;
  coef_ = out_ = nullptr;
  items_ = emu_ = arm_ = nullptr;
}

std::string StagedEngine::stage_report() const {
  return clock_ ? static_cast<const StageClock*>(clock_)->report() : std::string();
}

void StagedEngine::grow(void** p, size_t* cap, size_t bytes) {
  if (bytes <= *cap) return;
  check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize (row buffers)");
  if (*p) cudaFree(*p);
  *p = nullptr;
  *cap = 0;
  check(cudaMalloc(p, bytes), "cudaMalloc (row buffers)");
  *cap = bytes;
}

size_t StagedEngine::row_buffer_bytes(int n_slots, int max_arms, int n_tpix,
                                      const kern::EmulatorView& em) {
  long long c = 0, o = 0;
  kern::rows_buffer_bound(n_slots, max_arms, n_tpix, kern::rows_ncol(em.n_label), em.n_comp, &c,
                          &o);
  const long long emu = kern::rows_emu_ld(n_slots, em.n_label) *
                        (em.n_poly + em.n_train + std::max(em.n_comp - 1, 0));
  return static_cast<size_t>(c + o + emu) * sizeof(double) + 512 + arm_buffer_bytes(n_slots);
}

size_t StagedEngine::arm_buffer_bytes(int n_slots) {
  return align256(static_cast<size_t>(kern::rows_arm_items(n_slots)) * kern::kArmRed *
                  sizeof(double)) +
         static_cast<size_t>(kern::rows_arm_items(n_slots)) * sizeof(int);
}

size_t StagedEngine::item_buffer_bytes(int n_slots, long long t_stride) {
  const size_t cap = static_cast<size_t>(kItemsPerSlot) * static_cast<size_t>(n_slots);
  return cap * (static_cast<size_t>(t_stride) * sizeof(double) + sizeof(kern::EvalWork));
}

void StagedEngine::run(const kern::BatchView& b, const std::vector<const double*>& basis_d,
                       int max_arms) {
  rounds_ = gemms_ = emu_gemms_ = item_chunks_ = 0;
  if (b.n_spec <= 0) return;
  if (b.n_slots != n_slots_) throw std::logic_error("StagedEngine: batch with another slot count");
  // The per-arm stages' scratch (Tg's part and kept rows per arm), as the host executor checks.
  if (!kern::eval_arm_scratch_fits(b, std::max(max_arms, 1)))
    throw std::logic_error("StagedEngine: slot scratch without a part per arm");
  const int G = static_cast<int>(basis_d.size());
  const int K1 = b.em.n_comp, ncol = kern::rows_ncol(b.em.n_label);
  long long coef_n = 0, out_n = 0;
  kern::rows_buffer_bound(n_slots_, std::max(max_arms, 1), b.grid.n_tpix, ncol, K1, &coef_n,
                          &out_n);
  grow(reinterpret_cast<void**>(&coef_), &coef_cap_, static_cast<size_t>(coef_n) * sizeof(double));
  grow(reinterpret_cast<void**>(&out_), &out_cap_, static_cast<size_t>(out_n) * sizeof(double));
  // The emulator product's rows and sums (kern::RowsRound::emu_*).
  const long long emu_ld = kern::rows_emu_ld(n_slots_, b.em.n_label);
  const int emu_k = b.em.n_poly + b.em.n_train, emu_n = std::max(b.em.n_comp - 1, 0);
  const size_t emu_rows_b = align256(static_cast<size_t>(emu_ld) * emu_k * sizeof(double));
  grow(&emu_, &emu_cap_, emu_rows_b + static_cast<size_t>(emu_ld) * emu_n * sizeof(double));
  // The continuum stage's per-(request, arm) sums and flags (kern::RowsRound::arm_*).
  grow(&arm_, &arm_cap_, arm_buffer_bytes(n_slots_));
  // The per-template items' buffers (the grid's T and full grids, the CCF's sums), then their
  // workspaces.
  kern::TemplateItems ti;
  ti.cap = kItemsPerSlot * n_slots_;
  ti.t_stride = kern::template_items_stride(b);
  const size_t items_t = align256(static_cast<size_t>(ti.cap) * ti.t_stride * sizeof(double));
  grow(&items_, &items_cap_, item_buffer_bytes(n_slots_, ti.t_stride) + 256);
  ti.T = static_cast<double*>(items_);
  ti.work = reinterpret_cast<kern::EvalWork*>(static_cast<unsigned char*>(items_) + items_t);
  const size_t gi = sizeof(int) * static_cast<size_t>(std::max(G, 1));
  const size_t gl = sizeof(long long) * static_cast<size_t>(std::max(G, 1));
  grow(&groups_, &groups_cap_, 3 * gi + 2 * gl);
  // Pinned staging: [EngineCtl][RowsRound][g_count][g_lo][g_hi][g_coef][g_out].
  const size_t o_rows = sizeof(kern::EngineCtl), o_g = o_rows + sizeof(kern::RowsRound);
  const size_t staging = o_g + 3 * gi + 2 * gl;
  if (staging > staging_cap_) {
    if (staging_) cudaFreeHost(staging_);
    staging_ = nullptr;
    staging_cap_ = 0;
    check(cudaMallocHost(&staging_, staging), "cudaMallocHost (staged engine)");
    staging_cap_ = staging;
  }
  auto* hs = static_cast<unsigned char*>(staging_);
  auto* dg = static_cast<unsigned char*>(groups_);
  // The device's round plan.
  kern::RowsRound r;
  r.n_groups = G;
  r.K1 = K1;
  r.ncol = ncol;
  r.list = rlist_;
  r.g_count = reinterpret_cast<int*>(dg);
  r.g_lo = reinterpret_cast<int*>(dg + gi);
  r.g_hi = reinterpret_cast<int*>(dg + 2 * gi);
  r.g_coef = reinterpret_cast<long long*>(dg + 3 * gi);
  r.g_out = reinterpret_cast<long long*>(dg + 3 * gi + gl);
  r.col = col_;
  r.coef = coef_;
  r.out = out_;
  r.coef_cap = coef_n;
  r.out_cap = out_n;
  r.emu_ld = emu_ld;
  r.emu_rows = static_cast<double*>(emu_);
  r.emu_sums = reinterpret_cast<double*>(static_cast<unsigned char*>(emu_) + emu_rows_b);
  r.arm_red = static_cast<double*>(arm_);
  r.arm_ok = reinterpret_cast<int*>(
      static_cast<unsigned char*>(arm_) +
      align256(static_cast<size_t>(kern::rows_arm_items(n_slots_)) * kern::kArmRed *
               sizeof(double)));
  kern::EngineCtl c;
  c.b = b;
  c.list = list_;
  c.slot_spec = slot_spec_;
  c.rows = static_cast<kern::RowsRound*>(rows_);
  c.items = ti;
  std::memcpy(hs, &c, sizeof c);
  std::memcpy(hs + o_rows, &r, sizeof r);
  check(cudaMemcpyAsync(ctl_, hs, sizeof c, cudaMemcpyHostToDevice, stream_),
        "cudaMemcpyAsync (engine control)");
  check(cudaMemcpyAsync(rows_, hs + o_rows, sizeof r, cudaMemcpyHostToDevice, stream_),
        "cudaMemcpyAsync (row stages)");
  auto* ctl = static_cast<kern::EngineCtl*>(ctl_);
  const unsigned step_blocks = (n_slots_ + kEngineStepThreads - 1) / kEngineStepThreads;
  engine_init_kernel<<<step_blocks, kEngineStepThreads, 0, stream_>>>(ctl);
  check(cudaGetLastError(), "engine_init_kernel launch");
  const int reset_n = std::max(G, 32);
  const unsigned max_serve = (n_slots_ + kServeWarps - 1) / kServeWarps;
  // Blocks for n items at one warp each (the items' kernels loop over their grid otherwise).
  auto item_blocks = [](int n) { return (n + kServeWarps - 1) / kServeWarps; };
  auto blocks = [&](int n) {
    return std::min<unsigned>(max_serve,
                              (static_cast<unsigned>(n) + kServeWarps - 1) / kServeWarps);
  };
  kern::EngineCtl hc;
  kern::RowsRound hr;
  auto* blas = static_cast<BlasHandle*>(blas_);
  auto* clock = static_cast<StageClock*>(clock_);
  auto mark = [clock](int k) {
    if (clock) clock->mark(k);
  };
  if (clock) clock->begin_run();
  for (;;) {
    if (clock) clock->begin_round();
    mark(0);
    staged_reset_kernel<<<(reset_n + 127) / 128, 128, 0, stream_>>>(ctl, G);
    engine_step_kernel<<<step_blocks, kEngineStepThreads, 0, stream_>>>(ctl);
    engine_plan_kernel<<<step_blocks, kEngineStepThreads, 0, stream_>>>(ctl);
    check(cudaGetLastError(), "staged engine: step launch");
    mark(1);
    // The round's counts and plan down (the staging's upload part was read before: the stream
    // orders these copies after the first uploads).
    check(cudaMemcpyAsync(hs, ctl_, sizeof c, cudaMemcpyDeviceToHost, stream_),
          "cudaMemcpyAsync (engine counts)");
    check(cudaMemcpyAsync(hs + o_rows, rows_, sizeof r, cudaMemcpyDeviceToHost, stream_),
          "cudaMemcpyAsync (row plan)");
    check(cudaMemcpyAsync(hs + o_g, dg, 3 * gi, cudaMemcpyDeviceToHost, stream_),
          "cudaMemcpyAsync (row groups)");
    mark(2);
    check(cudaStreamSynchronize(stream_), "staged engine round");
    std::memcpy(&hc, hs, sizeof hc);
    std::memcpy(&hr, hs + o_rows, sizeof hr);
    if (hc.n_active == 0) {
      if (clock) clock->passed_wait(true);
      break;
    }
    mark(3);  // first, so that "host" does not time the clock's own reads below
    if (clock) clock->passed_wait(false);
    if (++rounds_ >= kEngineMaxRounds)
      throw std::runtime_error("the staged GPU engine stopped after " + std::to_string(rounds_) +
                               " rounds with " + std::to_string(hc.n_active) +
                               " fits unfinished (a fit that never ends: please report)");
    auto serve = [&](auto kind, auto stage) {
      constexpr int K = decltype(kind)::value, S = decltype(stage)::value;
      if (hc.count[K] > 0)
        engine_serve_kernel<K, S><<<blocks(hc.count[K]), kServeThreads, 0, stream_>>>(ctl);
    };
    // A kernel of one warp per (request, arm) over the n_req requests of a kind, if any.
    auto per_arm = [&](void (*kernel)(const kern::EngineCtl*), int n_req) {
      if (n_req > 0)
        kernel<<<item_blocks(n_req * kern::kMaxArms), kServeThreads, 0, stream_>>>(ctl);
    };
    // The continuum of n requests: a warp per (request, arm), then a thread per request.
    auto continuum = [&](auto rows, int n) {
      constexpr bool R = decltype(rows)::value;
      if (n <= 0) return;
      per_arm(engine_cont_arm_kernel<R>, n);
      engine_cont_finish_kernel<R>
          <<<(n + kEngineStepThreads - 1) / kEngineStepThreads, kEngineStepThreads, 0, stream_>>>(
              ctl);
    };
    using kern::IntC;
    serve(IntC<kern::kReqFold>{}, IntC<0>{});
    mark(4);
    serve(IntC<kern::kReqCcfPrep>{}, IntC<0>{});
    mark(5);
    // The coarse CCF and the chi^2 grid: a warp per (request, template), in chunks of the items'
    // buffers.
    // n_items items in chunks of the items' buffers: launch(first, n, blocks) for each.
    auto in_chunks = [&](int n_items, auto launch) {
      for (int first = 0; first < n_items; first += ti.cap) {
        const int n = std::min(ti.cap, n_items - first);
        launch(first, n, item_blocks(n));
        ++item_chunks_;
      }
    };
    auto items = [&](auto kind) {
      constexpr int K = decltype(kind)::value;
      in_chunks(kern::template_items_count<K>(&hc), [&](int first, int n, int nb) {
        engine_items_kernel<K><<<nb, kServeThreads, 0, stream_>>>(ctl, first, n);
      });
    };
    items(IntC<kern::kReqCcf>{});
    mark(6);
    items(IntC<kern::kReqGrid>{});
    mark(7);
    // The emulator: the row requests' and the emulator requests' row weights (the latter after
    // the former in the product's rows), their phase-2 sums for all of them as two products (the
    // polynomial terms, then the training stars: S = E B^T with B = poly_coef or alpha, stored
    // [row][K1], their columns 1 .. K1 - 1), then the emulator requests' c and dc (the row
    // requests' in their coefficient stage).
    const int n_emu = hc.count[kern::kReqEmu];
    // The product's rows hold n_slots requests (a slot asks for one request per round).
    if (hr.count + n_emu > n_slots_)
      throw std::logic_error("StagedEngine: more emulator requests than slots");
    if (hr.count > 0 || n_emu > 0) {
      if (hr.count > 0) engine_rows_kernel<-1><<<blocks(hr.count), kServeThreads, 0, stream_>>>(ctl);
      if (n_emu > 0) engine_emu_kernel<0><<<blocks(n_emu), kServeThreads, 0, stream_>>>(ctl);
      check(cudaGetLastError(), "staged engine: emulator launch");
      if (emu_n > 0) {
        const int m = (hr.count + n_emu) * (1 + b.em.n_label);
        blas->dgemm_nt(m, emu_n, b.em.n_poly, r.emu_rows, static_cast<int>(emu_ld),
                       b.em.poly_coef + 1, b.em.n_comp, 0.0, r.emu_sums, static_cast<int>(emu_ld));
        blas->dgemm_nt(m, emu_n, b.em.n_train, r.emu_rows + b.em.n_poly * emu_ld,
                       static_cast<int>(emu_ld), b.em.alpha + 1, b.em.n_comp, 1.0, r.emu_sums,
                       static_cast<int>(emu_ld));
        emu_gemms_ += 2;
      }
      if (n_emu > 0) engine_emu_kernel<1><<<blocks(n_emu), kServeThreads, 0, stream_>>>(ctl);
    }
    mark(8);
    if (hr.count == 0)
      for (int k = 9; k <= 13; ++k) mark(k);
    if (hr.count > 0) {
      // The groups' blocks (host), up; then coefficients, one GEMM per group, pixels, continuum.
      kern::RowsRound lay = hr;
      lay.g_count = reinterpret_cast<int*>(hs + o_g);
      lay.g_lo = reinterpret_cast<int*>(hs + o_g + gi);
      lay.g_hi = reinterpret_cast<int*>(hs + o_g + 2 * gi);
      lay.g_coef = reinterpret_cast<long long*>(hs + o_g + 3 * gi);
      lay.g_out = reinterpret_cast<long long*>(hs + o_g + 3 * gi + gl);
      long long nc = 0, no = 0;
      kern::rows_layout(&lay, &nc, &no);
      if (nc > coef_n || no > out_n) throw std::logic_error("StagedEngine: row buffers too small");
      check(
          cudaMemcpyAsync(dg + 3 * gi, hs + o_g + 3 * gi, 2 * gl, cudaMemcpyHostToDevice, stream_),
          "cudaMemcpyAsync (row layout)");
      const unsigned rb = blocks(hr.count);
      mark(9);
      engine_rows_kernel<0><<<rb, kServeThreads, 0, stream_>>>(ctl);
      check(cudaGetLastError(), "staged engine: coefficient launch");
      mark(10);
      for (int g = 0; g < G; ++g) {
        const int lo = lay.g_lo[g], span = lay.g_hi[g] - lo + 1, n = lay.g_count[g] * ncol;
        if (lay.g_count[g] == 0 || span <= 0) continue;
        // R (span x n) = B[lo .. lo + span) C: B is stored [row][K1], i.e. K1 x rows
        // column-major (op T makes it rows x K1); C is K1 x n and R span x n, column-major.
        blas->dgemm_tn(span, n, K1, basis_d[g] + static_cast<size_t>(lo) * K1, K1,
                       coef_ + lay.g_coef[g], K1, out_ + lay.g_out[g], span);
        ++gemms_;
      }
      mark(11);
      engine_rows_kernel<1><<<rb, kServeThreads, 0, stream_>>>(ctl);
      mark(12);
      // The continuum: a warp per (request, arm), then a thread per request.
      continuum(std::true_type{}, hr.count);
      mark(13);
      check(cudaGetLastError(), "staged engine: row stage launch");
    }
    // The other evaluations: their template stage and then their continuum per (request, arm),
    // and per request, as the row requests'.
    per_arm(engine_eval_arm_kernel, hc.count[kern::kReqEval]);
    mark(14);
    continuum(std::false_type{}, hc.count[kern::kReqEval]);
    mark(15);
    per_arm(engine_clip_arm_kernel, hc.count[kern::kReqClip]);
    mark(16);
    serve(IntC<kern::kReqArmPixels>{}, IntC<0>{});
    mark(17);
    // The moments grids: each (request, arm)'s kept rows, then a warp per (request, point), in
    // chunks of the items' buffers.
    if (hc.count[kern::kReqVGrid] > 0) {
      per_arm(engine_vgrid_rows_kernel, hc.count[kern::kReqVGrid]);
      in_chunks(hc.count[kern::kReqVGrid] * kern::kVGridItems, [&](int first, int n, int nb) {
        engine_vgrid_items_kernel<<<nb, kServeThreads, 0, stream_>>>(ctl, first, n);
      });
    }
    mark(18);
    check(cudaGetLastError(), "staged engine: serve launch");
  }
}

EngineLauncher::EngineLauncher(int n_slots, cudaStream_t stream)
    : n_slots_(n_slots), stream_(stream) {
  cudaGraph_t graph = nullptr;
  cudaStream_t cs = nullptr;
  try {
    check(cudaMalloc(&ctl_, sizeof(kern::EngineCtl)), "cudaMalloc (engine control)");
    check(cudaMalloc(&list_, sizeof(int) * kern::kNumReqKinds * static_cast<size_t>(n_slots)),
          "cudaMalloc (engine lists)");
    check(cudaMalloc(&slot_spec_, sizeof(int) * static_cast<size_t>(n_slots)),
          "cudaMalloc (engine slots)");
    check(cudaMallocHost(&staging_, sizeof(kern::EngineCtl)), "cudaMallocHost (engine)");
    // The rounds: a while node whose body is one round (kernels/engine.hpp), captured once.
    check(cudaGraphCreate(&graph, 0), "cudaGraphCreate");
    cudaGraphConditionalHandle handle;
    check(cudaGraphConditionalHandleCreate(&handle, graph, 1, cudaGraphCondAssignDefault),
          "cudaGraphConditionalHandleCreate (needs CUDA 12.4 or later)");
    cudaGraphNodeParams cp = {};
    cp.type = cudaGraphNodeTypeConditional;
    cp.conditional.handle = handle;
    cp.conditional.type = cudaGraphCondTypeWhile;
    cp.conditional.size = 1;
    cudaGraphNode_t node;
    check(cudaGraphAddNode(&node, graph, nullptr, nullptr, 0, &cp), "cudaGraphAddNode (while)");
    cudaGraph_t body = cp.conditional.phGraph_out[0];
    check(cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking), "cudaStreamCreate (capture)");
    check(cudaStreamBeginCaptureToGraph(cs, body, nullptr, nullptr, 0,
                                        cudaStreamCaptureModeThreadLocal),
          "cudaStreamBeginCaptureToGraph");
    auto* ctl = static_cast<kern::EngineCtl*>(ctl_);
    const unsigned step_blocks = (n_slots + kEngineStepThreads - 1) / kEngineStepThreads;
    const unsigned serve_blocks = (n_slots + kServeWarps - 1) / kServeWarps;
    engine_reset_kernel<<<1, 32, 0, cs>>>(ctl);
    engine_step_kernel<<<step_blocks, kEngineStepThreads, 0, cs>>>(ctl);
    engine_cond_kernel<<<1, 1, 0, cs>>>(ctl, handle);
    // Every kind in kern::engine_run's order; kReqGridPrep is a no-op for a warp (kVec 1).
    engine_serve_kernel<kern::kReqFold, 0><<<serve_blocks, kServeThreads, 0, cs>>>(ctl);
    engine_serve_kernel<kern::kReqCcfPrep, 0><<<serve_blocks, kServeThreads, 0, cs>>>(ctl);
    engine_serve_kernel<kern::kReqCcf, 0><<<serve_blocks, kServeThreads, 0, cs>>>(ctl);
    engine_serve_kernel<kern::kReqGrid, 0><<<serve_blocks, kServeThreads, 0, cs>>>(ctl);
    engine_serve_kernel<kern::kReqEmu, 0><<<serve_blocks, kServeThreads, 0, cs>>>(ctl);
    engine_serve_kernel<kern::kReqEval, 0><<<serve_blocks, kServeThreads, 0, cs>>>(ctl);
    engine_serve_kernel<kern::kReqEval, 1><<<serve_blocks, kServeThreads, 0, cs>>>(ctl);
    engine_serve_kernel<kern::kReqClip, 0><<<serve_blocks, kServeThreads, 0, cs>>>(ctl);
    engine_serve_kernel<kern::kReqArmPixels, 0><<<serve_blocks, kServeThreads, 0, cs>>>(ctl);
    engine_serve_kernel<kern::kReqVGrid, 0><<<serve_blocks, kServeThreads, 0, cs>>>(ctl);
    check(cudaGetLastError(), "engine kernel launch (capture)");
    check(cudaStreamEndCapture(cs, nullptr), "cudaStreamEndCapture");
    check(cudaStreamDestroy(cs), "cudaStreamDestroy (capture)");
    cs = nullptr;
    cudaGraphExec_t exec;
    check(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate (engine)");
    graph_ = graph;
    exec_ = exec;
  } catch (...) {
    if (cs) cudaStreamDestroy(cs);
    if (graph) cudaGraphDestroy(graph);
    graph_ = nullptr;
    release();
    throw;
  }
}

EngineLauncher::~EngineLauncher() { release(); }

void EngineLauncher::release() {
  if (exec_) cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec_));
  if (graph_) cudaGraphDestroy(static_cast<cudaGraph_t>(graph_));
  if (staging_) cudaFreeHost(staging_);
  if (slot_spec_) cudaFree(slot_spec_);
  if (list_) cudaFree(list_);
  if (ctl_) cudaFree(ctl_);
  exec_ = graph_ = staging_ = ctl_ = nullptr;
  slot_spec_ = list_ = nullptr;
}

void EngineLauncher::launch(const kern::BatchView& b) {
  if (b.n_spec <= 0) return;
  if (b.n_slots != n_slots_) throw std::logic_error("EngineLauncher: batch with another slot count");
  kern::EngineCtl h;
  h.b = b;
  h.list = list_;
  h.slot_spec = slot_spec_;
  std::memcpy(staging_, &h, sizeof h);
  check(cudaMemcpyAsync(ctl_, staging_, sizeof h, cudaMemcpyHostToDevice, stream_),
        "cudaMemcpyAsync (engine control)");
  const unsigned blocks = (n_slots_ + kEngineStepThreads - 1) / kEngineStepThreads;
  engine_init_kernel<<<blocks, kEngineStepThreads, 0, stream_>>>(
      static_cast<kern::EngineCtl*>(ctl_));
  check(cudaGetLastError(), "engine_init_kernel launch");
  check(cudaGraphLaunch(static_cast<cudaGraphExec_t>(exec_), stream_), "cudaGraphLaunch (engine)");
  // The end state (rounds, slots still active) for check_finished; stream-ordered after the
  // upload above, which read the staging first.
  check(cudaMemcpyAsync(staging_, ctl_, sizeof h, cudaMemcpyDeviceToHost, stream_),
        "cudaMemcpyAsync (engine state)");
}

void EngineLauncher::check_finished() const {
  kern::EngineCtl h;
  std::memcpy(&h, staging_, sizeof h);
  if (h.n_active > 0)
    throw std::runtime_error("the batched GPU engine stopped after " + std::to_string(h.rounds) +
                             " rounds with " + std::to_string(h.n_active) +
                             " fits unfinished (a fit that never ends: please report)");
}

int fit_kernel_slots(int device) {
  cudaDeviceProp prop;
  check(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
  int blocks_per_sm = 0;
  check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks_per_sm, fit_batch_kernel,
                                                      kThreadsPerBlock, 0),
        "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
  if (blocks_per_sm < 1) blocks_per_sm = 1;
  return blocks_per_sm * prop.multiProcessorCount * kFitWarpsPerBlock;
}

void launch_fit_batch(const kern::BatchView& b, int* d_counter, cudaStream_t stream) {
  if (b.n_spec <= 0) return;
  check(cudaMemsetAsync(d_counter, 0, sizeof(int), stream), "cudaMemsetAsync");
  int n_slots = b.n_slots;
  // No more warps than spectra.
  if (n_slots > b.n_spec) n_slots = b.n_spec;
  kern::BatchView v = b;
  v.n_slots = n_slots;
  const unsigned blocks = static_cast<unsigned>((n_slots + kFitWarpsPerBlock - 1) / kFitWarpsPerBlock);
  fit_batch_kernel<<<blocks, kThreadsPerBlock, 0, stream>>>(v, d_counter);
  check(cudaGetLastError(), "fit_batch_kernel launch");
}

}  // namespace velox
