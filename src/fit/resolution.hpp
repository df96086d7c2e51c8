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
#include <cstddef>
#include <vector>

namespace velox {

// The most diagonals a resolution matrix may have (DESI: 11). Wider matrices are not folded: every
// row is reported unusable.
constexpr int kMaxResolutionDiagonals = 32;

// Rows of the matrix with the template LSF folded in: out[i * ndiag + k] multiplies
// model[i + k - ndiag/2] (prepare_spectrum packs the used span diagonal-major for the kernels,
// kern::FitData::rmat).
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
