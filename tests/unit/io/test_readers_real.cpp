// The readers on the shared real data (../shared/data): one file per supported format.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "io/readers.hpp"
#include "test_util.hpp"

using namespace velox;
using velox::test::data;

namespace {

bool increasing(const std::vector<double>& w) {
  for (size_t i = 1; i < w.size(); ++i) {
    if (!(w[i] > w[i - 1])) return false;
  }
  return true;
}

template <class V>
size_t count_finite(const V& v) {
  size_t n = 0;
  for (float x : v) n += std::isfinite(x) ? 1 : 0;
  return n;
}

// Rows of a simple CSV (no quoted commas), header included.
std::vector<std::vector<std::string>> read_csv(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::vector<std::string>> rows;
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> cells;
    std::stringstream ss(line);
    std::string cell;
    while (std::getline(ss, cell, ',')) cells.push_back(cell);
    rows.push_back(cells);
  }
  return rows;
}

const std::string kDr10 = "spectra/lamost_dr10_pylasp/fits/3703110.fits";
const std::string kDr8 = "spectra/lamost_dr8/fits/spec-55859-F5902_sp03-232.fits.gz";
const std::string kBoss = "spectra/sdss/spec-3586-55181-0500.fits";
const std::string kSdssWd = "spectra/sdss/spec-0266-51602-0031.fits";
const std::string kDesiEdr = "spectra/desi_edr/coadd-sv3-dark-26065.fits";
const std::string kDesiLamost = "spectra/desi_lamost/coadd-lamost-dr10.fits";

}  // namespace

TEST_CASE("detect_format recognises every real format from content", "[io][real]") {
  CHECK(detect_format(data(kDr10)) == SpectrumFormat::LamostDR10);
  CHECK(detect_format(data(kDr8)) == SpectrumFormat::LamostDR8);
  CHECK(detect_format(data(kBoss)) == SpectrumFormat::SdssSpec);
  CHECK(detect_format(data(kSdssWd)) == SpectrumFormat::SdssSpec);
  CHECK(detect_format(data(kDesiEdr)) == SpectrumFormat::DesiCoadd);
  CHECK(detect_format(data("spectra/desi_edr/coadd-5-169-thru20210419.fits")) ==
        SpectrumFormat::DesiCoadd);
  CHECK(detect_format(data("spectra/desi_edr/spectra-sv3-dark-26065.fits")) ==
        SpectrumFormat::DesiCoadd);
  CHECK(detect_format(data(kDesiLamost)) == SpectrumFormat::DesiCoadd);
}

TEST_CASE("format names round-trip through parse_format", "[io]") {
  for (auto f : {SpectrumFormat::Auto, SpectrumFormat::LamostDR8, SpectrumFormat::LamostDR10,
                 SpectrumFormat::SdssSpec, SpectrumFormat::DesiCoadd}) {
    CHECK(parse_format(format_name(f)) == f);
  }
}

TEST_CASE("LAMOST DR10 file has one target with TARGETID = OBSID and 3700-9100 A vacuum",
          "[io][real]") {
  const auto file = read_spectra(data(kDr10));
  REQUIRE(file.format == SpectrumFormat::LamostDR10);
  REQUIRE(file.spectra.size() == 1);
  const auto& s = file.spectra[0];
  CHECK(s.targetid == 3703110);
  CHECK(s.problem.empty());
  CHECK(s.source_file == "3703110.fits");
  REQUIRE(s.arms.size() == 1);
  const auto& a = s.arms[0];
  CHECK(a.size() == 3909);
  CHECK(a.flux.size() == 3909);
  CHECK(a.ivar.size() == 3909);
  CHECK(a.mask.size() == 3909);
  CHECK(increasing(a.wave_vac_A));
  CHECK(a.wave_vac_A.front() == Approx(3700.0).margin(5));
  CHECK(a.wave_vac_A.back() == Approx(9100.0).margin(5));
  CHECK(a.resolution_R == 1800.0);
  CHECK(s.meta.at("SUBCLASS") == "K7");
  CHECK(std::stod(s.meta.at("Z")) == Approx(-5.617e-05));
}

TEST_CASE("LAMOST DR8 .fits.gz reads with TARGETID equal to header_index.csv obsid", "[io][real]") {
  const auto rows = read_csv(data("spectra/lamost_dr8/header_index.csv"));
  REQUIRE(rows.size() > 3);
  REQUIRE(rows[0][0] == "file");
  REQUIRE(rows[0][1] == "obsid");
  int checked = 0;
  for (size_t r = 1; r < rows.size() && checked < 3; ++r, ++checked) {
    const auto file = read_spectra(data("spectra/lamost_dr8/fits/" + rows[r][0]));
    REQUIRE(file.format == SpectrumFormat::LamostDR8);
    REQUIRE(file.spectra.size() == 1);
    const auto& s = file.spectra[0];
    CHECK(s.targetid == std::stoll(rows[r][1]));
    CHECK(s.problem.empty());
    REQUIRE(s.arms.size() == 1);
    // DR8 images are 5 x NAXIS1 with NAXIS1 varying slightly from file to file (3904-3909).
    CHECK(s.arms[0].size() > 3900);
    CHECK(s.arms[0].size() <= 3909);
    CHECK(increasing(s.arms[0].wave_vac_A));
    CHECK(s.arms[0].wave_vac_A.front() == Approx(3700.0).margin(5));
    CHECK(count_finite(s.arms[0].flux) == s.arms[0].size());
    CHECK(s.meta.at("CLASS") == "STAR");
  }
}

TEST_CASE("BOSS star spec file: 10^loglam wavelengths, finite flux, SPALL SPECOBJID",
          "[io][real]") {
  const auto file = read_spectra(data(kBoss));
  REQUIRE(file.spectra.size() == 1);
  const auto& s = file.spectra[0];
  CHECK(s.problem.empty());
  const auto& a = s.arms.at(0);
  CHECK(a.size() == 4625);
  CHECK(a.wave_vac_A.front() == Approx(std::pow(10.0, 3.5516)).epsilon(1e-6));
  CHECK(a.wave_vac_A.back() == Approx(std::pow(10.0, 3.5516 + 4624e-4)).epsilon(1e-6));
  CHECK(increasing(a.wave_vac_A));
  CHECK(count_finite(a.flux) == a.size());
  // The line spread from wdisp (Gaussian sigma in 1e-4 dex pixels) as a resolution matrix:
  // the instrument R is read from it (resolution_R NaN). Rows sum to 1 inside the arm; the
  // rows' widths give BOSS's R ~1000-1400 below 4000 A and ~1900-2400 above 7000 A (Smee et al.
  // 2013; one R of 2000 for both read the blue's width as rotation, docs/vsini.md).
  CHECK(std::isnan(a.resolution_R));
  REQUIRE(a.ndiag >= 15);  // 4 sigma of the 99th percentile row (1.8-2 px at the blue end)
  REQUIRE(a.ndiag <= 17);
  REQUIRE(a.resolution.size() == a.size() * a.ndiag);
  const size_t n = a.size();
  const int h = a.ndiag / 2;
  std::vector<double> r_blue, r_red;
  for (size_t i = h; i + h < n; ++i) {
    double sum = 0.0, m2 = 0.0;
    for (int d = 0; d < a.ndiag; ++d) {
      const int o = h - d;  // row i's tap at column i + o
      const double w = a.resolution[static_cast<size_t>(d) * n + i + o];
      sum += w;
      m2 += w * o * o;
    }
    CHECK(sum == Approx(1.0).epsilon(1e-5));
    const double R = 1.0 / (2.3548 * std::sqrt(m2) * std::log(10.0) * 1e-4);
    if (a.wave_vac_A[i] < 4000) r_blue.push_back(R);
    if (a.wave_vac_A[i] > 7000) r_red.push_back(R);
  }
  std::sort(r_blue.begin(), r_blue.end());
  std::sort(r_red.begin(), r_red.end());
  CHECK(r_blue[r_blue.size() / 2] > 900);
  CHECK(r_blue[r_blue.size() / 2] < 1400);
  CHECK(r_red[r_red.size() / 2] > 1900);
  CHECK(r_red[r_red.size() / 2] < 2400);
  // SPALL SPECOBJID is an unsigned 64-bit column (K with TZERO = 2^63).
  CHECK(s.targetid == 4037614591814901760LL);
  CHECK(s.meta.at("PLATE") == "3586");
  CHECK(s.meta.at("CLASS") == "STAR");
  CHECK(s.meta.at("SUBCLASS") == "G1V (95128)");
}

TEST_CASE("SDSS-I spec file takes TARGETID from the SPECOBJ string column", "[io][real]") {
  const auto file = read_spectra(data(kSdssWd));
  REQUIRE(file.spectra.size() == 1);
  CHECK(file.spectra[0].targetid == 299497923312379904LL);
  CHECK(file.spectra[0].arms.at(0).size() == 3842);
}

TEST_CASE("DESI EDR coadd: 5 fibres, arms B/R/Z with 11-diagonal resolution", "[io][real]") {
  const auto file = read_spectra(data(kDesiEdr));
  REQUIRE(file.format == SpectrumFormat::DesiCoadd);
  REQUIRE(file.spectra.size() == 5);
  const size_t npix[3] = {2751, 2326, 2881};
  for (size_t i = 0; i < 5; ++i) {
    const auto& s = file.spectra[i];
    CHECK(s.row_in_file == static_cast<int64_t>(i));
    CHECK(s.targetid != -1);
    CHECK(s.problem.empty());
    CHECK(s.meta.count("OBJTYPE") == 1);
    CHECK(s.meta.count("COADD_FIBERSTATUS") == 1);
    REQUIRE(s.arms.size() == 3);
    for (size_t k = 0; k < 3; ++k) {
      const auto& a = s.arms[k];
      CHECK(a.name == std::string(1, "BRZ"[k]));
      CHECK(a.size() == npix[k]);
      CHECK(a.ndiag == 11);
      CHECK(a.resolution.size() == 11 * npix[k]);
      CHECK(std::isnan(a.resolution_R));
      CHECK(increasing(a.wave_vac_A));
    }
  }
  CHECK(file.spectra[0].arms[0].wave_vac_A.front() == Approx(3600.0));
  // One array of wavelengths per arm, which the fibres share (no copy per fibre); writing one
  // arm's wavelengths copies them first, leaving the others as they were.
  for (size_t i = 1; i < 5; ++i)
    for (size_t k = 0; k < 3; ++k)
      CHECK(file.spectra[i].arms[k].wave_vac_A.shares(file.spectra[0].arms[k].wave_vac_A));
  CHECK_FALSE(file.spectra[0].arms[0].wave_vac_A.shares(file.spectra[0].arms[1].wave_vac_A));
  ArmData copy = file.spectra[1].arms[0];
  CHECK(copy.wave_vac_A.shares(file.spectra[0].arms[0].wave_vac_A));
  copy.wave_vac_A.mut()[0] = 1.0;
  CHECK_FALSE(copy.wave_vac_A.shares(file.spectra[0].arms[0].wave_vac_A));
  CHECK(copy.wave_vac_A.front() == 1.0);
  CHECK(file.spectra[1].arms[0].wave_vac_A.front() == Approx(3600.0));
  // Unassigned fibres carry negative TARGETIDs and an empty OBJTYPE in real DESI files.
  CHECK(file.spectra[0].targetid == -2713437);
  CHECK(file.spectra[0].meta.at("OBJTYPE").empty());
  CHECK(file.spectra[2].targetid == 39627866878511337LL);
  CHECK(file.spectra[3].meta.at("OBJTYPE") == "SKY");
}

TEST_CASE("DESI resolution rows of a fibre sum to about one per pixel", "[io][real]") {
  const auto file = read_spectra(data(kDesiLamost));
  const auto& a = file.spectra.at(0).arms.at(1);
  const size_t n = a.size(), j = n / 2;
  double column_sum = 0;
  for (int d = 0; d < a.ndiag; ++d) column_sum += a.resolution[d * n + j];
  CHECK(column_sum == Approx(1.0).margin(0.02));
}

TEST_CASE("DESI-format LAMOST coadd: TARGETIDs match truth-lamost-dr10.csv", "[io][real]") {
  const auto file = read_spectra(data(kDesiLamost));
  const auto truth = read_csv(data("spectra/desi_lamost/truth-lamost-dr10.csv"));
  REQUIRE(truth[0][0] == "TARGETID");
  REQUIRE(file.spectra.size() == 29);
  for (size_t r = 1; r < truth.size() && r <= 25; ++r) {
    CHECK(file.spectra[r - 1].targetid == std::stoll(truth[r][0]));
    CHECK(file.spectra[r - 1].meta.at("OBJTYPE") == "TGT");
  }
  CHECK(file.spectra[25].meta.at("OBJTYPE") == "SKY");
  CHECK(file.spectra[28].meta.at("COADD_FIBERSTATUS") == "512");
}
