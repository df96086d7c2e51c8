// The fitted-parameter table (src/fit/params.hpp) against theta's layout in the kernels, the LM
// box of pipeline_config, and the catalog's column table (names, fields and units).
#include <catch2/catch.hpp>

#include "fit/config.hpp"
#include "fit/fitter.hpp"
#include "fit/params.hpp"
#include "io/catalog.hpp"
#include "kernels/fit_pipeline.hpp"
#include "thin_library.hpp"

using namespace velox;

namespace {
const CatalogColumn* column_of(double CatalogRow::*field) {
  for (const auto& c : catalog_columns())
    if (const auto* f = std::get_if<double CatalogRow::*>(&c.field); f && *f == field) return &c;
  return nullptr;
}

void check_table(const TemplateLibrary& lib, const std::vector<std::string>& expected) {
  FitConfig cfg;
  const auto ps = fit_params(lib, cfg);
  REQUIRE(ps.size() == expected.size());
  const kern::PipelineConfig pc = pipeline_config(cfg, lib);
  for (size_t i = 0; i < ps.size(); ++i) {
    const FitParam& p = ps[i];
    INFO(p.name);
    CHECK(p.name == expected[i]);
    CHECK(p.theta == static_cast<int>(i));  // theta order = table order
    CHECK(p.lo < p.hi);
    CHECK(pc.lm.lo[p.theta] == p.lo);  // the LM box is the table's
    CHECK(pc.lm.hi[p.theta] == p.hi);
    // Value, error and statistical error are catalog columns named after the parameter, with
    // the table's unit.
    const CatalogColumn* v = column_of(p.value);
    const CatalogColumn* e = column_of(p.err);
    REQUIRE(v);
    REQUIRE(e);
    CHECK(std::string(v->name) == p.name);
    CHECK(std::string(e->name) == p.name + "_ERR");
    CHECK(std::string(v->unit) == p.unit);
    CHECK(std::string(e->unit) == p.unit);
    if (p.err_stat) {
      const CatalogColumn* es = column_of(p.err_stat);
      REQUIRE(es);
      CHECK(std::string(es->name) == p.name + "_ERR_STAT");
    }
  }
  // VSINI is last, where the kernels put it, and inside the rotation stencil's reach.
  CHECK(ps.back().theta == kern::vsini_index(lib.n_label));
  CHECK(ps.back().hi <= (kern::kMaxRotHalf + 0.5) * kern::kSpeedOfLight_kms * lib.dlnlam);
}
}  // namespace

TEST_CASE("parameter table: theta layout, LM box and catalog columns agree", "[fit][params]") {
  const auto& lib = test::thin_library();
  check_table(lib, {"VRAD", "TEFF", "LOGG", "FEH", "VSINI"});
  // The same library declared with [alpha/Fe] (a PHOENIX-format library's fourth label).
  TemplateLibrary alpha = lib;
  alpha.n_label = 4;
  alpha.label_names.push_back("ALPHAFE");
  alpha.label_min.push_back(-0.2);
  alpha.label_max.push_back(0.6);
  check_table(alpha, {"VRAD", "TEFF", "LOGG", "FEH", "ALPHAFE", "VSINI"});
  // A label the table does not know is an error, not a silently unfitted column.
  TemplateLibrary odd = lib;
  odd.label_names[2] = "MICROTURB";
  CHECK_THROWS_WITH(fit_params(odd, FitConfig{}), Catch::Contains("MICROTURB"));
}
