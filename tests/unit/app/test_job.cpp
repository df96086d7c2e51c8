// The job logic of `velox fit` apart from MPI (app/job*.hpp): output names, device choice, options.
#include <catch2/catch.hpp>

#include "app/job.hpp"
#include "app/job_outputs.hpp"
#include "app/job_plan.hpp"
#include "common/error.hpp"

using namespace velox;

TEST_CASE("per-input catalogs are named after the input without FITS and compression suffixes",
          "[job]") {
  CHECK(input_stem("/x/spec-55859-F5902_sp03-232.fits.gz") == "spec-55859-F5902_sp03-232");
  CHECK(input_stem("3703110.fits") == "3703110");
  CHECK(input_stem("coadd.fits.fz") == "coadd");
  CHECK(input_stem("odd.name") == "odd.name");
  CHECK(per_input_catalog("out", "/d/3703110.fits") == "out/3703110.velox.h5");
}

TEST_CASE("ranks on a node take GPUs round robin by node-local rank", "[job]") {
  CHECK(device_for_local_rank(0, 4) == 0);
  CHECK(device_for_local_rank(5, 4) == 1);
  CHECK(device_for_local_rank(2, 0) == -1);
}

TEST_CASE("a fit job needs an output and, to fit, templates", "[job]") {
  FitOptions o;
  o.inputs = {"a.fits"};
  o.templates = "lib.h5";
  CHECK_THROWS_AS(validate_job_options(o), ConfigError);  // no output
  o.output = "cat.h5";
  CHECK_NOTHROW(validate_job_options(o));
  o.output_dir = "out";
  CHECK_THROWS_AS(validate_job_options(o), ConfigError);  // both
  o.output.clear();
  o.inputs.clear();
  o.merge = "merged.h5";
  CHECK_NOTHROW(validate_job_options(o));  // merge alone
  o.output_dir.clear();
  CHECK_THROWS_AS(validate_job_options(o), ConfigError);  // merge without a dir
}
