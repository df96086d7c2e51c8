// Label-recovery validation of the template emulator by k-fold cross-validation: every usable
// template is held out once, the library is rebuilt without its fold, and the star's own
// template spectrum, Doppler-shifted and resampled onto a LAMOST-like grid, is fitted with the
// library that never saw it. The label differences measure the emulator's interpolation error
// as seen by the fit (no photon noise is added). Results: docs/validation.md.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "emulator/build.hpp"
#include "fit/config.hpp"
#include "io/catalog.hpp"
#include "io/readers.hpp"

namespace velox {

// One held-out star: truth (template labels, injected velocity) and the fit.
struct ValidationStar {
  std::string name;  // template name, e.g. "m0001V"
  size_t index = 0;  // index into TemplateSet::spectra
  int fold = 0;
  double teff_K = NAN, logg = NAN, feh = NAN;  // catalogue labels of the template
  double vrad_kms = NAN;                       // injected velocity (relativistic Doppler factor)
  CatalogRow fit;                              // fit_spectrum() output with the fold's library
  // LOO rms of normalised flux of this star in the full-library build; NaN if the full build
  // did not keep it (outlier rejection).
  double loo_rms_full = NAN;
};

// Median bias and robust sigma (1.4826 * MAD) of one difference (fit - truth).
struct ValidationStat {
  std::string quantity;  // "dTEFF" [K], "dLOGG" [dex], "dFEH" [dex], "dVRAD" [km/s]
  size_t n = 0;
  double bias = NAN, robust_sigma = NAN;
};

struct ValidationResult {
  int n_folds = 0;
  uint64_t seed = 0;
  std::vector<ValidationStar> stars;  // ordered by template index
  size_t n_failed = 0;                // fits with SUCCESS == false (not in the stats)
  double core_teff_min_K = 4000.0, core_teff_max_K = 7000.0;
  std::vector<ValidationStat> core;       // stars with core_teff_min <= Teff <= core_teff_max
  std::vector<ValidationStat> all;        // every successful fit
  double loo_rms_median = NAN;            // validation.loo_rms_median of the full build
  std::vector<std::string> full_dropped;  // outliers dropped by the full build
};

// Parameters of the synthetic observation made from a held-out template.
constexpr double kValidationSnPerPixel = 100.0;      // sets ivar only; no noise is drawn
constexpr double kValidationMaxVelocityKms = 200.0;  // |v| injected, uniform
constexpr double kValidationObsR = 1e5;  // above the templates' R: the arm model adds no blur

// Make the "observed" spectrum of template `t` at velocity v_kms: vacuum wavelengths on a
// log-linear grid (log10 step 1e-4, 3700-7400 A, LAMOST-like; to the template's end, at most
// 10500 A, for templates reaching beyond 7500 A), flux = template flux shifted by
// the relativistic Doppler factor and scaled to median 1, ivar for S/N kValidationSnPerPixel
// (constant noise level), resolution_R = kValidationObsR. Pixels outside the template get
// mask 1, ivar 0.
Spectrum validation_observation(const TemplateSpectrum& t, double v_kms, int64_t targetid);

// k-fold cross-validation of build_library + fit_spectrum. Usable templates (finite labels,
// bc.teff_min <= Teff <= bc.teff_max, not in bc.exclude) are shuffled with `seed` and dealt into
// n_folds folds; fold f is fitted with a library built without it. Also builds the full library
// once for the LOO reference. Folds run concurrently on `threads` workers (each a library build
// plus serial fits), so the result does not depend on the thread count. Throws ConfigError if
// n_folds < 2 or there are fewer usable templates than folds; build_library errors propagate.
// With `holdout_prefix`, only the templates whose name starts with it are held out, each in a
// fold of its own (leave-one-out of that subset, n_folds ignored); the rest always train.
ValidationResult cross_validate(const TemplateSet& set, const BuildConfig& bc, const FitConfig& fc,
                                int n_folds, uint64_t seed, int threads,
                                const std::string& holdout_prefix = "");

// Median bias and robust sigma of the four differences over the successful fits selected by
// `use` (same length as stars).
std::vector<ValidationStat> validation_stats(const std::vector<ValidationStar>& stars,
                                             const std::vector<char>& use);

// Per-star table (CSV with header) and summary (CSV: subset,quantity,n,bias,robust_sigma plus
// loo_rms_median). Throw IoError naming the file if it cannot be written.
void write_validation_csv(const std::string& path, const ValidationResult& r);
void write_validation_summary_csv(const std::string& path, const ValidationResult& r);
std::string format_validation_summary(const ValidationResult& r);  // human-readable

}  // namespace velox
