// The CFITSIO wrapper: write then read back images, keys and table columns of each kind.
#include <fitsio.h>
#include <zlib.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>

#include "common/error.hpp"
#include "io/fits.hpp"
#include "io/fits_guard.hpp"
#include "test_util.hpp"

using namespace velox;

TEST_CASE("fits wrapper round-trips images, keywords and table columns", "[io][fits]") {
  const auto path = test::tmp_dir("fits_roundtrip") + "/t.fits";
  {
    auto f = fits::File::create(path);
    f.write_image({1, 2, 3, 4, 5, 6}, {2, 3});
    f.write_key("OBSID", int64_t{123456789012});
    f.write_key("NAME", std::string("star"));
    f.write_key("X", 2.5);
    f.create_table("TAB", 2, {"A", "V", "S"}, {"J", "3E", "8A"});
    f.write_column("A", std::vector<int64_t>{7, -8});
    f.write_column("V", std::vector<double>{1, 2, 3, 4, 5, 6});
    f.write_column("S", std::vector<std::string>{"ab", "cde"});
  }
  auto f = fits::File::open_read(path);
  CHECK(f.num_hdus() == 2);
  CHECK(f.hdu_names() == std::vector<std::string>{"PRIMARY", "TAB"});
  CHECK(f.image_shape() == std::vector<int64_t>{2, 3});
  CHECK(f.read_image_double() == UninitVector<double>{1, 2, 3, 4, 5, 6});
  CHECK(f.key_long("OBSID") == 123456789012);
  CHECK(f.key_string("NAME") == "star");
  CHECK(f.key_double("X") == 2.5);
  CHECK(f.key_double("MISSING", -1.0) == -1.0);
  CHECK_THROWS_WITH(f.key_double("MISSING"), Catch::Contains("t.fits") &&
                                                 Catch::Contains("PRIMARY") &&
                                                 Catch::Contains("MISSING"));
  f.move_to("TAB");
  CHECK(f.num_rows() == 2);
  CHECK(f.column_repeat("V") == 3);
  CHECK(f.read_column_int32("A") == UninitVector<int32_t>{7, -8});
  CHECK(f.read_column_float("V") == UninitVector<float>{1, 2, 3, 4, 5, 6});
  CHECK(f.read_column_string("S") == std::vector<std::string>{"ab", "cde"});
  CHECK(f.read_column_text("A") == std::vector<std::string>{"7", "-8"});
  CHECK(f.has_column("a"));
  CHECK_FALSE(f.has_column("B"));
  CHECK_THROWS_WITH(f.read_column_double("B"), Catch::Contains("HDU TAB: column B"));
  CHECK_THROWS_WITH(f.move_to("NOPE"), Catch::Contains("HDU NOPE"));
  // A name found before is moved to by its index, from anywhere; an unknown one still throws.
  f.move_to(0);
  f.move_to("TAB");
  CHECK(f.current_index() == 1);
  CHECK(f.num_rows() == 2);
  CHECK_THROWS_WITH(f.move_to("NOPE"), Catch::Contains("HDU NOPE"));
}

TEST_CASE("primary_header_value reads one keyword of a plain or gzipped header", "[io][fits]") {
  const std::string dir = test::tmp_dir("header_value");
  {
    auto f = fits::File::create(dir + "/h.fits");
    f.write_image({1, 2}, {2});
    f.write_key("OBJNAME", std::string("it''s 12"));  // FITS escapes a quote by doubling it
    f.write_key("OBSID", int64_t{123456789012});
  }
  // The same bytes gzip-compressed, as LAMOST DR8 delivers its files.
  std::ifstream in(dir + "/h.fits", std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  gzFile gz = gzopen((dir + "/h.fits.gz").c_str(), "wb");
  gzwrite(gz, bytes.data(), static_cast<unsigned>(bytes.size()));
  gzclose(gz);
  for (const char* name : {"/h.fits", "/h.fits.gz"}) {
    const std::string p = dir + name;
    CHECK(fits::primary_header_value(p, "OBJNAME") ==
          fits::File::open_read(p).key_string("OBJNAME"));
    CHECK(fits::primary_header_value(p, "OBSID") == "123456789012");
    CHECK(fits::primary_header_value(p, "ABSENT").empty());
  }
  CHECK(fits::primary_header_value(dir + "/missing.fits", "OBJNAME").empty());
}

TEST_CASE("uint32 images (BZERO 2^31, DESI's masks) read as int32 keep every value's bits",
          "[io][fits]") {
  // Values across the whole unsigned range, both halves of the sign bit; the bits an int32 holds
  // are the uint32's (read_image_int32's contract for masks stored unsigned).
  const std::vector<unsigned int> u = {0u, 1u, 5u, 2147483647u, 2147483648u, 4294967295u};
  const auto path = test::tmp_dir("fits_uint32") + "/u.fits";
  {
    fitsfile* f = nullptr;
    int status = 0;
    long naxes[2] = {3, 2};
    std::remove(path.c_str());
    fits_create_file(&f, path.c_str(), &status);
    fits_create_img(f, ULONG_IMG, 2, naxes, &status);
    std::vector<unsigned int> w = u;
    fits_write_img(f, TUINT, 1, static_cast<LONGLONG>(w.size()), w.data(), &status);
    fits_close_file(f, &status);
    REQUIRE(status == 0);
  }
  auto f = fits::File::open_read(path);
  const UninitVector<int32_t> want = {0, 1, 5, 2147483647, INT32_MIN, -1};
  CHECK(f.read_image_int32() == want);
  // A row of the image (the DESI reader reads each fibre's row).
  CHECK(f.read_image_int32(3, 3) == UninitVector<int32_t>{2147483647, INT32_MIN, -1});
}
