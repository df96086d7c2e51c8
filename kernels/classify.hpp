// Template classification of ONE spectrum (star / white dwarf / CV / QSO) against DESI's redrock
// PCA bases: the chi^2 of the weighted linear least-squares fit
//   flux_k ~ sum_b a_b B_b(lnlam_k - ln(1 + z)) + sum_j p_{arm,j} Leg_j(x_k)   (per arm)
// on a spectrum rebinned onto bins uniform in ln(lambda_vac). The additive Legendre terms absorb
// flux-calibration errors, as redrock's own polynomial terms do. Sources: redrock (Bailey et al.,
// DESI; desihub/redrock, zfind/fitz), the template files of desihub/redrock-templates.
#pragma once
#include <cmath>

#include "kernels/hd.hpp"
#include "kernels/linalg.hpp"
#include "kernels/physics.hpp"

namespace velox::kern {

constexpr int kClassMaxBasis = 8;
constexpr int kClassMaxArms = 4;
constexpr int kClassPolyDeg = 2;  // additive Legendre degree per arm
constexpr int kClassMaxParams = kClassMaxBasis + kClassMaxArms * (kClassPolyDeg + 1);

// A spectrum rebinned for classification: n bins (observed frame, vacuum), arms contiguous.
struct ClassData {
  int n = 0, n_arms = 0;
  const double* lnlam = nullptr;  // [n] bin centre, ln(lambda_vac / A)
  const double* flux = nullptr;   // [n] inverse-variance weighted mean flux of the bin
  const double* ivar = nullptr;   // [n] summed ivar of the bin
  const double* xleg = nullptr;   // [n] Legendre coordinate in [-1, 1] within the bin's arm
  const int* arm = nullptr;       // [n] arm index
};

// A class's basis: [n_basis][n_bin], bin k centred on lnlam0 + (k + 1/2) dlnlam (rest frame).
struct ClassBasisView {
  int n_basis = 0, n_bin = 0;
  double lnlam0 = 0.0, dlnlam = 0.0;
  const float* basis = nullptr;
};

// chi^2 of the best fit of class t to d with the template shifted by ln(1 + z) = ln1pz (for a
// star: ln D(VRAD)). Template values beyond the basis are 0 (the polynomials still model those
// bins), so every class is compared on the same bins. Returns INFINITY if the normal equations
// are singular.
VX_HD VX_INLINE double class_chi2(const ClassBasisView& t, const ClassData& d, double ln1pz) {
  const int nb = t.n_basis < kClassMaxBasis ? t.n_basis : kClassMaxBasis;
  const int na = d.n_arms < kClassMaxArms ? d.n_arms : kClassMaxArms;
  const int np = kClassPolyDeg + 1, m = nb + na * np;
  double g[kClassMaxParams * kClassMaxParams] = {};
  double q[kClassMaxParams] = {};
  double ff = 0.0;
  for (int k = 0; k < d.n; ++k) {
    const double w = d.ivar[k];
    if (!(w > 0) || d.arm[k] >= na) continue;
    double z[kClassMaxParams] = {};
    const double u = (d.lnlam[k] - ln1pz - t.lnlam0) / t.dlnlam - 0.5;
    const int k0 = (int)floor(u);
    const double f = u - k0;
    for (int b = 0; b < nb; ++b) {
      const float* row = t.basis + (size_t)b * t.n_bin;
      const double lo = k0 >= 0 && k0 < t.n_bin ? row[k0] : 0.0;
      const double hi = k0 + 1 >= 0 && k0 + 1 < t.n_bin ? row[k0 + 1] : 0.0;
      z[b] = (1.0 - f) * lo + f * hi;
    }
    double p[kClassPolyDeg + 1];
    legendre(d.xleg[k], kClassPolyDeg, p);
    for (int j = 0; j < np; ++j) z[nb + d.arm[k] * np + j] = p[j];
    // Only the basis columns and this bin's own arm's polynomial columns can be non-zero: the
    // other arms' columns add nothing to g or q, and skipping them halves the sums of a
    // three-arm spectrum (each product is added in the same order as over all columns).
    const int p0 = nb + d.arm[k] * np, p1 = p0 + np;
    auto add_row = [&](int i) {
      if (z[i] == 0.0) return;
      const double wz = w * z[i];
      q[i] += wz * d.flux[k];
      for (int j = i; j < nb; ++j) g[i * m + j] += wz * z[j];
      for (int j = i > p0 ? i : p0; j < p1; ++j) g[i * m + j] += wz * z[j];
    };
    for (int i = 0; i < nb; ++i) add_row(i);
    for (int i = p0; i < p1; ++i) add_row(i);
    ff += w * d.flux[k] * d.flux[k];
  }
  // Symmetrise; a tiny ridge keeps columns that are zero on these bins (an arm without bins, a
  // basis beyond its range) from making the system singular without changing the fit.
  double scale = 0.0;
  for (int i = 0; i < m; ++i) scale = fmax(scale, g[i * m + i]);
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < i; ++j) g[i * m + j] = g[j * m + i];
    g[i * m + i] += 1e-12 * scale + 1e-300;
  }
  double a[kClassMaxParams];
  for (int i = 0; i < m; ++i) a[i] = q[i];
  if (!cholesky(g, m)) return INFINITY;
  cholesky_solve(g, m, a);
  double fit = 0.0;
  for (int i = 0; i < m; ++i) fit += a[i] * q[i];
  return ff - fit;
}

}  // namespace velox::kern
