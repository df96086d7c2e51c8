// The batched executor (kernels/batch_exec.hpp, issue 51) against fit_one, on real spectra: many
// spectra stepped in lockstep rounds, their requests served grouped by kind, must give every
// spectrum's fit bit for bit as fit_one gives it alone (the same machine steps, the same served
// functions on the same scratch, with the CPU's forms and their per-spectrum row cache), for the
// full fit and the held-label fit of --epochs. (That fit_one itself still gives the fits it gave
// before it became a machine is checked on catalogs: docs/gpu.md; compare_reference's accuracy
// figures in the integration tests.)
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "backend/cpu/isa/simd_forms.hpp"
#include "emulator/build.hpp"
#include "fit/fitter.hpp"
#include "io/readers.hpp"
#include "kernels/batch_exec.hpp"
#include "kernels/team.hpp"
#include "unit/kernels/real_spectra.hpp"
#include "test_util.hpp"
#include "thin_library.hpp"

using namespace velox;

namespace {

// One prepared spectrum with the scratch a backend would give it (as test_teams.cpp fit_with).
struct Rig {
  std::vector<double> T, dT, fn, wts, frac, ccf, acc, emu, Tf, dTf, Tg, Tr;
  // The CPU's forms (as the backend gives them, cpu_fit_extras): the transposed basis and the
  // convolved rows kept between velocity-only evaluations, per spectrum.
  std::unique_ptr<kern::CpuFitExtras> extras = std::make_unique<kern::CpuFitExtras>();
  std::vector<int> t0;
  std::vector<float> ivar, rm;
  std::vector<const float*> tmpl;
  std::unique_ptr<kern::PipelineShared> sh = std::make_unique<kern::PipelineShared>();
  kern::PipelineResult out{};
  kern::FitSlot slot;
  Rig(const PreparedSpectrum& p, const TemplateLibrary& lib, const kern::PipelineConfig& pc) {
    const Packed& all = p.packed;
    const auto em = lib.view();
    const int np = kern::n_fit_params(lib.n_label, 1), n = static_cast<int>(all.flux.size());
    const int n_out = std::max(kern::ccf_lags(pc, lib.grid()), 7);
    T.resize(n), dT.resize(static_cast<size_t>(n) * np), fn.resize(n), wts.resize(n);
    frac.resize(n), ccf.resize(n_out), acc.resize(8 * static_cast<size_t>(n_out));
    emu.resize(static_cast<size_t>(kern::emulator_scratch_size(em)));
    t0.resize(n);
    ivar.assign(all.ivar.begin(), all.ivar.end());
    Tf.resize(all.n_full_total()), dTf.resize(all.n_full_total() * np);
    rm.resize(all.n_rm_total());
    Tg.resize(static_cast<size_t>(lib.n_tpix) * np);
    slot.d = all.view(Tf.data(), dTf.data(), rm.data());
    slot.d.Tg = Tg.data();
    slot.d.ivar = ivar.data();
    Tr.resize(static_cast<size_t>(lib.n_tpix) * (np + 1));
    extras->Tr = Tr.data();
    extras->tr_cols = np + 1;
    for (int a = 0; a < all.n_arms; ++a) extras->basis_t[a] = all.models[a]->basis_t.data();
    slot.d.cpu = extras.get();
    slot.sc = {T.data(), dT.data(), fn.data(), wts.data(), frac.data(),
               t0.data(), ivar.data(), ccf.data(), acc.data(), emu.data()};
    tmpl.assign(kern::kMaxArms, nullptr);
    for (int a = 0; a < all.n_arms; ++a) tmpl[a] = all.models[a]->ccf_templates.data();
    slot.ccf_tmpl = tmpl.data();
    slot.n_ccf = all.models[0]->n_ccf;
    slot.ccf_labels = lib.ccf_labels.data();
    slot.sh = sh.get();
    slot.out = &out;
  }
};

}  // namespace

TEST_CASE("the batched executor fits real spectra bit for bit as fit_one does",
          "[kernels][batch][real]") {
  const auto& lib = test::thin_library();
  FitConfig cfg;         // resolution matrices on (the DESI default)
  cfg.fit_vsini = true;  // the VSINI branch and its upper limit run too
  ArmModelCache cache(lib);
  const kern::PipelineConfig pc = pipeline_config(cfg, lib);
  const auto em = lib.view();
  const auto grid = lib.grid();
  using CpuTeam = kern::cpu::SimdTeam<>;
  // LAMOST DR10 (one arm, two velocity segments) and the DESI-layout coadd (three arms with
  // resolution matrices): at most 6 files and 6 ready spectra per file.
  const std::vector<PreparedSpectrum> prepared = test::real_spectra(lib, cache, cfg, 6);
  REQUIRE(prepared.size() >= 10);
  // Alone: fit_one per spectrum; then the held-label fit of each at its solution, v moved 5 km/s.
  std::vector<std::unique_ptr<Rig>> alone, batch;
  std::vector<kern::PipelineResult> ref_fit, ref_held;
  std::vector<std::vector<double>> held(prepared.size(), std::vector<double>(kern::kMaxParams));
  for (size_t i = 0; i < prepared.size(); ++i) {
    auto r = std::make_unique<Rig>(prepared[i], lib, pc);
    const auto& s = r->slot;
    kern::fit_one(CpuTeam{}, em, grid, s.d, s.ccf_tmpl, s.n_ccf, s.ccf_labels, pc, s.sc, s.sh,
                  s.out);
    ref_fit.push_back(r->out);
    for (int q = 0; q < kern::kMaxParams; ++q) held[i][q] = r->out.best.theta[q];
    held[i][0] += 5.0;
    auto h = std::make_unique<Rig>(prepared[i], lib, pc);
    kern::fit_velocity_held(CpuTeam{}, em, grid, h->slot.d, pc, held[i].data(), h->slot.sc,
                            h->slot.sh, h->slot.out);
    ref_held.push_back(h->out);
    alone.push_back(std::move(r));
  }
  // Batched: every spectrum's full fit and held fit in one batch, in lockstep rounds.
  std::vector<kern::FitSlot> slots;
  for (size_t i = 0; i < prepared.size(); ++i) {
    batch.push_back(std::make_unique<Rig>(prepared[i], lib, pc));
    slots.push_back(batch.back()->slot);
    batch.push_back(std::make_unique<Rig>(prepared[i], lib, pc));
    batch.back()->slot.held_theta = held[i].data();
    slots.push_back(batch.back()->slot);
  }
  std::vector<int> active(slots.size());
  const auto st = kern::fit_batched(CpuTeam{}, em, grid, pc, slots.data(),
                                    static_cast<int>(slots.size()), active.data());
  REQUIRE(st.finished);  // every machine ended (within the executor's round cap)
  int n_ok = 0, n_vsini = 0, n_matrix = 0;
  for (size_t i = 0; i < prepared.size(); ++i) {
    INFO("spectrum " << i);
    test::require_same_fit(batch[2 * i]->out, ref_fit[i]);
    test::require_same_fit(batch[2 * i + 1]->out, ref_held[i]);
    CHECK(batch[2 * i]->ivar == alone[i]->ivar);  // the same pixels clipped
    n_ok += ref_fit[i].status == kern::kPipeOk;
    n_vsini += ref_fit[i].status == kern::kPipeOk && !std::isnan(ref_fit[i].dchi2_vsini0);
    n_matrix += prepared[i].packed.n_full_total() > 0;
  }
  CHECK(n_ok >= 10);
  CHECK(n_vsini >= 10);  // the VSINI probe and upper-limit steps were exercised
  CHECK(n_matrix >= 4);  // and the resolution-matrix arms
  // Lockstep: a round serves one request of every active spectrum (the first round all of
  // them), so the rounds are those of the longest fit, not the sum; every kind was served.
  long served = 0, longest = 0;
  for (int k = 1; k < kern::kNumReqKinds; ++k) {
    INFO("request kind " << k);
    CHECK(st.served[k] > 0);
    served += st.served[k];
  }
  CHECK(st.widest_round == static_cast<int>(slots.size()));
  // Every full evaluation (n_eval[0], n_eval[1]) is a request of its own (the outlier clip's
  // too), so the longest fit needs at least that many rounds; velocity-only ones (n_eval[2]) are
  // not: the moments grid's 13 share one request.
  for (const auto& r : ref_fit) longest = std::max<long>(longest, r.n_eval[0] + r.n_eval[1]);
  CHECK(st.rounds >= longest);
  CHECK(st.rounds < served / 10);   // and far fewer rounds than requests served
}
