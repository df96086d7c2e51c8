// The batched executor's control flow (issue 51; docs/gpu.md "The batched engine"): many
// spectra's fits advance together. Each round steps every active spectrum's machine
// (fit_step / held_step, kernels/fit_pipeline.hpp) to its next request, then serves the requests
// grouped by kind (every kReqCcf, then every kReqGrid, ..., every kReqEval), one pass per kind;
// a spectrum whose machine is done leaves the batch. This is the device engine's schedule
// (control kernel, compaction by kind, one pass of stage kernels per kind), run here on the host
// with any team serving each spectrum's request: the same steps and the same served functions as
// fit_one, so the results are bitwise fit_one's (tests/unit/kernels/test_batch_exec.cpp).
// What differs on the device is only how a pass over one kind is decomposed (stage kernels over
// many spectra); a stage that sums in another order states its tolerance there.
#pragma once
#include "kernels/fit_pipeline.hpp"

namespace velox::kern {

// One spectrum of a batch: fit_one's (or fit_velocity_held's, with held_theta) arguments.
struct FitSlot {
  FitData d;
  const float* const* ccf_tmpl = nullptr;
  int n_ccf = 0;
  const double* ccf_labels = nullptr;
  PipelineScratch sc{};
  PipelineShared* sh = nullptr;
  PipelineResult* out = nullptr;
  const double* held_theta = nullptr;  // non-null: fit_velocity_held at these labels
};

// Per-round counts of a batched run: requests served per kind, rounds, the most requests one
// round served, and whether every machine finished within max_rounds.
struct BatchExecStats {
  long rounds = 0;
  long served[kNumReqKinds] = {};
  int widest_round = 0;
  bool finished = true;
};

// Fit every slot (shared library views em, g and configuration cfg) in lockstep rounds. `active`
// is caller scratch of n ints. Stops after max_rounds (a machine that never finishes is a bug:
// stats.finished is then false). Returns the rounds' statistics.
template <class Team>
BatchExecStats fit_batched(const Team& team, const EmulatorView& em, const GridView& g,
                           const PipelineConfig& cfg, FitSlot* slots, int n, int* active,
                           long max_rounds = 100000) {
  BatchExecStats st;
  for (int i = 0; i < n; ++i) {
    slots[i].sh->fm.pc = 0;
    slots[i].sh->hm.pc = 0;
    active[i] = 1;
  }
  for (;;) {
    int n_active = 0;
    for (int i = 0; i < n; ++i) {
      if (!active[i]) continue;
      FitSlot& s = slots[i];
      active[i] = s.held_theta
                      ? held_step<Team>(s.sh->hm, em.n_label, s.d, cfg, s.held_theta, s.sc, s.sh,
                                        s.out, &s.sh->rq)
                      : fit_step<Team>(s.sh->fm, em.n_label, g, s.d, s.n_ccf, s.ccf_labels, cfg,
                                       s.sc, s.sh, s.out, &s.sh->rq);
      n_active += active[i];
    }
    if (n_active == 0) break;
    if (st.rounds == max_rounds) {
      st.finished = false;
      break;
    }
    ++st.rounds;
    if (n_active > st.widest_round) st.widest_round = n_active;
    for (int kind = kReqNone + 1; kind < kNumReqKinds; ++kind)
      for (int i = 0; i < n; ++i) {
        if (!active[i] || slots[i].sh->rq.kind != kind) continue;
        FitSlot& s = slots[i];
        serve_request(team, &s.sh->rq, em, g, s.d, s.ccf_tmpl, cfg, s.sc, s.sh, s.out);
        team.sync();
        ++st.served[kind];
      }
  }
  return st;
}

}  // namespace velox::kern
