// The batched engine's control (kernels/engine.hpp, issue 51) on the host, against fit_one, on
// real spectra: a batch of LAMOST DR10 and DESI-layout (resolution-matrix) spectra, full fits
// and held-label fits of --epochs mixed, run over fewer slots than spectra (so that finished
// slots take new spectra), with requests served grouped by kind and evaluations in two stage
// passes. With the lane team (the warp's arithmetic, kernels/team.hpp) every spectrum's result
// and clipped pixels must be fit_one's bit for bit: the engine only interleaves the same steps
// and served functions over the slots. The device runs the same functions as kernels
// (src/backend/cuda/engine_kernel.cu).
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <vector>

#include "backend/batch.hpp"
#include "emulator/build.hpp"
#include "fit/fitter.hpp"
#include "io/readers.hpp"
#include "kernels/engine.hpp"
#include "kernels/team.hpp"
#include "test_util.hpp"
#include "thin_library.hpp"
#include "unit/kernels/real_spectra.hpp"

using namespace velox;

TEST_CASE("the batched engine's rounds with refill fit real spectra bit for bit as fit_one",
          "[kernels][engine][real]") {
  const auto& lib = test::thin_library();
  FitConfig cfg;         // resolution matrices on (the DESI default)
  cfg.fit_vsini = true;  // the VSINI branch and its upper limit run too
  ArmModelCache cache(lib);
  const std::vector<PreparedSpectrum> prepared = test::real_spectra(lib, cache, cfg, 4);
  REQUIRE(prepared.size() >= 8);
  const int n = static_cast<int>(prepared.size());
  // Each spectrum twice: a full fit, and a held-label fit (set below) at the first one's result.
  std::vector<const Packed*> specs;
  for (int pass = 0; pass < 2; ++pass)
    for (const auto& p : prepared) specs.push_back(&p.packed);
  HostBatch hb(specs, lib, pipeline_config(cfg, lib));
  const std::vector<float> ivar0 = hb.ivar;
  const kern::LaneTeam team;

  // Reference: fit_one and fit_velocity_held alone, spectrum after spectrum, in slot 0.
  SlotScratch one;
  one.ensure(1, hb.sizes_kept_rows());  // with the warp's kept rows (FitData::Tv)
  kern::BatchView b1 = hb.view(one);
  auto alone = [&](int s) {
    kern::FitData d;
    kern::PipelineScratch sc;
    const float* tmpl[kern::kMaxArms];
    kern::batch_views(b1, s, 0, &d, &sc, tmpl);
    if (b1.spec[s].held)
      kern::fit_velocity_held(team, b1.em, b1.grid, d, b1.cfg, b1.spec[s].held_theta, sc,
                              &b1.shared[0], &b1.results[s]);
    else
      kern::fit_one(team, b1.em, b1.grid, d, tmpl, b1.n_ccf, b1.ccf_labels, b1.cfg, sc,
                    &b1.shared[0], &b1.results[s]);
  };
  for (int s = 0; s < n; ++s) alone(s);
  for (int s = 0; s < n; ++s) {
    kern::BatchSpectrum& h = hb.spec[n + s];
    h.held = 1;
    for (int q = 0; q < kern::kMaxParams; ++q) h.held_theta[q] = hb.results[s].best.theta[q];
    h.held_theta[0] += 5.0;  // VRAD moved 5 km/s from the joint value
  }
  for (int s = n; s < 2 * n; ++s) alone(s);
  const std::vector<kern::PipelineResult> ref = hb.results;
  const std::vector<float> ivar_ref = hb.ivar;

  // The engine: fewer slots than spectra, from the original ivar.
  hb.ivar = ivar0;
  std::fill(hb.results.begin(), hb.results.end(), kern::PipelineResult{});
  const int n_slots = std::max(3, n / 3);
  SlotScratch scratch;
  scratch.ensure(n_slots, hb.sizes_kept_rows());
  kern::EngineCtl ctl;
  ctl.b = hb.view(scratch);
  ctl.b.n_slots = n_slots;
  std::vector<int> list(static_cast<size_t>(kern::kNumReqKinds) * n_slots), slot_spec(n_slots);
  ctl.list = list.data();
  ctl.slot_spec = slot_spec.data();
  const auto st = kern::engine_run(team, &ctl, 100000);
  REQUIRE(st.finished);
  for (int s = 0; s < 2 * n; ++s) {
    INFO("spectrum " << s << (s >= n ? " (held labels)" : ""));
    test::require_same_fit(hb.results[s], ref[s]);
  }
  CHECK(hb.ivar == ivar_ref);  // the same pixels clipped
  for (int slot = 0; slot < n_slots; ++slot) CHECK(slot_spec[slot] == kern::kSlotDrained);
  // The velocity-only evaluations took the kept rows (reset when a slot takes a new spectrum).
  int n_kept = 0;
  for (int slot = 0; slot < n_slots; ++slot)
    n_kept += scratch.shared[slot].kept[0].basis != nullptr;
  CHECK(n_kept == n_slots);
  CHECK(ctl.next_spectrum >= 2 * n);  // every spectrum was taken
  int n_ok = 0, n_matrix = 0;
  for (int s = 0; s < n; ++s) {
    n_ok += ref[s].status == kern::kPipeOk;
    n_matrix += prepared[s].packed.n_full_total() > 0;
  }
  CHECK(n_ok >= 6);
  CHECK(n_matrix >= 2);  // resolution-matrix arms were served
  // Every kind was served, and the slots stayed busy: no round served more requests than there
  // are slots, and there were more requests than rounds x slots / 4 (a refill that left slots
  // idle until the batch ended would fail this: the longest fit alone needs ~100 rounds).
  long served = 0;
  for (int k = 1; k < kern::kNumReqKinds; ++k) {
    INFO("request kind " << k);
    CHECK(st.served[k] > 0);
    served += st.served[k];
  }
  CHECK(st.widest_round == n_slots);
  CHECK(served > st.rounds * n_slots / 4);
}
