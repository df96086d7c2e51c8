// Identity of a fit (app/fit_identity.hpp): what a resume or --merge compares before mixing rows.
#include <catch2/catch.hpp>

#include "app/fit_identity.hpp"

using namespace velox;

TEST_CASE("the configuration hash follows every option that changes rows", "[identity]") {
  FitConfig cfg;
  FitOptions opt;
  const std::string base = fit_config_hash(cfg, opt);
  CHECK(base.rfind("fnv1a64:", 0) == 0);
  CHECK(base.size() == 8 + 16);
  CHECK(fit_config_hash(cfg, opt) == base);  // deterministic
  FitConfig other = cfg;
  other.resolution_matrix = !cfg.resolution_matrix;
  CHECK(fit_config_hash(other, opt) != base);
  FitOptions sel = opt;
  sel.min_sn = 3.0;
  CHECK(fit_config_hash(cfg, sel) != base);
  sel = opt;
  sel.objtypes = {"MWS_ANY"};
  CHECK(fit_config_hash(cfg, sel) != base);
  sel = opt;
  sel.include_unselected = true;
  CHECK(fit_config_hash(cfg, sel) != base);
  // Threads, device and paths change no row: the same hash.
  FitOptions run = opt;
  run.threads = 7;
  run.device = "cpu";
  run.output_dir = "elsewhere";
  CHECK(fit_config_hash(cfg, run) == base);
}

TEST_CASE("identity_difference names both values, or nothing when equal", "[identity]") {
  Provenance p{{"templates_checksum", "fnv1a64:aaaa"}, {"fit_config_hash", "fnv1a64:cccc"}};
  const FitIdentity have = identity_of(p);
  CHECK(identity_difference(have, have).empty());
  const std::string d = identity_difference(have, {"fnv1a64:bbbb", "fnv1a64:cccc"});
  CHECK(d == "template library fnv1a64:aaaa (this run: fnv1a64:bbbb)");
  // An older catalog without the configuration hash differs from every run.
  const FitIdentity old = identity_of({{"templates_checksum", "fnv1a64:aaaa"}});
  CHECK(identity_difference(old, have, "x.h5") ==
        "fit configuration none recorded (x.h5: fnv1a64:cccc)");
}
