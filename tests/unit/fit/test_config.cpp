// Strict configuration (common/yaml_get.hpp YamlSection): a typo in a key or section is an error
// naming the nearest valid one, and every key the loaders know is accepted.
#include <catch2/catch.hpp>
#include <fstream>

#include "common/error.hpp"
#include "common/yaml_get.hpp"
#include "emulator/build.hpp"
#include "fit/config.hpp"
#include "fit/select.hpp"
#include "test_util.hpp"

using namespace velox;
using Catch::Contains;

namespace {
std::string write_yaml(const std::string& name, const std::string& text) {
  const std::string path = test::tmp_dir("config_" + name) + "/c.yaml";
  std::ofstream(path) << text;
  return path;
}
}  // namespace

TEST_CASE("the nearest valid name is the one fewest edits away", "[config]") {
  const std::vector<std::string> keys = {"cont_deg", "ccf_cont_deg", "n_starts", "max_iter"};
  CHECK(nearest_name("cont_degg", keys) == "cont_deg");
  CHECK(nearest_name("ccf_cont_dg", keys) == "ccf_cont_deg");
  CHECK(nearest_name("maxiter", keys) == "max_iter");
  CHECK(nearest_name("fitt", config_sections()) == "fit");
  CHECK(nearest_name("selection", config_sections()) == "select");
}

TEST_CASE("a misspelt key or section exits with its name and the nearest valid one", "[config]") {
  CHECK_THROWS_WITH(load_fit_config(write_yaml("key", "fit:\n  cont_degg: 3\n")),
                    Contains("fit.cont_degg: unknown key (did you mean fit.cont_deg?)"));
  CHECK_THROWS_WITH(load_fit_config(write_yaml("section", "fitt:\n  cont_deg: 3\n")),
                    Contains("unknown section 'fitt:' (did you mean 'fit:'?)"));
  SelectConfig sel;
  CHECK_THROWS_WITH(load_select_config(write_yaml("sel", "select:\n  objtype_: [TGT]\n"), sel),
                    Contains("select.objtype_: unknown key (did you mean select.objtype?)"));
  CHECK_THROWS_WITH(load_build_config(write_yaml("tpl", "templates:\n  dlnlamm: 5e-5\n")),
                    Contains("templates.dlnlamm: unknown key (did you mean templates.dlnlam?)"));
  CHECK_THROWS_AS(load_fit_config(write_yaml("notmap", "fit: 3\n")), ConfigError);
  CHECK_THROWS_AS(load_fit_config(write_yaml("list", "- fit\n")), ConfigError);
}

TEST_CASE("every key the fit configuration writes is a key it reads", "[config]") {
  // The provenance dump (config_yaml) lists every fit: key; loading it back must pass the strict
  // check and give the same configuration.
  FitConfig c;
  c.cont_deg = 5;
  c.default_R["sdss"] = 2200;
  c.mask_bands_A = {{7590, 7700}};
  c.arm_zero_point_kms["sdss"]["R"] = -3.5;
  c.model_variance = false;
  const FitConfig back = load_fit_config(write_yaml("dump", dump_fit_config(c)));
  CHECK(back.arm_zero_point_kms.at("sdss").at("R") == -3.5);
  CHECK(back.arm_zero_point_kms.at("lamost-dr8").at("R") == 9.5);  // a default kept
  CHECK_FALSE(back.model_variance);
  CHECK_THROWS_WITH(
      load_fit_config(write_yaml("zp", "fit:\n  arm_zero_point_kms:\n    sdss: {Q: 1}\n")),
      Contains("unknown arm"));
  CHECK(back.cont_deg == 5);
  CHECK(back.default_R.at("sdss") == 2200);
  CHECK(back.mask_bands_A == c.mask_bands_A);
  CHECK(dump_fit_config(back) == dump_fit_config(c));
}

TEST_CASE("arm velocity scatter and survey keys: checked and looked up per key", "[config]") {
  const FitConfig c = load_fit_config(write_yaml(
      "sc", "fit:\n  arm_rv_scatter_kms:\n    desi:main: {Z: 2.5}\n    lamost-dr8: {R: 7}\n"));
  CHECK(c.arm_rv_scatter_kms.at("desi:main").at("Z") == 2.5);
  // A format given replaces its entry; the others keep their defaults.
  CHECK(c.arm_rv_scatter_kms.at("lamost-dr8").size() == 1);
  CHECK(c.arm_rv_scatter_kms.at("lamost-dr8").at("R") == 7.0);
  CHECK(c.arm_rv_scatter_kms.at("desi:lamost-regrid").at("Z") > 0.0);
  CHECK(load_fit_config(write_yaml("dump2", dump_fit_config(c))).arm_rv_scatter_kms ==
        c.arm_rv_scatter_kms);
  // Per key: the survey's own entry where it lists the key, else its format's; another survey of
  // the format reads the format's.
  const std::map<std::string, std::map<std::string, int>> m = {
      {"desi", {{"VRAD", 1}, {"TEFF", 3}}}, {"desi:lamost-regrid", {{"VRAD", 2}}}};
  CHECK(*format_value(m, "desi", "lamost-regrid", "VRAD") == 2);
  CHECK(*format_value(m, "desi", "lamost-regrid", "TEFF") == 3);  // not in the survey's entry
  CHECK(*format_value(m, "desi", "main", "VRAD") == 1);
  CHECK(*format_value(m, "desi", "", "VRAD") == 1);
  CHECK(format_value(m, "desi", "lamost-regrid", "LOGG") == nullptr);
  CHECK(format_value(m, "sdss", "main", "VRAD") == nullptr);
  // A survey's error floor for one column keeps the format's others.
  const FitConfig f =
      load_fit_config(write_yaml("fl", "fit:\n  error_floor:\n    desi:main: {VRAD: 0.5}\n"));
  CHECK(*format_value(f.error_floor, "desi", "main", "VRAD") == 0.5);
  CHECK(*format_value(f.error_floor, "desi", "main", "TEFF") ==
        f.error_floor.at("desi").at("TEFF"));
  // {} empties an entry: the zero points of desi:lamost-regrid removed, VRAD from the arms off.
  const FitConfig off =
      load_fit_config(write_yaml("off",
                                 "fit:\n  arm_zero_point_kms:\n    desi:lamost-regrid: {}\n"
                                 "  arm_rv_scatter_kms:\n    desi:lamost-regrid: {}\n"));
  for (const char* arm : {"B", "R", "Z"}) {
    CHECK(format_value(off.arm_zero_point_kms, "desi", "lamost-regrid", arm) == nullptr);
    CHECK(format_value(off.arm_rv_scatter_kms, "desi", "lamost-regrid", arm) == nullptr);
  }
  for (const char* bad :
       {"fit:\n  arm_rv_scatter_kms:\n    desi: {Q: 1}\n",
        "fit:\n  arm_rv_scatter_kms:\n    desi: {R: -1}\n",
        "fit:\n  arm_rv_scatter_kms:\n    dsei:main: {R: 1}\n",
        "fit:\n  arm_rv_scatter_kms:\n    desi: {R: .nan}\n",
        "fit:\n  arm_zero_point_kms:\n    desi:: {R: 1}\n",
        "fit:\n  arm_zero_point_kms:\n    dsei:main: {}\n",  // checked empty too
        "fit:\n  error_floor:\n    desi:: {}\n",
        "fit:\n  error_floor:\n    desi:MAIN: {VRAD: 1}\n",  // SURVEY is lower case
        "fit:\n  error_floor:\n    desi:main:x: {VRAD: 1}\n",
        "fit:\n  error_floor:\n    lamost-dr8:x: {VRAD: 1}\n",  // no SURVEY there
        // Resolutions and arm splits are per format only.
        "fit:\n  default_R:\n    desi:main: 3000\n",
        // The arms' Student-t degrees of freedom: >= 0 (0: Gaussian weights), finite.
        "fit:\n  arm_rv_t_dof: -1\n", "fit:\n  arm_rv_t_dof: .nan\n"})
    CHECK_THROWS_AS(load_fit_config(write_yaml("bad", bad)), ConfigError);
  CHECK(FitConfig{}.arm_rv_t_dof == 4.0);
  CHECK(load_fit_config(write_yaml("tdof", "fit:\n  arm_rv_t_dof: 0\n")).arm_rv_t_dof == 0.0);
}

TEST_CASE("one file may hold every section, and each command reads its own", "[config]") {
  const auto path = write_yaml("all",
                               "fit:\n  vmin_kms: -600\n  vmax_kms: 600\n"
                               "select:\n  min_sn: 2.0\n"
                               "templates:\n  n_components: 30\n");
  CHECK(load_fit_config(path).vmin_kms == -600);
  SelectConfig sel;
  load_select_config(path, sel);
  CHECK(sel.min_sn == 2.0);
  CHECK(load_build_config(path).n_components == 30);
  CHECK_NOTHROW(load_fit_config(write_yaml("empty", "")));
}

TEST_CASE("default_R entries override their format's default and keep the others", "[config]") {
  const FitConfig c = load_fit_config(write_yaml("R", "fit:\n  default_R: {sdss: 2200}\n"));
  CHECK(c.default_R.at("sdss") == 2200);
  CHECK(c.default_R.at("desi") == FitConfig{}.default_R.at("desi"));  // not dropped
  CHECK_THROWS_WITH(load_fit_config(write_yaml("Rbad", "fit:\n  default_R: {lamost_dr8: 1}\n")),
                    Contains("fit.default_R.lamost_dr8: unknown input format (did you mean "
                             "lamost-dr8?)"));
}

TEST_CASE("VSINI floor fractions per format and library, and a scalar that applies everywhere",
          "[config][vsini]") {
  // Shipped (issue 52): per format and library kind (preset name or template kind), else the
  // scalar; a "desi:SURVEY" file reads its format's entry.
  const FitConfig d;
  CHECK(vsini_floor_frac(d, "lamost-dr8", "", "lamost") ==
        d.vsini_fwhm_frac.at("lamost-dr8").at("lamost"));
  CHECK(vsini_floor_frac(d, "desi", "lamost-regrid", "desi") ==
        d.vsini_fwhm_frac.at("desi").at("desi"));
  CHECK(vsini_floor_frac(d, "sdss", "", "miles") == d.vsini_min_fwhm_frac);  // not calibrated
  CHECK(vsini_floor_frac(d, "desi", "main", "phoenix") == d.vsini_min_fwhm_frac);
  // A scalar in the file applies to every format and library.
  const FitConfig s = load_fit_config(write_yaml("vs", "fit:\n  vsini_min_fwhm_frac: 0\n"));
  CHECK(s.vsini_fwhm_frac.empty());
  CHECK(vsini_floor_frac(s, "lamost-dr8", "", "lamost") == 0.0);
  // Per format: an entry replaces its format's; "*" is any library; the rest keep theirs.
  const FitConfig m = load_fit_config(write_yaml(
      "vm", "fit:\n  vsini_fwhm_frac:\n    desi:main: {'*': 0.7}\n    sdss: {miles: 0.8}\n"));
  CHECK(vsini_floor_frac(m, "desi", "main", "desi") == 0.7);
  CHECK(vsini_floor_frac(m, "desi", "lamost-regrid", "desi") ==
        d.vsini_fwhm_frac.at("desi").at("desi"));
  CHECK(vsini_floor_frac(m, "sdss", "", "miles") == 0.8);
  CHECK(vsini_floor_frac(m, "sdss", "", "desi") == m.vsini_min_fwhm_frac);
  const FitConfig back = load_fit_config(write_yaml("vd", dump_fit_config(m)));
  CHECK(back.vsini_fwhm_frac == m.vsini_fwhm_frac);
  CHECK(back.vsini_min_fwhm_frac == m.vsini_min_fwhm_frac);
  // Both in one file: the scalar replaces the shipped map, the map given then applies.
  const FitConfig both = load_fit_config(write_yaml(
      "vb", "fit:\n  vsini_min_fwhm_frac: 0.6\n  vsini_fwhm_frac:\n    sdss: {miles: 0.8}\n"));
  CHECK(both.vsini_fwhm_frac.size() == 1);
  CHECK(vsini_floor_frac(both, "sdss", "", "miles") == 0.8);
  CHECK(vsini_floor_frac(both, "lamost-dr8", "", "lamost") == 0.6);
  for (const char* bad :
       {"fit:\n  vsini_min_fwhm_frac: -1\n",
        "fit:\n  vsini_fwhm_frac:\n    lamost: {miles: 1}\n",  // a preset, not a format
        "fit:\n  vsini_fwhm_frac:\n    sdss: {miles: .nan}\n"})
    CHECK_THROWS_AS(load_fit_config(write_yaml("vbad", bad)), ConfigError);
}
