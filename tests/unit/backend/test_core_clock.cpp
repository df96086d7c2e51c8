// The core clock of `velox bench`'s share of peak (backend/cpu/flop_count.hpp): the choice
// between the two timed chains and the bounds, on readings made up to match the cases met, and
// the measurement on this machine.
#include <catch2/catch.hpp>
#include <cmath>

#include "backend/cpu/flop_count.hpp"

using namespace velox;

TEST_CASE("core clock: an add chain the core shortcuts gives way to the imul chain",
          "[bench][clock]") {
  // The Xeon: 2.1 GHz, the add chain read 10.5 GHz.
  const CoreClock c = pick_core_clock(10.5, 2.1, NAN, 2.1);
  CHECK(c.ghz == 2.1);
  CHECK(c.source.find("imul chain") != std::string::npos);
  CHECK(c.source.find("10.50 GHz: shortcut") != std::string::npos);
  // Chains that agree (this VM: 3.49 and 3.49): the smaller, said so.
  const CoreClock a = pick_core_clock(3.50, 3.48, NAN, 2.79);
  CHECK(a.ghz == 3.48);
  CHECK(a.source == "measured: dependent imul and add chains agree");
  // An imul slower than 3 cycles reads high: the add chain wins.
  CHECK(pick_core_clock(2.0, 2.7, NAN, NAN).ghz == 2.0);
}

TEST_CASE("core clock: bounded by the cpufreq maximum, else by twice /proc/cpuinfo",
          "[bench][clock]") {
  const CoreClock m = pick_core_clock(9.0, 8.0, 3.7, 2.1);
  CHECK(m.ghz == 3.7);
  CHECK(m.source.find("cpuinfo_max_freq") != std::string::npos);
  CHECK(pick_core_clock(3.6, 3.6, 3.7, 2.1).ghz == 3.6);  // boost within the maximum: kept
  CHECK(pick_core_clock(5.0, 5.0, NAN, 2.0).ghz == 2.0);  // over 2x /proc/cpuinfo
  CHECK(pick_core_clock(3.8, 3.8, NAN, 2.6).ghz == 3.8);  // a VM's boost over its nominal clock
  // Nothing measured (not x86-64): the maximum, else /proc/cpuinfo, else NaN.
  CHECK(pick_core_clock(NAN, NAN, 3.0, 2.0).ghz == 3.0);
  CHECK(pick_core_clock(NAN, NAN, NAN, 2.0).ghz == 2.0);
  CHECK(std::isnan(pick_core_clock(NAN, NAN, NAN, NAN).ghz));
}

TEST_CASE("core clock measured here is a real clock, within its bounds", "[bench][clock]") {
  const CoreClock c = core_clock();
  INFO(c.source << ": " << c.ghz << " GHz");
#if defined(__x86_64__)
  CHECK(c.source.rfind("measured", 0) == 0);
#endif
  REQUIRE(c.ghz > 0.3);
  CHECK(c.ghz < 7.0);  // no shipped core runs faster; the add chain's shortcut read 10-11
  const double max = cpufreq_max_ghz();
  if (max > 0) CHECK(c.ghz <= 1.05 * max);
}
