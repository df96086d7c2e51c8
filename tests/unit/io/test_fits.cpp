// The CFITSIO wrapper: write then read back images, keys and table columns of each kind.
#include <zlib.h>

#include <catch2/catch.hpp>
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
