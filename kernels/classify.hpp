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
  const double* leg = nullptr;    // [n][kClassPolyDeg + 1] Legendre values at xleg, or nullptr
};

// The part of class_chi2's normal equations that depends on neither the class nor z: each arm's
// block of polynomial columns in G (upper triangle), their entries of q, and sum w f^2. The
// polynomial columns of a bin are its own arm's, so G's polynomial part is block diagonal.
struct ClassPolySums {
  double g[kClassMaxArms][kClassPolyDeg + 1][kClassPolyDeg + 1] = {};
  double q[kClassMaxArms][kClassPolyDeg + 1] = {};
  double ff = 0.0;
};

// Bin k's Legendre values p[kClassPolyDeg + 1]: d.leg's row, else computed.
VX_HD VX_INLINE const double* class_legendre(const ClassData& d, int k, double* buf) {
  if (d.leg) return d.leg + (size_t)k * (kClassPolyDeg + 1);
  legendre(d.xleg[k], kClassPolyDeg, buf);
  return buf;
}

// ClassPolySums of d: the same products summed over the bins in the same order as class_chi2's
// loop over all columns would add them (so class_chi2's result is the same bit for bit).
VX_HD VX_INLINE void class_poly_sums(const ClassData& d, ClassPolySums* s) {
  const int na = d.n_arms < kClassMaxArms ? d.n_arms : kClassMaxArms;
  const int np = kClassPolyDeg + 1;
  *s = ClassPolySums{};
  for (int k = 0; k < d.n; ++k) {
    const double w = d.ivar[k];
    if (!(w > 0) || d.arm[k] >= na) continue;
    double buf[kClassPolyDeg + 1];
    const double* p = class_legendre(d, k, buf);
    const int a = d.arm[k];
    for (int i = 0; i < np; ++i) {
      if (p[i] == 0.0) continue;
      const double wz = w * p[i];
      s->q[a][i] += wz * d.flux[k];
      for (int j = i; j < np; ++j) s->g[a][i][j] += wz * p[j];
    }
    s->ff += w * d.flux[k] * d.flux[k];
  }
}

// A class's basis: [n_basis][n_bin], bin k centred on lnlam0 + (k + 1/2) dlnlam (rest frame).
struct ClassBasisView {
  int n_basis = 0, n_bin = 0;
  double lnlam0 = 0.0, dlnlam = 0.0;
  const float* basis = nullptr;
};

// chi^2 of the best fit of class t to d with the template shifted by ln(1 + z) = ln1pz (for a
// star: ln D(VRAD)). Template values beyond the basis are 0 (the polynomials still model those
// bins), so every class is compared on the same bins. `ps`: class_poly_sums(d), the same for
// every class and z of a spectrum (a redshift scan computes it once). Returns INFINITY if the
// normal equations are singular.
VX_HD VX_INLINE double class_chi2(const ClassBasisView& t, const ClassData& d, double ln1pz,
                                  const ClassPolySums& ps) {
  const int nb = t.n_basis < kClassMaxBasis ? t.n_basis : kClassMaxBasis;
  const int na = d.n_arms < kClassMaxArms ? d.n_arms : kClassMaxArms;
  const int np = kClassPolyDeg + 1, m = nb + na * np;
  double g[kClassMaxParams * kClassMaxParams] = {};
  double q[kClassMaxParams] = {};
  // The basis rows of G and q, bin by bin: the basis columns and the bin's own arm's
  // polynomial columns (the other arms' are zero there).
  for (int k = 0; k < d.n; ++k) {
    const double w = d.ivar[k];
    if (!(w > 0) || d.arm[k] >= na) continue;
    double z[kClassMaxBasis];
    const double u = (d.lnlam[k] - ln1pz - t.lnlam0) / t.dlnlam - 0.5;
    const int k0 = (int)floor(u);
    const double f = u - k0;
    for (int b = 0; b < nb; ++b) {
      const float* row = t.basis + (size_t)b * t.n_bin;
      const double lo = k0 >= 0 && k0 < t.n_bin ? row[k0] : 0.0;
      const double hi = k0 + 1 >= 0 && k0 + 1 < t.n_bin ? row[k0 + 1] : 0.0;
      z[b] = (1.0 - f) * lo + f * hi;
    }
    double buf[kClassPolyDeg + 1];
    const double* p = class_legendre(d, k, buf);
    double* gp = g + nb + d.arm[k] * np;  // row 0's polynomial columns of the bin's arm
    for (int i = 0; i < nb; ++i) {
      if (z[i] == 0.0) continue;
      const double wz = w * z[i];
      q[i] += wz * d.flux[k];
      for (int j = i; j < nb; ++j) g[i * m + j] += wz * z[j];
      for (int j = 0; j < np; ++j) gp[i * m + j] += wz * p[j];
    }
  }
  // The polynomial rows: the same for every class and z.
  for (int a = 0; a < na; ++a)
    for (int i = 0; i < np; ++i) {
      const int r = nb + a * np + i;
      q[r] = ps.q[a][i];
      for (int j = i; j < np; ++j) g[r * m + nb + a * np + j] = ps.g[a][i][j];
    }
  const double ff = ps.ff;
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
