// The per-thread cache of wavelength grids (fit/ln_wave.hpp arm_grid): the values are std::log's
// bit for bit, a grid is matched by its values (never by address), and more grids than the cache
// holds are recomputed, not confused.
#include <algorithm>
#include <catch2/catch.hpp>
#include <climits>
#include <cmath>
#include <cstring>
#include <vector>

#include "fit/classify.hpp"
#include "fit/ln_wave.hpp"

using namespace velox;

namespace {
std::vector<double> grid(double w0, size_t n) {
  std::vector<double> w(n);
  for (size_t j = 0; j < n; ++j) w[j] = w0 * std::exp(1e-4 * static_cast<double>(j));
  return w;
}
bool bitwise_logs(const double* ln, const std::vector<double>& w) {
  for (size_t j = 0; j < w.size(); ++j) {
    const double want = std::log(w[j]);
    if (std::memcmp(&ln[j], &want, sizeof want) != 0) return false;
  }
  return true;
}
}  // namespace

TEST_CASE("arm_grid: std::log bit for bit, grids matched by value", "[fit][ln_wave]") {
  std::vector<double> a = grid(3600.0, 2751);
  const double* la = arm_grid(a.data(), a.size()).ln;
  CHECK(bitwise_logs(la, a));
  // The same grid again (another copy, another address): the cached array.
  const std::vector<double> a2 = a;
  CHECK(arm_grid(a2.data(), a2.size()).ln == la);
  // The same address with one value changed: recomputed, not the stale logs.
  a[1000] *= 1.001;
  const double* lb = arm_grid(a.data(), a.size()).ln;
  CHECK(bitwise_logs(lb, a));
  CHECK(lb[1000] != la[1000]);
  // A prefix of a cached grid is another grid (the length is part of the key).
  const double* lp = arm_grid(a.data(), 100).ln;
  CHECK(bitwise_logs(lp, std::vector<double>(a.begin(), a.begin() + 100)));
  // Non-positive and non-finite wavelengths give what std::log gives.
  const std::vector<double> bad = {0.0, -1.0, NAN, INFINITY, 5000.0};
  const double* lbad = arm_grid(bad.data(), bad.size()).ln;
  CHECK(std::isinf(lbad[0]));
  CHECK(std::isnan(lbad[1]));
  CHECK(std::isnan(lbad[2]));
  CHECK(std::isinf(lbad[3]));
  CHECK(lbad[4] == std::log(5000.0));
}

TEST_CASE("arm_grid: more grids than the cache holds stay correct", "[fit][ln_wave]") {
  std::vector<std::vector<double>> grids;
  for (int g = 0; g < 20; ++g) grids.push_back(grid(3600.0 + g, 500));
  for (int round = 0; round < 3; ++round)
    for (const auto& w : grids) REQUIRE(bitwise_logs(arm_grid(w.data(), w.size()).ln, w));
}

TEST_CASE("arm_grid: classification bins and a new id for every refilled entry", "[fit][ln_wave]") {
  std::vector<double> a = grid(3600.0, 3000);
  a[7] = NAN;
  a[8] = -5.0;
  const ArmGrid g = arm_grid(a.data(), a.size());
  CHECK(g.ln == arm_grid(a.data(), a.size()).ln);  // a hit: the same arrays
  long lo = LONG_MAX, hi = LONG_MIN;
  for (size_t j = 0; j < a.size(); ++j) {
    const long want = j == 7 || j == 8
                          ? ArmGrid::kNoBin
                          : static_cast<long>(std::floor(std::log(a[j]) / kClassBinDlnlam));
    REQUIRE(g.class_bin[j] == want);
    if (want != ArmGrid::kNoBin) lo = std::min(lo, want), hi = std::max(hi, want);
  }
  CHECK(g.bin_lo == lo);  // the bins' range, kNoBin left out
  CHECK(g.bin_hi == hi);
  // A hit keeps the id; the grid with one value changed is another entry with a new id; after
  // more grids than the cache holds, the first grid is recomputed under a new id (ids are never
  // reused, so callers keyed on them do not read another grid's work).
  CHECK(arm_grid(a.data(), a.size()).id == g.id);
  std::vector<double> b = a;
  b[100] *= 1.0001;
  const uint64_t id_b = arm_grid(b.data(), b.size()).id;
  CHECK(id_b != g.id);
  for (int k = 0; k < 9; ++k) {
    const std::vector<double> o = grid(4000.0 + k, 50);
    (void)arm_grid(o.data(), o.size());
  }
  const uint64_t id_again = arm_grid(a.data(), a.size()).id;
  CHECK(id_again != g.id);
  CHECK(id_again != id_b);
}
