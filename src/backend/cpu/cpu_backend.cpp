#include "backend/cpu/cpu_backend.hpp"

#include <sched.h>

#include <atomic>
#include <thread>

#include "backend/backend.hpp"
#include "backend/cpu/isa.hpp"

namespace velox {

namespace {

// Fit spectrum s of `b` in slot `slot` with the kernel of the active instruction set
// (backend/cpu/isa.hpp); with `model`, also the best-fit model at the used pixels.
void fit_in_slot(CpuFitKernel kernel, const kern::BatchView& b, int s, int slot,
                 std::vector<double>* model) {
  if (model) model->assign(b.spec[s].n_pix, 0.0);
  kernel(b, s, slot, model ? model->data() : nullptr);
  if (model && b.results[s].status != kern::kPipeOk) model->clear();
}

BatchOutput outputs_of(const HostBatch& hb, std::vector<std::vector<double>>&& models) {
  BatchOutput out;
  out.results = hb.results;
  out.ivar.resize(hb.spec.size());
  for (int s = 0; s < hb.n_spec(); ++s) out.ivar[s] = hb.ivar_of(s);
  out.models = std::move(models);
  return out;
}

}  // namespace

void CpuBackend::submit(std::vector<const Packed*> specs, bool want_models,
                        std::function<void(size_t)> on_done,
                        std::function<void(size_t)> on_packed) {
  if (specs.empty()) {
    done_.emplace_back();
    return;
  }
  HostBatch hb(specs, lib_, pc_, on_packed, &pool_);
  scratch_.ensure(pool_.size(), hb.sizes());
  const kern::BatchView b = hb.view(scratch_);
  std::vector<std::vector<double>> models(want_models ? specs.size() : 0);
  std::atomic<size_t> n_done{0};
  const CpuFitKernel kernel = cpu_fit_kernel();
  pool_.for_each(specs.size(), [&](size_t s, int worker) {
    fit_in_slot(kernel, b, static_cast<int>(s), worker, want_models ? &models[s] : nullptr);
    const size_t n = ++n_done;
    if (on_done) on_done(n);
  });
  done_.push_back(outputs_of(hb, std::move(models)));
}

BatchOutput CpuBackend::fit_one(const Packed& spec, int worker, bool want_models) {
  HostBatch hb({&spec}, lib_, pc_);
  SlotScratch& scratch = worker_scratch_.at(static_cast<size_t>(worker));
  scratch.ensure(1, hb.sizes());
  const kern::BatchView b = hb.view(scratch);
  std::vector<std::vector<double>> models(want_models ? 1 : 0);
  fit_in_slot(cpu_fit_kernel(), b, 0, 0, want_models ? &models[0] : nullptr);
  return outputs_of(hb, std::move(models));
}

BatchOutput CpuBackend::collect() {
  BatchOutput out = std::move(done_.front());
  done_.pop_front();
  return out;
}

BatchOutput fit_batch_serial(const std::vector<const Packed*>& specs, const TemplateLibrary& lib,
                             const kern::PipelineConfig& pc, bool want_models) {
  HostBatch hb(specs, lib, pc);
  SlotScratch scratch;
  scratch.ensure(1, hb.sizes());
  const kern::BatchView b = hb.view(scratch);
  std::vector<std::vector<double>> models(want_models ? specs.size() : 0);
  const CpuFitKernel kernel = cpu_fit_kernel();
  for (int s = 0; s < hb.n_spec(); ++s)
    fit_in_slot(kernel, b, s, 0, want_models ? &models[s] : nullptr);
  return outputs_of(hb, std::move(models));
}

CatalogRow fit_spectrum(const Spectrum& spec, const FitContext& ctx, FitDiagnostics* diag) {
  PreparedSpectrum p = prepare_spectrum(spec, ctx);
  if (diag) diag->messages = p.notes;
  if (!p.ready) return p.row;
  // The numerical fit: a one-spectrum batch on the serial team (the CPU backend's path).
  const BatchOutput out =
      fit_batch_serial({&p.packed}, ctx.lib, pipeline_config(ctx.cfg, ctx.lib), diag != nullptr);
  if (diag) diagnostics_of(p, spec, nullptr, out.ivar[0], out.models[0], diag);
  finish_row(p, out.results[0], out.ivar[0], ctx);
  if (diag && out.results[0].status != kern::kPipeOk) diag->messages.push_back(p.notes.back());
  return p.row;
}

int default_thread_count() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

}  // namespace velox
