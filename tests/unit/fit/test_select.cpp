// Target selection (fit/select.hpp) and the DESI target-bit table (io/desi_targets.hpp).
#include <catch2/catch.hpp>

#include "common/error.hpp"
#include "fit/select.hpp"

using namespace velox;

namespace {
Spectrum desi_target(const std::string& objtype, const std::string& status) {
  Spectrum s;
  s.targetid = 42;
  s.meta["OBJTYPE"] = objtype;
  s.meta["COADD_FIBERSTATUS"] = status;
  ArmData a;
  a.name = "B";
  a.wave_vac_A = {1, 2, 3, 4, 5};
  a.flux = {10, 10, 10, 10, 10};
  a.ivar = {1, 1, 1, 0, 1};  // S/N 10 where ivar > 0
  a.mask = {0, 0, 0, 0, 1};
  s.arms.push_back(a);
  return s;
}
}  // namespace

TEST_CASE("DESI target bits: names, globs, COLUMN:BIT", "[select]") {
  auto mws = resolve_target_pattern("MWS_ANY");
  REQUIRE(mws.size() == 3);  // DESI_TARGET, SV1_DESI_TARGET, SV3_DESI_TARGET
  for (const auto& b : mws) CHECK(b.bit == 61);
  CHECK(resolve_target_pattern("BGS_ANY")[0].bit == 60);
  CHECK(resolve_target_pattern("SCND_ANY")[0].bit == 62);
  CHECK(resolve_target_pattern("STD_*").size() == 9);  // 3 names x 3 surveys
  CHECK(resolve_target_pattern("MWS_BHB").size() == 2);  // main and SV3
  const auto x = resolve_target_pattern("SCND_TARGET:10");
  REQUIRE(x.size() == 1);
  CHECK((x[0].column == "SCND_TARGET" && x[0].bit == 10));
  CHECK_THROWS_AS(resolve_target_pattern("NOT_A_BIT"), ConfigError);
  CHECK_THROWS_AS(resolve_target_pattern("DESI_TARGET:64"), ConfigError);
}

TEST_CASE("select_target: OBJTYPE, FIBERSTATUS, objtypes, TARGETID, S/N", "[select]") {
  SelectConfig cfg;
  std::string why;
  CHECK(select_target(desi_target("TGT", "0"), cfg, &why));
  CHECK_FALSE(select_target(desi_target("SKY", "0"), cfg, &why));
  CHECK(why == "OBJTYPE 'SKY'");
  CHECK_FALSE(select_target(desi_target("", "0"), cfg, &why));  // masked OBJTYPE
  CHECK_FALSE(select_target(desi_target("TGT", "512"), cfg, &why));
  CHECK(why == "COADD_FIBERSTATUS 512");
  cfg.fiberstatus_allowed_bits = {9};
  CHECK(select_target(desi_target("TGT", "512"), cfg, &why));

  Spectrum lamost;  // no OBJTYPE / FIBERSTATUS: passes
  CHECK(select_target(lamost, cfg, &why));

  cfg.objtypes = {"MWS_ANY"};
  resolve_objtypes(cfg);
  auto s = desi_target("TGT", "0");
  CHECK_FALSE(select_target(s, cfg, &why));
  s.meta["DESI_TARGET"] = "2305843009213693952";  // 1 << 61
  CHECK(select_target(s, cfg, &why));

  cfg.targetids = {7};
  CHECK_FALSE(select_target(s, cfg, &why));
  cfg.targetids = {42};
  CHECK(select_target(s, cfg, &why));

  CHECK(selection_sn(s) == Approx(10.0));
  cfg.min_sn = 9.5;
  CHECK(select_target(s, cfg, &why));
  cfg.min_sn = 10.5;
  CHECK_FALSE(select_target(s, cfg, &why));
  Spectrum empty;
  CHECK(selection_sn(empty) == -1e9);
}
