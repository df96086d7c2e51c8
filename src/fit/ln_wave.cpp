#include "fit/ln_wave.hpp"

#include <algorithm>
#include <array>
#include <climits>
#include <cmath>
#include <cstring>
#include <vector>

#include "common/rounding.hpp"
#include "fit/classify.hpp"

namespace velox {

namespace {

struct Entry {
  std::vector<double> wave, ln;
  std::vector<long> class_bin;
  long bin_lo = 0, bin_hi = -1;
  unsigned long last_use = 0;
  uint64_t id = 0;
};

}  // namespace

ArmGrid arm_grid(const double* wave, size_t n) {
  if (n == 0) return {};  // nothing to look up, nothing to evict
  thread_local std::array<Entry, kArmGridCache> cache;
  thread_local unsigned long clock = 0;
  thread_local uint64_t next_id = 0;
  ++clock;
  Entry* oldest = &cache[0];
  Entry* hit = nullptr;
  for (Entry& e : cache) {
    if (e.wave.size() == n && std::memcmp(e.wave.data(), wave, n * sizeof(double)) == 0) {
      hit = &e;
      break;
    }
    if (e.last_use < oldest->last_use) oldest = &e;
  }
  if (!hit) {
    hit = oldest;
    hit->wave.assign(wave, wave + n);
    hit->ln.resize(n);
    hit->class_bin.resize(n);
    hit->bin_lo = LONG_MAX, hit->bin_hi = LONG_MIN;
    for (size_t j = 0; j < n; ++j) {
      hit->ln[j] = std::log(wave[j]);
      const double w = wave[j];
      if (!(std::isfinite(w) && w > 0)) {
        hit->class_bin[j] = ArmGrid::kNoBin;
        continue;
      }
      const long k = floor_long(hit->ln[j] / kClassBinDlnlam);
      hit->class_bin[j] = k;
      hit->bin_lo = std::min(hit->bin_lo, k);
      hit->bin_hi = std::max(hit->bin_hi, k);
    }
    hit->id = ++next_id;
  }
  hit->last_use = clock;
  return {hit->ln.data(), hit->class_bin.data(), hit->bin_lo, hit->bin_hi, hit->id};
}

}  // namespace velox
