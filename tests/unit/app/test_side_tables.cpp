// FIBERMAP/SCORES side tables re-read from the inputs at write time (app/fit_outputs.hpp): a DESI
// input gives its FIBERMAP columns; an input whose reader reported no such HDUs (LAMOST, SDSS:
// FileResult::side_hdus false) is not opened at all.
#include <catch2/catch.hpp>

#include "app/fit_outputs.hpp"
#include "test_util.hpp"

using namespace velox;

TEST_CASE("side tables read a DESI input's FIBERMAP and skip inputs reported to have none",
          "[app]") {
  std::vector<CatalogRow> rows(3);
  for (int i = 0; i < 3; ++i) rows[i].ROW_IN_FILE = i;
  const std::string desi = test::data("spectra/desi_lamost/coadd-lamost-dr10.fits");
  const SideTables with = side_tables({{desi, rows.data(), rows.size(), true}}, true);
  CHECK(with.fibermap.n_rows() == 3);
  CHECK(with.fibermap.n_columns() > 10);  // DESI FIBERMAPs have dozens of columns
  // The same input flagged as having none: not opened, so no columns, but every row is there.
  const SideTables without = side_tables({{desi, rows.data(), rows.size(), false}}, true);
  CHECK(without.fibermap.n_rows() == 3);
  CHECK(without.fibermap.n_columns() == 0);
  // A path that cannot be opened is never touched when flagged (no exception, no warning path).
  const SideTables missing = side_tables({{"/nonexistent/x.fits", rows.data(), 3, false}}, false);
  CHECK(missing.fibermap.n_rows() == 3);
}
