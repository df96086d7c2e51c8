#include "fit/resolution.hpp"

#include <algorithm>
#include <cmath>

namespace velox {

namespace {

// Centroid tolerance of the sampled Gaussian [px]: 1e-7 px is 5e-6 km/s on DESI pixels, and the
// rows are stored in single precision (relative 6e-8) anyway.
constexpr double kCentroidTol = 1e-7;

// w[k] = exp(-(k - half - c)^2 / (2 sg^2)), k = 0 .. ndiag-1, with two exp() per call instead of
// ndiag: from the tap nearest c outwards, successive ratios follow w[k+1]/w[k] = exp(-(x_k +
// dx/2) dx) and each ratio is the last times exp(-dx^2) (x_k = (k - half - c)/sg, dx = 1/sg);
// starting at the peak, the products only shrink, so nothing overflows. Relative error ~1e-15.
void sampled_gaussian(int ndiag, int half, double c, double sg, double* w) {
  const double dx = 1.0 / sg, q = std::exp(-dx * dx);
  const int kc = std::clamp(static_cast<int>(std::lround(c)) + half, 0, ndiag - 1);
  const double xc = (kc - half - c) * dx;
  w[kc] = std::exp(-0.5 * xc * xc);
  double r = std::exp(-(xc + 0.5 * dx) * dx);  // w[kc+1] / w[kc]
  for (int k = kc + 1; k < ndiag; ++k, r *= q) w[k] = w[k - 1] * r;
  r = std::exp((xc - 0.5 * dx) * dx);  // w[kc-1] / w[kc]
  for (int k = kc - 1; k >= 0; --k, r *= q) w[k] = w[k + 1] * r;
}

}  // namespace

void fold_resolution_rows(const double* wave, size_t n_pix, const float* res, int ndiag,
                          double template_fwhm_A, std::vector<float>* out,
                          std::vector<char>* row_ok, const double* template_fwhm_pp,
                          const char* want) {
  const int n = static_cast<int>(n_pix), half = ndiag / 2;
  out->assign(n_pix * static_cast<size_t>(std::max(ndiag, 0)), 0.0f);
  row_ok->assign(n_pix, 0);
  if (ndiag <= 0 || ndiag > kMaxResolutionDiagonals) return;
  const double fwhm_to_sigma = 1.0 / std::sqrt(8.0 * std::log(2.0));
  // Moments of the rows (sum, sum o, sum o^2 of its weights over offsets o), one contiguous
  // pass per diagonal (vectorised; the same order of additions per row as a row-by-row loop).
  // Row i: weight of model[i + o] is res[d * n + i + o] with o = k - half, d = ndiag - 1 - k.
  // A non-finite weight makes the row's sum non-finite: such rows are unusable. With `want`,
  // only the rows from the first to the last wanted one (and the complete rows their edge rows
  // borrow): the matrix beyond the templates' range is never read (the rest of a DESI arm past
  // MILES' 7410 A, the whole z arm).
  auto borrowed = [&](int i) { return n > 2 * half ? std::clamp(i, half, n - 1 - half) : i; };
  int row_lo = 0, row_hi = n;  // rows [row_lo, row_hi) get moments
  if (want) {
    row_lo = n, row_hi = 0;
    for (int i = 0; i < n; ++i)
      if (want[i]) {
        row_lo = std::min({row_lo, i, borrowed(i)});
        row_hi = std::max({row_hi, i + 1, borrowed(i) + 1});
      }
  }
  thread_local std::vector<double> mom;
  mom.assign(3 * n_pix, 0.0);
  double *m0 = mom.data(), *m1 = m0 + n, *m2 = m1 + n;
  for (int k = 0; k < ndiag; ++k) {
    const int o = k - half;
    const double od = o;
    const float* rd = res + static_cast<size_t>(ndiag - 1 - k) * n + o;
    for (int i = std::max(row_lo, -o), hi = std::min(row_hi, n - o); i < hi; ++i) {
      const double r = rd[i];
      m0[i] += r;
      m1[i] += r * od;
      m2[i] += r * od * od;
    }
  }
  auto usable = [&](int i) { return std::isfinite(m0[i]) && m0[i] > 1e-6; };
  for (int i = row_lo; i < row_hi; ++i) {
    if (!usable(i)) continue;
    (*row_ok)[i] = 1;
    if (want && !want[i]) continue;
    // The first and last `half` rows reach beyond the arm, where the matrix stores nothing: their
    // stored weights lose part of the row and pull its centroid inward. They take the shape and
    // weight of the nearest complete row (the LSF varies slowly along an arm).
    int ir = borrowed(i);
    if (!usable(ir)) ir = i;
    const double s0 = m0[ir], s1 = m1[ir], s2 = m2[ir];
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
      // the row's (a contraction: 2-4 steps to kCentroidTol).
      const double sg = std::sqrt(var);
      double c = mu, w[kMaxResolutionDiagonals], norm = 0;
      for (int it = 0; it < 8; ++it) {
        sampled_gaussian(ndiag, half, c, sg, w);
        norm = 0;
        double m1 = 0;
        for (int k = 0; k < ndiag; ++k) {
          norm += w[k];
          m1 += w[k] * (k - half);
        }
        const double dc = mu - m1 / norm;
        c += dc;
        if (std::fabs(dc) < kCentroidTol) break;
      }
      for (int k = 0; k < ndiag; ++k) row[k] = static_cast<float>(s0 * w[k] / norm);
    } else if (ndiag == 1) {  // a one-diagonal matrix: the row is its weight
      row[0] = static_cast<float>(s0);
    } else {  // narrower than a pixel: linear interpolation at the centroid
      const double c = std::clamp(mu, -static_cast<double>(half), static_cast<double>(half));
      const int k0 = std::min(static_cast<int>(std::floor(c)) + half, ndiag - 2);
      const double f = c + half - k0;
      row[k0] = static_cast<float>(s0 * (1 - f));
      row[k0 + 1] = static_cast<float>(s0 * f);
    }
  }
}

bool any_resolution_row_ok(const float* res, size_t n_pix, int ndiag, const char* candidates) {
  if (ndiag <= 0 || ndiag > kMaxResolutionDiagonals) return false;
  const int n = static_cast<int>(n_pix), half = ndiag / 2;
  for (int i = 0; i < n; ++i) {
    if (!candidates[i]) continue;
    double s0 = 0;  // the row's sum, its terms in the order of the fold's pass
    for (int k = 0; k < ndiag; ++k) {
      const int o = k - half;
      if (i + o >= 0 && i + o < n) s0 += res[static_cast<size_t>(ndiag - 1 - k) * n + i + o];
    }
    if (std::isfinite(s0) && s0 > 1e-6) return true;
  }
  return false;
}

}  // namespace velox
