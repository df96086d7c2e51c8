#include <catch2/catch.hpp>

#include "io/readers.hpp"

using velox::air_to_vacuum_A;
using velox::vacuum_to_air_A;

TEST_CASE("air to vacuum at 5000 A air gives 5001.39 A vacuum (Morton 2000)", "[io][airvac]") {
  CHECK(air_to_vacuum_A(5000.0) == Approx(5001.394).margin(0.002));
  // IAU standard values (Morton 2000, table 3 of the VALD note): 6562.80 air -> 6564.61 vac.
  CHECK(air_to_vacuum_A(6562.80) == Approx(6564.61).margin(0.01));
}

TEST_CASE("air/vacuum round trip is exact to 1e-10 relative over 3000-11000 A", "[io][airvac]") {
  for (double w = 3000.0; w <= 11000.0; w += 37.3) {
    CHECK(vacuum_to_air_A(air_to_vacuum_A(w)) == Approx(w).epsilon(1e-10));
    CHECK(air_to_vacuum_A(vacuum_to_air_A(w)) == Approx(w).epsilon(1e-10));
    CHECK(air_to_vacuum_A(w) > w);
  }
}

TEST_CASE("air/vacuum conversion leaves wavelengths below 2000 A unchanged (IAU)", "[io][airvac]") {
  CHECK(air_to_vacuum_A(1500.0) == 1500.0);
  CHECK(vacuum_to_air_A(1999.0) == 1999.0);
}
