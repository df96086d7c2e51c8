// Medians of samples (one definition for the fit, the selection, the bench and the library
// validation; issue 27).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

namespace velox {

// The element at index n/2 of v sorted: the median for odd n, the upper of the two middle values
// for even n (the catalog's SN and SN_<arm> use it); NaN if v is empty. Reorders v.
inline double median_upper_inplace(std::vector<double>& v) {
  if (v.empty()) return NAN;
  const size_t m = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + m, v.end());
  return v[m];
}
// The same on a copy of v.
inline double median_upper(std::vector<double> v) { return median_upper_inplace(v); }

// The element at index n/2 of x[0..n-1] sorted (median_upper_inplace's element) for finite
// floats, without reordering x: a radix select on the floats' bits mapped to an unsigned order
// (Knuth, TAOCP vol. 3, 5.2.5), 11, 11 and 10 bits per pass, each pass counting only the values
// that share the digits found so far (four histograms, so that runs of similar values do not
// wait on one counter). nth_element's partitions mispredict about every other comparison; this
// is ~4x faster on a spectrum's ~5,000 S/N values. -0.0 ranks below +0.0 (equal values). NaN if n
// is 0. `scratch` is reused (capacity n).
inline float median_upper_f32(const float* x, size_t n, std::vector<uint32_t>& scratch) {
  if (n == 0) return NAN;
  auto key = [](float f) {  // increasing with the float's value
    uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
  };
  scratch.resize(n);
  uint32_t* k = scratch.data();
  size_t m = n / 2, nk = n;
  for (size_t i = 0; i < n; ++i) k[i] = key(x[i]);
  uint32_t prefix = 0;  // the digits found, in place
  constexpr int kShift[3] = {21, 10, 0}, kBits[3] = {11, 11, 10};
  for (int pass = 0; pass < 3; ++pass) {
    const int sh = kShift[pass];
    const uint32_t mask = (1u << kBits[pass]) - 1;
    uint32_t hist[4][2048] = {};
    size_t i = 0;
    for (; i + 4 <= nk; i += 4)
      for (int h = 0; h < 4; ++h) ++hist[h][(k[i + h] >> sh) & mask];
    for (; i < nk; ++i) ++hist[0][(k[i] >> sh) & mask];
    uint32_t d = 0;
    for (size_t below = 0;; ++d) {
      const size_t c = size_t{hist[0][d]} + hist[1][d] + hist[2][d] + hist[3][d];
      if (below + c > m) {
        m -= below;
        break;
      }
      below += c;
    }
    prefix |= d << sh;
    if (pass == 2) break;
    // keep the keys whose digit is d (branch-free: every key written, the count advanced)
    size_t w = 0;
    for (size_t j = 0; j < nk; ++j) {
      k[w] = k[j];
      w += ((k[j] >> sh) & mask) == d;
    }
    nk = w;
  }
  const uint32_t u = (prefix & 0x80000000u) ? (prefix & 0x7fffffffu) : ~prefix;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// The median (the mean of the two middle values for even n); reorders v; NaN if v is empty.
inline double median_inplace(std::vector<double>& v) {
  if (v.empty()) return NAN;
  const size_t m = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + m, v.end());
  const double hi = v[m];
  if (v.size() % 2) return hi;
  const double lo = *std::max_element(v.begin(), v.begin() + m);
  return 0.5 * (lo + hi);
}

}  // namespace velox
