#include "fit/resolution.hpp"

#include <algorithm>
#include <cmath>

namespace velox {

void fold_resolution_rows(const double* wave, size_t n_pix, const float* res, int ndiag,
                          double template_fwhm_A, std::vector<float>* out,
                          std::vector<char>* row_ok, const double* template_fwhm_pp) {
  const int n = static_cast<int>(n_pix), half = ndiag / 2;
  out->assign(n_pix * static_cast<size_t>(std::max(ndiag, 0)), 0.0f);
  row_ok->assign(n_pix, 0);
  if (ndiag <= 0 || ndiag > kMaxResolutionDiagonals) return;
  const double fwhm_to_sigma = 1.0 / std::sqrt(8.0 * std::log(2.0));
  // Moments of row i (sum, sum o, sum o^2 of its weights over offsets o); false if not finite.
  // Row i: weight of model[i + o] is res[d * n + i + o] with o = half - d.
  auto moments = [&](int i, double* s0, double* s1, double* s2) {
    *s0 = *s1 = *s2 = 0;
    bool finite = true;
    for (int k = 0; k < ndiag; ++k) {
      const int o = k - half, m = i + o, d = ndiag - 1 - k;
      if (m < 0 || m >= n) continue;
      const double r = res[static_cast<size_t>(d) * n + m];
      if (!std::isfinite(r)) finite = false;
      *s0 += r;
      *s1 += r * o;
      *s2 += r * o * o;
    }
    return finite;
  };
  for (int i = 0; i < n; ++i) {
    double s0, s1, s2;
    if (!moments(i, &s0, &s1, &s2) || !(s0 > 1e-6)) continue;
    // The first and last `half` rows reach beyond the arm, where the matrix stores nothing: their
    // stored weights lose part of the row and pull its centroid inward. They take the shape and
    // weight of the nearest complete row (the LSF varies slowly along an arm).
    const int ir = n > 2 * half ? std::clamp(i, half, n - 1 - half) : i;
    if (ir != i) {
      double r0, r1, r2;
      if (moments(ir, &r0, &r1, &r2) && r0 > 1e-6) s0 = r0, s1 = r1, s2 = r2;
    }
    const double mu = s1 / s0;
    const double var_row = std::max(0.0, s2 / s0 - mu * mu);
    const int i0 = std::max(0, i - 1), i1 = std::min(n - 1, i + 1);
    const double dlam = (wave[i1] - wave[i0]) / std::max(1, i1 - i0);
    const double fwhm_t = template_fwhm_pp ? template_fwhm_pp[i] : template_fwhm_A;
    const double sig_t = fwhm_t > 0 ? fwhm_t * fwhm_to_sigma / dlam : 0.0;
    const double var = var_row - sig_t * sig_t;
    float* row = out->data() + static_cast<size_t>(i) * ndiag;
    if (var > 0.09) {  // sigma > 0.3 px: sampled Gaussian, normalised to the row's sum
      // Sampling a narrow Gaussian at integer offsets pulls its centroid towards 0 (0.04 px for
      // sigma 0.46, i.e. ~2 km/s on DESI pixels): move the centre until the sampled centroid is
      // the row's.
      const double sg = std::sqrt(var);
      double c = mu, w[kMaxResolutionDiagonals], norm = 0;
      for (int it = 0; it < 8; ++it) {
        norm = 0;
        double m1 = 0;
        for (int k = 0; k < ndiag; ++k) {
          w[k] = std::exp(-0.5 * std::pow((k - half - c) / sg, 2));
          norm += w[k];
          m1 += w[k] * (k - half);
        }
        c += mu - m1 / norm;
      }
      for (int k = 0; k < ndiag; ++k) row[k] = static_cast<float>(s0 * w[k] / norm);
    } else {  // narrower than a pixel: linear interpolation at the centroid
      const double c = std::clamp(mu, -static_cast<double>(half), static_cast<double>(half));
      const int k0 = std::min(static_cast<int>(std::floor(c)) + half, ndiag - 2);
      const double f = c + half - k0;
      row[k0] = static_cast<float>(s0 * (1 - f));
      row[k0 + 1] = static_cast<float>(s0 * f);
    }
    (*row_ok)[i] = 1;
  }
}

}  // namespace velox
