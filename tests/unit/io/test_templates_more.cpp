// Template readers beyond MILES/PHOENIX on the shared real data: STELIB (air, header labels with
// gaps, zero-flux ends), the Kesseli M dwarfs (vacuum, Teff and logg from the Pecaut & Mamajek
// table, BOSS line spread) and a converted Cannon model (scripts/cannon-to-h5.py).
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <string>

#include "common/error.hpp"
#include "emulator/build.hpp"
#include "io/cannon.hpp"
#include "io/fits.hpp"
#include "io/h5.hpp"
#include "io/h5_seal.hpp"
#include "io/readers.hpp"
#include "test_util.hpp"

using namespace velox;

TEST_CASE("STELIB: 255 files, 203 with all three labels, air converted, gaps trimmed",
          "[io][stelib]") {
  const auto set = read_templates(test::data("templates/stelib"));
  CHECK(set.kind == "stelib");
  CHECK(set.medium == "air");
  CHECK(set.fwhm_A == 3.4);
  // The data README: 203 of 255 stars have TEFF, LOG_G and FE_H; the others are listed.
  CHECK(set.spectra.size() == 203);
  CHECK(set.spectra.size() + set.skipped.size() == 255);
  for (const auto& t : set.spectra) {
    REQUIRE(t.flux.size() == t.wave_vac_A.size());
    CHECK(std::isfinite(t.teff_K));
    CHECK(std::isfinite(t.logg));
    CHECK(std::isfinite(t.feh));
    // Ends trimmed: the first and last pixels carry flux.
    CHECK(t.flux.front() > 0);
    CHECK(t.flux.back() > 0);
    // Air -> vacuum: about +0.9 A at 3200 A, +2.7 A at 9900 A; never beyond the file's axis.
    CHECK(t.wave_vac_A.front() > 3197.0);
    CHECK(t.wave_vac_A.back() < 9915.0);
    // The air-vacuum difference is 0.9 A at 3200 A and grows to the red: a star without the
    // conversion would show 0.
    CHECK(t.wave_vac_A.front() - vacuum_to_air_A(t.wave_vac_A.front()) > 0.85);
  }
  CHECK(set.n_unlabelled == 52);  // the README: 52 without all three labels
  // HD005820 has '-' labels (header strings): skipped with a reason.
  bool listed = false;
  for (const auto& s : set.skipped) listed = listed || s.rfind("HD005820:", 0) == 0;
  CHECK(listed);
}

TEST_CASE("Kesseli M dwarfs: Teff and logg from the dwarf table, BOSS line spread",
          "[io][kesseli]") {
  const auto set = read_templates(test::data("templates/kesseli_mdwarfs"));
  CHECK(set.kind == "kesseli");
  CHECK(set.medium == "vacuum");
  CHECK(set.curated);
  CHECK(set.spectra.size() == 33);
  CHECK(set.skipped.empty());
  CHECK(set.frame.find("M0..M9 = +3.6 +3.4 +0.7 +4.7 +4.9 +5.1 +5.0 +2.9 +2.9 +2.9 km/s") !=
        std::string::npos);
  // BOSS R from 1560 (3650 A) to 2650 (10000 A): FWHM = lambda / R, tabulated every 50 A and
  // linear in between (lambda / R curves by < 1e-5 relative over 50 A).
  CHECK(set.fwhm_at(3650.0) == Approx(3650.0 / 1560.0).epsilon(1e-5));
  CHECK(set.fwhm_at(6025.0) == Approx(6025.0 / (1560.0 + 1090.0 * 2375.0 / 6350.0)).epsilon(1e-5));
  CHECK(set.fwhm_at(10000.0) == Approx(10000.0 / 2650.0).epsilon(1e-5));
  bool m4 = false, m9 = false;
  for (const auto& t : set.spectra) {
    CHECK(t.curated);
    CHECK(t.wave_vac_A.front() <
          3652.0);  // the file starts at 3650.05 A (a few noisy pixels trimmed)
    if (t.name == "M4_+0.0_Dwarf") {
      m4 = true;
      // Pecaut & Mamajek M4V: 3210 K, 0.24 Msun, 0.274 Rsun -> logg 4.438 + log10(0.24) -
      // 2 log10(0.274) = 4.94; [Fe/H] bin (-0.5, 0.0] -> -0.25.
      CHECK(t.teff_K == 3210.0);
      CHECK(t.logg == Approx(4.438 + std::log10(0.24) - 2 * std::log10(0.274)).margin(1e-9));
      CHECK(t.feh == Approx(-0.25));
      // On the redrock/Cannon frame (issue 52): the file's 10^LogLam x (1 + 4.9 / c), M4's
      // measured offset (docs/rv-zero-point.md). The reader may trim a few pixels at the start,
      // so the first wavelength is matched to one of the file's first 20 (the grid step, 1.7e-5
      // relative, is about the shift itself: exactly one ratio must be the factor, to 1e-13).
      auto f = fits::File::open_read(test::data("templates/kesseli_mdwarfs/M4_+0.0_Dwarf.fits"));
      f.move_to(1);
      const auto loglam = f.read_column_double("LogLam");
      const double factor = 1.0 + 4.9 / 299792.458;
      int matches = 0;
      for (size_t j = 0; j < 20 && j < loglam.size(); ++j)
        matches += std::fabs(t.wave_vac_A.front() / std::pow(10.0, loglam[j]) - factor) < 1e-13;
      CHECK(matches == 1);
    }
    if (t.name == "M9") {
      m9 = true;
      CHECK(t.teff_K == 2380.0);
      CHECK(t.feh == 0.0);
    }
  }
  CHECK(m4);
  CHECK(m9);
  // A missing table is a clear error, not a silent default.
  CHECK_THROWS_WITH(read_templates(test::data("templates/kesseli_mdwarfs"), "/no/such/table.txt"),
                    Catch::Contains("dwarf Teff table"));
}

namespace {
// A two-label-term model written with the layout of scripts/cannon-to-h5.py.
std::string write_tiny_cannon(const std::string& dir) {
  const std::string path = dir + "/tiny.h5";
  {
    auto f = h5::File::create(path, /*seal_block=*/true);
    const size_t n = 5, nt = 3;
    std::vector<double> disp = {5000, 5000.1, 5000.2, 5000.3, 5000.4}, theta(n * nt), s2(n, 0.0);
    for (size_t i = 0; i < n; ++i) {
      theta[i * nt] = 0.9;           // constant
      theta[i * nt + 1] = 0.01 * i;  // x_TEFF
      theta[i * nt + 2] = -0.02;     // x_LOGG * x_FEH
    }
    f.write("dispersion", disp, {n});
    f.write("theta", theta, {n, nt});
    f.write("s2", s2, {n});
    f.write("powers", std::vector<int64_t>{0, 0, 0, 1, 0, 0, 0, 1, 1}, {nt, 3});
    f.write("fiducials", std::vector<double>{5000, 4, 0}, {3});
    f.write("scales", std::vector<double>{1000, 2, 1}, {3});
    f.write("training_set_labels", std::vector<double>{4000, 1, -1, 6000, 5, 0.5}, {2, 3});
    f.set_attr("/", "label_names", std::string("TEFF,LOGG,FEH"));
    f.set_attr("/", "lsf_fwhm_A", static_cast<double>(NAN));
  }
  h5::seal::write(path);  // as scripts/cannon-to-h5.py does
  return path;
}
}  // namespace

TEST_CASE("Cannon model: the polynomial in scaled labels, clipped to [0, 1]", "[io][cannon]") {
  const auto m = read_cannon_h5(write_tiny_cannon(test::tmp_dir("cannon_tiny")));
  CHECK(m.n_terms == 3);
  CHECK(m.lsf_fwhm_A == 0.0);  // NaN in the file: unresolved
  // Air 5000 A -> vacuum 5001.39 A.
  CHECK(m.wave_vac_A[0] == Approx(air_to_vacuum_A(5000.0)).epsilon(1e-12));
  const double lab[3] = {6000, 5, 0.5};  // x = (1, 0.5, 0.5)
  const auto f = m.evaluate(lab);
  for (size_t i = 0; i < f.size(); ++i) CHECK(f[i] == Approx(0.9 + 0.01 * i - 0.02 * 0.25));
  const double hot[3] = {60000, 4, 0};  // x_TEFF = 55: 0.9 + 0.01 * 55 * i > 1 for i >= 1
  CHECK(m.evaluate(hot)[4] == 1.0);
  CHECK(m.trained_near(lab, 0.01, 0.1, 0.1));
  const double far[3] = {5000, 3, 0};
  CHECK_FALSE(m.trained_near(far, 0.01, 0.1, 0.1));
}

TEST_CASE("Cannon model: thedoppler's coolstars model converted, at the Sun's labels",
          "[io][cannon]") {
  const std::string dir = test::tmp_dir("cannon_real");
  const std::string cmd = std::string("/usr/bin/python3 ") + VELOX_TEST_SOURCE_DIR +
                          "/scripts/cannon-to-h5.py " +
                          test::data(
                              "templates/doppler_cannon/"
                              "cannongrid_3000_18000_coolstars_norm_cubic_model.pkl") +
                          " " + dir + "/coolstars.h5 > /dev/null";
  REQUIRE(std::system(cmd.c_str()) == 0);
  const auto m = read_cannon_h5(dir + "/coolstars.h5");
  CHECK(m.n_pix == 150001);
  CHECK(m.n_terms == 20);
  CHECK(m.label_min[0] == Approx(3500));
  CHECK(m.label_max[0] == Approx(8000));
  // The Cannon 0.2.93's own evaluation (annieslasso, run by hand on the pickle), at pixels 0,
  // 25000, 60000, 100000 and 150000 (3000, 5500, 9000, 13000, 18000 A air): same formula, so
  // agreement to rounding (1e-12 relative).
  const double sun[3] = {5777.0, 4.44, 0.0};
  const auto f = m.evaluate(sun);
  const std::pair<int, double> ref[] = {{0, 0.4278426742116462},
                                        {25000, 0.9930268769425451},
                                        {60000, 0.9627309299734009},
                                        {100000, 0.9979691927935712},
                                        {150000, 0.9991271403767702}};
  for (const auto& [i, v] : ref) CHECK(f[i] == Approx(v).epsilon(1e-12));
}

TEST_CASE("Cannon model: inconsistent or non-finite files are refused with their name",
          "[io][cannon]") {
  const std::string dir = test::tmp_dir("cannon_bad");
  {
    auto f = h5::File::create(dir + "/bad.h5");
    f.write("dispersion", std::vector<double>{1, 2, 3}, {3});
  }
  // Unsealed: refused before libhdf5 parses it.
  CHECK_THROWS_WITH(read_cannon_h5(dir + "/bad.h5"), Catch::Contains("no integrity seal"));
  // One dataset replaced at a time in an otherwise valid model.
  const std::vector<double> disp = {5000, 5000.1, 5000.2, 5000.3, 5000.4};
  auto model = [&](const std::string& name, const std::vector<double>& theta,
                   std::vector<uint64_t> theta_shape, const std::vector<int64_t>& powers,
                   std::vector<uint64_t> powers_shape, const std::vector<double>& labels) {
    const std::string path = dir + "/" + name + ".h5";
    {
      auto f = h5::File::create(path, /*seal_block=*/true);
      f.write("dispersion", disp, {5});
      f.write("theta", theta, theta_shape);
      f.write("powers", powers, powers_shape);
      f.write("fiducials", std::vector<double>{5000, 4, 0}, {3});
      f.write("scales", std::vector<double>{1000, 2, 1}, {3});
      f.write("training_set_labels", labels, {labels.size() / 3, 3});
    }
    h5::seal::write(path);
    return path;
  };
  const std::vector<double> theta(5, 0.9), labels = {4000, 1, -1, 6000, 5, 0.5};
  const std::vector<int64_t> powers = {0, 0, 0};
  CHECK_NOTHROW(read_cannon_h5(model("good", theta, {5, 1}, powers, {1, 3}, labels)));
  CHECK_THROWS_WITH(read_cannon_h5(model("short_theta", std::vector<double>(4, 0.9), {4, 1}, powers,
                                         {1, 3}, labels)),
                    Catch::Contains("theta must be"));
  CHECK_THROWS_WITH(read_cannon_h5(model("two_labels", theta, {5, 1}, {0, 0}, {1, 2}, labels)),
                    Catch::Contains("powers must be"));
  CHECK_THROWS_WITH(read_cannon_h5(model("nan_label", theta, {5, 1}, powers, {1, 3},
                                         {4000, 1, NAN, 6000, 5, 0.5})),
                    Catch::Contains("non-finite"));
}

TEST_CASE("Cannon model: the dispersion's medium attribute decides the air-vacuum conversion",
          "[io][cannon]") {
  const std::string dir = test::tmp_dir("cannon_medium");
  const std::string path = write_tiny_cannon(dir);
  {
    auto f = h5::File::create(dir + "/vac.h5", /*seal_block=*/true);
    f.write("dispersion", std::vector<double>{5000, 5000.1, 5000.2, 5000.3, 5000.4}, {5});
    f.set_attr("dispersion", "medium", std::string("vacuum"));
    f.write("theta", std::vector<double>(5, 0.9), {5, 1});
    f.write("powers", std::vector<int64_t>{0, 0, 0}, {1, 3});
    f.write("fiducials", std::vector<double>{5000, 4, 0}, {3});
    f.write("scales", std::vector<double>{1000, 2, 1}, {3});
    f.write("training_set_labels", std::vector<double>{4000, 1, -1}, {1, 3});
  }
  h5::seal::write(dir + "/vac.h5");
  CHECK(read_cannon_h5(dir + "/vac.h5").wave_vac_A[0] == 5000.0);
  CHECK(read_cannon_h5(path).wave_vac_A[0] == Approx(air_to_vacuum_A(5000.0)).epsilon(1e-12));
}

// The GP hyper-parameter search runs its trials on BuildConfig::threads threads and takes them
// in grid order (emulator/build.cpp): the library must be the same bits for any thread count.
// miles_thin over 5000-5500 A with 8 components keeps the two builds short (86 s under ASan
// over the whole range).
TEST_CASE("The emulator build gives the same library bits on 1 and on 3 threads",
          "[emulator][templates]") {
  const auto set = read_templates(test::data("templates/miles/miles_thin"));
  BuildConfig bc;
  bc.n_components = 8;
  bc.wave_min_A = 5000.0;
  bc.wave_max_A = 5500.0;
  bc.threads = 1;
  const TemplateLibrary one = build_library(set, bc);
  bc.threads = 3;
  const TemplateLibrary three = build_library(set, bc);
  CHECK(one.n_train == three.n_train);
  CHECK(one.basis == three.basis);
  CHECK(one.alpha == three.alpha);
  CHECK(one.poly_coef == three.poly_coef);
  CHECK(one.length_scale == three.length_scale);
  CHECK(one.loo_rms == three.loo_rms);
  CHECK(one.model_sigma == three.model_sigma);
  CHECK(one.attrs == three.attrs);
}
