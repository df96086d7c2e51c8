// Broken inputs: whole-file problems throw one clear IoError naming the file (and HDU/column);
// per-target problems become Spectrum::problem. Nothing crashes.
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "common/error.hpp"
#include "io/fits.hpp"
#include "io/readers.hpp"
#include "test_util.hpp"

using namespace velox;
using Catch::Contains;

namespace {

void copy_prefix(const std::string& from, const std::string& to, size_t n_bytes) {
  std::ifstream in(from, std::ios::binary);
  std::vector<char> buf(n_bytes);
  in.read(buf.data(), static_cast<std::streamsize>(n_bytes));
  std::ofstream(to, std::ios::binary).write(buf.data(), in.gcount());
}

// A LAMOST DR10-like file: primary with OBSID, BINTABLE COADD with n_rows rows of n_pix pixels.
// Row r's wavelengths are NaN when nan_row == r. `columns` chooses which columns exist.
void write_dr10_like(const std::string& path, int64_t n_rows, int64_t n_pix, int64_t nan_row,
                     const std::vector<std::string>& columns) {
  auto f = fits::File::create(path);
  f.write_image({}, {});
  f.write_key("OBSID", int64_t{4242});
  f.write_key("TELESCOP", std::string("LAMOST"));
  const std::string tform = std::to_string(n_pix) + "E";
  f.create_table("COADD", n_rows, columns, std::vector<std::string>(columns.size(), tform));
  for (const auto& c : columns) {
    std::vector<double> v(n_rows * n_pix, c == "ANDMASK" ? 0.0 : 1.0);
    if (c == "WAVELENGTH") {
      for (int64_t r = 0; r < n_rows; ++r) {
        for (int64_t j = 0; j < n_pix; ++j) {
          v[r * n_pix + j] = r == nan_row ? NAN : 4000.0 + static_cast<double>(j);
        }
      }
    }
    f.write_column(c, v);
  }
}

// A DESI-like coadd with one arm B: FIBERMAP with n_fibermap rows, B_* images for n_fib fibres.
void write_desi_like(const std::string& path, int64_t n_fibermap, int64_t n_fib, int64_t n_pix) {
  auto f = fits::File::create(path);
  f.write_image({}, {});
  f.create_table("FIBERMAP", n_fibermap, {"TARGETID", "OBJTYPE"}, {"K", "3A"});
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < n_fibermap; ++i) ids.push_back(1000 + i);
  f.write_column("TARGETID", ids);
  f.write_column("OBJTYPE", std::vector<std::string>(n_fibermap, "TGT"));
  std::vector<double> wave(n_pix);
  for (int64_t j = 0; j < n_pix; ++j) wave[j] = 3600.0 + 0.8 * static_cast<double>(j);
  f.write_image(wave, {n_pix}, "B_WAVELENGTH");
  f.write_image(std::vector<double>(n_fib * n_pix, 1.0), {n_fib, n_pix}, "B_FLUX");
  f.write_image(std::vector<double>(n_fib * n_pix, 4.0), {n_fib, n_pix}, "B_IVAR");
  f.write_image(std::vector<double>(n_fib * n_pix, 0.0), {n_fib, n_pix}, "B_MASK");
}

}  // namespace

TEST_CASE("a text file is rejected with an IoError naming it", "[io][bad]") {
  const auto path = test::tmp_dir("bad_text") + "/not_fits.fits";
  std::ofstream(path) << "this is not a FITS file\n";
  CHECK_THROWS_AS(read_spectra(path), IoError);
  CHECK_THROWS_WITH(read_spectra(path), Contains("not_fits.fits") && Contains("FITS"));
  CHECK_THROWS_WITH(detect_format(path), Contains("not_fits.fits"));
}

TEST_CASE("a missing file is rejected with an IoError naming it", "[io][bad]") {
  CHECK_THROWS_WITH(read_spectra("/nonexistent/spec.fits"), Contains("/nonexistent/spec.fits"));
}

TEST_CASE("a truncated FITS file throws IoError instead of crashing", "[io][bad]") {
  const auto dir = test::tmp_dir("bad_truncated");
  const auto plain = dir + "/3703110_cut.fits";
  copy_prefix(test::data("spectra/lamost_dr10_pylasp/fits/3703110.fits"), plain, 5000);
  CHECK_THROWS_WITH(read_spectra(plain), Contains("3703110_cut.fits"));
  const auto gz = dir + "/dr8_cut.fits.gz";
  copy_prefix(test::data("spectra/lamost_dr8/fits/spec-55859-F5902_sp03-232.fits.gz"), gz, 5000);
  CHECK_THROWS_WITH(read_spectra(gz), Contains("dr8_cut.fits.gz"));
  const auto desi = dir + "/desi_cut.fits";
  copy_prefix(test::data("spectra/desi_edr/coadd-sv3-dark-26065.fits"), desi, 200000);
  CHECK_THROWS_WITH(read_spectra(desi, SpectrumFormat::DesiCoadd), Contains("desi_cut.fits"));
}

TEST_CASE("a file missing a required column names the HDU and the column", "[io][bad]") {
  const auto path = test::tmp_dir("bad_column") + "/no_ivar.fits";
  write_dr10_like(path, 1, 20, -1, {"FLUX", "WAVELENGTH"});
  REQUIRE(detect_format(path) == SpectrumFormat::LamostDR10);
  CHECK_THROWS_WITH(read_spectra(path),
                    Contains("no_ivar.fits") && Contains("COADD") && Contains("IVAR"));
}

TEST_CASE("reading a file as the wrong format names the missing HDU", "[io][bad]") {
  const auto path = test::data("spectra/lamost_dr10_pylasp/fits/3703110.fits");
  CHECK_THROWS_WITH(read_spectra(path, SpectrumFormat::SdssSpec), Contains("3703110.fits"));
  CHECK_THROWS_WITH(read_spectra(path, SpectrumFormat::DesiCoadd), Contains("B_FLUX"));
}

TEST_CASE("a FITS file of no known layout is rejected by detect_format", "[io][bad]") {
  const auto path = test::tmp_dir("bad_layout") + "/image.fits";
  fits::File::create(path).write_image({1, 2, 3}, {3});
  CHECK_THROWS_WITH(detect_format(path), Contains("image.fits") && Contains("unknown"));
}

TEST_CASE("NaN wavelengths make a per-target problem, other targets stay fine", "[io][bad]") {
  const auto path = test::tmp_dir("bad_nan") + "/nan_wave.fits";
  write_dr10_like(path, 3, 20, 1, {"FLUX", "IVAR", "WAVELENGTH", "ANDMASK"});
  const auto file = read_spectra(path);
  REQUIRE(file.spectra.size() == 3);
  CHECK(file.spectra[0].problem.empty());
  CHECK_THAT(file.spectra[1].problem, Contains("non-finite wavelength"));
  CHECK(file.spectra[2].problem.empty());
  CHECK(file.spectra[2].targetid == 4242);
  CHECK(file.spectra[2].row_in_file == 2);
}

TEST_CASE("DESI fibres beyond the FIBERMAP rows get TARGETID -1 and a problem", "[io][bad]") {
  const auto path = test::tmp_dir("bad_fibermap") + "/short_fibermap.fits";
  write_desi_like(path, 2, 3, 30);
  REQUIRE(detect_format(path) == SpectrumFormat::DesiCoadd);
  const auto file = read_spectra(path);
  REQUIRE(file.spectra.size() == 3);
  CHECK(file.spectra[0].targetid == 1000);
  CHECK(file.spectra[1].targetid == 1001);
  CHECK(file.spectra[0].problem.empty());
  CHECK(file.spectra[0].arms.at(0).ndiag == 0);
  CHECK(file.spectra[2].targetid == -1);
  CHECK_THAT(file.spectra[2].problem, Contains("FIBERMAP"));
}
