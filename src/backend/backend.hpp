// The backend seam: every fit goes prepare (host, fit/fitter.hpp) -> Backend (the kernels on
// some device) -> finish_row (host). CpuBackend runs kern::fit_one with the serial team on a
// pool of threads; the CUDA backend (make_cuda_backend, backend/gpu.hpp) with a warp per spectrum.
// Both fit from the one batch layout of kernels/batch.hpp.
#pragma once
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend/batch.hpp"
#include "common/thread_pool.hpp"
#include "fit/fitter.hpp"

namespace velox {

// What a batch needs from a backend (for supports()).
struct BatchRequest {
  size_t n_spectra = 0;
  bool matrices = false;  // some spectrum has resolution-matrix arms
  bool models = false;    // best-fit models wanted (--save-models)
};

// The fit of one batch, in the order of the submitted spectra.
struct BatchOutput {
  std::vector<kern::PipelineResult> results;
  std::vector<std::vector<float>> ivar;     // working ivar after clipping, [n_pix] each
  std::vector<std::vector<double>> models;  // best-fit model at the used pixels (when asked;
                                            // empty for a failed fit)
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  // Empty when the backend can fit such a batch, else why not ("no resolution matrices", ...).
  virtual std::string unsupported(const BatchRequest& r) const = 0;
  bool supports(const BatchRequest& r) const { return unsupported(r).empty(); }
  // Spectra per submit that keep the device busy (the engine accumulates chunks this large).
  virtual size_t preferred_batch() const = 0;

  // Start fitting `specs`: the packed arrays of ready spectra (PreparedSpectrum::packed; the
  // backend sees no catalog row). The backend reads them only until submit returns: it copies
  // each into its batch (HostBatch), then calls `on_packed(i)` (may be empty), after which the
  // caller may free spec i's arrays (Packed::release_fit_arrays). on_packed runs on the
  // backend's pool threads, for several i at once: it must be thread-safe.
  // `on_done(n)` (may be empty) reports spectra completed in this batch, from any thread. A backend
  // may fit synchronously here (CPU) or asynchronously (CUDA). Throws std::runtime_error on device
  // errors.
  virtual void submit(std::vector<const Packed*> specs, bool want_models,
                      std::function<void(size_t)> on_done,
                      std::function<void(size_t)> on_packed) = 0;
  // The output of the oldest submitted batch not yet collected; blocks until it is done.
  virtual BatchOutput collect() = 0;

  // submit + collect.
  BatchOutput run(std::vector<const Packed*> specs, bool want_models = false,
                  std::function<void(size_t)> on_done = {}) {
    submit(std::move(specs), want_models, std::move(on_done), {});
    return collect();
  }
};

// The CPU backend: every thread of `pool` is a slot fitting whole spectra with the serial team.
// Results do not depend on the thread count (each spectrum's fit reads only its own inputs).
class CpuBackend : public Backend {
 public:
  CpuBackend(const TemplateLibrary& lib, const kern::PipelineConfig& pc, ThreadPool& pool)
      : lib_(lib), pc_(pc), pool_(pool) {}
  std::string name() const override { return "cpu"; }
  std::string unsupported(const BatchRequest&) const override { return {}; }
  size_t preferred_batch() const override { return 4 * static_cast<size_t>(pool_.size()); }
  void submit(std::vector<const Packed*> specs, bool want_models,
              std::function<void(size_t)> on_done, std::function<void(size_t)> on_packed) override;
  BatchOutput collect() override;

  // Fit one spectrum now, on the calling thread, which must be worker `worker` of the pool (its
  // own scratch: the pool's workers may each call this at the same time). The fit stream
  // (app/stream_pipeline.hpp) takes spectra one at a time this way. Same results as submit().
  BatchOutput fit_one(const Packed& spec, int worker, bool want_models);

 private:
  const TemplateLibrary& lib_;
  kern::PipelineConfig pc_;
  ThreadPool& pool_;
  SlotScratch scratch_;
  std::vector<SlotScratch> worker_scratch_ = std::vector<SlotScratch>(pool_.size());
  std::deque<BatchOutput> done_;  // submitted, not yet collected (oldest first)
};

// Fit one batch on the calling thread with one slot (what fit_spectrum uses).
BatchOutput fit_batch_serial(const std::vector<const Packed*>& specs, const TemplateLibrary& lib,
                             const kern::PipelineConfig& pc, bool want_models);

// One spectrum, start to end: prepare_spectrum -> a one-spectrum batch on the CPU backend's
// serial path (fit_batch_serial) -> finish_row. Never throws for data problems: they become
// RVS_WARN bits with SUCCESS=false. `diag` (may be null) gets the fit's diagnostics.
CatalogRow fit_spectrum(const Spectrum& spec, const FitContext& ctx,
                        FitDiagnostics* diag = nullptr);

}  // namespace velox
