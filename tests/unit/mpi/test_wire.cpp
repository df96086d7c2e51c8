// The MPI driver's message layouts (mpi/wire.hpp), checked without mpirun.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "common/error.hpp"
#include "mpi/wire.hpp"

using namespace velox;

namespace {

template <class T>
bool same_bits(const T& a, const T& b) {
  return std::memcmp(&a, &b, sizeof a) == 0;
}

}  // namespace

TEST_CASE("a result sent between ranks arrives bit for bit, NaN payloads included", "[mpi]") {
  FileResult r;
  r.index = 41;
  r.path = "/data/spec-55859-F5902_sp03-232.fits.gz";
  r.ok = false;
  r.error = "bad\tfile";
  r.n_targets = 2;
  r.seconds = 0.125;
  r.rank = 3;
  r.rows.resize(2);
  r.rows[0].TARGETID = 39627652257399884;
  r.rows[0].SOURCE_FILE = std::string(200, 'x');  // longer than the catalog's 127 bytes
  r.rows[0].VRAD = -30.1;
  r.rows[0].NPIX_TOT = 3800;
  r.rows[0].RVS_WARN = int64_t{1} << 40;
  r.rows[0].SUCCESS = true;
  r.rows[1].TEFF = -std::numeric_limits<double>::quiet_NaN();
  const auto back = mpi::unpack_result(mpi::pack_result(r));
  CHECK(back.index == 41);
  CHECK(back.path == r.path);
  CHECK(!back.ok);
  CHECK(back.error == r.error);
  CHECK(back.n_targets == 2);
  CHECK(back.seconds == 0.125);
  CHECK(back.rank == 3);
  REQUIRE(back.rows.size() == 2);
  CHECK(back.rows[0].SOURCE_FILE == r.rows[0].SOURCE_FILE);
  CHECK(back.rows[0].TARGETID == r.rows[0].TARGETID);
  CHECK(back.rows[0].RVS_WARN == r.rows[0].RVS_WARN);
  CHECK(back.rows[0].SUCCESS);
  CHECK(back.rows[0].NPIX_TOT == 3800);
  CHECK(same_bits(back.rows[0].VRAD, r.rows[0].VRAD));
  CHECK(same_bits(back.rows[1].TEFF, r.rows[1].TEFF));
  CHECK(same_bits(back.rows[1].VRAD, r.rows[1].VRAD));  // default NaN
}

TEST_CASE("a truncated result message is an error, not garbage", "[mpi]") {
  FileResult r;
  r.rows.resize(1);
  auto msg = mpi::pack_result(r);
  msg.pop_back();
  CHECK_THROWS_AS(mpi::unpack_result(msg), IoError);
}

TEST_CASE("a work item carries the input index and path", "[mpi]") {
  size_t index = 0;
  std::string path;
  mpi::unpack_work(mpi::pack_work(123456789012ull, "a b/c.fits"), index, path);
  CHECK(index == 123456789012ull);
  CHECK(path == "a b/c.fits");
}
