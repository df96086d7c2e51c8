// median_upper_f32 (common/median.hpp): the radix select returns the element nth_element puts at
// index n/2, for every length and kind of value a spectrum's S/N can take.
#include <catch2/catch.hpp>
#include <cmath>
#include <random>
#include <vector>

#include "common/median.hpp"

using namespace velox;

TEST_CASE("the radix median equals nth_element's element n/2", "[median]") {
  // Oracle: median_upper_inplace on the same values as doubles (exact: floats widen exactly).
  // Lengths from 1 up to past a spectrum's pixel count; values lognormal (positive S/N, many
  // sharing their high digits: the later passes decide), normal (negatives: the sign mapping),
  // with ties (rounded values), signed zeros and subnormals. Equality of values is required
  // (-0.0 and +0.0 compare equal, and nth_element may return either).
  std::mt19937 rng(5);
  std::lognormal_distribution<float> snr(2.0f, 0.5f);
  std::normal_distribution<float> noise(0.0f, 1.0f);
  std::vector<uint32_t> scratch;
  size_t n_checked = 0;
  for (int rep = 0; rep < 600; ++rep) {
    const size_t n = rep < 40 ? static_cast<size_t>(rep + 1) : 1 + rng() % 9000;
    std::vector<float> x(n);
    for (float& v : x) {
      v = rep % 3 == 0 ? noise(rng) : snr(rng);
      if (rng() % 20 == 0) v = std::round(v);  // ties
      if (rng() % 97 == 0) v = rng() % 2 ? -0.0f : 0.0f;
      if (rng() % 211 == 0) v = 1e-40f;  // subnormal
    }
    const std::vector<float> copy = x;
    std::vector<double> d(x.begin(), x.end());
    const double want = median_upper_inplace(d);
    const float got = median_upper_f32(x.data(), n, scratch);
    INFO("rep " << rep << ", n " << n);
    CHECK(static_cast<double>(got) == want);
    CHECK(x == copy);  // the input is not reordered
    ++n_checked;
  }
  CHECK(n_checked == 600);
  CHECK(std::isnan(median_upper_f32(nullptr, 0, scratch)));
}
