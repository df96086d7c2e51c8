// The HDF5 catalog: round trips, edge cases, and readability by h5py/astropy.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>

#include "common/error.hpp"
#include "io/catalog.hpp"
#include "io/h5.hpp"
#include "io/info.hpp"
#include "test_util.hpp"

using namespace velox;

namespace {

std::vector<CatalogRow> sample_rows() {
  std::vector<CatalogRow> rows(3);
  rows[0].TARGETID = 39627652257399884;
  rows[0].SOURCE_FILE = "spec-3586-55181-0500.fits";
  rows[0].ROW_IN_FILE = 0;
  rows[0].VRAD = -30.1, rows[0].VRAD_ERR = 1.2, rows[0].VRAD_CCF = -31;
  rows[0].TEFF = 5800, rows[0].TEFF_ERR = 50, rows[0].LOGG = 4.4, rows[0].LOGG_ERR = 0.1;
  rows[0].FEH = -0.3, rows[0].FEH_ERR = 0.05, rows[0].CHISQ_TOT = 3900, rows[0].CHISQ_C = 9000;
  rows[0].NPIX_TOT = 3800, rows[0].SN = 25.5, rows[0].NITER = 7, rows[0].RVS_WARN = 0;
  rows[0].SUCCESS = true;
  rows[1] = rows[0];
  rows[1].ROW_IN_FILE = 1, rows[1].VRAD = 12.5, rows[1].TEFF = 4500;
  rows[1].VSINI = 8.0, rows[1].VSINI_ERR = 2.0, rows[1].ALPHAFE = 0.2, rows[1].ALPHAFE_ERR = 0.1;
  rows[1].RVS_WARN = (1 << 0) | (1 << 3);
  rows[2].SOURCE_FILE = "failed.fits";  // a failure: everything NaN / default
  rows[2].RVS_WARN = 1 << 3;
  return rows;
}

bool same(double a, double b) { return (std::isnan(a) && std::isnan(b)) || a == b; }

void check_equal(const CatalogRow& a, const CatalogRow& b) {
  CHECK(a.TARGETID == b.TARGETID);
  CHECK(a.SOURCE_FILE == b.SOURCE_FILE);
  CHECK(a.ROW_IN_FILE == b.ROW_IN_FILE);
  for (auto f :
       {&CatalogRow::VRAD, &CatalogRow::VRAD_ERR, &CatalogRow::VRAD_CCF, &CatalogRow::TEFF,
        &CatalogRow::TEFF_ERR, &CatalogRow::LOGG, &CatalogRow::LOGG_ERR, &CatalogRow::FEH,
        &CatalogRow::FEH_ERR, &CatalogRow::ALPHAFE, &CatalogRow::ALPHAFE_ERR, &CatalogRow::VSINI,
        &CatalogRow::VSINI_ERR, &CatalogRow::CHISQ_TOT, &CatalogRow::CHISQ_C, &CatalogRow::SN})
    CHECK(same(a.*f, b.*f));
  CHECK(a.NPIX_TOT == b.NPIX_TOT);
  CHECK(a.NITER == b.NITER);
  CHECK(a.RVS_WARN == b.RVS_WARN);
  CHECK(a.SUCCESS == b.SUCCESS);
}

const Provenance kProv{{"velox_version", "0.1.0"},
                       {"command_line", "velox fit --templates lib.h5 *.fits"},
                       {"config_yaml", "fit:\n  rv_range_kms: [-500, 500]\n  quote: \"x\"\n"}};

}  // namespace

TEST_CASE("catalog round trip keeps every column, NaNs and the provenance", "[io][catalog]") {
  const std::string path = test::tmp_dir("cat_roundtrip") + "/cat.h5";
  auto rows = sample_rows();
  write_catalog(path, rows, kProv);
  CHECK_FALSE(std::filesystem::exists(path + ".tmp"));
  Provenance prov;
  auto back = read_catalog(path, &prov);
  REQUIRE(back.size() == rows.size());
  for (size_t i = 0; i < rows.size(); ++i) check_equal(back[i], rows[i]);
  CHECK(prov == kProv);
}

TEST_CASE("a catalog carries the seal of its rows and their count", "[io][catalog]") {
  const std::string path = test::tmp_dir("cat_seal") + "/cat.h5";
  auto rows = sample_rows();
  rows[1].EPOCH = 0;  // one epoch row: /epochs is sealed too
  write_catalog(path, rows, kProv);
  bool sealed = false;
  Provenance prov;
  CHECK(read_catalog(path, &prov, &sealed).size() == rows.size());
  CHECK(sealed);
  CHECK(prov.count("velox_rows_seal") == 0);  // not provenance: a resume does not compare it
  const std::string seal = h5::File::open_read(path).attr_string("/", "velox_rows_seal");
  const std::string rec = std::to_string(catalog_record_offsets().back());
  CHECK(seal.rfind("velox-rows v1 catalog:2/" + rec + " epochs:1/", 0) == 0);
  CHECK(seal.find(" fnv1a64:") != std::string::npos);
  // The tests' scripts change a row with h5py and check that reading refuses it
  // (tests/integration/test_operator_guards.sh).
}

TEST_CASE("catalog with zero rows round trips", "[io][catalog]") {
  const std::string path = test::tmp_dir("cat_empty") + "/cat.h5";
  write_catalog(path, {}, {});
  Provenance prov{{"stale", "x"}};
  CHECK(read_catalog(path, &prov).empty());
  CHECK(prov.empty());
}

TEST_CASE("catalog truncates a long SOURCE_FILE to 127 bytes without splitting UTF-8",
          "[io][catalog]") {
  const std::string path = test::tmp_dir("cat_long") + "/cat.h5";
  std::vector<CatalogRow> rows(2);
  rows[0].SOURCE_FILE = std::string(300, 'a');
  rows[1].SOURCE_FILE = std::string(126, 'b') + "é";  // 2-byte character across byte 127
  write_catalog(path, rows, {});
  auto back = read_catalog(path);
  CHECK(back[0].SOURCE_FILE == std::string(127, 'a'));
  CHECK(back[1].SOURCE_FILE == std::string(126, 'b'));
}

TEST_CASE("catalog stores units and descriptions as <COL>_UNIT/_DESC attributes", "[io][catalog]") {
  const std::string path = test::tmp_dir("cat_units") + "/cat.h5";
  write_catalog(path, sample_rows(), {});
  auto f = h5::File::open_read(path);
  CHECK(f.attr_string("/", "velox_kind") == "catalog");
  CHECK(f.attr_string("/catalog", "VRAD_UNIT") == "km/s");
  CHECK(f.attr_string("/catalog", "VSINI_ERR_UNIT") == "km/s");
  CHECK(f.attr_string("/catalog", "TEFF_UNIT") == "K");
  CHECK(f.attr_string("/catalog", "FEH_UNIT") == "dex");
  CHECK(f.attr_string("/catalog", "NPIX_TOT_UNIT") == "");
  CHECK_FALSE(f.attr_string("/catalog", "SUCCESS_DESC").empty());
  CHECK(f.read_strings("/catalog.__table_column_meta__").front() == "datatype:");
}

TEST_CASE("read_catalog of a non-catalog or non-HDF5 file throws IoError naming it",
          "[io][catalog]") {
  const std::string dir = test::tmp_dir("cat_bad");
  h5::File::create(dir + "/other.h5").close();
  CHECK_THROWS_WITH(read_catalog(dir + "/other.h5"), Catch::Contains(dir + "/other.h5"));
  CHECK_THROWS_AS(read_catalog(dir + "/absent.h5"), IoError);
}

TEST_CASE("describe_file summarises a catalog and rejects non-velox files", "[io][info]") {
  const std::string dir = test::tmp_dir("info");
  write_catalog(dir + "/cat.h5", sample_rows(), kProv);
  auto text = describe_file(dir + "/cat.h5");
  CHECK_THAT(text, Catch::Contains("rows: 3") && Catch::Contains("SUCCESS: 2") &&
                       Catch::Contains("bit 0 CHISQ_NOT_BETTER: 1") &&
                       Catch::Contains("bit 3 LABEL_EDGE: 2") &&
                       Catch::Contains("velox_version = 0.1.0"));
  CHECK_THAT(text, Catch::Contains("VRAD  -8.8 [") && Catch::Contains("(N=2)"));

  {
    auto f = h5::File::create(dir + "/lib.h5");
    f.write("templates/flux", std::vector<float>(6, 1.f), {2, 3});
    f.set_attr("/", "velox_kind", std::string("template-library"));
    f.set_attr("/", "n_templates", int64_t{2});
  }
  text = describe_file(dir + "/lib.h5");
  CHECK_THAT(text, Catch::Contains("n_templates = 2") &&
                       Catch::Contains("/templates/flux [2, 3] float32"));

  h5::File::create(dir + "/plain.h5").close();
  CHECK_THROWS_WITH(describe_file(dir + "/plain.h5"),
                    Catch::Contains("not a velox file") && Catch::Contains(dir + "/plain.h5"));
}

TEST_CASE("catalog is readable by h5py and astropy with units (tests/python/check_catalog.py)",
          "[io][catalog][python]") {
  if (std::system("/usr/bin/python3 -c 'import h5py, numpy' >/dev/null 2>&1") != 0) {
    WARN("skipped: /usr/bin/python3 with h5py and numpy not available");
    return;
  }
  const std::string path = test::tmp_dir("cat_python") + "/cat.h5";
  write_catalog(path, sample_rows(), kProv);
  const std::string cmd = std::string("/usr/bin/python3 ") + VELOX_TEST_SOURCE_DIR +
                          "/tests/python/check_catalog.py " + path;
  CHECK(std::system(cmd.c_str()) == 0);
}
