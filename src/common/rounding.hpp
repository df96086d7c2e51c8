// floor() and the nearest index without a libm call (the host code is compiled for baseline
// x86-64, which has no rounding instruction: std::floor and std::lround are calls there, and
// preparation makes one per pixel). Exact for finite x within the range of long.
#pragma once

namespace velox {

// floor(x) as a long.
inline long floor_long(double x) {
  const long k = static_cast<long>(x);  // truncation towards zero
  return k - (x < static_cast<double>(k));
}

// std::clamp(std::lround(u), 0, last): the nearest index, ties away from zero (u - floor(u) is
// exact); u < 0.5 (NaN too) gives 0, u >= last gives last.
inline long nearest_index(double u, long last) {
  if (!(u > 0.0)) return 0;
  if (u >= static_cast<double>(last)) return last;
  const long i = static_cast<long>(u);
  return i + (u - static_cast<double>(i) >= 0.5);
}

}  // namespace velox
