// The MPI driver's pieces that need no mpirun: message layouts, output names, device choice.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "app/job_outputs.hpp"
#include "common/error.hpp"
#include "mpi/driver.hpp"
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

TEST_CASE("per-input catalogs are named after the input without FITS and compression suffixes",
          "[mpi]") {
  CHECK(input_stem("/x/spec-55859-F5902_sp03-232.fits.gz") == "spec-55859-F5902_sp03-232");
  CHECK(input_stem("3703110.fits") == "3703110");
  CHECK(input_stem("coadd.fits.fz") == "coadd");
  CHECK(input_stem("odd.name") == "odd.name");
  CHECK(per_input_catalog("out", "/d/3703110.fits") == "out/3703110.velox.h5");
}

TEST_CASE("ranks on a node take GPUs round robin by node-local rank", "[mpi]") {
  CHECK(mpi::device_for_local_rank(0, 4) == 0);
  CHECK(mpi::device_for_local_rank(5, 4) == 1);
  CHECK(mpi::device_for_local_rank(2, 0) == -1);
}

TEST_CASE("a fit job needs an output and, to fit, templates", "[mpi]") {
  FitOptions o;
  o.inputs = {"a.fits"};
  o.templates = "lib.h5";
  CHECK_THROWS_AS(mpi::validate_job_options(o), ConfigError);  // no output
  o.output = "cat.h5";
  CHECK_NOTHROW(mpi::validate_job_options(o));
  o.output_dir = "out";
  CHECK_THROWS_AS(mpi::validate_job_options(o), ConfigError);  // both
  o.output.clear();
  o.inputs.clear();
  o.merge = "merged.h5";
  CHECK_NOTHROW(mpi::validate_job_options(o));  // merge alone
  o.output_dir.clear();
  CHECK_THROWS_AS(mpi::validate_job_options(o), ConfigError);  // merge without a dir
}
