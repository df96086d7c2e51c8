// Line-spread-function matching on the template grid (uniform in ln lambda).
// Gaussian with a per-pixel width sigma_pix[t] (template pixels), normalised to unit sum at
// every output pixel so that a flat spectrum stays flat. Used with the quadrature difference
// sigma_diff^2 = sigma_inst^2 - sigma_template^2 (never deconvolve: where it is <= 0 the
// template is left as it is). Source: docs/design.md "Forward model" (Resolution); Gray (2005) for
// the rotation kernel.
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

// The rotation kernel on the template grid (uniform in ln lambda, step dlnlam): weights w[m],
// m = -M..M stored at w[m + M], of the Gray profile integrated over each grid bin
// [m - 1/2, m + 1/2], for a half-width s = vsini / (c dlnlam) grid pixels. Bin integration makes
// the weights continuous in vsini and sum exactly to 1; below s = 1/2 the kernel is the identity
// (M = 0, w = {1}). dw[m + M] = dw/dvsini in 1/(km/s), analytic. The extra 1-pixel boxcar this
// adds (sigma = c dlnlam / sqrt(12), 4.3 km/s on the 5e-5 grid) is negligible beside any survey
// LSF. Returns M (<= max_half: s is capped there, callers bound vsini below it).
// Source: Gray (2005), The Observation and Analysis of Stellar Photospheres, eq. 18.14; the CDF
// is its integral, x in [-1, 1]:
//   F(x) = [(1-eps)(x sqrt(1-x^2) + asin x + pi/2) + (pi eps / 2)(x - x^3/3 + 2/3)] / (pi (1 - eps/3)).
VX_HD VX_INLINE double rotation_cdf(double x, double eps) {
  const double pi = 3.14159265358979323846;
  if (x <= -1.0) return 0.0;
  if (x >= 1.0) return 1.0;
  const double s = sqrt(1.0 - x * x);
  return ((1.0 - eps) * (x * s + asin(x) + 0.5 * pi) + 0.5 * pi * eps * (x - x * x * x / 3.0 + 2.0 / 3.0)) /
         (pi * (1.0 - eps / 3.0));
}
// The profile density in x (integrates to 1 over [-1, 1]): dF/dx.
VX_HD VX_INLINE double rotation_density(double x, double eps) {
  const double pi = 3.14159265358979323846;
  if (!(fabs(x) < 1.0)) return 0.0;
  const double u = 1.0 - x * x;
  return (2.0 * (1.0 - eps) * sqrt(u) + 0.5 * pi * eps * u) / (pi * (1.0 - eps / 3.0));
}
VX_HD VX_INLINE int rotation_weights(double vsini_kms, double eps, double dlnlam, int max_half,
                                     double* w, double* dw) {
  const double c_kms = 299792.458;
  const double ds_dv = 1.0 / (c_kms * dlnlam);
  double s = vsini_kms * ds_dv;
  if (!(s >= 0.5)) {  // the whole profile inside the central bin (also NaN / negative vsini)
    w[0] = 1.0;
    dw[0] = 0.0;
    return 0;
  }
  if (s > max_half + 0.5) s = max_half + 0.5;
  const int M = (int)ceil(s - 0.5);
  for (int m = -M; m <= M; ++m) {
    const double xp = (m + 0.5) / s, xm = (m - 0.5) / s;
    w[m + M] = rotation_cdf(xp, eps) - rotation_cdf(xm, eps);
    // d/ds F((m +- 1/2) / s) = -density(x) x / s.
    dw[m + M] = (-rotation_density(xp, eps) * xp + rotation_density(xm, eps) * xm) / s * ds_dv;
  }
  return M;
}

}  // namespace velox::kern
