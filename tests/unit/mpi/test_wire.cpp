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
  r.n_fitted = 1;
  r.targetids_listed = {39627652257399884, -1};
  r.seconds = 0.125;
  r.rank = 3;
  r.side_hdus = false;  // the default is true: a lost flag would show
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
  CHECK(back.n_fitted == 1);
  CHECK(back.targetids_listed == r.targetids_listed);
  CHECK(back.seconds == 0.125);
  CHECK(back.rank == 3);
  CHECK_FALSE(back.side_hdus);
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

TEST_CASE("a batch of work items carries each input's index, path and size", "[mpi]") {
  std::vector<WorkItem> batch{{123456789012ull, "a b/c.fits", 5000}, {7, "", 0}};
  const auto back = mpi::unpack_work(mpi::pack_work(batch));
  REQUIRE(back.size() == 2);
  CHECK(back[0].index == 123456789012ull);
  CHECK(back[0].path == "a b/c.fits");
  CHECK(back[0].bytes == 5000);
  CHECK(back[1].index == 7);
  CHECK(mpi::unpack_work(mpi::pack_work({})).empty());  // "stop"
}

TEST_CASE("a worker's report carries statuses, returned inputs, rate and busy time", "[mpi]") {
  mpi::Report rep;
  rep.stop = true;
  rep.rate_bytes_s = 1.5e6;
  rep.busy_s = 2.25;
  rep.done.resize(3);
  rep.done[1].index = 9;
  rep.done[1].rows.resize(1);
  rep.done[1].rows[0].TARGETID = 42;
  rep.done[2].error = "x.fits: truncated";
  rep.returned = {4, 5};
  const auto back = mpi::unpack_report(mpi::pack_report(rep));
  CHECK(back.stop);
  CHECK(back.rate_bytes_s == 1.5e6);
  CHECK(back.busy_s == 2.25);
  REQUIRE(back.done.size() == 3);
  CHECK(back.done[1].index == 9);
  REQUIRE(back.done[1].rows.size() == 1);
  CHECK(back.done[1].rows[0].TARGETID == 42);
  CHECK(back.done[2].error == rep.done[2].error);
  CHECK(back.returned == rep.returned);
  auto msg = mpi::pack_report(rep);
  msg.resize(msg.size() - 9);
  CHECK_THROWS_AS(mpi::unpack_report(msg), IoError);
}
