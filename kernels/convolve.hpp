// Line-spread-function matching on the template grid (uniform in ln lambda).
// Gaussian with a per-pixel width sigma_pix[t] (template pixels), normalised to unit sum at
// every output pixel so that a flat spectrum stays flat. Used with the quadrature difference
// sigma_diff^2 = sigma_inst^2 - sigma_template^2 (never deconvolve: where it is <= 0 the
// template is left as it is). Source: DESIGN.md "Resolution"; Gray (2005) for the rotation kernel.
#pragma once
#include <cmath>

#include "kernels/hd.hpp"

namespace velox::kern {

// out[t*stride] = sum_s in[s*stride] G(t - s; sigma_pix[t]) for one column of an interleaved
// [n][stride] array. Kernel truncated at 4 sigma; sigma_pix < 0.05 copies the input.
VX_HD VX_INLINE void gaussian_convolve_column(const float* in, float* out, int n, int stride,
                                              const double* sigma_pix) {
  for (int t = 0; t < n; ++t) {
    const double s = sigma_pix[t];
    if (!(s >= 0.05)) {
      out[(size_t)t * stride] = in[(size_t)t * stride];
      continue;
    }
    const int half = (int)ceil(4.0 * s);
    double acc = 0.0, wsum = 0.0;
    const double inv2s2 = 0.5 / (s * s);
    for (int k = -half; k <= half; ++k) {
      const int src = t + k;
      if (src < 0 || src >= n) continue;
      const double wk = exp(-(double)k * k * inv2s2);
      acc += wk * in[(size_t)src * stride];
      wsum += wk;
    }
    out[(size_t)t * stride] = (float)(acc / wsum);
  }
}

// Rotational broadening profile G(dv) of Gray (2005, eq. 18.14) with linear limb darkening eps,
// sampled at velocity offset dv (km/s) for vsini (km/s). Zero outside |dv| < vsini.
VX_HD VX_INLINE double rotation_profile(double dv_kms, double vsini_kms, double eps) {
  const double x = dv_kms / vsini_kms;
  if (!(fabs(x) < 1.0)) return 0.0;
  const double s = 1.0 - x * x;
  const double pi = 3.14159265358979323846;
  return (2.0 * (1.0 - eps) * sqrt(s) + 0.5 * pi * eps * s) / (pi * vsini_kms * (1.0 - eps / 3.0));
}

}  // namespace velox::kern
