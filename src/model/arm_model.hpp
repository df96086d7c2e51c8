// The template library matched to one arm's line-spread function: the emulator basis and the
// coarse CCF templates convolved by the quadrature difference between the instrument's Gaussian
// LSF (FWHM = lambda / R) and the templates' own (never deconvolved). Convolution is linear, so
// convolving the basis once per resolution gives the convolved model for every label set.
#pragma once
#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "emulator/library.hpp"

namespace velox {

struct CcfPhaseCache;  // arm_model.cpp

struct ArmModel {
  double resolution_R = 0.0;
  std::vector<float> basis;  // [n_tpix][K+1] at the arm resolution, + kern::kBasisPad zeros
  // The same basis transposed, [K+1][n_tpix]: the CPU's rotated model sums grid rows with it,
  // 16 rows per vector operation (backend/cpu/isa/simd_forms.hpp rotated_rows_cpu). Not on the GPU.
  std::vector<float> basis_t;
  std::vector<float> ccf_templates;  // [n_ccf][n_tpix] normalised flux at the arm resolution
  int n_ccf = 0;
  // The first n_tmpl CCF templates de-interleaved for the CPU's CCF, laid out as
  // kern::ccf_phases(n_tmpl, step, n_tpix, n_out) says (kernels/ccf.hpp CcfPhases): built on
  // first use for that geometry and kept with the model (thread-safe), so a batch or a single
  // spectrum only looks them up. nullptr when n_tmpl is not in 1 .. n_ccf.
  const float* ccf_phases(int n_tmpl, int step, int n_out) const;
  std::shared_ptr<CcfPhaseCache> ccf_phase_cache;  // set by make_arm_model
};

// Thread-safe cache of ArmModels keyed by R (rounded to 0.5%).
class ArmModelCache {
 public:
  explicit ArmModelCache(const TemplateLibrary& lib) : lib_(lib) {}
  std::shared_ptr<const ArmModel> get(double resolution_R);

 private:
  const TemplateLibrary& lib_;
  std::mutex mu_;
  std::map<long, std::shared_ptr<const ArmModel>> cache_;
};

// Build one ArmModel (exposed for tests).
ArmModel make_arm_model(const TemplateLibrary& lib, double resolution_R);

// kern::gaussian_convolve_column for every column of an interleaved [n][ncol] float array at
// once (in -> out, sigma_pix[n] in pixels): bitwise the same sums, each column's in the order of
// the taps, with a pixel's Gaussian weights (its exp() calls) computed once for all columns
// (make_arm_model's basis: 31 components).
void convolve_columns(const float* in, float* out, int n, int ncol, const double* sigma_pix);

// Effective resolving power of a DESI-style resolution matrix (res[d*n_pix + j], ndiag
// diagonals): lambda / FWHM, the median over every 7th row of FWHM = 2.355 sigma, sigma the width
// of the Gaussian whose taps within the band have the row's second moment (a wide line spread
// cut off by the band, e.g. R 1800 on DESI's 0.8 A pixels, is not read as a sharper one). NaN if
// unusable.
double effective_resolution(const double* wave_A, size_t n_pix, const float* res, int ndiag);

}  // namespace velox
