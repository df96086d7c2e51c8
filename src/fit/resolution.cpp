#include "fit/resolution.hpp"

#include <algorithm>
#include <cmath>

#include "fit/prep_kernels.hpp"
#include "kernels/fold_row.hpp"

namespace velox {

// The matrices the host accepts are those whose rows the fit can build (kernels/fold_row.hpp).
static_assert(kMaxResolutionDiagonals == kern::kFoldMaxDiag, "one bound on the diagonals");

void ResolutionFold::set(const float* res, size_t n_pix, int ndiag, const char* want) {
  long first = -1, last = -1;
  for (size_t i = 0; i < n_pix; ++i)
    if (!want || want[i]) {
      if (first < 0) first = static_cast<long>(i);
      last = static_cast<long>(i);
    }
  set_span(res, n_pix, ndiag, first, last);
}

void ResolutionFold::set_span(const float* res, size_t n_pix, int ndiag, long first, long last) {
  n_ = static_cast<long>(n_pix);
  ndiag_ = ndiag;
  half_ = ndiag / 2;
  lo_ = hi_ = 0;
  if (ndiag <= 0 || ndiag > kMaxResolutionDiagonals || first < 0 || last < first) return;
  const long n = n_;
  // Moments of the rows (sum, sum o, sum o^2 of its weights over offsets o), one contiguous
  // pass per diagonal (fit/isa/prep_slot.cpp; the same order of additions per row as a row-by-row
  // loop).
  // Row i: weight of model[i + o] is res[d * n + i + o] with o = k - half, d = ndiag - 1 - k.
  // A non-finite weight makes the row's sum non-finite: such rows are unusable. Only the rows
  // from the first to the last wanted one get moments, and the complete rows their edge rows
  // borrow (borrowed() does not decrease with i, so the first and last wanted rows set the
  // span): the matrix beyond the templates' range is never read (the rest of a DESI arm past
  // MILES' 7410 A, the whole z arm).
  const long row_lo = std::min(first, borrowed(first));
  const long row_hi = std::max(last + 1, borrowed(last) + 1);
  if (mom_.size() < 3 * n_pix) mom_.resize(3 * n_pix);
  double *m0 = mom_.data(), *m1 = m0 + n, *m2 = m1 + n;
  prep_kernels().moments(res, n, ndiag, row_lo, row_hi, m0, m1, m2);  // only these are read
  m0_ = m0, m1_ = m1, m2_ = m2;
  lo_ = row_lo, hi_ = row_hi;
}

void ResolutionFold::write_rows(const size_t* rows, size_t count, const double* wave,
                                const double* fwhm_pp, double fwhm_fixed, float* out,
                                ptrdiff_t row_step, ptrdiff_t k_step, long offset) const {
  const prep::FoldMoments fm{m0_, m1_, m2_, n_, ndiag_};
  prep_kernels().write_rows(fm, rows, count, wave, fwhm_pp, fwhm_fixed, out, row_step, k_step,
                            offset);
}

void ResolutionFold::params(const size_t* rows, size_t count, const double* wave,
                            const double* fwhm_pp, double fwhm_fixed, double* p) const {
  const prep::FoldMoments fm{m0_, m1_, m2_, n_, ndiag_};
  prep_kernels().fold_params(fm, rows, count, wave, fwhm_pp, fwhm_fixed, p);
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
