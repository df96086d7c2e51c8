#include "fit/resolution.hpp"

#include <algorithm>
#include <cmath>

#include "common/rounding.hpp"

namespace velox {

namespace {

// Centroid tolerance of the sampled Gaussian [px]: 1e-7 px is 5e-6 km/s on DESI pixels, and the
// rows are stored in single precision (relative 6e-8) anyway.
constexpr double kCentroidTol = 1e-7;

// w[k] proportional to exp(-(k - half - c)^2 / (2 sg^2)), k = 0 .. ndiag-1 (the callers
// normalise): 1 at the tap kc nearest c, and from there outwards successive ratios follow
// w[k+1]/w[k] = exp(-(x_k + dx/2) dx), each ratio the last times q = exp(-dx^2) (x_k = (k - half -
// c)/sg, dx = 1/sg). The first ratio downwards is q over the first upwards, so one exp() per call
// (q is the row's). Starting at the peak, the products only shrink: nothing overflows. Relative
// error ~1e-15.
void sampled_gaussian(int ndiag, int half, double c, double dx, double q, double* w) {
  // Nearest tap, clamped to the taps (a row with negative weights can put its centroid, and c,
  // beyond +-half; the clamp keeps its peak tap at the edge, where lround's exp(-xc^2/2)
  // underflowed to a NaN row before).
  const int kc = static_cast<int>(std::clamp(floor_long(c + 0.5) + half, 0L, ndiag - 1L));
  const double xc = (kc - half - c) * dx;
  w[kc] = 1.0;
  const double r_up = std::exp(-(xc + 0.5 * dx) * dx);  // w[kc+1] / w[kc]
  double r = r_up;
  for (int k = kc + 1; k < ndiag; ++k, r *= q) w[k] = w[k - 1] * r;
  r = q / r_up;  // w[kc-1] / w[kc] = exp((xc - dx/2) dx)
  for (int k = kc - 1; k >= 0; --k, r *= q) w[k] = w[k + 1] * r;
}

}  // namespace

void ResolutionFold::set(const float* res, size_t n_pix, int ndiag, const char* want) {
  n_ = static_cast<long>(n_pix);
  ndiag_ = ndiag;
  half_ = ndiag / 2;
  lo_ = hi_ = 0;
  if (ndiag <= 0 || ndiag > kMaxResolutionDiagonals) return;
  const long n = n_, half = half_;
  // Moments of the rows (sum, sum o, sum o^2 of its weights over offsets o), one contiguous
  // pass per diagonal (vectorised; the same order of additions per row as a row-by-row loop).
  // Row i: weight of model[i + o] is res[d * n + i + o] with o = k - half, d = ndiag - 1 - k.
  // A non-finite weight makes the row's sum non-finite: such rows are unusable. With `want`,
  // only the rows from the first to the last wanted one (and the complete rows their edge rows
  // borrow): the matrix beyond the templates' range is never read (the rest of a DESI arm past
  // MILES' 7410 A, the whole z arm).
  long row_lo = 0, row_hi = n;  // rows [row_lo, row_hi) get moments
  if (want) {
    row_lo = n, row_hi = 0;
    for (long i = 0; i < n; ++i)
      if (want[i]) {
        row_lo = std::min({row_lo, i, borrowed(i)});
        row_hi = std::max({row_hi, i + 1, borrowed(i) + 1});
      }
  }
  if (row_lo >= row_hi) return;
  mom_.assign(3 * n_pix, 0.0);
  double *m0 = mom_.data(), *m1 = m0 + n, *m2 = m1 + n;
  for (long k = 0; k < ndiag; ++k) {
    const long o = k - half;
    const double od = static_cast<double>(o);
    const float* rd = res + static_cast<size_t>(ndiag - 1 - k) * n + o;
    for (long i = std::max(row_lo, -o), hi = std::min(row_hi, n - o); i < hi; ++i) {
      const double r = rd[i];
      m0[i] += r;
      m1[i] += r * od;
      m2[i] += r * od * od;
    }
  }
  m0_ = m0, m1_ = m1, m2_ = m2;
  lo_ = row_lo, hi_ = row_hi;
}

void ResolutionFold::write_rows(const size_t* rows, size_t count, const double* wave,
                                const double* fwhm_pp, double fwhm_fixed, float* out,
                                ptrdiff_t row_step, ptrdiff_t k_step, long offset) const {
  static const double fwhm_to_sigma = 1.0 / std::sqrt(8.0 * std::log(2.0));
  const long n = n_, half = half_;
  const int ndiag = ndiag_;
  // Rows in batches of kBatch: each step of the centroid iteration runs over the batch's rows
  // before the next, so that the rows' independent dependency chains (the tap products, the
  // sums, a division) overlap instead of one row's latency at a time. Each row's arithmetic is
  // that of a row alone.
  constexpr int kBatch = 8;
  double c[kBatch], mu[kBatch], dx[kBatch], q[kBatch], s0[kBatch], norm[kBatch];
  double w[kBatch][kMaxResolutionDiagonals];
  float* dst[kBatch];
  bool done[kBatch];
  for (size_t r0 = 0; r0 < count; r0 += kBatch) {
    const size_t nb = std::min<size_t>(kBatch, count - r0);
    int ng = 0;  // rows of the batch with a sampled Gaussian
    for (size_t r = r0; r < r0 + nb; ++r) {
      const long i = static_cast<long>(rows[r]);
      float* o = out + (i - offset) * row_step;
      // The first and last `half` rows reach beyond the arm, where the matrix stores nothing:
      // their stored weights lose part of the row and pull its centroid inward. They take the
      // shape and weight of the nearest complete row (the LSF varies slowly along an arm).
      long ir = borrowed(i);
      if (!usable(ir)) ir = i;
      const double sum = m0_[ir], s1 = m1_[ir], s2 = m2_[ir];
      const double m = s1 / sum;
      const double var_row = std::max(0.0, s2 / sum - m * m);
      const long i0 = std::max(0L, i - 1), i1 = std::min(n - 1, i + 1);
      const double dlam = (wave[i1] - wave[i0]) / static_cast<double>(std::max(1L, i1 - i0));
      const double fwhm_t = fwhm_pp ? fwhm_pp[r] : fwhm_fixed;
      const double sig_t = fwhm_t > 0 ? fwhm_t * fwhm_to_sigma / dlam : 0.0;
      const double var = var_row - sig_t * sig_t;
      if (var > 0.09) {  // sigma > 0.3 px: sampled Gaussian, normalised to the row's sum
        dx[ng] = 1.0 / std::sqrt(var);
        q[ng] = std::exp(-dx[ng] * dx[ng]);
        c[ng] = mu[ng] = m;
        s0[ng] = sum;
        dst[ng] = o;
        done[ng] = false;
        ++ng;
      } else if (ndiag == 1) {  // a one-diagonal matrix: the row is its weight
        o[0] = static_cast<float>(sum);
      } else {  // narrower than a pixel: linear interpolation at the centroid
        const double cl = std::clamp(m, -static_cast<double>(half), static_cast<double>(half));
        const int k0 = static_cast<int>(std::min(floor_long(cl) + half, ndiag - 2L));
        const double f = cl + static_cast<double>(half) - k0;
        o[k0 * k_step] = static_cast<float>(sum * (1 - f));
        o[(k0 + 1) * k_step] = static_cast<float>(sum * f);
      }
    }
    // Sampling a narrow Gaussian at integer offsets pulls its centroid towards 0 (0.04 px for
    // sigma 0.46, i.e. ~2 km/s on DESI pixels): move the centre until the sampled centroid is
    // the row's (a contraction: 1-4 steps to kCentroidTol for most rows, at most 8).
    int active = ng;
    for (int it = 0; it < 8 && active > 0; ++it) {
      for (int g = 0; g < ng; ++g) {
        if (done[g]) continue;
        sampled_gaussian(ndiag, static_cast<int>(half), c[g], dx[g], q[g], w[g]);
        double nm = 0, m1 = 0;
        for (int k = 0; k < ndiag; ++k) {
          nm += w[g][k];
          m1 += w[g][k] * (k - half);
        }
        norm[g] = nm;
        const double dc = mu[g] - m1 / nm;
        c[g] += dc;
        if (std::fabs(dc) < kCentroidTol || it == 7) done[g] = true, --active;
      }
    }
    for (int g = 0; g < ng; ++g) {
      const double scale = s0[g] / norm[g];
      for (int k = 0; k < ndiag; ++k) dst[g][k * k_step] = static_cast<float>(scale * w[g][k]);
    }
  }
}

void fold_resolution_rows(const double* wave, size_t n_pix, const float* res, int ndiag,
                          double template_fwhm_A, std::vector<float>* out,
                          std::vector<char>* row_ok, const double* template_fwhm_pp,
                          const char* want) {
  out->assign(n_pix * static_cast<size_t>(std::max(ndiag, 0)), 0.0f);
  row_ok->assign(n_pix, 0);
  thread_local ResolutionFold fold;
  fold.set(res, n_pix, ndiag, want);
  for (size_t i = 0; i < n_pix; ++i) {
    if (!fold.ok(i)) continue;
    (*row_ok)[i] = 1;
  }
  // The wanted usable rows, each with its template FWHM.
  thread_local std::vector<size_t> rows;
  thread_local std::vector<double> fwhm;
  rows.clear();
  fwhm.clear();
  for (size_t i = 0; i < n_pix; ++i)
    if ((*row_ok)[i] && (!want || want[i])) {
      rows.push_back(i);
      fwhm.push_back(template_fwhm_pp ? template_fwhm_pp[i] : template_fwhm_A);
    }
  fold.write_rows(rows.data(), rows.size(), wave, fwhm.data(), 0.0, out->data(), ndiag, 1, 0);
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
