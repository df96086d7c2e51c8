// The template library: a smooth emulator of normalised template flux as a function of stellar
// labels, on a grid uniform in ln(lambda_vac). Built by `velox templates build`, stored as HDF5
// (layout: docs/data-model.md "Template library"), loaded by `velox fit`.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "io/class_template.hpp"
#include "kernels/emulator_eval.hpp"
#include "kernels/grid.hpp"

namespace velox {

struct TemplateLibrary {
  // Template grid: ln(lambda_vac/A) = lnlam0 + t * dlnlam, t = 0 .. n_tpix-1. VACUUM.
  int n_tpix = 0;
  double lnlam0 = 0.0, dlnlam = 0.0;
  // Line-spread function of the templates: constant FWHM [A] (MILES: 2.5) or constant R.
  double fwhm_A = NAN, resolution_R = NAN;
  // Or, when not empty, a line spread that varies along the grid (joined libraries): FWHM [A] at
  // each template pixel [n_tpix]. Overrides the two above.
  std::vector<float> lsf_fwhm_A;
  // Basis [n_tpix][K+1]: column 0 is the mean spectrum, 1..K the principal components.
  int n_comp = 0;  // K + 1
  std::vector<float> basis;
  // Labels: names (TEFF is carried as LOG10_TEFF), training set and GP emulator.
  std::vector<std::string> label_names;  // e.g. {"LOG10_TEFF", "LOGG", "FEH"}
  int n_label = 0, n_train = 0, n_poly = 0;
  std::vector<double> train_x;       // [N][L] scaled
  std::vector<double> train_labels;  // [N][L] physical (log10 Teff, logg, feh[, alpha])
  std::vector<std::string> train_names;
  std::vector<double> alpha;                       // [N][K+1]
  std::vector<double> poly_coef;                   // [P][K+1]
  std::vector<double> length_scale, shift, scale;  // [L]
  std::vector<double> label_min, label_max;        // [L] physical box of the training labels
  std::vector<double> ccf_labels;      // [n_ccf][L] physical labels of the coarse CCF templates
  std::vector<double> loo_rms;         // [N] leave-one-out rms of normalised flux per training star
  // Optional [n_tpix]: the emulator's own error at each template pixel, in normalised flux: the
  // robust sigma over the training stars of their leave-one-out residuals (prediction without
  // the star minus its spectrum, so template noise is included), smoothed over +-300 km/s.
  // Empty in libraries built before it existed (no model variance in the fit).
  std::vector<float> model_sigma;
  std::vector<ClassTemplate> classes;  // optional: classification templates (empty: none)
  std::map<std::string, std::string> attrs;  // build parameters, validation, provenance
  std::string checksum;

  bool has_alpha() const { return n_label >= 4; }
  // What calibrations are keyed by (FitConfig::vsini_fwhm_frac): the survey preset a joined
  // library was built from (attribute join.preset: desi, sdss, lamost), else the template kind
  // of a one-source library (build.template_kind: miles, stelib, ...), else "".
  std::string kind() const;
  kern::EmulatorView view() const;  // points into this object: keep it alive
  kern::GridView grid() const { return {n_tpix, lnlam0, dlnlam}; }
  double wave_vac_A(int t) const;
  // FWHM [A] of the templates' line spread at vacuum wavelength lam [A] (0 if unknown).
  double template_fwhm_A(double lam_A) const;
  // The same at ln(lam): bitwise template_fwhm_A(lam) for ln_lam = std::log(lam) where the library
  // has a per-pixel line spread (lsf_fwhm_A; joined libraries), else from exp(ln_lam).
  double template_fwhm_at_ln(double ln_lam) const;
  // model_sigma at vacuum wavelength lam [A] (nearest pixel, clamped to the grid); 0 if absent.
  double model_sigma_at(double lam_A) const;
  // The same at ln(lam) (lam in A): bitwise model_sigma_at(lam) for ln_lam = std::log(lam).
  double model_sigma_at_ln(double ln_lam) const;
  // The pixel of a per-template-pixel array of `size` values nearest ln(lam) (lam in A; ties away
  // from zero, clamped to 0 .. size-1): the pixel model_sigma_at_ln and template_fwhm_at_ln read.
  long nearest_pixel_ln(double ln_lam, size_t size) const;

  // Model on the template grid at physical labels: flux[n_tpix] (normalised), using `basis_in`
  // (default: this library's own basis, i.e. the template resolution).
  std::vector<float> evaluate(const double* labels, const float* basis_in = nullptr) const;
  // evaluate() at n label vectors labels[n][L] at once: [n][n_tpix], row j equal to
  // evaluate(labels + j L, basis_in) bit for bit (the same sums in the same order, the n
  // templates interleaved so that they vectorise; the arm models' n_ccf CCF templates).
  std::vector<float> evaluate_many(const double* labels, int n,
                                   const float* basis_in = nullptr) const;

  void save(const std::string& path) const;              // atomic; throws IoError
  static TemplateLibrary load(const std::string& path);  // throws IoError
  std::string compute_checksum() const;  // FNV-1a 64 of grid, basis and emulator arrays
};

}  // namespace velox
