#include "backend/cpu/cpu_backend.hpp"

#include <sched.h>

#include <atomic>
#include <thread>

#include "backend/backend.hpp"
#include "kernels/team.hpp"

namespace velox {

namespace {

// Fit spectrum s of `b` in slot `slot` with the serial team; with `model`, also the best-fit
// model at the used pixels (fit_one's last evaluation is the continuum-only one, so the stellar
// model is evaluated again at the solution).
void fit_in_slot(const kern::BatchView& b, int s, int slot, std::vector<double>* model) {
  kern::FitData d;
  kern::PipelineScratch sc;
  const float* tmpl[kern::kMaxArms] = {};
  kern::batch_views(b, s, slot, &d, &sc, tmpl);
  kern::PipelineShared* sh = b.shared + slot;
  kern::PipelineResult* res = b.results + s;
  const kern::SerialTeam team;
  kern::fit_one(team, b.em, b.grid, d, tmpl, b.n_ccf, b.ccf_labels, b.cfg, sc, sh, res);
  if (!model || res->status != kern::kPipeOk) return;
  kern::evaluate(team, &b.em, b.grid, d, b.cfg.cont_deg, res->best.theta, false, &sh->w, sc.T,
                 sc.dT);
  model->resize(d.n_pix);
  kern::model_at_pixels(team, d, b.cfg.cont_deg, sc.T, &sh->w, model->data());
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

void CpuBackend::submit(std::vector<const PreparedSpectrum*> specs, bool want_models,
                        std::function<void(size_t)> on_done) {
  if (specs.empty()) {
    done_.emplace_back();
    return;
  }
  HostBatch hb(specs, lib_, pc_);
  scratch_.ensure(pool_.size(), hb.sizes());
  const kern::BatchView b = hb.view(scratch_);
  std::vector<std::vector<double>> models(want_models ? specs.size() : 0);
  std::atomic<size_t> n_done{0};
  pool_.for_each(specs.size(), [&](size_t s, int worker) {
    fit_in_slot(b, static_cast<int>(s), worker, want_models ? &models[s] : nullptr);
    const size_t n = ++n_done;
    if (on_done) on_done(n);
  });
  done_.push_back(outputs_of(hb, std::move(models)));
}

BatchOutput CpuBackend::fit_one(const PreparedSpectrum& spec, int worker, bool want_models) {
  HostBatch hb({&spec}, lib_, pc_);
  SlotScratch& scratch = worker_scratch_.at(static_cast<size_t>(worker));
  scratch.ensure(1, hb.sizes());
  const kern::BatchView b = hb.view(scratch);
  std::vector<std::vector<double>> models(want_models ? 1 : 0);
  fit_in_slot(b, 0, 0, want_models ? &models[0] : nullptr);
  return outputs_of(hb, std::move(models));
}

BatchOutput CpuBackend::collect() {
  BatchOutput out = std::move(done_.front());
  done_.pop_front();
  return out;
}

BatchOutput fit_batch_serial(const std::vector<const PreparedSpectrum*>& specs,
                             const TemplateLibrary& lib, const kern::PipelineConfig& pc,
                             bool want_models) {
  HostBatch hb(specs, lib, pc);
  SlotScratch scratch;
  scratch.ensure(1, hb.sizes());
  const kern::BatchView b = hb.view(scratch);
  std::vector<std::vector<double>> models(want_models ? specs.size() : 0);
  for (int s = 0; s < hb.n_spec(); ++s) fit_in_slot(b, s, 0, want_models ? &models[s] : nullptr);
  return outputs_of(hb, std::move(models));
}

int default_thread_count() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

}  // namespace velox
