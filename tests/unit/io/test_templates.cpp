// Template library readers: MILES on the shared data, PHOENIX on files generated here.
#include <catch2/catch.hpp>
#include <cmath>

#include "common/error.hpp"
#include "io/fits.hpp"
#include "io/readers.hpp"
#include "test_util.hpp"

using namespace velox;

TEST_CASE("MILES library: 985 files, 945 with valid labels, vacuum wavelengths", "[io][miles]") {
  const auto set = read_templates(test::data("templates/miles"));
  CHECK(set.kind == "miles");
  CHECK(set.spectra.size() + set.skipped.size() == 985);
  // 39 stars have a 9999 label, m0221 is not in MILES_params.db (its row reads "022."): all 40
  // are gaps of the catalogue (an info line, issue 53), none an unreadable file (a warning).
  CHECK(set.spectra.size() == 945);
  CHECK(set.skipped.size() == 40);
  CHECK(set.n_unlabelled == 40);
  CHECK(set.fwhm_A == 2.5);
  CHECK(std::isnan(set.resolution_R));
  CHECK_FALSE(set.has_alpha);
  const auto& t = set.spectra.front();
  CHECK(t.name == "m0001V");
  CHECK(t.flux.size() == 4300);
  CHECK(t.wave_vac_A.front() == Approx(air_to_vacuum_A(3540.5)).epsilon(1e-12));
  CHECK(t.wave_vac_A.back() == Approx(air_to_vacuum_A(3540.5 + 4299 * 0.9)).epsilon(1e-12));
  for (const auto& s : set.spectra) {
    CHECK(std::isfinite(s.teff_K));
    CHECK(s.teff_K < 9999.0 * 10);
  }
}

TEST_CASE("MILES thin subset takes labels from MLOGT/MLOGG/MFEH headers", "[io][miles]") {
  const auto set = read_templates(test::data("templates/miles/miles_thin"));
  CHECK(set.kind == "miles");
  CHECK(set.spectra.size() == 219);
  CHECK(set.skipped.empty());
  const auto& t = set.spectra.front();
  CHECK(t.name == "lt3.51_lg5.0_fe+0.1");
  CHECK(t.teff_K == Approx(std::pow(10.0, 3.513217600067939)));
  CHECK(t.logg == Approx(4.96));
  CHECK(t.feh == Approx(0.1));
}

namespace {

// A PHOENIX-format file: primary image of flux with the PHX* label keys.
void write_phoenix(const std::string& path, double teff, double logg, double mh, double alpha,
                   size_t n_pix) {
  auto f = fits::File::create(path);
  std::vector<double> flux(n_pix);
  for (size_t i = 0; i < n_pix; ++i) flux[i] = teff + static_cast<double>(i);
  f.write_image(flux, {static_cast<int64_t>(n_pix)});
  f.write_key("PHXTEFF", teff);
  f.write_key("PHXLOGG", logg);
  f.write_key("PHXM_H", mh);
  f.write_key("PHXALPHA", alpha);
}

}  // namespace

TEST_CASE("PHOENIX-format directory: labels from PHX keys, shared WAVE file", "[io][phoenix]") {
  const auto dir = test::tmp_dir("phoenix_grid");
  const size_t n = 50;
  {
    auto w = fits::File::create(dir + "/WAVE_PHOENIX-ACES-AGSS-COND-2011.fits");
    std::vector<double> wave(n);
    for (size_t i = 0; i < n; ++i) wave[i] = 5000.0 + 0.1 * static_cast<double>(i);
    w.write_image(wave, {static_cast<int64_t>(n)});
  }
  write_phoenix(dir + "/lte05000-4.50-0.0.fits", 5000, 4.5, 0.0, 0.0, n);
  write_phoenix(dir + "/lte05000-4.50-0.5.fits", 5000, 4.5, -0.5, 0.0, n);
  write_phoenix(dir + "/lte05200-4.00-0.0.fits", 5200, 4.0, 0.0, 0.0, n);
  write_phoenix(dir + "/lte05200-4.00-0.0.Alpha=+0.40.fits", 5200, 4.0, 0.0, 0.4, n);
  write_phoenix(dir + "/lte09999-wrong-length.fits", 9999, 4.0, 0.0, 0.0, n - 1);

  const auto set = read_templates(dir);
  CHECK(set.kind == "phoenix");
  REQUIRE(set.spectra.size() == 4);
  REQUIRE(set.skipped.size() == 1);
  CHECK(set.skipped[0].find("lte09999-wrong-length") != std::string::npos);
  CHECK(set.has_alpha);
  CHECK(std::isnan(set.resolution_R));
  const auto& t = set.spectra[1];  // sorted by file name: ...0.0, ...0.5, ...Alpha, ...0.0
  CHECK(t.name == "lte05000-4.50-0.5");
  CHECK(t.teff_K == 5000);
  CHECK(t.logg == 4.5);
  CHECK(t.feh == -0.5);
  CHECK(t.alphafe == 0.0);
  CHECK(t.wave_vac_A.size() == n);
  CHECK(t.wave_vac_A[1] == Approx(5000.1));
  CHECK(t.flux[2] == 5002.0);
  CHECK(set.spectra[2].name == "lte05200-4.00-0.0.Alpha=+0.40");
  CHECK(set.spectra[2].alphafe == Approx(0.4));
}

TEST_CASE("read_templates on a missing or empty directory throws IoError", "[io][templates]") {
  CHECK_THROWS_AS(read_templates(test::data("no/such/dir")), IoError);
  const auto dir = test::tmp_dir("empty_templates");
  CHECK_THROWS_WITH(read_templates(dir),
                    Catch::Contains("no usable templates: found no FITS files"));
}

TEST_CASE("read_templates on a folder of spectra says what it found and what it expects",
          "[io][templates]") {
  // Issue 53: the message named a MILES header keyword (MLOGT) that the user never chose.
  try {
    (void)read_templates(test::data("spectra/lamost_dr10_pylasp/fits"));
    FAIL("a folder of spectra read as templates");
  } catch (const IoError& e) {
    const std::string m = e.what();
    CHECK(m.find("found 25 FITS files, e.g. 3703110.fits: a lamost-dr10 spectrum (an input of "
                 "velox fit, not a template)") != std::string::npos);
    CHECK(m.find("A template folder holds MILES") != std::string::npos);
    CHECK(m.find("--preset") != std::string::npos);
    CHECK(m.find("CFITSIO") == std::string::npos);
  }
}
