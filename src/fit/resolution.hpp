// DESI resolution matrices with the template line-spread function folded in.
// The instrument matrix (desispec.resolution layout: res[d * n + j] = A[j - off_d, j],
// off_d = ndiag/2 - d) maps the true spectrum to the observed one; the templates are already
// blurred by their own LSF (MILES: Gaussian, FWHM 2.5 A). Applying A to the template model would
// blur twice, and deconvolving is ill-posed, so each row is replaced by a Gaussian with the row's
// own centroid and the quadrature-reduced width sigma^2 = sigma_row^2 - sigma_template^2
// (0 where the template is broader: then only the centroid shift remains). This keeps the
// per-fibre, per-pixel width and centroid of the real matrix; its higher moments (asymmetry beyond
// the centroid) are lost. rvspecfit instead convolves high-resolution templates with the full
// matrix (docs/desi.md compares the two).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

namespace velox {

// The most diagonals a resolution matrix may have (DESI: 11). Wider matrices are not folded: every
// row is reported unusable.
constexpr int kMaxResolutionDiagonals = 32;

// Rows of the matrix with the template LSF folded in: out[i * ndiag + k] multiplies
// model[i + k - ndiag/2] (the fit builds the same rows diagonal-major from their fold
// parameters, kern::FitData::fold and rmat: ResolutionFold::params).
// wave_A[n] vacuum wavelengths of the arm, res[ndiag * n] the file's matrix, template_fwhm_A the
// templates' Gaussian FWHM (0 = infinitely sharp). row_ok[i] = 0 for rows that are all zero or not
// finite (those pixels must not be fitted). The first and last ndiag/2 rows, which reach beyond
// the arm where the matrix stores nothing, take the shape and weight of the nearest complete row.
// template_fwhm_pp[n], when not null, gives the templates' FWHM [A] per arm pixel instead (joined
// libraries, whose line spread varies with wavelength). want[n], when not null, names the rows
// the caller will use: only they are folded (the others stay zero), and row_ok is given for the
// rows from the first to the last wanted one (0 beyond them, where the matrix is not read: the
// fold is most of a DESI spectrum's preparation).
void fold_resolution_rows(const double* wave_A, size_t n, const float* res, int ndiag,
                          double template_fwhm_A, std::vector<float>* out,
                          std::vector<char>* row_ok, const double* template_fwhm_pp = nullptr,
                          const char* want = nullptr);
// The same fold in two phases: the rows' moments and usability first (set), then each wanted
// row's fold parameters (params, prepare_spectrum: the fit builds the rows from them) or the row
// itself written to where the caller keeps it (write_rows), with no per-arm buffers (one
// instance per thread is reused). The rows listed to params and write_rows increase.
class ResolutionFold {
 public:
  // Moments of the rows of res[ndiag * n] from the first to the last row with want[i] != 0 (all
  // rows when want is null), and the complete rows the edge rows borrow. ndiag <= 0 or above
  // kMaxResolutionDiagonals: no row is usable.
  void set(const float* res, size_t n, int ndiag, const char* want);
  // The same with the wanted rows given by their span: rows first .. last (first < 0: none) are
  // the first and last wanted ones, and the moments are those set() gives for them.
  void set_span(const float* res, size_t n, int ndiag, long first, long last);
  // Whether row i is usable (finite, sum above 1e-6); false outside the rows set() read.
  bool ok(size_t i) const {
    const long k = static_cast<long>(i);
    return k >= lo_ && k < hi_ && usable(k);
  }
  // The rows' sums, valid from the first to the last wanted row (ok(i): finite and above 1e-6);
  // nullptr where set() read no row (no wanted row, or ndiag out of range: no row is usable).
  const double* row_sums() const { return hi_ > lo_ ? m0_ : nullptr; }
  // The usable rows rows[0 .. count-1] folded with a template Gaussian of FWHM fwhm_pp[r] [A]
  // for rows[r] (fwhm_pp null: fwhm_fixed for all; 0: sharp templates). Row i's weight of
  // model[i + k - ndiag/2] (k = 0 .. ndiag-1) goes to out[(i - offset) * row_step + k * k_step]:
  // row-major [n][ndiag] with (ndiag, 1, 0), the kernels' diagonal-major grid with (1, n_grid,
  // the grid's first pixel). All ndiag entries of each listed row are written; other rows'
  // entries are not. A Gaussian row is
  // computed in FP32 where its centroid lies within 2 px of the central tap and sigma^2 >= 0.25
  // px^2 (centroid matched to 2e-6 px, 1e-4 km/s on DESI's pixels), else in FP64 (1e-7 px); it
  // is stored in FP32 either way.
  void write_rows(const size_t* rows, size_t count, const double* wave_A, const double* fwhm_pp,
                  double fwhm_fixed, float* out, ptrdiff_t row_step, ptrdiff_t k_step,
                  long offset) const;
  // write_rows' first half: the rows' fold parameters p[count][3] (centroid [px from the
  // central tap], the Gaussian's variance [px^2], the row's sum), from which the fit builds the
  // same rows (kern::FitData::fold, kernels/fold.hpp; prep::Kernels::expand_rows).
  void params(const size_t* rows, size_t count, const double* wave_A, const double* fwhm_pp,
              double fwhm_fixed, double* p) const;

 private:
  bool usable(long i) const { return std::isfinite(m0_[i]) && m0_[i] > 1e-6; }
  // The complete row whose moments row i takes: the nearest with all ndiag weights inside the
  // arm (the first and last half rows reach beyond it).
  long borrowed(long i) const {
    return n_ > 2L * half_ ? std::clamp(i, static_cast<long>(half_), n_ - 1 - half_) : i;
  }
  std::vector<double> mom_;
  const double *m0_ = nullptr, *m1_ = nullptr, *m2_ = nullptr;
  long n_ = 0, lo_ = 0, hi_ = 0;
  int ndiag_ = 0, half_ = 0;
};

// Whether any row i with candidates[i] != 0 is usable (the row_ok test of fold_resolution_rows),
// reading rows only until the first usable one. res[ndiag * n] as above.
bool any_resolution_row_ok(const float* res, size_t n, int ndiag, const char* candidates);

inline void fold_resolution_rows(const std::vector<double>& wave_A, const std::vector<float>& res,
                                 int ndiag, double template_fwhm_A, std::vector<float>* out,
                                 std::vector<char>* row_ok) {
  fold_resolution_rows(wave_A.data(), wave_A.size(), res.data(), ndiag, template_fwhm_A, out,
                       row_ok);
}

}  // namespace velox
