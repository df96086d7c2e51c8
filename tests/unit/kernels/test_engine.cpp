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
#include <cstdio>
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

namespace {

// A batch of every spectrum twice: a full fit, and a held-label fit of --epochs at the first one's
// result with VRAD moved 5 km/s. ref, ivar_ref: fit_one and fit_velocity_held alone with the lane
// team, spectrum after spectrum, in slot 0 (with the warp's kept rows, FitData::Tv); the batch is
// then left with its original ivar and empty results. engine(n_slots): the control of a run over
// n_slots slots (fewer than spectra: finished slots take new ones).
struct EngineCase {
  static std::vector<const Packed*> twice(const std::vector<PreparedSpectrum>& prepared) {
    std::vector<const Packed*> specs;
    for (int pass = 0; pass < 2; ++pass)
      for (const auto& p : prepared) specs.push_back(&p.packed);
    return specs;
  }
  EngineCase(const TemplateLibrary& lib, const FitConfig& cfg,
             const std::vector<PreparedSpectrum>& prepared)
      : n(static_cast<int>(prepared.size())), hb(twice(prepared), lib, pipeline_config(cfg, lib)) {
    const UninitVector<float> ivar0 = hb.ivar;
    SlotScratch one;
    one.ensure(1, hb.sizes_kept_rows());
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
    ref = hb.results;
    ivar_ref = hb.ivar;
    hb.ivar = ivar0;
    std::fill(hb.results.begin(), hb.results.end(), kern::PipelineResult{});
  }
  kern::EngineCtl engine(int n_slots) {
    scratch.ensure(n_slots, hb.sizes_kept_rows());
    kern::EngineCtl ctl;
    ctl.b = hb.view(scratch);
    ctl.b.n_slots = n_slots;
    list.assign(static_cast<size_t>(kern::kNumReqKinds) * n_slots, 0);
    slot_spec.assign(n_slots, 0);
    ctl.list = list.data();
    ctl.slot_spec = slot_spec.data();
    return ctl;
  }
  // The staged engine's per-template item buffers for `cap` items (TemplateItems), sized from the
  // batch's slot strides as the device sizes them.
  void items(kern::EngineCtl* ctl, int cap) {
    ctl->items.cap = cap;
    ctl->items.t_stride = kern::template_items_stride(ctl->b);
    items_T.assign(static_cast<size_t>(cap) * ctl->items.t_stride, 0.0);
    items_work.assign(cap, kern::EvalWork{});
    ctl->items.T = items_T.data();
    ctl->items.work = items_work.data();
  }
  const kern::LaneTeam team{};
  std::vector<double> items_T;
  std::vector<kern::EvalWork> items_work;
  int n;
  HostBatch hb;
  std::vector<kern::PipelineResult> ref;
  UninitVector<float> ivar_ref;
  SlotScratch scratch;
  std::vector<int> list, slot_spec;
};

}  // namespace

TEST_CASE("the batched engine's rounds with refill fit real spectra bit for bit as fit_one",
          "[kernels][engine][real]") {
  const auto& lib = test::thin_library();
  FitConfig cfg;         // resolution matrices on (the DESI default)
  cfg.fit_vsini = true;  // the VSINI branch and its upper limit run too
  ArmModelCache cache(lib);
  const std::vector<PreparedSpectrum> prepared = test::real_spectra(lib, cache, cfg, 4);
  REQUIRE(prepared.size() >= 8);
  EngineCase c(lib, cfg, prepared);
  const int n = c.n;
  const auto& ref = c.ref;
  const auto& hb = c.hb;
  const int n_slots = std::max(3, n / 3);
  kern::EngineCtl ctl = c.engine(n_slots);
  const auto& slot_spec = c.slot_spec;
  const auto& scratch = c.scratch;
  const auto& team = c.team;
  const auto st = kern::engine_run(team, &ctl, 100000);
  REQUIRE(st.finished);
  for (int s = 0; s < 2 * n; ++s) {
    INFO("spectrum " << s << (s >= n ? " (held labels)" : ""));
    test::require_same_fit(hb.results[s], ref[s]);
  }
  CHECK(hb.ivar == c.ivar_ref);  // the same pixels clipped
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

// The staged engine's per-template items (TemplateItems): every coarse template of every chi^2
// grid and coarse CCF request of a round served as an item of its own, in chunks of a few items
// (7: the rounds at the batch's start have every slot's 40 grid templates or 8 CCF templates, so
// a round takes many chunks, and chunks end inside a request's templates). The items call the
// functions the per-request serve calls, with their own buffers: every fit is fit_one's bit for
// bit. A template served twice, skipped or written to another template's entry changes the
// grid's order or the CCF's best template, and with them the starts of most fits (writing each
// grid template's chi^2 to its neighbour's entry fails 158 of this test's checks).
TEST_CASE(
    "the staged engine's chi^2 grid and CCF per (request, template) fit real spectra bit "
    "for bit",
    "[kernels][engine][real]") {
  const auto& lib = test::thin_library();
  FitConfig cfg;
  cfg.fit_vsini = true;
  ArmModelCache cache(lib);
  const std::vector<PreparedSpectrum> prepared = test::real_spectra(lib, cache, cfg, 4);
  REQUIRE(prepared.size() >= 8);
  EngineCase c(lib, cfg, prepared);
  const int n = c.n, n_slots = std::max(3, n / 3);
  kern::EngineCtl ctl = c.engine(n_slots);
  c.items(&ctl, 7);
  const auto st = kern::engine_run(c.team, &ctl, 100000);
  REQUIRE(st.finished);
  for (int s = 0; s < 2 * n; ++s) {
    INFO("spectrum " << s << (s >= n ? " (held labels)" : ""));
    test::require_same_fit(c.hb.results[s], c.ref[s]);
  }
  CHECK(c.hb.ivar == c.ivar_ref);
  // Every full fit asked for one grid of n_ccf templates and two CCFs (coarse, then fine), held-
  // label fits for none.
  const int per_ccf = kern::template_items_per_request<kern::kReqCcf>(ctl.b);
  CHECK(c.hb.n_ccf > 7);
  CHECK(per_ccf == std::min(c.hb.n_ccf, cfg.n_ccf_templates));
  CHECK(st.served[kern::kReqGrid] == n);
  CHECK(st.items[kern::kReqGrid] == static_cast<long>(n) * c.hb.n_ccf);
  CHECK(st.served[kern::kReqCcf] == 2 * n);
  CHECK(st.items[kern::kReqCcf] == 2L * n * per_ccf);
  CHECK(st.item_chunks >= (st.items[kern::kReqGrid] + st.items[kern::kReqCcf]) / 7);
}

// The staged engine's emulator product (kernels/emulator_eval.hpp): the row weights of several
// requests in one column-major matrix, phase 2 for all of them at once (emulator_gemm_host, the
// host's form of the device's DGEMM), then each request's coefficients, against
// emulator_coeffs_team with the lane team (the warp's arithmetic) one request at a time: the
// same sums in the same order, so bit for bit, for labels across the library's grid (near
// training stars, between them, at its edges where most kernel rows are skipped).
TEST_CASE("the emulator's coefficients as one product over requests are emulator_coeffs_team's",
          "[kernels][engine]") {
  const auto& lib = test::thin_library();
  const kern::EmulatorView em = lib.view();
  const int L = em.n_label, K1 = em.n_comp, W = 1 + L, n_req = 5;
  REQUIRE(L == 3);
  const double labels[n_req][3] = {{std::log10(5800.0), 4.4, 0.0},
                                   {std::log10(4600.0), 2.5, -0.5},
                                   {std::log10(3600.0), 4.8, 0.2},
                                   {std::log10(6800.0), 4.0, -1.5},
                                   {std::log10(5200.0), 3.6, -2.4}};
  const long long ld = kern::rows_emu_ld(n_req + 2, L);  // wider than the requests, as the device
  std::vector<double> rows(ld * (em.n_poly + em.n_train), NAN), sums(ld * (K1 - 1), NAN);
  const kern::LaneTeam team{};
  for (int i = 0; i < n_req; ++i) {
    double x[kern::kMaxLabels];
    kern::emulator_scaled(em, labels[i], x);
    kern::emulator_rows(team, em, x, rows.data() + i * W, ld, 1);
  }
  kern::emulator_gemm_host(em, n_req, ld, rows.data(), sums.data());
  std::vector<double> scratch(kern::emulator_scratch_size(em));
  int n_skipped = 0;
  for (int i = 0; i < n_req; ++i) {
    INFO("request " << i);
    std::vector<double> c(K1), dc(L * K1), c_ref(K1), dc_ref(L * K1);
    kern::emulator_finish(team, em, sums.data() + i * W, ld, 1, c.data(), dc.data());
    kern::emulator_coeffs_team(team, em, labels[i], scratch.data(), c_ref.data(), dc_ref.data());
    CHECK(std::memcmp(c.data(), c_ref.data(), sizeof(double) * K1) == 0);
    CHECK(std::memcmp(dc.data(), dc_ref.data(), sizeof(double) * L * K1) == 0);
    CHECK(c_ref[1] != 0.0);
    for (int r = em.n_poly; r < em.n_poly + em.n_train; ++r)
      n_skipped += rows[r * ld + i * W] == 0.0;
  }
  CHECK(n_skipped > 0);  // the skipped rows (kernel value 0) were exercised
}

// The staged engine (kernels/rows_stage.hpp): the round's full evaluations in row stages (the
// coefficients per request, one GEMM per arm model over all of the round's requests, the pixels
// from the rows per request), against fit_one with the same lane team. The rows sum the model in
// another order than the lane team's unrotated per-pixel sums (rows first, then the stencil; with
// rotation the sums are the same), so the bar is the lane-vs-serial team bar of test_teams.cpp:
// the same status, iterations, evaluations and clipped pixels, chi^2 to 1e-10 relative,
// parameters to 1e-6 sigma (round-off moves LM's path by ~1e-12 sigma; an error in a row, a
// column or a span moves the model by far more than that: a column read one row off fails 58
// checks, a span one row short 51). Each spectrum is fitted twice: a full fit and a held-label
// fit of --epochs at the first one's labels. Returns the rotated fits (VSINI > 10 km/s).
// items_cap: the per-item buffers' cap in slots' worth (0: the chi^2 grid, the CCF and the
// moments grid served per request). results: the engine's results, when given.
static int staged_against_fit_one(const TemplateLibrary& lib, const FitConfig& cfg,
                                  const std::vector<PreparedSpectrum>& prepared, int items_cap = 2,
                                  std::vector<kern::PipelineResult>* results = nullptr) {
  EngineCase c(lib, cfg, prepared);
  const int n = c.n;
  const auto& ref = c.ref;
  const auto& hb = c.hb;
  const int n_slots = std::max(3, n / 3);
  kern::EngineCtl ctl = c.engine(n_slots);
  // The row stages' plan and buffers, sized as the device sizes them (rows_buffer_bound).
  kern::RowsRound rows;
  rows.n_groups = static_cast<int>(hb.models.size());
  rows.K1 = lib.n_comp;
  rows.ncol = kern::rows_ncol(lib.n_label);
  const int n_groups = rows.n_groups;
  std::vector<int> r_list(n_slots), g_count(n_groups), g_lo(n_groups), g_hi(n_groups),
      col(static_cast<size_t>(n_slots) * kern::kMaxArms);
  std::vector<long long> g_coef(n_groups), g_out(n_groups);
  int max_arms = 1;
  for (const auto& bs : hb.spec) max_arms = std::max(max_arms, bs.n_arms);
  kern::rows_buffer_bound(n_slots, max_arms, lib.n_tpix, rows.ncol, rows.K1, &rows.coef_cap,
                          &rows.out_cap);
  std::vector<double> coef(rows.coef_cap), out(rows.out_cap);
  rows.list = r_list.data();
  rows.g_count = g_count.data();
  rows.g_lo = g_lo.data();
  rows.g_hi = g_hi.data();
  rows.g_coef = g_coef.data();
  rows.g_out = g_out.data();
  rows.col = col.data();
  rows.coef = coef.data();
  rows.out = out.data();
  // The emulator's phase 2 as one product over each round's requests, as the device runs it.
  const kern::EmulatorView& em = ctl.b.em;
  rows.emu_ld = kern::rows_emu_ld(n_slots, em.n_label);
  std::vector<double> emu_rows(rows.emu_ld * (em.n_poly + em.n_train)),
      emu_sums(rows.emu_ld * (em.n_comp - 1));
  rows.emu_rows = emu_rows.data();
  rows.emu_sums = emu_sums.data();
  // The continuum per (request, arm), as the device runs it.
  std::vector<double> arm_red(kern::rows_arm_items(n_slots) * kern::kArmRed);
  std::vector<int> arm_ok(kern::rows_arm_items(n_slots));
  rows.arm_red = arm_red.data();
  rows.arm_ok = arm_ok.data();
  ctl.rows = &rows;
  if (items_cap > 0)  // and the grid and CCF per template, the moments grid per point
    c.items(&ctl, items_cap * n_slots);
  const auto st = kern::engine_run(c.team, &ctl, 1000000);
  REQUIRE(st.finished);
  int n_rot = 0;
  double worst_chi2 = 0.0, worst_sigma = 0.0, worst_mom = 0.0;
  int n_mom = 0;
  for (int s = 0; s < 2 * n; ++s) {
    INFO("spectrum " << s << (s >= n ? " (held labels)" : ""));
    const auto& a = hb.results[s];
    const auto& r = ref[s];
    REQUIRE(a.status == r.status);
    if (r.status != kern::kPipeOk) continue;
    CHECK(a.best.chi2 == Approx(r.best.chi2).epsilon(1e-10));
    worst_chi2 = std::max(worst_chi2, std::fabs(a.best.chi2 / r.best.chi2 - 1.0));
    CHECK(a.best.niter == r.best.niter);
    REQUIRE(a.best.np == r.best.np);
    for (int q = 0; q < r.best.np; ++q) {
      const double sig = std::sqrt(r.best.cov[q * r.best.np + q]);
      if (std::isfinite(sig)) {
        CHECK(std::fabs(a.best.theta[q] - r.best.theta[q]) < 1e-6 * sig);
        worst_sigma = std::max(worst_sigma, std::fabs(a.best.theta[q] - r.best.theta[q]) / sig);
      } else {
        CHECK(a.best.theta[q] == r.best.theta[q]);
      }
    }
    CHECK(a.n_clipped == r.n_clipped);
    for (int k = 0; k < 3; ++k) CHECK(a.n_eval[k] == r.n_eval[k]);  // the same evaluations
    // The moments grid (kReqVGrid, its points per item): VRAD_SKEW and VRAD_KURT from its chi^2
    // about the best fit. The grid is centred on VRAD and spaced by its error, so the bar's
    // 1e-6 sigma in VRAD moves these standardised moments by ~1e-6; a point at a wrong velocity
    // or a wrong chi^2 moves them by far more (at least 1e-3 for a one-step shift of one point).
    CHECK(std::isnan(a.v_skew) == std::isnan(r.v_skew));
    CHECK(std::isnan(a.v_kurt) == std::isnan(r.v_kurt));
    if (std::isfinite(r.v_skew)) CHECK(std::fabs(a.v_skew - r.v_skew) < 1e-6);
    if (std::isfinite(r.v_kurt)) CHECK(std::fabs(a.v_kurt - r.v_kurt) < 1e-6);
    if (std::isfinite(r.v_skew)) worst_mom = std::max(worst_mom, std::fabs(a.v_skew - r.v_skew));
    if (std::isfinite(r.v_kurt)) worst_mom = std::max(worst_mom, std::fabs(a.v_kurt - r.v_kurt));
    n_mom += std::isfinite(r.v_kurt);
    n_rot += s < n && r.best.np > 1 + lib.n_label && r.best.theta[1 + lib.n_label] > 10.0;
  }
  CHECK(hb.ivar == c.ivar_ref);  // the same pixels clipped
  for (int slot = 0; slot < n_slots; ++slot) CHECK(c.slot_spec[slot] == kern::kSlotDrained);
  // The full evaluations all went through the row stages (none left to engine_serve<kReqEval>
  // but velocity-only, segment and continuum-only ones; the outlier clip's evaluation too, a
  // kReqEval before its kReqClip), several per round and per GEMM.
  long full = 0;
  for (int s = 0; s < 2 * n; ++s) full += ref[s].n_eval[0] + ref[s].n_eval[1];
  CHECK(st.served_rows == full);
  CHECK(st.gemms > 0);
  CHECK(st.served_rows > st.gemms);
  CHECK(st.emu_gemms > 0);
  // several requests per emulator product: the row requests and the emulator requests (kReqEmu,
  // the labels of the velocity-only evaluations), all of which join it
  CHECK(st.served_rows + st.emu_in_product > st.emu_gemms);
  CHECK(st.emu_in_product > 0);
  CHECK(st.emu_in_product == st.served[kern::kReqEmu]);
  CHECK(st.items[kern::kReqGrid] == (items_cap > 0 ? st.served[kern::kReqGrid] * hb.n_ccf : 0));
  // The other evaluations (velocity-only, per-arm velocity segments) took the continuum per arm.
  CHECK(st.cont_evals == st.served[kern::kReqEval]);
  CHECK(st.cont_evals > 0);
  CHECK(st.cont_segs > 0);
  // and their template stage per (request, arm): more items than requests when any has 2+ arms.
  // (The held-label fits' velocity-only evaluations cover every arm of a DESI-layout fibre.)
  bool multi_arm = false;
  for (const auto& bs : hb.spec) multi_arm = multi_arm || bs.n_arms > 1;
  CHECK(st.eval_items >= st.cont_evals);
  CHECK((st.eval_items > st.cont_evals || !multi_arm));
  // Clipping per (request, arm): every arm of every clip request an item.
  CHECK(st.served[kern::kReqClip] > 0);
  CHECK(st.clip_items >= st.served[kern::kReqClip]);
  CHECK((st.clip_items > st.served[kern::kReqClip] || !multi_arm));
  // The moments grids per point: every point of every request an item.
  CHECK(n_mom > 0);
  CHECK(st.served[kern::kReqVGrid] > 0);
  if (items_cap > 0) CHECK(st.items[kern::kReqVGrid] > st.served[kern::kReqVGrid]);
  if (results) results->assign(hb.results.begin(), hb.results.begin() + 2 * n);
  std::fprintf(stderr,
               "staged engine: %d fits over %d slots, %ld rounds, %ld full evaluations in %ld row "
               "GEMMs, %ld emulator products (with %ld emulator requests), %ld other evaluations "
               "(%ld segments) per arm (%ld template items), %ld moments grids in %ld point "
               "items, %ld clips in %ld arm items, %d rotated fits; worst chi2 %.2e relative, "
               "parameters %.2e sigma, "
               "VRAD_SKEW/KURT %.2e (%d fits)\n",
               2 * n, n_slots, st.rounds, st.served_rows, st.gemms, st.emu_gemms, st.emu_in_product,
               st.cont_evals, st.cont_segs, st.eval_items, st.served[kern::kReqVGrid],
               st.items[kern::kReqVGrid], st.served[kern::kReqClip], st.clip_items, n_rot,
               worst_chi2, worst_sigma, worst_mom, n_mom);
  return n_rot;
}

TEST_CASE("the staged engine's template rows as one GEMM per arm model fit real spectra as fit_one",
          "[kernels][engine][real]") {
  const auto& lib = test::thin_library();
  FitConfig cfg;  // resolution matrices on (the DESI default)
  cfg.fit_vsini = true;
  ArmModelCache cache(lib);
  const std::vector<PreparedSpectrum> prepared = test::real_spectra(lib, cache, cfg, 4);
  REQUIRE(prepared.size() >= 8);
  std::vector<kern::PipelineResult> per_item, per_request;
  const int n_rot = staged_against_fit_one(lib, cfg, prepared, 2, &per_item);
  CHECK(n_rot >= 1);  // the rotated path (2M + 4 rows per point) was served too
  // The items (the chi^2 grid and the CCF per template, the moments grid per point: their rows
  // per arm over all points' span, each point's taps and profile on its own buffers) give the
  // per-request serve's results bit for bit, VRAD_SKEW and VRAD_KURT included.
  staged_against_fit_one(lib, cfg, prepared, 0, &per_request);
  REQUIRE(per_item.size() == per_request.size());
  for (size_t s = 0; s < per_item.size(); ++s) {
    INFO("spectrum " << s);
    const auto &a = per_item[s], &r = per_request[s];
    CHECK(a.status == r.status);
    CHECK(std::memcmp(&a.best.chi2, &r.best.chi2, sizeof(double)) == 0);
    CHECK(std::memcmp(a.best.theta, r.best.theta, sizeof a.best.theta) == 0);
    CHECK(std::memcmp(&a.v_skew, &r.v_skew, sizeof(double)) == 0);  // NaN too
    CHECK(std::memcmp(&a.v_kurt, &r.v_kurt, sizeof(double)) == 0);
  }
}

// Issue 51's sample: all 134 shared LAMOST spectra and the 85 DESI-layout stars.
TEST_CASE("the staged engine fits every shared LAMOST and DESI-layout spectrum as fit_one",
          "[kernels][engine][real][all]") {
  const auto& lib = test::thin_library();
  FitConfig cfg;
  cfg.fit_vsini = true;
  ArmModelCache cache(lib);
  const std::vector<PreparedSpectrum> prepared = test::all_real_spectra(lib, cache, cfg);
  int n_desi = 0;
  for (const auto& p : prepared) n_desi += p.packed.n_full_total() > 0;
  CHECK(prepared.size() - n_desi >= 130);  // 134 LAMOST files, a few without usable pixels
  CHECK(n_desi >= 80);                     // 85 DESI-layout fibres
  const int n_rot = staged_against_fit_one(lib, cfg, prepared);
  CHECK(n_rot >= 5);
}
