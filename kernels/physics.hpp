// Small physics formulas shared by every stage: Doppler factor, cubic interpolation weights,
// Legendre polynomials. Units: km/s, Angstrom (vacuum), natural log of wavelength.
#pragma once
#include <cmath>

#include "kernels/hd.hpp"

namespace velox::kern {

constexpr double kSpeedOfLight_kms = 299792.458;

// ln of the relativistic Doppler factor: lambda_obs = lambda_rest * sqrt((1+b)/(1-b)), b = v/c.
// ln D = atanh(b). Source: special relativity, radial motion only.
VX_HD VX_INLINE double ln_doppler(double v_kms) { return atanh(v_kms / kSpeedOfLight_kms); }
// d(ln D)/dv in 1/(km/s).
VX_HD VX_INLINE double dln_doppler_dv(double v_kms) {
  const double b = v_kms / kSpeedOfLight_kms;
  return 1.0 / (kSpeedOfLight_kms * (1.0 - b * b));
}
// Inverse of ln_doppler: velocity (km/s) for a given ln D.
VX_HD VX_INLINE double velocity_from_ln_doppler(double lnd) {
  return kSpeedOfLight_kms * tanh(lnd);
}

// The four weights of cubic_weights (below) alone, for a double or, lane by lane, a host vector
// of doubles (the CPU's SIMD forms): one set of expressions for both.
template <class T>
VX_HD VX_INLINE void cubic_weights_of(const T& f, T* w) {
  const T f2 = f * f, f3 = f2 * f;
  w[0] = -0.5 * f3 + f2 - 0.5 * f;
  w[1] = 1.5 * f3 - 2.5 * f2 + 1.0;
  w[2] = -1.5 * f3 + 2.0 * f2 + 0.5 * f;
  w[3] = 0.5 * f3 - 0.5 * f2;
}

// Keys (1981) cubic convolution kernel, a = -0.5 (Catmull-Rom): C1-continuous interpolation with
// an analytic derivative. For fractional offset f in [0,1) the taps are at -1, 0, 1, 2.
// w[4] are the weights, dw[4] their derivatives d/df.
VX_HD VX_INLINE void cubic_weights(double f, double* w, double* dw) {
  cubic_weights_of(f, w);
  const double f2 = f * f;
  dw[0] = -1.5 * f2 + 2.0 * f - 0.5;
  dw[1] = 4.5 * f2 - 5.0 * f;
  dw[2] = -4.5 * f2 + 4.0 * f + 0.5;
  dw[3] = 1.5 * f2 - f;
}

// Bonnet's recursion: P_n(x) from p1 = P_{n-1}(x) and p2 = P_{n-2}(x), n >= 2. The one
// expression of every Legendre form (legendre, legendre_scaled, continuum_at), which agree bit
// for bit through it.
VX_HD VX_INLINE double legendre_next(int n, double x, double p1, double p2) {
  return ((2 * n - 1) * x * p1 - (n - 1) * p2) / n;
}

// Legendre polynomials P_0..P_deg at x in [-1, 1] (Bonnet recursion) into p[deg+1].
VX_HD VX_INLINE void legendre(double x, int deg, double* p) {
  p[0] = 1.0;
  if (deg >= 1) p[1] = x;
  for (int n = 2; n <= deg; ++n) p[n] = legendre_next(n, x, p[n - 1], p[n - 2]);
}

// Chebyshev polynomials of the first kind T_0..T_deg at x in [-1, 1] (T_n = 2x T_{n-1} - T_{n-2}:
// one multiply-add per order) into p[deg+1]. The CPU's SIMD continuum uses them as its basis:
// they span the same polynomials as Legendre's of the same degree, so the profiled continuum,
// chi^2, gradient and Hessian are the same up to rounding (only the coefficients differ), and
// products linearize simply, T_j T_k = (T_{j+k} + T_{|j-k|}) / 2 (Mason & Handscomb 2003, 2.38).
VX_HD VX_INLINE void chebyshev(double x, int deg, double* p) {
  p[0] = 1.0;
  if (deg >= 1) p[1] = x;
  const double y = 2.0 * x;
  for (int n = 2; n <= deg; ++n) p[n] = y * p[n - 1] - p[n - 2];
}

// The same for V points at once, transposed: p[n * V + v] = T_n(x[v]) for n <= deg.
template <int V>
VX_HD VX_INLINE void chebyshev_v(const double* x, int deg, double* p) {
  double p2[V], p1[V], y[V];
  for (int v = 0; v < V; ++v) {
    p2[v] = 1.0;
    p1[v] = x[v];
    y[v] = 2.0 * x[v];
    p[v] = 1.0;
  }
  if (deg < 1) return;
  for (int v = 0; v < V; ++v) p[V + v] = x[v];
  for (int n = 2; n <= deg; ++n) {
    double* pn = p + n * V;
    for (int v = 0; v < V; ++v) {
      const double q = y[v] * p1[v] - p2[v];
      p2[v] = p1[v];
      p1[v] = q;
      pn[v] = q;
    }
  }
}

}  // namespace velox::kern
