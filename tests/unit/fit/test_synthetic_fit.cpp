// End-to-end fit on a synthetic template set (no files): build the emulator, inject spectra drawn
// from it with known truth, fit, and check bias and pulls. Exercises every kernel through the
// CPU team.
#include <catch2/catch.hpp>
#include <random>

#include "backend/backend.hpp"
#include "emulator/build.hpp"
#include "fit/fitter.hpp"
#include "inject.hpp"
#include "io/rvs_warn.hpp"

using namespace velox;

using test::synthetic_set;

TEST_CASE("synthetic injection-recovery: unbiased VRAD and honest errors", "[fit][synthetic]") {
  const auto lib = test::synthetic_library();
  REQUIRE(lib.n_train >= 140);
  test::InjectionSetup setup(lib);
  auto arm = setup.cache.get(1800.0);
  std::mt19937_64 rng(42);
  std::uniform_real_distribution<double> uv(-300, 300), ut(4600, 6400), ug(1.8, 4.5), uf(-1.5, 0.2);
  test::Recovery rec;
  const int n = 40;
  for (int i = 0; i < n; ++i) {
    const test::Truth tr{uv(rng), ut(rng), ug(rng), uf(rng)};
    const auto row = fit_spectrum(test::inject(lib, *arm, tr, 30.0, 4100, 6900, rng, i), setup.ctx);
    REQUIRE(row.SUCCESS);
    rec.add(row, tr);
  }
  // 40 draws: the median's standard error is ~1.25 sigma_v/sqrt(40) ~ 0.2 sigma_v (sigma_v of a
  // few km/s at S/N 30 for these broad synthetic lines), so 1 km/s is a >3-sigma bound.
  CHECK(std::fabs(test::median_of(rec.dv)) < 1.0);
  // Robust sigma of 40 pulls has ~15% scatter; [0.7, 1.35] is a ~2-sigma band around 1.
  for (const auto* p : rec.pulls()) {
    const double s = test::robust_sigma(*p);
    CHECK(s > 0.7);
    CHECK(s < 1.35);
  }
}

namespace {
// `clean` with its red half (wavelengths >= 5800 A, lamost-dr10's split) replaced by the same
// star at VRAD + 40 km/s (noise draw `seed`): a wavelength calibration off in one arm.
Spectrum shift_red_half(const Spectrum& clean, const TemplateLibrary& lib, const ArmModel& arm,
                        test::Truth tr, std::mt19937_64& rng, int seed) {
  tr.v_kms += 40.0;
  const Spectrum red = test::inject(lib, arm, tr, 30.0, 4100, 6900, rng, seed);
  Spectrum shifted = clean;
  ArmData& a = shifted.arms[0];
  for (size_t j = 0; j < a.size(); ++j)
    if (a.wave_vac_A[j] >= 5800.0) a.flux[j] = red.arms[0].flux[j];
  return shifted;
}
}  // namespace

TEST_CASE("per-arm velocities recover the injected VRAD, and a shifted red half is flagged",
          "[fit][synthetic][quality]") {
  const auto lib = test::synthetic_library();
  test::InjectionSetup setup(lib);
  auto arm = setup.cache.get(1800.0);
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> uv(-300, 300), ut(4600, 6400), ug(1.8, 4.5), uf(-1.5, 0.2);
  std::vector<double> pb, pr;
  int n_flag_shifted = 0, n_flag_clean = 0;
  const int n = 30;
  for (int i = 0; i < n; ++i) {
    const test::Truth tr{uv(rng), ut(rng), ug(rng), uf(rng)};
    // Clean: one spectrum; shifted: its red half (split at 5800 A, lamost-dr10) replaced by the
    // same star at VRAD + 40 km/s, about 8 sigma of the per-half errors at S/N 30.
    const Spectrum clean = test::inject(lib, *arm, tr, 30.0, 4100, 6900, rng, i);
    const Spectrum shifted = shift_red_half(clean, lib, *arm, tr, rng, i);
    const auto row = fit_spectrum(clean, setup.ctx);
    REQUIRE(row.SUCCESS);
    REQUIRE((row.FIT_INFO & info::kArmSplit) != 0);
    pb.push_back((row.VRAD_B - tr.v_kms) / row.VRAD_B_ERR);
    pr.push_back((row.VRAD_R - tr.v_kms) / row.VRAD_R_ERR);
    n_flag_clean += (row.RVS_WARN & warn::kArmRvDisagree) != 0;
    n_flag_shifted += (fit_spectrum(shifted, setup.ctx).RVS_WARN & warn::kArmRvDisagree) != 0;
  }
  // Each half is an independent measurement with its own (statistical) error: robust sigma of 30
  // pulls scatters by ~17%, so [0.65, 1.4] is a ~2-sigma band around 1.
  for (const auto* p : {&pb, &pr}) {
    CHECK(test::robust_sigma(*p) > 0.65);
    CHECK(test::robust_sigma(*p) < 1.4);
    CHECK(std::fabs(test::median_of(*p)) < 0.5);  // unbiased: 0.5 sigma is ~2.3 standard errors
  }
  // p-value threshold 1e-3: a clean spectrum is flagged with probability 0.001 (30 tries: 0 or
  // 1); a 40 km/s shift at ~8 sigma is always caught.
  CHECK(n_flag_clean <= 1);
  CHECK(n_flag_shifted == n);
}

TEST_CASE("a format's arm scatter keeps VRAD on the blue half when the red half is shifted",
          "[fit][synthetic][quality]") {
  const auto lib = test::synthetic_library();
  test::InjectionSetup setup(lib);
  FitConfig cfg = test::InjectionSetup::cfg();
  cfg.arm_rv_scatter_kms = {{"lamost-dr10", {{"R", 30.0}}}};
  const FitContext scatter_ctx{lib, setup.cache, cfg, "lamost-dr10", ""};
  // The same key with a survey: a file of another survey reads the format's entry, this one its
  // own.
  FitConfig cfg_survey = test::InjectionSetup::cfg();
  cfg_survey.arm_rv_scatter_kms = {{"lamost-dr10:other", {{"R", 30.0}}}};
  const FitContext other_ctx{lib, setup.cache, cfg_survey, "lamost-dr10", "this"};
  auto arm = setup.cache.get(1800.0);
  std::mt19937_64 rng(23);
  std::uniform_real_distribution<double> uv(-300, 300), ut(4600, 6400), ug(1.8, 4.5), uf(-1.5, 0.2);
  std::vector<double> d_joint, d_arms;
  const int n = 12;
  for (int i = 0; i < n; ++i) {
    const test::Truth tr{uv(rng), ut(rng), ug(rng), uf(rng)};
    // The red half (split at 5800 A) of the star at VRAD + 40 km/s: a wavelength calibration
    // that is off in one arm.
    const Spectrum clean = test::inject(lib, *arm, tr, 30.0, 4100, 6900, rng, i);
    const Spectrum shifted = shift_red_half(clean, lib, *arm, tr, rng, i);
    const auto joint = fit_spectrum(shifted, setup.ctx);
    const auto arms = fit_spectrum(shifted, scatter_ctx);
    const auto other = fit_spectrum(shifted, other_ctx);
    REQUIRE(joint.SUCCESS);
    REQUIRE(arms.SUCCESS);
    CHECK((joint.FIT_INFO & info::kVradFromArms) == 0);
    CHECK((other.FIT_INFO & info::kVradFromArms) == 0);
    CHECK(other.VRAD == joint.VRAD);
    CHECK((arms.FIT_INFO & info::kVradFromArms) != 0);
    // The weighted mean of the halves, weights 1 / ((k s)^2 + scatter^2), s the halves'
    // statistical errors (VRAD_B_ERR, VRAD_R_ERR: no floors here) and k = max(1, the joint
    // VRAD's statistical error x sqrt(sum 1/s^2)); VRAD_ERR_STAT = (sum of the weights)^(-1/2).
    // Recomputed from the catalog columns to rounding.
    const double sb = arms.VRAD_B_ERR, sr = arms.VRAD_R_ERR;
    const double k = std::max(1.0, joint.VRAD_ERR_STAT * std::sqrt(1 / (sb * sb) + 1 / (sr * sr)));
    const double wb = 1 / (k * k * sb * sb), wr = 1 / (k * k * sr * sr + 30.0 * 30.0);
    CHECK(arms.VRAD == Approx((wb * arms.VRAD_B + wr * arms.VRAD_R) / (wb + wr)).epsilon(1e-12));
    CHECK(arms.VRAD_ERR_STAT == Approx(1 / std::sqrt(wb + wr)).epsilon(1e-12));
    // The halves disagree by 40 km/s at ~8 of their errors, within 1.3 of the 30 km/s scatter:
    // ARM_RV_DISAGREE (p < 1e-3 with the scatter in the errors) is not set; without, it is.
    CHECK((arms.RVS_WARN & warn::kArmRvDisagree) == 0);
    CHECK((joint.RVS_WARN & warn::kArmRvDisagree) != 0);
    d_joint.push_back(joint.VRAD - tr.v_kms);
    d_arms.push_back(arms.VRAD - tr.v_kms);
  }
  // The joint fit splits the 40 km/s between the halves by their weights (the blue half has
  // about 3x the red one's: +8.9 km/s when written); with the scatter, the red half weighs < 2%
  // (+0.8 km/s of the 40): the median offset falls below 3 km/s (-0.1 when written; the per-half
  // errors are 1-3 km/s at S/N 30).
  CHECK(test::median_of(d_joint) > 5.0);
  CHECK(std::fabs(test::median_of(d_arms)) < 3.0);
}

TEST_CASE("a spectrum with every pixel masked gets NO_PIXELS and no crash", "[fit][badinput]") {
  BuildConfig bc;
  bc.n_components = 10;
  const auto lib = build_library(synthetic_set(60, 3), bc);
  FitConfig cfg;
  ArmModelCache cache(lib);
  const FitContext ctx{lib, cache, cfg, "lamost-dr10"};
  std::mt19937_64 rng(1);
  auto spec = test::inject(lib, *cache.get(1800.0), {10, 5500, 4, 0}, 30, 4100, 6900, rng);
  SECTION("all masked") {
    for (auto& m : spec.arms[0].mask) m = 1;
  }
  SECTION("NaN flux and negative ivar") {
    for (size_t i = 0; i < spec.arms[0].size(); ++i) {
      spec.arms[0].flux[i] = (i % 2) ? NAN : INFINITY;
      spec.arms[0].ivar[i] = (i % 2) ? -1.0f : 1.0f;
    }
  }
  SECTION("wavelengths outside the templates") {
    for (auto& w : spec.arms[0].wave_vac_A.mut()) w += 20000.0;
  }
  const auto row = fit_spectrum(spec, ctx);
  CHECK_FALSE(row.SUCCESS);
  CHECK((row.RVS_WARN & warn::kNoPixels) != 0);
  CHECK(std::isnan(row.VRAD));
}
