#include <catch2/catch.hpp>

#include "io/readers.hpp"
#include "test_util.hpp"

using namespace velox;

TEST_CASE("DESI spectra file with tile-compressed uint32 masks reads every fibre", "[io][real]") {
  const auto sf = read_spectra(test::data("spectra/desi_edr/spectra-sv3-dark-26065.fits"));
  REQUIRE(sf.format == SpectrumFormat::DesiCoadd);
  REQUIRE(sf.spectra.size() == 5);
  for (const auto& s : sf.spectra) {
    REQUIRE(s.arms.size() == 3);
    for (const auto& a : s.arms) CHECK(a.mask.size() == a.size());
  }
}
