// Medians of samples (one definition for the fit, the selection, the bench and the library
// validation; issue 27).
#pragma once
#include <algorithm>
#include <cmath>
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
