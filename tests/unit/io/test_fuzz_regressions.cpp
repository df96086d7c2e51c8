// What fuzzing the readers found (scripts/fuzz.sh, tests/fuzz/), kept fixed. The crash inputs
// themselves are mutated copies of the shared survey files, which stay out of git; each finding
// is rebuilt here from synthetic data and run through the same harness code
// (tests/fuzz/fuzz_targets.hpp), where a crash, an unexpected exception (the harness aborts) or,
// in the sanitizer build, a sanitizer report fails the test. Inputs without survey data can also
// be dropped into tests/fuzz/regressions/<target>/: the last test replays them.
#include <fitsio.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <random>

#include "common/error.hpp"
#include "emulator/build.hpp"
#include "fuzz/fuzz_targets.hpp"
#include "io/fits.hpp"
#include "io/readers.hpp"
#include "test_util.hpp"

using namespace velox;
using Catch::Contains;
namespace fs = std::filesystem;

namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}
void spit(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}
void run(const std::string& target, const std::string& bytes) {
  fuzz::run_target(target, reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
}

// Replaces the value of the `nth` (0-based) header card KEY with `value` (right-justified in
// columns 11-30, as FITS writes integers).
std::string patch_card(std::string bytes, const std::string& key, const std::string& value,
                       int nth = 0) {
  std::string card = key;
  card.resize(8, ' ');
  card += "= ";
  size_t pos = 0;
  for (int i = 0; i <= nth; ++i) {
    pos = bytes.find(card, i == 0 ? 0 : pos + 80);
    REQUIRE(pos != std::string::npos);
  }
  std::string v(20 - std::min<size_t>(20, value.size()), ' ');
  bytes.replace(pos + 10, 20, v + value);
  return bytes;
}

// A one-row LAMOST DR10 layout (primary with OBSID, COADD table) of n_pix pixels.
void write_dr10(const std::string& path, const std::vector<double>& andmask) {
  const int64_t n = static_cast<int64_t>(andmask.size());
  auto f = fits::File::create(path);
  f.write_image({}, {});
  f.write_key("OBSID", int64_t{4242});
  f.write_key("TELESCOP", std::string("LAMOST"));
  const std::string tform = std::to_string(n) + "E";
  f.create_table("COADD", 1, {"FLUX", "IVAR", "WAVELENGTH", "ANDMASK"},
                 {tform, tform, tform, tform});
  std::vector<double> wave(n);
  for (int64_t j = 0; j < n; ++j) wave[j] = 5000.0 + j;
  f.write_column("FLUX", std::vector<double>(n, 1.0));
  f.write_column("IVAR", std::vector<double>(n, 1.0));
  f.write_column("WAVELENGTH", wave);
  f.write_column("ANDMASK", andmask);
}

// A small sealed template library (MILES thin subset, 5000-5300 A, 4 components), built once.
const std::string& small_library() {
  static const std::string path = [] {
    BuildConfig bc;
    bc.wave_min_A = 5000;
    bc.wave_max_A = 5300;
    bc.n_components = 4;
    bc.n_ccf_templates = 4;
    const std::string p = test::tmp_dir("fuzz_small_library") + "/lib.h5";
    build_library(read_templates(test::data("templates/miles/miles_thin")), bc).save(p);
    fuzz::set_fit_library(p);  // the survey targets also prepare the fit, as under fuzz.sh
    return p;
  }();
  return path;
}

// A one-target SDSS spec file: the primary header's integer keys (and what `more_keys` adds),
// then a 32-pixel COADD table of unit flux and ivar.
void write_sdss(const std::string& path, const std::vector<std::pair<std::string, int64_t>>& keys,
                const std::function<void(fits::File&)>& more_keys = {}) {
  auto f = fits::File::create(path);
  f.write_image({}, {});
  for (const auto& [key, value] : keys) f.write_key(key, value);
  if (more_keys) more_keys(f);
  f.create_table("COADD", 32, {"loglam", "flux", "ivar"}, {"E", "E", "E"});
  std::vector<double> loglam(32);
  for (int j = 0; j < 32; ++j) loglam[j] = 3.7 + 1e-4 * j;
  f.write_column("loglam", loglam);
  f.write_column("flux", std::vector<double>(32, 1.0));
  f.write_column("ivar", std::vector<double>(32, 1.0));
}

}  // namespace

TEST_CASE("a LAMOST mask value beyond int32 marks a bad pixel, not undefined behaviour",
          "[io][fuzz]") {
  // Finding (lamost-dr10): float_mask cast 2.8e20 to int32, undefined behaviour (UBSan).
  small_library();
  const auto path = test::tmp_dir("fuzz_mask") + "/mask.fits";
  write_dr10(path, {0.0, 1e20, -3e38, NAN, 4.0, 0.5});
  const auto sf = read_spectra(path);
  REQUIRE(sf.spectra.size() == 1);
  CHECK(sf.spectra[0].arms[0].mask == UninitVector<int32_t>{0, 1, 1, 1, 4, 1});
  run("lamost-dr10", slurp(path));
}

TEST_CASE("a header that declares more data than the file holds is refused before allocating",
          "[io][fuzz]") {
  // Finding (lamost-dr8, sdss, desi, lamost-dr10): a corrupt NAXISn made velox allocate (and
  // zero) the declared size before CFITSIO noticed the file was short; with absurd sizes, out
  // of memory. Now: one IoError naming the HDU.
  small_library();
  const auto dir = test::tmp_dir("fuzz_sizes");
  write_dr10(dir + "/ok.fits", std::vector<double>(32, 0.0));
  const std::string ok = slurp(dir + "/ok.fits");

  const auto rows = dir + "/rows.fits";  // COADD claims 2e9 rows of 512 bytes
  spit(rows, patch_card(ok, "NAXIS2", "2000000000", 0));
  CHECK_THROWS_WITH(read_spectra(rows), Contains("rows.fits") && Contains("COADD") &&
                                            Contains("declares") && Contains("truncated"));
  run("lamost-dr10", slurp(rows));

  // A LAMOST DR8 primary image [5][n] whose n is patched to 2^40: the element count alone
  // (5 x 2^40 floats) must not be allocated, nor overflow.
  auto img = fits::File::create(dir + "/dr8.fits");
  img.write_image(std::vector<double>(5 * 16, 1.0), {5, 16});
  img.write_key("COEFF0", 3.6);
  img.write_key("COEFF1", 1e-4);
  img = fits::File::create(dir + "/unused.fits");  // closes dr8.fits
  const std::string dr8 = slurp(dir + "/dr8.fits");
  for (const std::string n : {"1099511627776", "4611686018427387904"}) {
    const auto big = dir + "/dr8_big.fits";
    spit(big, patch_card(dr8, "NAXIS1", n));
    CHECK_THROWS_AS(read_spectra(big, SpectrumFormat::LamostDR8), IoError);
    run("lamost-dr8", slurp(big));
  }
}

TEST_CASE("an unquoted 70-character TTYPE value is refused before CFITSIO overflows on it",
          "[io][fuzz]") {
  // Finding (lamost-dr10): CFITSIO 4.2.0 ffgtbp strcpy's an unquoted TTYPEn value of 70
  // characters into the 70-byte tcolumn.ttype: a heap overflow (glibc aborted: "buffer overflow
  // detected"). io/fits_guard.cpp refuses such a header first.
  small_library();
  const auto dir = test::tmp_dir("fuzz_ttype");
  write_dr10(dir + "/ok.fits", std::vector<double>(32, 0.0));
  std::string bytes = slurp(dir + "/ok.fits");
  const size_t at = bytes.find("TTYPE2  = ");
  REQUIRE(at != std::string::npos);
  bytes.replace(at + 10, 70, std::string(70, 'A'));
  for (const char* name : {"/ttype.fits", "/ttype.fits.gz"}) {
    const std::string path = dir + name;
    spit(dir + "/ttype.fits", bytes);
    if (std::string(name).find(".gz") != std::string::npos)
      REQUIRE(std::system(("gzip -kf " + dir + "/ttype.fits").c_str()) == 0);
    CHECK_THROWS_WITH(read_spectra(path),
                      Contains(name + 1) && Contains("TTYPE2") && Contains("not a quoted string"));
  }
  run("lamost-dr10", bytes);
  // CFITSIO takes a value even without the blank after '=' (found by fuzzing, sdss and desi).
  std::string no_blank = slurp(dir + "/ok.fits");
  no_blank.replace(no_blank.find("TTYPE2  = ") + 9, 71, std::string(71, '&'));
  spit(dir + "/ttype_no_blank.fits", no_blank);
  CHECK_THROWS_WITH(read_spectra(dir + "/ttype_no_blank.fits"), Contains("not a quoted string"));
  run("lamost-dr10", no_blank);
  // A quoted value of the longest legal length still reads.
  std::string quoted = slurp(dir + "/ok.fits");
  quoted.replace(quoted.find("TTYPE2  = ") + 10, 70, "'" + std::string(68, 'B') + "'");
  spit(dir + "/quoted.fits", quoted);
  CHECK_NOTHROW(fits::File::open_read(dir + "/quoted.fits").move_to("COADD"));
}

TEST_CASE("a tile-compressed image with ZTILEn = 0 is refused before CFITSIO divides by it",
          "[io][fuzz]") {
  // Finding (desi): a DESI spectra file whose compressed B_MASK says ZTILE2 = 0 made CFITSIO
  // 4.2.0 (imcomp_get_compressed_image_par) divide by zero: SIGFPE while listing the HDUs.
  small_library();
  const auto dir = test::tmp_dir("fuzz_ztile");
  const std::string ok = slurp(test::data("spectra/desi_edr/spectra-sv3-dark-26065.fits"));
  for (const char* v : {"0", "-3"}) {
    const std::string bytes = patch_card(ok, "ZTILE2", v);
    spit(dir + "/ztile.fits", bytes);
    CHECK_THROWS_WITH(read_spectra(dir + "/ztile.fits"),
                      Contains("ZTILE2") && Contains("tile size not positive"));
    run("desi", bytes);
  }
  // The file as it is still reads (its tiles are positive).
  spit(dir + "/ok.fits", ok);
  CHECK(read_spectra(dir + "/ok.fits").spectra.size() == 5);
}

TEST_CASE(
    "a compressed image's integer keyword holding 29 or more characters of no number is "
    "refused before CFITSIO aborts",
    "[io][fuzz]") {
  // Finding (desi, sixteenth session): a DESI coadd whose compressed Z_MASK said
  // "ZVAL2 = (4 / bytes per pixel (1, 2, 4, or 8)". CFITSIO (4.2.0 to 4.6.3) takes a value
  // starting with '(' up to the first ')' (37 characters here), fails to read it as an integer,
  // and its ffc2j copies 30 of them after a 52-character message into an 81-byte buffer: glibc's
  // fortify check aborted the process while velox listed the HDUs. The same for a quoted string
  // of 29 characters or more in ZNAXIS, ZNAXISn, ZTILEn, ZBITPIX. The spectra file's masks are
  // tile-compressed (GZIP_1).
  small_library();
  const auto dir = test::tmp_dir("fuzz_ffc2j");
  const std::string ok = slurp(test::data("spectra/desi_edr/spectra-sv3-dark-26065.fits"));
  // Replaces the whole value field (columns 10-80) of the first card KEY.
  auto patch_value = [&](const std::string& key, const std::string& value) {
    std::string card = key;
    card.resize(8, ' ');
    card += "= ";
    const size_t pos = ok.find(card);
    REQUIRE(pos != std::string::npos);
    std::string field = value;
    field.resize(70, ' ');
    std::string bytes = ok;
    bytes.replace(pos + 10, 70, field);
    return bytes;
  };
  const std::string long_string = "'" + std::string(40, 'A') + "'";
  const std::string complex_value = "(4 / bytes per pixel (1, 2, 4, or 8)";
  for (const char* key : {"ZNAXIS1", "ZTILE2", "ZBITPIX", "ZNAXIS"})
    for (const std::string& value : {long_string, complex_value}) {
      INFO(key << " = " << value);
      const std::string bytes = patch_value(key, value);
      spit(dir + "/bad.fits", bytes);
      CHECK_THROWS_WITH(read_spectra(dir + "/bad.fits"),
                        Contains(key) && Contains("value is not an integer"));
      run("desi", bytes);
    }
  // A long value that holds a number is what CFITSIO reads: not refused (28 blanks and the tile
  // size inside the quotes, 31 characters).
  const std::string padded = patch_value("ZTILE2", "'" + std::string(28, ' ') + "1'");
  spit(dir + "/padded.fits", padded);
  CHECK(read_spectra(dir + "/padded.fits").spectra.size() == 5);
  // A short value that holds no number is left to CFITSIO, which does not abort on it: for
  // ZTILEn it falls back to its default tiles (one row each, which is how these masks are tiled).
  const std::string short_bad = patch_value("ZTILE2", "'ABC'");
  spit(dir + "/short.fits", short_bad);
  CHECK(read_spectra(dir + "/short.fits").spectra.size() == 5);
  run("desi", short_bad);
}

TEST_CASE("a table of more than 999 columns is refused before CFITSIO allocates them",
          "[io][fuzz]") {
  // Finding (sdss, sixteenth session): an SDSS spec file whose second table said TFIELDS =
  // 12623064 made CFITSIO allocate and clear 2 GB of column descriptions (libFuzzer's 2 GB
  // limit); FITS allows at most 999 columns.
  small_library();
  const auto dir = test::tmp_dir("fuzz_tfields");
  write_sdss(dir + "/ok.fits", {{"PLATEID", 3586}, {"MJD", 55181}, {"FIBERID", 500}});
  const std::string ok = slurp(dir + "/ok.fits");
  const std::string bytes = patch_card(ok, "TFIELDS", "12623064");
  spit(dir + "/wide.fits", bytes);
  CHECK_THROWS_WITH(read_spectra(dir + "/wide.fits"),
                    Contains("TFIELDS") && Contains("more than 999 columns"));
  run("sdss", bytes);
  // 999 is allowed by the guard (CFITSIO then finds the columns' keywords missing: its error).
  spit(dir + "/w999.fits", patch_card(ok, "TFIELDS", "999"));
  CHECK_THROWS_AS(read_spectra(dir + "/w999.fits"), IoError);
  try {
    read_spectra(dir + "/w999.fits");
  } catch (const IoError& e) {
    CHECK_THAT(e.what(), !Contains("more than 999 columns"));
  }
  CHECK(read_spectra(dir + "/ok.fits").spectra.size() == 1);
}

namespace {
// A Rice-compressed (RICE_1) integer image of 300 x 3 pixels, one tile per row, of CFITSIO's
// `bitpix` (BYTE_IMG, SHORT_IMG, LONG_IMG: Rice bytes per pixel 1, 2, 4): row 0 constant (the
// low-entropy blocks), row 1 small steps (Rice codes), row 2 noise over the whole range (the
// directly coded blocks). Returns the values and, through heap_tile0, the file offset of row 0's
// compressed bytes.
std::vector<int32_t> write_rice(const std::string& path, int bitpix, long* heap_tile0) {
  const long nx = 300, ny = 3;
  const int32_t top = bitpix == BYTE_IMG ? 255 : bitpix == SHORT_IMG ? 32767 : 2147483647;
  std::vector<int32_t> v(nx * ny);
  std::mt19937 rng(5);
  for (long j = 0; j < nx; ++j) {
    v[j] = 7;
    v[nx + j] = static_cast<int32_t>(j % 17);
    v[2 * nx + j] = static_cast<int32_t>(rng() % static_cast<uint32_t>(top));
  }
  int status = 0;
  fitsfile* f = nullptr;
  const std::string name = "!" + path + "[compress R 300,1]";
  fits_create_file(&f, name.c_str(), &status);
  long naxes[2] = {nx, ny};
  fits_create_img(f, bitpix, 2, naxes, &status);
  // In the image's own type (CFITSIO's compression refuses a conversion from int here).
  if (bitpix == BYTE_IMG) {
    std::vector<unsigned char> b(v.begin(), v.end());
    fits_write_img(f, TBYTE, 1, nx * ny, b.data(), &status);
  } else if (bitpix == SHORT_IMG) {
    std::vector<short> h(v.begin(), v.end());
    fits_write_img(f, TSHORT, 1, nx * ny, h.data(), &status);
  } else {
    fits_write_img(f, TINT, 1, nx * ny, v.data(), &status);
  }
  LONGLONG len = 0, off = 0, head = 0, data = 0, end = 0;
  fits_read_descriptll(f, f->Fptr->cn_compressed, 1, &len, &off, &status);
  fits_get_hduaddrll(f, &head, &data, &end, &status);
  *heap_tile0 = static_cast<long>(data + f->Fptr->heapstart + off);
  fits_close_file(f, &status);
  REQUIRE(status == 0);
  return v;
}
}  // namespace

TEST_CASE("Rice-compressed tiles decode, and a corrupt one is refused before CFITSIO over-reads",
          "[io][fuzz]") {
  // Finding (desi): a DESI file whose GZIP_1 mask said RICE_1 made CFITSIO 4.2.0's Rice decoder
  // (which checks the end of a tile only after each block of pixels) read past the tile's
  // buffer: an AddressSanitizer SEGV. fits::File walks each Rice tile's reads first.
  const auto dir = test::tmp_dir("fuzz_rice");
  for (int bitpix : {BYTE_IMG, SHORT_IMG, LONG_IMG}) {
    INFO("BITPIX " << bitpix);
    long tile0 = 0;
    const std::vector<int32_t> written = write_rice(dir + "/rice.fits", bitpix, &tile0);
    const UninitVector<int32_t> want(written.begin(), written.end());
    {
      auto f = fits::File::open_read(dir + "/rice.fits");
      f.move_to(1);
      CHECK(f.read_image_int32() == want);  // valid tiles of every kind pass the walk
    }
    // Row 0's codes replaced by an FS value of 1 (a Rice-coded block) followed by zero bytes:
    // the decoder's count of leading zeros runs past the tile.
    std::string bytes = slurp(dir + "/rice.fits");
    const int bsize = bitpix == BYTE_IMG ? 1 : bitpix == SHORT_IMG ? 2 : 4;
    const int fsbits = bsize == 1 ? 3 : bsize == 2 ? 4 : 5;
    bytes[tile0 + bsize] = static_cast<char>(2 << (8 - fsbits));  // fs = 2 - 1
    for (long k = tile0 + bsize + 1; k < tile0 + bsize + 8; ++k) bytes[k] = 0;
    spit(dir + "/bad.fits", bytes);
    auto f = fits::File::open_read(dir + "/bad.fits");
    f.move_to(1);
    CHECK_THROWS_WITH(f.read_image_int32(), Contains("tile 1: RICE_1 data end"));
  }
}

TEST_CASE("a corrupt gzip trailer is refused before CFITSIO allocates the size it claims",
          "[io][fuzz]") {
  // Finding (lamost-dr8): CFITSIO sizes its buffer for a .gz file by the file's last 4 bytes
  // (gzip ISIZE) before inflating; a corrupt trailer or trailing garbage made it allocate
  // gigabytes (and time out under ASan).
  small_library();
  const auto dir = test::tmp_dir("fuzz_gzip");
  write_dr10(dir + "/spec.fits", std::vector<double>(32, 0.0));
  REQUIRE(std::system(("gzip -kf " + dir + "/spec.fits").c_str()) == 0);
  CHECK_NOTHROW(read_spectra(dir + "/spec.fits.gz"));  // the intact file reads
  std::string gz = slurp(dir + "/spec.fits.gz");
  gz.replace(gz.size() - 4, 4, std::string("\xf0\xff\xff\xff", 4));  // ISIZE ~ 4 GiB
  spit(dir + "/big.fits.gz", gz);
  CHECK_THROWS_WITH(read_spectra(dir + "/big.fits.gz"),
                    Contains("big.fits.gz") && Contains("corrupt gzip data"));
  run("lamost-dr8", gz);
  // Garbage after the gzip data: zlib ignores it, CFITSIO took its last 4 bytes for the size.
  spit(dir + "/tail.fits.gz", slurp(dir + "/spec.fits.gz") + std::string("\0\0\0\x7f", 4));
  CHECK_THROWS_WITH(read_spectra(dir + "/tail.fits.gz"),
                    Contains("tail.fits.gz") && Contains("corrupt"));
  run("lamost-dr8", slurp(dir + "/tail.fits.gz"));
  // A file over 10000 bytes whose last 4 bytes are below its size: CFITSIO adds 4 GiB to them.
  std::vector<double> noise(4000);
  for (size_t i = 0; i < noise.size(); ++i) noise[i] = std::sin(1e3 * static_cast<double>(i));
  write_dr10(dir + "/big.fits", noise);
  REQUIRE(std::system(("gzip -kf " + dir + "/big.fits").c_str()) == 0);
  const std::string big_gz = slurp(dir + "/big.fits.gz");
  REQUIRE(big_gz.size() > 10000);
  spit(dir + "/wrap.fits.gz", big_gz + std::string(4, '\0'));
  CHECK_THROWS_WITH(read_spectra(dir + "/wrap.fits.gz"),
                    Contains("wrap.fits.gz") && Contains("corrupt .gz"));
  run("lamost-dr8", slurp(dir + "/wrap.fits.gz"));
  // A zip archive: CFITSIO would allocate the size at its bytes 22-25.
  spit(dir + "/zip.fits", "PK\3\4" + std::string(40, '\xff'));
  CHECK_THROWS_WITH(read_spectra(dir + "/zip.fits"), Contains("zip archive"));
  run("lamost-dr8", slurp(dir + "/zip.fits"));
  std::string broken = slurp(dir + "/spec.fits.gz");
  broken[broken.size() / 2] = static_cast<char>(broken[broken.size() / 2] ^ 0xff);
  spit(dir + "/broken.fits.gz", broken);
  CHECK_THROWS_WITH(read_spectra(dir + "/broken.fits.gz"), Contains("broken.fits.gz"));
  run("lamost-dr10", broken);
}

TEST_CASE("SDSS PLATEID/MJD/FIBERID too large to pack make a per-target problem, not overflow",
          "[io][fuzz]") {
  // Finding (sdss): without SPECOBJID, TARGETID = plate << 42 | mjd << 24 | fiber shifted a
  // corrupt PLATEID out of int64 (undefined behaviour).
  small_library();
  const auto path = test::tmp_dir("fuzz_sdss") + "/spec.fits";
  write_sdss(path, {{"PLATEID", 538976288}, {"MJD", 55181}, {"FIBERID", 500}});
  const auto sf = read_spectra(path, SpectrumFormat::SdssSpec);
  REQUIRE(sf.spectra.size() == 1);
  CHECK(sf.spectra[0].targetid == -1);
  CHECK_THAT(sf.spectra[0].problem, Contains("PLATEID/MJD/FIBERID"));
  run("sdss", slurp(path));
}

TEST_CASE("an integer keyword holding no number is an error, not a CFITSIO abort", "[io][fuzz]") {
  // Finding (sdss): a flipped bit turned the card FIBERID = 31 into FIBERID = (  31. CFITSIO's
  // integer conversion formats its error message into a buffer that such a value overflows, and
  // the fortified libcfitsio aborted the process. velox now parses integer keywords itself.
  small_library();
  const auto dir = test::tmp_dir("fuzz_sdss_key");
  const auto path = dir + "/spec.fits";
  write_sdss(path, {{"PLATEID", 266}, {"MJD", 51602}, {"FIBERID", 31}}, [](fits::File& f) {
    f.write_key("QUOTED", std::string("266"));
    f.write_key("FLOATED", 2.66e2);
    f.write_key("LOGICAL", true);
  });
  {
    // The forms CFITSIO accepts still read: a quoted integer, an integral real, a logical.
    auto f = fits::File::open_read(path);
    CHECK(f.key_long("FIBERID") == 31);
    CHECK(f.key_long("QUOTED") == 266);
    CHECK(f.key_long("FLOATED") == 266);
    CHECK(f.key_long("LOGICAL") == 1);  // redrock templates carry LOGLAM = T
  }
  // The fuzzed card: "(" opens a complex value that the ")" of the comment closes, so CFITSIO
  // reads the value field as "(                 31 / Fiber (1-640)".
  std::string bad = slurp(path);
  const size_t card = bad.find("FIBERID = ");
  REQUIRE(card != std::string::npos);
  bad.replace(card + 10, 40, "(                 31 / Fiber (1-640)    ");
  spit(dir + "/bad.fits", bad);
  CHECK_THROWS_WITH(read_spectra(dir + "/bad.fits", SpectrumFormat::SdssSpec),
                    Contains("FIBERID") && Contains("not an integer"));
  {
    // CFITSIO's real conversion (ffc2d) has room for its message; it must throw, not abort.
    auto f = fits::File::open_read(dir + "/bad.fits");
    CHECK_THROWS_WITH(f.key_double("FIBERID"), Contains("FIBERID"));
  }
  run("sdss", bad);
}

TEST_CASE("a damaged or unsealed template library is refused before HDF5 parses it", "[io][fuzz]") {
  // Finding (library): a flipped byte in a library made libhdf5 itself crash (SEGV in
  // H5HG_read, reading a string attribute). The library now carries an integrity seal
  // (io/h5_seal.hpp) checked before HDF5 opens the file.
  const std::string good = slurp(small_library());
  REQUIRE(good.compare(0, 14, "velox-seal v1 ") == 0);
  CHECK_NOTHROW(run("library", good));
  const auto dir = test::tmp_dir("fuzz_library");
  for (size_t at : {size_t{600}, good.size() / 2, good.size() - 1}) {
    std::string bad = good;
    bad[at] = static_cast<char>(bad[at] ^ 0x20);
    spit(dir + "/bad.h5", bad);
    CHECK_THROWS_WITH(TemplateLibrary::load(dir + "/bad.h5"),
                      Contains("bad.h5") && Contains("integrity seal does not match"));
    run("library", bad);
  }
  std::string truncated = good.substr(0, good.size() - 100);
  spit(dir + "/short.h5", truncated);
  CHECK_THROWS_WITH(TemplateLibrary::load(dir + "/short.h5"), Contains("integrity seal"));
  std::string unsealed = good;
  std::fill(unsealed.begin(), unsealed.begin() + 512, '\0');
  spit(dir + "/unsealed.h5", unsealed);
  CHECK_THROWS_WITH(TemplateLibrary::load(dir + "/unsealed.h5"), Contains("no integrity seal"));
  run("library", unsealed);
}

namespace {

// Replays every file of root/<target>/ through its fuzz target: the inputs replayed.
size_t replay_folder(const fs::path& root) {
  size_t n = 0;
  for (const auto& target : fuzz::target_names()) {
    if (!fs::is_directory(root / target)) continue;
    for (const auto& e : fs::directory_iterator(root / target)) {
      INFO(target << ": " << e.path().filename().string());
      run(target, slurp(e.path().string()));
      ++n;
    }
  }
  return n;
}

}  // namespace

TEST_CASE("inputs saved in tests/fuzz/regressions are read or rejected cleanly", "[io][fuzz]") {
  small_library();
  // The replay itself, on two malformed FITS headers written here in the folder layout (no data
  // in git): one cut inside a card, one whose NAXIS1 promises far more data than the file holds.
  const fs::path made = test::tmp_dir("fuzz_replay");
  auto card = [](std::string c) { return c.append(80 - c.size(), ' '); };
  std::string head = card("SIMPLE  =                    T") +
                     card("BITPIX  =                  -32") +
                     card("NAXIS   =                    2");
  fs::create_directories(made / "lamost-dr10");
  spit((made / "lamost-dr10" / "header-cut-in-a-card.fits").string(),
       head + card("NAXIS1  =                 3909") + "NAXIS2  =      ");
  std::string big = head + card("NAXIS1  =              1000000") +
                    card("NAXIS2  =                    5") + card("END");
  big.resize(2880, ' ');
  fs::create_directories(made / "desi");
  spit((made / "desi" / "data-shorter-than-naxis.fits").string(), big + std::string(2880, '\0'));
  CHECK(replay_folder(made) == 2);
  // libFuzzer findings saved under tests/fuzz/regressions/<target>/ (README.md there).
  const size_t n = replay_folder(fs::path(VELOX_TEST_SOURCE_DIR) / "tests/fuzz/regressions");
  SUCCEED(n << " saved inputs replayed");
}
