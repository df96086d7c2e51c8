// [alpha/Fe] end to end on a PHOENIX-format grid written here (issue 12): a small synthetic
// PHOENIX-ACES-like grid in Teff, logg, [M/H] and [alpha/M] (FITS primary images with the PHX*
// keys and a shared WAVE_PHOENIX-*.fits vacuum wavelength file, the layout src/io/templates.cpp
// reads), built into a 4-label emulator with velox's own API, then injection-recovery of
// ALPHAFE exactly as test_injection_miles.cpp does for the other labels: spectra drawn from the
// emulator with known truth (alpha included) at R = 1800 on a LAMOST-like grid, S/N 30 and 100,
// fitted by fit_spectrum; finally the catalog writers (HDF5 /catalog and the rvspecfit RVTAB)
// must carry finite ALPHAFE / ALPHAFE_ERR.
#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>

#include "app/fit_outputs.hpp"
#include "app/fit_run.hpp"
#include "backend/backend.hpp"
#include "emulator/build.hpp"
#include "fit/fitter.hpp"
#include "inject.hpp"
#include "io/catalog.hpp"
#include "io/fits.hpp"
#include "io/readers.hpp"
#include "test_util.hpp"

using namespace velox;

namespace {

// ---- The synthetic grid ------------------------------------------------------------------
// Flux = Planck continuum x exp(-sum of Gaussian optical-depth profiles). Each line family
// responds smoothly to one combination of labels, so that all four are identifiable:
//   Fe lines      tau ~ 10^[M/H]              x (5750/Teff)^3   (neutral metal lines)
//   alpha lines   tau ~ 10^([M/H]+[alpha/M])  x (5750/Teff)^3   (Mg, Ca, Ti, Si, O-like)
//   ion lines     tau ~ 10^[M/H] x 10^(-0.7 (logg-4))           (Fe II-like, gravity-sensitive)
//   strong lines  Mg b / Ca I 4227 / Na D with damping wings of width ~ 10^(0.5 (logg-4))
//   Balmer lines  depth and width growing with Teff
// PHOENIX labels: [M/H] is the overall metallicity and [alpha/M] the alpha enhancement; velox
// maps them to FEH and ALPHAFE (templates.cpp).
constexpr double kWaveLo = 4000.0, kWaveHi = 7000.0;  // vacuum Angstrom
constexpr double kTemplateR = 20000.0;
constexpr double kDlnlam = 1.0 / (2.5 * kTemplateR);  // 2.5 pixels per resolution element
// Injections per S/N: enough that the acceptance band of the pull sigma is ~3 standard errors.
constexpr int kInject = 300;
constexpr double kLineSigmaKms = 299792.458 / kTemplateR / 2.3548;  // unresolved at R 20000

struct Line {
  double wave, strength;
};

struct LineList {
  std::vector<Line> fe, alpha, ion;
};

// Deterministic line lists (fixed seed), plus a few real alpha-element positions (vacuum A).
const LineList& line_list() {
  static const LineList ll = [] {
    LineList l;
    std::mt19937_64 rng(12);
    std::uniform_real_distribution<double> uw(kWaveLo + 20, kWaveHi - 20), us(0.05, 0.6);
    for (int i = 0; i < 400; ++i) l.fe.push_back({uw(rng), us(rng)});
    for (int i = 0; i < 200; ++i) l.alpha.push_back({uw(rng), us(rng)});
    for (int i = 0; i < 250; ++i) l.ion.push_back({uw(rng), us(rng)});
    // Mg I, Ca I, Ti I, Si I lines at their (vacuum) positions, moderately strong.
    for (double w : {4572.9, 4704.1, 5529.6, 5713.4, 6164.6, 6441.4, 6463.4, 6500.2, 4535.6,
                     4982.2, 4992.0, 5174.5, 5212.6, 6157.6, 5691.0, 5950.7, 6246.9})
      l.alpha.push_back({w, 0.8});
    return l;
  }();
  return ll;
}

struct Strong {
  double wave, strength;
  bool alpha;
};
// Mg b triplet, Ca I 4227, Na D (vacuum): strong lines with gravity-sensitive damping wings.
const Strong kStrong[] = {{5168.8, 3.0, true}, {5174.1, 4.0, true},  {5185.0, 5.0, true},
                          {4227.9, 5.0, true}, {5891.6, 4.0, false}, {5897.6, 3.0, false}};
// Balmer lines (vacuum): H alpha, beta, gamma, delta.
const double kBalmer[] = {6564.6, 4862.7, 4341.7, 4102.9};

std::vector<double> synthetic_flux(const std::vector<double>& wave, double teff, double logg,
                                   double mh, double am) {
  const size_t n = wave.size();
  std::vector<double> tau(n, 0.0);
  const double tfac = std::pow(5750.0 / teff, 3.0);
  const double sig_frac = kLineSigmaKms / 299792.458;
  const double lnlo = std::log(wave.front());
  // Adds tau0 * exp(-x^2/2) (+ a Lorentzian wing of half width `gamma` A) around w0 over +-`half` A.
  auto add = [&](double w0, double tau0, double sigma_A, double gamma_A, double half_A) {
    const long i0 = std::max(0L, static_cast<long>((std::log(w0 - half_A) - lnlo) / kDlnlam));
    const long i1 = std::min(static_cast<long>(n) - 1,
                             static_cast<long>((std::log(w0 + half_A) - lnlo) / kDlnlam) + 1);
    for (long i = i0; i <= i1; ++i) {
      const double d = wave[i] - w0;
      double p = std::exp(-0.5 * d * d / (sigma_A * sigma_A));
      if (gamma_A > 0) p += 0.3 * gamma_A * gamma_A / (d * d + gamma_A * gamma_A);
      tau[i] += tau0 * p;
    }
  };
  const auto& ll = line_list();
  const double fe = std::pow(10.0, mh), al = std::pow(10.0, mh + am);
  const double ion = fe * std::pow(10.0, -0.7 * (logg - 4.0));
  for (const auto& l : ll.fe) add(l.wave, l.strength * fe * tfac, sig_frac * l.wave, 0, 6 * sig_frac * l.wave);
  for (const auto& l : ll.alpha) add(l.wave, l.strength * al * tfac, sig_frac * l.wave, 0, 6 * sig_frac * l.wave);
  for (const auto& l : ll.ion) add(l.wave, l.strength * ion, sig_frac * l.wave, 0, 6 * sig_frac * l.wave);
  const double gamma = 2.0 * std::pow(10.0, 0.5 * (logg - 4.0));  // damping half width, A
  for (const auto& s : kStrong)
    add(s.wave, s.strength * (s.alpha ? al : fe) * tfac, 2 * sig_frac * s.wave, gamma, 80.0);
  const double x = (teff - 4500.0) / 2000.0;  // Balmer strength grows with Teff in FGK stars
  for (double w : kBalmer) add(w, 1.5 * x * x + 0.3, 2.0 + 4.0 * x, 0, 60.0);
  std::vector<double> f(n);
  for (size_t i = 0; i < n; ++i) {
    const double lam = wave[i];
    const double planck = std::pow(lam / 5000.0, -5.0) / std::expm1(1.4388e8 / (lam * teff));
    f[i] = 1e10 * planck * std::exp(-tau[i]);
  }
  return f;
}

// PHOENIX-like file names: lte05000-4.50-0.5.fits, lte05000-4.50-0.5.Alpha=+0.20.fits.
std::string phoenix_name(double teff, double logg, double mh, double am) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "lte%05.0f-%.2f%+.1f", teff, logg, mh == 0 ? -0.0 : mh);
  std::string name = buf;
  if (am != 0) {
    std::snprintf(buf, sizeof buf, ".Alpha=%+.2f", am);
    name += buf;
  }
  return name + ".fits";
}

// Writes the grid: 4 Teff x 3 logg x 3 [M/H] x 5 [alpha/M] = 180 files of ~28 000 pixels (the
// alpha grid -0.2..+0.6 reaches past the injected truths so that the fit's box constraints
// stay > 5 errors away from them; PHOENIX-ACES has [alpha/M] from -0.2 to +1.2).
std::string write_grid() {
  const auto dir = test::tmp_dir("alphafe_phoenix_grid");
  std::vector<double> wave;
  for (double l = std::log(kWaveLo); l <= std::log(kWaveHi); l += kDlnlam) wave.push_back(std::exp(l));
  const auto n = static_cast<int64_t>(wave.size());
  {
    auto w = fits::File::create(dir + "/WAVE_PHOENIX-ACES-AGSS-COND-2011.fits");
    w.write_image(wave, {n});
  }
  for (double teff : {5000.0, 5500.0, 6000.0, 6500.0})
    for (double logg : {3.5, 4.0, 4.5})
      for (double mh : {-1.0, -0.5, 0.0})
        for (double am : {-0.2, 0.0, 0.2, 0.4, 0.6}) {
          auto f = fits::File::create(dir + "/" + phoenix_name(teff, logg, mh, am));
          f.write_image(synthetic_flux(wave, teff, logg, mh, am), {n});
          f.write_key("PHXTEFF", teff);
          f.write_key("PHXLOGG", logg);
          f.write_key("PHXM_H", mh);
          f.write_key("PHXALPHA", am);
        }
  return dir;
}

const TemplateLibrary& alpha_library() {
  static const TemplateLibrary lib = [] {
    const auto t0 = std::chrono::steady_clock::now();
    const auto set = read_templates(write_grid());
    const auto t1 = std::chrono::steady_clock::now();
    REQUIRE(set.kind == "phoenix");
    REQUIRE(set.spectra.size() == 180);
    REQUIRE(set.has_alpha);
    BuildConfig bc;
    bc.template_R = kTemplateR;  // PHOENIX files carry no FWHM / resolution
    bc.wave_min_A = 4050.0;      // inside the files' coverage, as for a real HiRes subset
    bc.wave_max_A = 6950.0;
    bc.n_components = 30;
    auto lib = build_library(set, bc);
    const auto t2 = std::chrono::steady_clock::now();
    WARN("synthetic PHOENIX grid: write + read " << std::chrono::duration<double>(t1 - t0).count()
                                                 << " s, build "
                                         << std::chrono::duration<double>(t2 - t1).count() << " s");
    return lib;
  }();
  return lib;
}

}  // namespace

TEST_CASE("PHOENIX-format grid with [alpha/Fe]: 4-label emulator, ALPHAFE injection-recovery",
          "[fit][injection][alphafe]") {
  const auto t_start = std::chrono::steady_clock::now();
  const auto& lib = alpha_library();
  REQUIRE(lib.n_label == 4);
  REQUIRE(lib.has_alpha());
  REQUIRE(lib.label_names.size() == 4);
  CHECK(lib.label_names[3] == "ALPHAFE");
  CHECK(lib.resolution_R == kTemplateR);
  CHECK(lib.label_min[3] == Approx(-0.2));
  CHECK(lib.label_max[3] == Approx(0.6));

  test::InjectionSetup setup(lib);
  const auto arm = setup.cache.get(1800.0);
  std::mt19937_64 rng(2027);
  // Truths inside the grid, away from the box constraints of the fit (label_min/max), so that
  // no fit is pinned at an edge (LABEL_EDGE, not SUCCESS) and clipping does not shrink the pulls.
  // At S/N 30 the errors are at most ~0.04 dex in ALPHAFE and FEH, ~0.08 dex in LOGG (hot,
  // metal-poor end) and ~15 K in TEFF: ALPHAFE in [0, 0.4] of [-0.2, 0.6] is > 5 errors from an
  // edge, LOGG in [3.75, 4.25] of [3.5, 4.5] > 3, FEH in [-0.85, -0.15] of [-1, 0] ~4.
  std::uniform_real_distribution<double> uv(-300, 300), ut(5150, 6350), ug(3.75, 4.25),
      uf(-0.85, -0.15), ua(0.0, 0.4);
  std::vector<CatalogRow> rows;
  for (double sn : {30.0, 100.0}) {
    const int n = kInject;
    std::vector<double> da, pa, ea;
    test::Recovery rec;
    for (int i = 0; i < n; ++i) {
      test::Truth tr{uv(rng), ut(rng), ug(rng), uf(rng)};
      tr.alphafe = ua(rng);
      const auto row = fit_spectrum(test::inject(lib, *arm, tr, sn, 4100, 6900, rng, i), setup.ctx);
      INFO("RVS_WARN " << row.RVS_WARN << ", fit/truth: VRAD " << row.VRAD << "/" << tr.v_kms
                       << " TEFF " << row.TEFF << "/" << tr.teff << " LOGG " << row.LOGG << "/"
                       << tr.logg << " FEH " << row.FEH << "/" << tr.feh << " ALPHAFE "
                       << row.ALPHAFE << "/" << tr.alphafe << " +- " << row.ALPHAFE_ERR);
      REQUIRE(row.SUCCESS);
      REQUIRE(std::isfinite(row.ALPHAFE));
      REQUIRE(row.ALPHAFE_ERR > 0);
      da.push_back(row.ALPHAFE - tr.alphafe);
      pa.push_back((row.ALPHAFE - tr.alphafe) / row.ALPHAFE_ERR);
      ea.push_back(row.ALPHAFE_ERR);
      rec.add(row, tr);
      if (rows.size() < 20) rows.push_back(row);
    }
    const double bias = test::median_of(da), scatter = test::robust_sigma(da);
    // Standard error of the median of n Gaussian draws: 1.2533 sigma / sqrt(n).
    const double se = 1.2533 * scatter / std::sqrt(double(n));
    const double pull_sigma = test::robust_sigma(pa);
    WARN("S/N " << sn << ": median dALPHAFE " << bias << " dex (s.e. " << se << ", scatter "
                << scatter << ", median ALPHAFE_ERR " << test::median_of(ea)
                << "), ALPHAFE pull sigma " << pull_sigma << ", pulls v/T/g/f "
                << test::robust_sigma(rec.pv) << " " << test::robust_sigma(rec.pt) << " "
                << test::robust_sigma(rec.pg) << " " << test::robust_sigma(rec.pf));
    // Recovered: the median offset is within 3 standard errors of its estimate, or below a
    // tenth of the per-star scatter (an offset that small is irrelevant next to the errors).
    CHECK(std::fabs(bias) < std::max(3 * se, 0.1 * scatter));
    // The acceptance band. The MAD-based robust sigma of n unit Gaussians has standard
    // error ~1.17/sqrt(n) (asymptotic efficiency 37%); with n = kInject that is ~0.067, so
    // [0.8, 1.25] is ~3 standard errors below 1 and ~3.7 above.
    CHECK(pull_sigma > 0.8);
    CHECK(pull_sigma < 1.25);
  }

  // The catalog writers carry ALPHAFE: HDF5 /catalog read back, and the rvspecfit RVTAB.
  const auto dir = test::tmp_dir("alphafe_phoenix_catalog");
  const std::string h5 = dir + "/cat.h5";
  write_catalog(h5, rows, {});
  for (const auto& r : read_catalog(h5)) {
    CHECK(std::isfinite(r.ALPHAFE));
    CHECK(std::isfinite(r.ALPHAFE_ERR));
    CHECK(std::isfinite(r.ALPHAFE_ERR_STAT));
  }
  write_rvtab_fits(FitOutputs::fits_path(h5), rows, {}, side_tables({{"", rows.data(), rows.size()}}, true));
  auto f = fits::File::open_read(FitOutputs::fits_path(h5));
  f.move_to("RVTAB");
  const auto a = f.read_column_double("ALPHAFE"), ae = f.read_column_double("ALPHAFE_ERR");
  REQUIRE(a.size() == rows.size());
  for (size_t i = 0; i < a.size(); ++i) {
    CHECK(a[i] == Approx(rows[i].ALPHAFE));
    CHECK(std::isfinite(ae[i]));
  }
  WARN("test runtime " << std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count()
                       << " s");
}
