// Template classification (kernels/classify.hpp, fit/classify.cpp) on spectra drawn from the
// real redrock bases themselves: the class and the redshift that made a spectrum win.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <vector>

#include "fit/classify.hpp"
#include "io/redrock.hpp"
#include "kernels/classify.hpp"
#include "kernels/physics.hpp"
#include "test_util.hpp"

using namespace velox;

namespace {

ClassSpectrum rebin(const Spectrum& s) { return rebin_for_classes({s.arms[0].view()}, {}); }

// A one-arm spectrum on a LAMOST-like grid (3700-9000 A, log10 step 1e-4) from basis vector
// combination `coef` of class `c` at ln(1 + z), times 1 + a tilt (flux calibration), plus
// Gaussian noise of 2% of the mean flux.
Spectrum draw(const ClassTemplate& c, const std::vector<double>& coef, double ln1pz,
              std::mt19937_64& rng) {
  ArmData a;
  a.name = "ALL";
  std::normal_distribution<double> gauss(0.0, 1.0);
  std::vector<double> f;
  for (double l10 = std::log10(3700.0); l10 < std::log10(9000.0); l10 += 1e-4) {
    const double w = std::pow(10.0, l10);
    const double u = (std::log(w) - ln1pz - c.lnlam0) / c.dlnlam - 0.5;
    const int k = std::clamp(static_cast<int>(std::floor(u)), 0, c.n_bin - 2);
    double t = 0;
    for (int b = 0; b < c.n_basis; ++b)
      t += coef[b] *
           ((k + 1 - u) * c.basis[b * c.n_bin + k] + (u - k) * c.basis[b * c.n_bin + k + 1]);
    a.wave_vac_A.push_back(w);
    f.push_back(t * (1.0 + 0.1 * (w - 6000.0) / 3000.0));
  }
  double mean = 0;
  for (double x : f) mean += std::fabs(x) / f.size();
  const double sigma = 0.02 * mean;
  for (double x : f) {
    a.flux.push_back(static_cast<float>(x + sigma * gauss(rng)));
    a.ivar.push_back(static_cast<float>(1.0 / (sigma * sigma)));
  }
  Spectrum s;
  s.arms.push_back(std::move(a));
  return s;
}

}  // namespace

TEST_CASE("classification picks the redrock class and redshift a spectrum was drawn from",
          "[fit][classify][realdata]") {
  TemplateLibrary lib;
  lib.classes = read_redrock_templates(test::data("templates/redrock"), kClassBinDlnlam);
  REQUIRE(lib.classes.size() == 10);
  auto find = [&](const std::string& sub) -> const ClassTemplate& {
    for (const auto& c : lib.classes)
      if (c.subtype == sub) return c;
    FAIL("no class " << sub);
    return lib.classes[0];
  };
  std::mt19937_64 rng(3);
  // A white dwarf and a G star at +80 km/s: classified at the given velocity.
  const double v = 80.0;
  const auto wd = rebin(draw(find("WD"), {1.0, 0.3, -0.2, 0.1, 0.05}, kern::ln_doppler(v), rng));
  const ClassResult r_wd = classify(lib, wd, v, 25.0, true);
  CHECK(r_wd.subtype == "WD");
  CHECK(r_wd.not_star);
  const auto g = rebin(draw(find("G"), {1.0, 0.2, -0.1, 0.05, 0.02}, kern::ln_doppler(v), rng));
  const ClassResult r_g = classify(lib, g, v, 25.0, true);
  CHECK(r_g.spectype == "STAR");
  CHECK(!r_g.not_star);
  // A QSO at z = 0.8: the scan's step is 5e-4 in ln(1 + z) after refinement.
  const double z = 0.8;
  const auto q = rebin(draw(find("LOZ"), {1.0, 0.3, 0.1, -0.1}, std::log1p(z), rng));
  const ClassResult r_q = classify(lib, q, 0.0, 25.0, true);
  CHECK(r_q.spectype == "QSO");
  CHECK(r_q.not_star);
  CHECK(std::fabs(std::log1p(r_q.z) - std::log1p(z)) < 1.5e-3);
  // Without the QSO scan the same spectrum is a (poor) star: the caller decides (fitter.cpp).
  CHECK(classify(lib, q, 0.0, 25.0, false).spectype == "STAR");
}

TEST_CASE("the galaxy template gets redrock's redshift range and finds a galaxy's redshift",
          "[fit][classify][realdata]") {
  TemplateLibrary lib;
  lib.classes = read_redrock_templates(test::data("templates/redrock"), kClassBinDlnlam);
  const auto gal = read_redrock_templates(test::data("templates/redrock_galaxy"), kClassBinDlnlam);
  REQUIRE(gal.size() == 1);
  CHECK(gal[0].spectype == "GALAXY");
  // No REDSHIFTS HDU in the file: redrock's default galaxy range.
  CHECK(gal[0].z_min == -0.005);
  CHECK(gal[0].z_max == 1.7);
  lib.classes.push_back(gal[0]);
  std::mt19937_64 rng(5);
  // A galaxy at z = 0.37: GALAXY, NOT_STAR, z within the refined step (6.9e-4 / 6 in ln(1+z))
  // plus the bins' 2e-3 quantisation of the spectrum.
  const double z = 0.37;
  const auto g = rebin(draw(gal[0], {1.0, 0.2, -0.1, 0.05, 0.02}, std::log1p(z), rng));
  const ClassResult r = classify(lib, g, 0.0, 25.0, true);
  CHECK(r.spectype == "GALAXY");
  CHECK(r.not_star);
  CHECK(std::fabs(std::log1p(r.z) - std::log1p(z)) < 1.5e-3);
  // A G star at +80 km/s stays a star with the galaxy class scanned too (galaxies start at
  // kGalaxyZMin = 0.005, 1500 km/s).
  const ClassTemplate* gstar = nullptr;
  for (const auto& c : lib.classes)
    if (c.subtype == "G") gstar = &c;
  REQUIRE(gstar);
  const double v = 80.0;
  const auto st = rebin(draw(*gstar, {1.0, 0.2, -0.1, 0.05, 0.02}, kern::ln_doppler(v), rng));
  const ClassResult r_st = classify(lib, st, v, 25.0, true);
  CHECK(r_st.spectype == "STAR");
  CHECK(!r_st.not_star);
}

TEST_CASE("a normal star's MK letter follows its Teff (Pecaut & Mamajek dwarf boundaries)",
          "[classify]") {
  // Each class's first and last dwarf subtypes in the EEM table, and the midpoints between.
  CHECK(mk_class_of_teff(33300) == "O");  // O9V
  CHECK(mk_class_of_teff(31400) == "B");  // B0V
  CHECK(mk_class_of_teff(10400) == "B");  // B9.5V
  CHECK(mk_class_of_teff(9700) == "A");   // A0V
  CHECK(mk_class_of_teff(7400) == "A");   // A9V
  CHECK(mk_class_of_teff(7220) == "F");   // F0V
  CHECK(mk_class_of_teff(6187) == "F");   // the LAMOST DR8 stars redrock had called M
  CHECK(mk_class_of_teff(5930) == "G");   // G0V
  CHECK(mk_class_of_teff(5290) == "K");   // K0V
  CHECK(mk_class_of_teff(3930) == "K");   // K9V
  CHECK(mk_class_of_teff(3850) == "M");   // M0V
  CHECK(mk_class_of_teff(2400) == "M");
  CHECK(mk_class_of_teff(NAN).empty());
  CHECK(mk_class_of_teff(-5).empty());
}

TEST_CASE("class_chi2 of a three-arm spectrum equals the sums over every column, bit for bit",
          "[classify]") {
  // class_chi2 adds each bin's products for the basis and its own arm's polynomial columns
  // only (the other arms' columns are zero there). Reference: the normal equations summed over
  // all columns, zeros included, in the same order, then the same solve.
  const int nb = 5, na = 3, np = kern::kClassPolyDeg + 1, m = nb + na * np, n_bin = 400;
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> u(0.2, 1.5);
  std::vector<float> basis(static_cast<size_t>(nb) * n_bin);
  for (auto& b : basis) b = static_cast<float>(u(rng));
  const kern::ClassBasisView t{nb, n_bin, std::log(3500.0), 2e-3, basis.data()};
  std::vector<double> lnlam, flux, ivar, xleg;
  std::vector<int> arm;
  for (int a = 0; a < na; ++a)  // three arms of 150 bins, the last one partly beyond the basis
    for (int k = 0; k < 150; ++k) {
      lnlam.push_back(std::log(3600.0) + (a * 150 + k) * 2.1e-3);
      flux.push_back(u(rng));
      ivar.push_back(k % 17 == 0 ? 0.0 : u(rng));
      xleg.push_back(2.0 * k / 149.0 - 1.0);
      arm.push_back(a);
    }
  kern::ClassData d;
  d.n = static_cast<int>(flux.size());
  d.n_arms = na;
  d.lnlam = lnlam.data(), d.flux = flux.data(), d.ivar = ivar.data(), d.xleg = xleg.data();
  d.arm = arm.data();
  auto dense = [&](double ln1pz) -> double {
    double g[kern::kClassMaxParams * kern::kClassMaxParams] = {}, q[kern::kClassMaxParams] = {};
    double ff = 0.0;
    for (int k = 0; k < d.n; ++k) {
      const double w = d.ivar[k];
      if (!(w > 0)) continue;
      double z[kern::kClassMaxParams] = {};
      const double x = (d.lnlam[k] - ln1pz - t.lnlam0) / t.dlnlam - 0.5;
      const int k0 = static_cast<int>(std::floor(x));
      const double f = x - k0;
      for (int b = 0; b < nb; ++b) {
        const float* row = t.basis + static_cast<size_t>(b) * t.n_bin;
        const double lo = k0 >= 0 && k0 < t.n_bin ? row[k0] : 0.0;
        const double hi = k0 + 1 >= 0 && k0 + 1 < t.n_bin ? row[k0 + 1] : 0.0;
        z[b] = (1.0 - f) * lo + f * hi;
      }
      double p[kern::kClassPolyDeg + 1];
      kern::legendre(d.xleg[k], kern::kClassPolyDeg, p);
      for (int j = 0; j < np; ++j) z[nb + d.arm[k] * np + j] = p[j];
      for (int i = 0; i < m; ++i) {
        if (z[i] == 0.0) continue;
        const double wz = w * z[i];
        q[i] += wz * d.flux[k];
        for (int j = i; j < m; ++j) g[i * m + j] += wz * z[j];
      }
      ff += w * d.flux[k] * d.flux[k];
    }
    double scale = 0.0;
    for (int i = 0; i < m; ++i) scale = std::fmax(scale, g[i * m + i]);
    for (int i = 0; i < m; ++i) {
      for (int j = 0; j < i; ++j) g[i * m + j] = g[j * m + i];
      g[i * m + i] += 1e-12 * scale + 1e-300;
    }
    double a[kern::kClassMaxParams];
    for (int i = 0; i < m; ++i) a[i] = q[i];
    if (!kern::cholesky(g, m)) return INFINITY;
    kern::cholesky_solve(g, m, a);
    double fit = 0.0;
    for (int i = 0; i < m; ++i) fit += a[i] * q[i];
    return ff - fit;
  };
  kern::ClassPolySums ps;
  kern::class_poly_sums(d, &ps);
  for (double ln1pz : {0.0, 0.05, 0.3, -0.02}) {
    const double ref = dense(ln1pz), got = kern::class_chi2(t, d, ln1pz, ps);
    REQUIRE(std::isfinite(ref));
    CHECK(std::memcmp(&ref, &got, sizeof ref) == 0);
  }
}

TEST_CASE("the class rebinning equals each bin's sums in pixel order, bit for bit", "[classify]") {
  // Oracle: every usable pixel (finite flux and ivar, ivar > 0, mask 0, outside the masked band)
  // added to its bin's sums one pixel at a time in pixel order, as prepare_spectrum's rebinning
  // did before it summed four bins side by side. Bad values and masked pixels at random; two
  // grids: in wavelength order (the side-by-side sums) and with the wavelengths of two stretches
  // swapped (a bin in two runs: the one-pixel-at-a-time path).
  std::mt19937 rng(13);
  const std::vector<std::pair<double, double>> bands = {{5000.0, 5010.0}};
  for (const bool swapped : {false, true}) {
    ArmData a;
    a.name = "B";
    for (double w = 3600.0; w < 5900.0; w += 0.8) a.wave_vac_A.push_back(w);
    const size_t n = a.wave_vac_A.size();
    if (swapped) {
      std::vector<double>& w = a.wave_vac_A.mut();
      std::swap_ranges(w.begin() + 100, w.begin() + 130, w.begin() + 400);
    }
    for (size_t j = 0; j < n; ++j) {
      a.flux.push_back(1.0f + 0.01f * static_cast<float>(rng() % 100));
      a.ivar.push_back(50.0f + static_cast<float>(rng() % 7));
      a.mask.push_back(rng() % 11 == 0 ? 1 : 0);
      if (rng() % 13 == 0) a.flux.back() = NAN;
      if (rng() % 17 == 0) a.ivar.back() = rng() % 2 ? 0.0f : INFINITY;
    }
    const ClassSpectrum cs = rebin_for_classes({a.view()}, bands);
    std::map<long, std::pair<double, double>> want;
    for (size_t j = 0; j < n; ++j) {
      const double w = a.wave_vac_A[j];
      const float f = a.flux[j], iv = a.ivar[j];
      if (!(std::isfinite(f) && std::isfinite(iv) && iv > 0) || a.mask[j] != 0) continue;
      if (w >= bands[0].first && w <= bands[0].second) continue;
      auto& s = want[static_cast<long>(std::floor(std::log(w) / kClassBinDlnlam))];
      s.first += static_cast<double>(iv) * f;
      s.second += iv;
    }
    INFO("swapped stretches " << swapped);
    REQUIRE(cs.flux.size() == want.size());
    size_t i = 0, n_equal = 0;
    for (const auto& [k, s] : want) {
      CHECK(cs.lnlam[i] == (k + 0.5) * kClassBinDlnlam);
      const double f = s.first / s.second;
      n_equal += std::memcmp(&cs.flux[i], &f, sizeof f) == 0 &&
                 std::memcmp(&cs.ivar[i], &s.second, sizeof s.second) == 0;
      ++i;
    }
    CHECK(n_equal == want.size());
    CHECK(want.size() > 200);
  }
}
