// The persistent GPU engine of one rank (CudaBackend, backend/gpu.hpp): library resident once,
// buffers allocated once and grown, two buffer sets on two streams so that the host packs batch
// k+1 while batch k is copied, fitted and copied back. Launches the fit kernel through
// launch_fit_batch (fit_kernel.hpp). Memory and launches only: no physics here.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <exception>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <utility>

#include "backend/cuda/fit_kernel.hpp"
#include "backend/gpu.hpp"
#include "kernels/engine.hpp"  // kern::template_items_stride

namespace velox {

namespace {

constexpr int kSets = 2;             // buffer sets (and streams) in flight
constexpr int kWavesPerBatch = 16;   // spectra per resident warp in a full batch
constexpr size_t kMaxBatch = 65536;  // spectra per batch at most
constexpr double kMemSafety = 0.8;   // fraction of free device memory a batch may use

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw std::runtime_error(std::string("CUDA: ") + what + ": " + cudaGetErrorString(e) + " (" +
                             cudaGetErrorName(e) + ")");
}

// Device array that only grows. Contents are not kept when it grows.
template <class T>
struct DevArray {
  T* p = nullptr;
  size_t cap = 0;
  DevArray() = default;
  DevArray(const DevArray&) = delete;
  DevArray& operator=(const DevArray&) = delete;
  ~DevArray() {
    if (p) cudaFree(p);
  }
  void ensure(size_t n) {
    if (n <= cap) return;
    if (p) cudaFree(p);
    p = nullptr;
    cap = 0;
    check(cudaMalloc(&p, n * sizeof(T)), "cudaMalloc");
    cap = n;
  }
  void upload(const T* host, size_t n) {  // synchronous (library data, once)
    ensure(n);
    if (n)
      check(cudaMemcpy(p, host, n * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy (library)");
  }
};

// Pinned host buffer of bytes that only grows.
struct PinnedBytes {
  unsigned char* p = nullptr;
  size_t cap = 0;
  PinnedBytes() = default;
  PinnedBytes(const PinnedBytes&) = delete;
  PinnedBytes& operator=(const PinnedBytes&) = delete;
  ~PinnedBytes() {
    if (p) cudaFreeHost(p);
  }
  void ensure(size_t n) {
    if (n <= cap) return;
    if (p) cudaFreeHost(p);
    p = nullptr;
    cap = 0;
    check(cudaMallocHost(reinterpret_cast<void**>(&p), n), "cudaMallocHost");
    cap = n;
  }
};

size_t align256(size_t n) { return (n + 255) & ~size_t{255}; }

// One buffer set: a stream, the device arrays of one batch and its slots, the pinned buffer of
// its results, and the batch it holds while in flight.
struct BufferSet {
  cudaStream_t stream = nullptr;
  cudaEvent_t done = nullptr;
  DevArray<kern::BatchSpectrum> spec;
  DevArray<double> lnlam, xleg, full_lnlam, fold;
  DevArray<float> flux, ivar, rm;
  DevArray<int> full_idx;
  DevArray<kern::PipelineResult> results;
  DevArray<const float*> basis, ccf_tmpl;
  DevArray<double> T, dT, fn, wts, frac, Tf, dTf, Tg, ccf, acc, emu, Tv;
  DevArray<int> t0, counter;
  DevArray<kern::PipelineShared> shared;
  std::unique_ptr<EngineLauncher> engine;  // VELOX_GPU_ENGINE=kinds: the batched engine
  std::unique_ptr<StagedEngine> staged;    // VELOX_GPU_ENGINE=staged: its rounds, host-driven
  std::thread runner;                      // staged: runs the batch's rounds, then the copies
  std::exception_ptr error;                // what the runner threw
  SlotSizes slots;                         // what the slot scratch is sized for
  PinnedBytes down;                        // results then ivar
  // In flight:
  bool busy = false;
  size_t ticket = 0, first = 0;
  std::vector<kern::BatchSpectrum> spec_h;  // offsets to unpack ivar
  size_t ivar_bytes_off = 0;
};

class CudaBackend final : public Backend {
 public:
  CudaBackend(const TemplateLibrary& lib, const kern::PipelineConfig& pc, int device,
              size_t min_batch, ThreadPool* pool)
      : lib_(lib),
        pc_(pc),
        device_(device),
        min_batch_(std::max<size_t>(1, min_batch)),
        pool_(pool) {
    check(cudaSetDevice(device_), "cudaSetDevice");
    cudaDeviceProp prop;
    check(cudaGetDeviceProperties(&prop, device_), "cudaGetDeviceProperties");
    name_ = std::string("cuda:") + std::to_string(device_) + " (" + prop.name + ")";
    n_slots_ = fit_kernel_slots(device_);
    // The engine (fit_kernel.hpp): the warp kernel unless VELOX_GPU_ENGINE says kinds or staged.
    // The warp kernel stays the default until a device has measured the batched engine faster
    // (docs/gpu.md "The batched engine").
    if (const char* e = std::getenv("VELOX_GPU_ENGINE")) {
      const std::string v = e;
      if (v == "kinds")
        kinds_engine_ = true;
      else if (v == "staged")
        staged_engine_ = true;
      else if (!v.empty() && v != "warp")
        throw std::runtime_error("VELOX_GPU_ENGINE=" + v + ": expected warp, kinds or staged");
    }
    if (kinds_engine_) name_ += ", batched engine";
    if (staged_engine_) name_ += ", staged engine";
    em_ = lib.view();
    train_x_.upload(lib.train_x.data(), lib.train_x.size());
    alpha_.upload(lib.alpha.data(), lib.alpha.size());
    poly_.upload(lib.poly_coef.data(), lib.poly_coef.size());
    ccf_labels_.upload(lib.ccf_labels.data(), lib.ccf_labels.size());
    em_.train_x = train_x_.p;
    em_.alpha = alpha_.p;
    em_.poly_coef = poly_.p;
    for (auto& s : sets_) {
      check(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking), "cudaStreamCreate");
      check(cudaEventCreateWithFlags(&s.done, cudaEventDisableTiming), "cudaEventCreate");
      // cuBLAS loads here: a machine without it fails at the start, not at the first batch.
      if (staged_engine_) s.staged = std::make_unique<StagedEngine>(n_slots_, s.stream);
    }
  }
  ~CudaBackend() override {
    cudaSetDevice(device_);
    for (int k = 0; k < kSets; ++k) {
      auto& s = sets_[k];
      if (s.runner.joinable()) s.runner.join();
      // VELOX_GPU_STAGE_TIMES=1: where the staged engine's device time went (docs/gpu.md).
      const std::string times = s.staged ? s.staged->stage_report() : std::string();
      if (!times.empty())
        std::fprintf(stderr, "velox: %s, buffer set %d, stage times: %s\n", name_.c_str(), k,
                     times.c_str());
      if (s.stream) cudaStreamSynchronize(s.stream);
      if (s.done) cudaEventDestroy(s.done);
      if (s.stream) cudaStreamDestroy(s.stream);
    }
  }

  std::string name() const override { return name_; }
  std::string unsupported(const BatchRequest& r) const override {
    if (r.models) return "best-fit models (--save-models) are evaluated by the CPU backend";
    if (r.n_spectra < min_batch_)
      return "batch smaller than the GPU minimum (" + std::to_string(min_batch_) + " spectra)";
    return {};
  }
  size_t preferred_batch() const override {
    return gpu_target_batch(n_slots_, kWavesPerBatch, min_batch_, kMaxBatch);
  }

  void submit(std::vector<const Packed*> specs, bool /*want_models*/,
              std::function<void(size_t)> on_done,
              std::function<void(size_t)> on_packed) override {
    check(cudaSetDevice(device_), "cudaSetDevice");
    Pending p;
    p.ticket = next_ticket_++;
    p.on_done = std::move(on_done);
    p.out.results.resize(specs.size());
    p.out.ivar.resize(specs.size());
    pending_.push_back(std::move(p));
    if (specs.empty()) return;
    const size_t batch = batch_size(specs);
    for (size_t b0 = 0; b0 < specs.size(); b0 += batch) {
      const size_t nb = std::min(batch, specs.size() - b0);
      // Pack on the host while the other set's batch runs, then wait for this set to be free.
      HostBatch hb(
          {specs.begin() + b0, specs.begin() + b0 + nb}, lib_, pc_,
          [&](size_t s) {
            if (on_packed) on_packed(b0 + s);
          },
          pool_);
      BufferSet& set = sets_[next_set_];
      next_set_ = (next_set_ + 1) % kSets;
      if (set.busy) finish(set);
      launch(set, hb, pending_.back().ticket, b0);
      ++pending_.back().in_flight;
    }
  }

  BatchOutput collect() override {
    if (pending_.empty()) throw std::logic_error("CudaBackend::collect: nothing submitted");
    const size_t t = pending_.front().ticket;
    for (int k = 0; k < kSets; ++k) {  // oldest set first: next_set_ is the least recent
      BufferSet& set = sets_[(next_set_ + k) % kSets];
      if (set.busy && set.ticket == t) finish(set);
    }
    BatchOutput out = std::move(pending_.front().out);
    pending_.pop_front();
    return out;
  }

 private:
  struct Pending {
    size_t ticket = 0;
    int in_flight = 0;
    size_t n_done = 0;
    std::function<void(size_t)> on_done;
    BatchOutput out;
  };

  // The scratch's stride of fitted parameters: np, and in the staged engine at least the arms
  // when the rotated model's rows are kept (slot_grid > 0): each arm of a velocity-only
  // evaluation rotates its rows in its own n_tpix part of the slot's Tg (kern::eval_arm_tg).
  // n_fit_params with VSINI is 2 + L >= 3 arms already; more arms widen the stride.
  int staged_np(int arms, long long slot_grid) const {
    return staged_engine_ && slot_grid > 0 ? arms : 0;
  }

  // What a batch's slots are sized for: the host batch's sizes with the warp's kept rows
  // (FitData::Tv) and staged_np.
  SlotSizes slot_sizes(const HostBatch& hb) const {
    SlotSizes s = hb.sizes_kept_rows();
    int arms = 0;
    for (const auto& bs : hb.spec) arms = std::max(arms, bs.n_arms);
    s.np = std::max(s.np, staged_np(arms, s.slot_grid));
    return s;
  }

  // Spectra per batch: a few waves of the resident warps, within the free device memory.
  size_t batch_size(const std::vector<const Packed*>& specs) {
    size_t per = 0;
    SlotSizes s;
    s.np = kern::n_fit_params(lib_.n_label, 1);
    s.n_out = std::max(kern::ccf_lags(pc_, lib_.grid()), 7);
    s.emu = kern::emulator_scratch_size(em_);
    const bool with_fold = any_fold(specs);  // then every spectrum carries fold parameters
    int max_arms = 0;
    for (const auto* p : specs) {
      per = std::max(per, gpu_bytes_per_spectrum(p->flux.size(), p->n_full_total(),
                                                 with_fold ? p->flux.size() : 0));
      s.slot_pix = std::max<long long>(s.slot_pix, static_cast<long long>(p->flux.size()));
      s.slot_full = std::max<long long>(s.slot_full, static_cast<long long>(p->n_full_total()));
      s.slot_rm = std::max<long long>(s.slot_rm, static_cast<long long>(p->n_rm_total()));
      if (p->fit_vsini && pc_.fit_vsini) s.slot_grid = lib_.n_tpix;
      s.slot_vrows =
          std::max<long long>(s.slot_vrows, static_cast<long long>(p->n_arms) * lib_.n_tpix);
      max_arms = std::max(max_arms, p->n_arms);
    }
    s.np = std::max(s.np, staged_np(max_arms, s.slot_grid));
    size_t free_b = 0, total_b = 0;
    check(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo");
    size_t fixed = static_cast<size_t>(kSets) * n_slots_ *
                   gpu_bytes_per_slot(s.slot_pix, s.slot_full, s.np, s.n_out, s.emu, s.slot_grid,
                                      s.slot_rm, s.slot_vrows);
    if (staged_engine_) {  // the row stages' and the per-template items' buffers, per set
      int arms = 1;
      for (const auto* p : specs) arms = std::max(arms, p->n_arms);
      fixed +=
          static_cast<size_t>(kSets) *
          (StagedEngine::row_buffer_bytes(n_slots_, arms, lib_.n_tpix, em_) +
           // From this batch's sizes (run() sizes them from the set's widened slots: larger
           // only after a larger batch).
           StagedEngine::item_buffer_bytes(
               n_slots_, kern::template_items_stride(s.slot_pix, s.slot_full, s.n_out)));
    }
    // What this engine already holds for batches is reusable: count it as free.
    const size_t n =
        gpu_batch_size(free_b + held_bytes_, kMemSafety, fixed, per, kSets, preferred_batch());
    if (n == 0)
      throw std::runtime_error("CUDA: not enough free device memory for one batch (" +
                               std::to_string(free_b >> 20) + " MiB free)");
    return n;
  }

  const float* const* model_table(const HostBatch& hb, std::vector<const float*>* tmpl) {
    std::vector<const float*> basis;
    model_basis_d_.clear();
    for (const ArmModel* m : hb.models) {
      auto it = models_.find(m);
      if (it == models_.end()) {
        it = models_
                 .emplace(std::piecewise_construct, std::forward_as_tuple(m),
                          std::forward_as_tuple())
                 .first;
        std::get<0>(it->second).upload(m->basis.data(), m->basis.size());
        std::get<1>(it->second).upload(m->ccf_templates.data(), m->ccf_templates.size());
        if (staged_engine_) {  // the row GEMMs' FP64 copy (exact: every float is a double)
          const std::vector<double> bd(m->basis.begin(), m->basis.end());
          std::get<2>(it->second).upload(bd.data(), bd.size());
        }
      }
      basis.push_back(std::get<0>(it->second).p);
      tmpl->push_back(std::get<1>(it->second).p);
      model_basis_d_.push_back(std::get<2>(it->second).p);
    }
    model_basis_ = std::move(basis);
    return model_basis_.data();
  }

  template <class T>
  void grow(DevArray<T>& a, size_t n) {
    if (n <= a.cap) return;
    held_bytes_ -= a.cap * sizeof(T);
    a.ensure(n);
    held_bytes_ += a.cap * sizeof(T);
  }

  void ensure_slots(BufferSet& set, const SlotSizes& s) {
    set.slots.widen(s);
    const size_t ns = static_cast<size_t>(n_slots_);
    auto n = [ns](long long per_slot) { return std::max<size_t>(ns * per_slot, 1); };
    kern::for_each_slot_array(set, slot_counts(set.slots),
                              [&](auto& a, long long per_slot) { grow(a, n(per_slot)); });
    grow(set.shared, ns);
    grow(set.counter, 1);
  }

  // Copy hb's arrays up, launch, and copy results and ivar down, asynchronously on set.stream.
  // The uploads read hb's pageable memory, and launch waits for them before it returns (the
  // set's stream is idle before them, so the wait is the copies' own time): hb, the model
  // tables and `tmpl` may then go. cudaMemcpyAsync from pageable memory may return before the
  // device has read it where the driver does not stage it (CUDA Runtime API, "API
  // synchronization behavior"). The rank thus holds no pinned copy of a batch's inputs (about
  // 0.8 GB per buffer set for 2048 DESI spectra; docs/gpu.md "Each batch held once"); the host
  // spends the copy's time here, as it spent it before on a memcpy into pinned staging.
  void launch(BufferSet& set, const HostBatch& hb, size_t ticket, size_t first) {
    std::vector<const float*> tmpl;
    const float* const* basis = model_table(hb, &tmpl);
    const size_t n_models = tmpl.size();
    const size_t ns = hb.spec.size(), np_ = hb.flux.size();
    struct Part {
      const void* src;
      size_t bytes;
      void* dst;
    };
    grow(set.spec, ns);
    grow(set.lnlam, np_);
    grow(set.xleg, np_);
    grow(set.flux, np_);
    grow(set.ivar, np_);
    grow(set.full_idx, np_);
    grow(set.full_lnlam, std::max<size_t>(hb.full_lnlam.size(), 1));
    grow(set.fold, std::max<size_t>(hb.fold.size(), 1));
    grow(set.results, ns);
    grow(set.basis, n_models);
    grow(set.ccf_tmpl, n_models);
    ensure_slots(set, slot_sizes(hb));
    const Part parts[] = {
        {hb.spec.data(), ns * sizeof(kern::BatchSpectrum), set.spec.p},
        {hb.lnlam.data(), np_ * sizeof(double), set.lnlam.p},
        {hb.xleg.data(), np_ * sizeof(double), set.xleg.p},
        {hb.flux.data(), np_ * sizeof(float), set.flux.p},
        {hb.ivar.data(), np_ * sizeof(float), set.ivar.p},
        {hb.full_idx.data(), np_ * sizeof(int), set.full_idx.p},
        {hb.full_lnlam.data(), hb.full_lnlam.size() * sizeof(double), set.full_lnlam.p},
        {hb.fold.data(), hb.fold.size() * sizeof(double), set.fold.p},
        {basis, n_models * sizeof(const float*), set.basis.p},
        {tmpl.data(), n_models * sizeof(const float*), set.ccf_tmpl.p},
    };
    for (const auto& pt : parts) {
      if (pt.bytes == 0) continue;
      check(cudaMemcpyAsync(pt.dst, pt.src, pt.bytes, cudaMemcpyHostToDevice, set.stream),
            "cudaMemcpyAsync (batch upload)");
    }
    check(cudaStreamSynchronize(set.stream), "cudaStreamSynchronize (batch upload)");
    kern::BatchView v;
    v.em = em_;
    v.grid = hb.grid;
    v.cfg = hb.cfg;
    v.n_ccf = hb.n_ccf;
    v.ccf_labels = ccf_labels_.p;
    v.np = set.slots.np;  // the allocation's stride (slot_sizes(hb).np at least)
    v.n_out = hb.sizes().n_out;
    v.basis = set.basis.p;
    v.ccf_tmpl = set.ccf_tmpl.p;
    v.n_spec = static_cast<int>(ns);
    v.spec = set.spec.p;
    v.lnlam = set.lnlam.p;
    v.xleg = set.xleg.p;
    v.flux = set.flux.p;
    v.ivar = set.ivar.p;
    v.full_idx = set.full_idx.p;
    v.full_lnlam = set.full_lnlam.p;
    v.fold = hb.fold.empty() ? nullptr : set.fold.p;
    v.results = set.results.p;
    v.n_slots = n_slots_;
    v.slot_pix = set.slots.slot_pix;
    v.slot_full = set.slots.slot_full;
    v.slot_rm = set.slots.slot_rm;
    v.T = set.T.p;
    v.dT = set.dT.p;
    v.fn = set.fn.p;
    v.wts = set.wts.p;
    v.frac = set.frac.p;
    v.t0 = set.t0.p;
    v.Tf = set.Tf.p;
    v.dTf = set.dTf.p;
    v.rm = set.rm.p;
    v.slot_grid = set.slots.slot_grid;
    v.Tg = set.Tg.p;
    v.slot_vrows = set.slots.slot_vrows;
    v.Tv = set.Tv.p;
    v.ccf = set.ccf.p;
    v.acc = set.acc.p;
    v.emu = set.emu.p;
    v.shared = set.shared.p;
    const size_t res_bytes = ns * sizeof(kern::PipelineResult);
    set.ivar_bytes_off = align256(res_bytes);
    set.down.ensure(set.ivar_bytes_off + np_ * sizeof(float));
    // After the fits: results and ivar down, then the set's event.
    auto download = [this, &set, res_bytes, np_] {
      check(
          cudaMemcpyAsync(set.down.p, set.results.p, res_bytes, cudaMemcpyDeviceToHost, set.stream),
          "cudaMemcpyAsync (results)");
      check(cudaMemcpyAsync(set.down.p + set.ivar_bytes_off, set.ivar.p, np_ * sizeof(float),
                            cudaMemcpyDeviceToHost, set.stream),
            "cudaMemcpyAsync (ivar)");
      check(cudaEventRecord(set.done, set.stream), "cudaEventRecord");
    };
    if (staged_engine_) {
      // The host drives the rounds: on a thread of the set's own, so that this thread packs the
      // next batch meanwhile (finish() joins it).
      int arms = 1;
      for (const auto& bs : hb.spec) arms = std::max(arms, bs.n_arms);
      set.error = nullptr;
      set.runner = std::thread([this, &set, v, bd = model_basis_d_, arms, download] {
        try {
          check(cudaSetDevice(device_), "cudaSetDevice (staged engine)");
          set.staged->run(v, bd, arms);
          download();
        } catch (...) {
          set.error = std::current_exception();
        }
      });
    } else {
      if (kinds_engine_) {
        if (!set.engine) set.engine = std::make_unique<EngineLauncher>(n_slots_, set.stream);
        set.engine->launch(v);
      } else {
        launch_fit_batch(v, set.counter.p, set.stream);
      }
      download();
    }
    set.busy = true;
    set.ticket = ticket;
    set.first = first;
    set.spec_h = hb.spec;
  }

  // Wait for the set's batch and move its results into the output of the submit it belongs to.
  void finish(BufferSet& set) {
    if (set.runner.joinable()) {
      set.runner.join();
      if (set.error) {
        set.busy = false;
        std::rethrow_exception(std::exchange(set.error, nullptr));
      }
    }
    check(cudaEventSynchronize(set.done), "fit kernel batch");
    set.busy = false;
    if (kinds_engine_) set.engine->check_finished();
    auto it = std::find_if(pending_.begin(), pending_.end(),
                           [&](const Pending& p) { return p.ticket == set.ticket; });
    if (it == pending_.end()) throw std::logic_error("CudaBackend: batch without a submit");
    const auto* res = reinterpret_cast<const kern::PipelineResult*>(set.down.p);
    const auto* iv = reinterpret_cast<const float*>(set.down.p + set.ivar_bytes_off);
    for (size_t k = 0; k < set.spec_h.size(); ++k) {
      const auto& bs = set.spec_h[k];
      it->out.results[set.first + k] = res[k];
      it->out.ivar[set.first + k].assign(iv + bs.pix_off, iv + bs.pix_off + bs.n_pix);
    }
    --it->in_flight;
    it->n_done += set.spec_h.size();
    if (it->on_done) it->on_done(it->n_done);
  }

  const TemplateLibrary& lib_;
  kern::PipelineConfig pc_;
  int device_;
  size_t min_batch_;
  ThreadPool* pool_;  // packs the batches (may be null)
  std::string name_;
  int n_slots_ = 1;
  bool kinds_engine_ = false;
  bool staged_engine_ = false;
  kern::EmulatorView em_;
  DevArray<double> train_x_, alpha_, poly_, ccf_labels_;
  // Per arm model: its basis, CCF templates and (staged engine) FP64 basis.
  std::map<const ArmModel*, std::tuple<DevArray<float>, DevArray<float>, DevArray<double>>> models_;
  std::vector<const float*> model_basis_;
  std::vector<const double*> model_basis_d_;  // the batch's FP64 bases, in model_basis_' order
  BufferSet sets_[kSets];
  int next_set_ = 0;
  size_t held_bytes_ = 0;
  size_t next_ticket_ = 0;
  std::deque<Pending> pending_;
};

}  // namespace

GpuInfo query_gpus() {
  GpuInfo g;
  g.compiled = true;
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    g.message = std::string("cudaGetDeviceCount: ") + cudaGetErrorString(e) + " (error " +
                std::to_string(static_cast<int>(e)) + ")";
    return g;
  }
  g.device_count = n;
  if (n == 0) g.message = "no CUDA device";
  return g;
}

std::unique_ptr<Backend> make_cuda_backend(const TemplateLibrary& lib,
                                           const kern::PipelineConfig& pc, int device,
                                           size_t min_batch, ThreadPool* pool) {
  return std::make_unique<CudaBackend>(lib, pc, device, min_batch, pool);
}

}  // namespace velox
