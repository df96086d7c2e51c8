#include "fit/ln_wave.hpp"

#include <array>
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
    for (size_t j = 0; j < n; ++j) {
      hit->ln[j] = std::log(wave[j]);
      const double w = wave[j];
      hit->class_bin[j] =
          std::isfinite(w) && w > 0 ? floor_long(hit->ln[j] / kClassBinDlnlam) : ArmGrid::kNoBin;
    }
    hit->id = ++next_id;
  }
  hit->last_use = clock;
  return {hit->ln.data(), hit->class_bin.data(), hit->id};
}

const double* ln_wavelengths(const double* wave, size_t n) { return arm_grid(wave, n).ln; }

}  // namespace velox
