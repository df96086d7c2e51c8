// Fit configuration: defaults, YAML loading (`--config FILE`, section `fit:`), YAML dumping for
// the provenance attribute. Units: km/s, vacuum Angstrom.
#pragma once
#include <initializer_list>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace velox {

// The shipped error floors (config.cpp, with their sources).
std::map<std::string, std::map<std::string, double>> default_error_floors();

// A file's value of `key` (a column or an arm) in a per-format calibration map (error floors,
// arm zero points and scatter): the survey's own entry "format:SURVEY" (the primary header's
// SURVEY, e.g. desi:lamost-regrid) where it lists the key, else the format's entry; nullptr when
// neither does. With several keys, each entry is searched for them in order before the next
// entry (the VSINI floor's library, then "*").
template <class V>
const V* format_value(const std::map<std::string, std::map<std::string, V>>& m,
                      const std::string& format, const std::string& survey,
                      std::initializer_list<std::string> keys) {
  for (const std::string& k : {survey.empty() ? std::string() : format + ":" + survey, format}) {
    if (k.empty()) continue;
    const auto e = m.find(k);
    if (e == m.end()) continue;
    for (const std::string& key : keys) {
      const auto v = e->second.find(key);
      if (v != e->second.end()) return &v->second;
    }
  }
  return nullptr;
}
template <class V>
const V* format_value(const std::map<std::string, std::map<std::string, V>>& m,
                      const std::string& format, const std::string& survey,
                      const std::string& key) {
  return format_value(m, format, survey, {key});
}

struct FitConfig {
  double vmin_kms = -1000.0, vmax_kms = 1000.0;  // velocity search range
  int cont_deg = 8;         // Legendre degree of the per-arm multiplicative continuum
  int ccf_cont_deg = 5;     // pseudo-continuum degree for the cross-correlation
  int n_starts = 2;         // LM starting points (best distinct chi^2-grid templates)
  int n_ccf_templates = 8;  // coarse templates cross-correlated (the library stores more)
  int ccf_lag_step = 4;     // coarse CCF lag step in template pixels (library dlnlam)
  int max_iter = 60;        // LM iteration limit
  // Later LM starts stop once inside an earlier start's minimum: chi^2 not lower and the chi^2
  // rise that minimum's covariance predicts below this (kern::LMConfig::join_dchi2); 0 = every
  // start runs to convergence.
  double start_join_dchi2 = 25.0;
  int min_pixels = 50;      // fewer usable pixels => NO_PIXELS
  int min_arm_pixels = 20;  // an arm with fewer usable pixels is dropped
  double clip_sigma = 5.0;  // one re-fit after clipping |resid|/sigma above this; 0 = off
  double wave_min_A = 0.0, wave_max_A = 0.0;  // optional fit range (vacuum), 0 = none
  std::vector<std::pair<double, double>> mask_bands_A = {{6865.0, 6930.0}, {7165.0, 7330.0}};
  // The emulator's own error in the likelihood: each pixel's variance 1/ivar gets
  // (model_variance_scale x sigma_m(lambda) x F)^2, sigma_m the library's per-pixel
  // leave-one-out error in normalised flux (TemplateLibrary::model_sigma; libraries without it:
  // no term) and F the flux's running median over +-15 used pixels of the arm (the model's
  // scale, before the model is known). Issue 25; docs/quality.md gives the pulls.
  bool model_variance = true;
  double model_variance_scale = 1.0;
  double chisq_improvement_min = 50.0;  // RVS_WARN bit 0 threshold (rvspecfit uses 50)
  double rv_err_max_kms = 100.0;        // RVS_WARN bit 2 threshold
  // --epochs: FIT_INFO RV_VARIABLE when VRAD_LOGP_CONST is below this (p < 1e-4: one false
  // alarm in 10^4 constant stars at honest errors; docs/epochs.md gives the measured rates).
  double rv_variable_logp = -4.0;
  // RVS_WARN MODEL_MISMATCH: the fractional rms of the residuals beyond the noise,
  // sqrt(max(chi^2/dof - 1, 0)) / SN, above this (and chi^2/dof significantly above 1). The 134
  // real LAMOST stars have a median of 0 and a maximum of 0.020 with the model variance (0.008 and
  // 0.020 without), the BOSS G star 0.019; the SDSS white dwarf fitted with MILES has 0.06
  // (docs/quality.md).
  double mismatch_max = 0.04;
  // Template classification against the library's redrock classes (templates build --classes):
  // RVS_WARN NOT_STAR when a WD, CV or QSO beats every normal star by more than class_dchi2_min.
  bool classify = true;
  double class_dchi2_min = 25.0;
  // Per-arm velocities (VRAD_B/R/Z): Gauss-Newton steps with the labels fixed (0: off), and the
  // wavelength (vacuum Angstrom) where one-arm spectra are split into their blue and red halves,
  // per input format (the spectrograph's dichroic; formats not listed are not split).
  int seg_max_iter = 6;
  // VRAD_SKEW / VRAD_KURT from the velocity posterior (kern::velocity_moments): velocities on
  // each side of VRAD (0: not measured, NaN), spaced vrad_moments_step x VRAD's error.
  int vrad_moments_half = 6;
  double vrad_moments_step = 1.0;
  std::map<std::string, double> arm_split_A = {
      {"lamost-dr8", 5800.0}, {"lamost-dr10", 5800.0}, {"sdss", 6000.0}};
  // Per-arm velocity zero points [km/s] per input format and segment (B, R, Z): the velocity an
  // arm reads against the blue (reference) arm across a survey format, from its wavelength
  // calibration. The arm's wavelengths are divided by (1 + zp/c) before the fit, so VRAD and
  // VRAD_<arm> are on the reference arm's scale. Formats or arms not listed: 0. LAMOST: the
  // median VRAD_R - VRAD_B of the shared stars fitted without it (DR8 109 stars: +9.5 km/s, 5-fold
  // spread 8.8-10.8; DR10 25 stars: +18.7, 13.7-20.2), validated by 5-fold cross-validation
  // (docs/rv-zero-point.md).
  // desi:lamost-regrid (LAMOST spectra re-gridded into the DESI layout, primary SURVEY
  // 'lamost-regrid'): R +14.2, Z +8.0 from the 84 DESI-layout LAMOST stars, 5-fold spread
  // 13.3-14.8 and 6.6-8.9 (docs/rv-zero-point.md). Real DESI arms share one wavelength solution.
  std::map<std::string, std::map<std::string, double>> arm_zero_point_kms = {
      {"lamost-dr8", {{"R", 9.5}}},
      {"lamost-dr10", {{"R", 18.7}}},
      {"desi:lamost-regrid", {{"R", 14.2}, {"Z", 8.0}}}};
  // Per-arm velocity scatter [km/s] per input format and arm: the star-to-star scatter of an
  // arm's velocity about the reference (B) arm's beyond their statistical errors, from the arm's
  // wavelength calibration (the moments of VRAD_<arm> - VRAD_B over a format's stars,
  // scripts/arm_rv_scatter.py). Where a format lists any, VRAD is the weighted mean of the
  // per-arm velocities, weights 1 / (statistical error^2 + scatter^2), VRAD_ERR_STAT its error,
  // and FIT_INFO VRAD_FROM_ARMS is set; elsewhere VRAD is the joint fit's (arms that share one
  // wavelength solution: DESI, SDSS). The LAMOST red arm's per-star calibration errors, from the
  // shared stars (5-fold spread in brackets): lamost-dr8 R 15.1 (109 stars; 12.8-16.7),
  // lamost-dr10 R 12.0 (25; 10.3-13.9), desi:lamost-regrid R 18.3 (84; 17.0-20.9), Z 34.9
  // (33.4-38.5).
  std::map<std::string, std::map<std::string, double>> arm_rv_scatter_kms = {
      {"lamost-dr8", {{"R", 15.1}}},
      {"lamost-dr10", {{"R", 12.0}}},
      {"desi:lamost-regrid", {{"R", 18.3}, {"Z", 34.9}}}};
  // With three or more arm velocities, VRAD from the arms (above) reweights each arm by a
  // Student-t factor with this many degrees of freedom, capped at 1 (iteratively: w_a min(1,
  // (nu + 1) / (nu + r_a^2)), r_a the arm's residual about the mean in units of sqrt(stat^2 +
  // scatter^2); combine_arm_velocities), so that one arm's calibration outlier (the LAMOST DR10
  // z arms' +60 to +120 km/s, docs/rv-zero-point.md) is down-weighted rather than averaged in,
  // while arms that agree keep their Gaussian weights. nu = 4 is the usual robust choice (Lange,
  // Little & Taylor 1989, JASA 84, 881); 0 = Gaussian weights. Two arms keep the Gaussian
  // weights: with two velocities neither can be told to be the outlier.
  double arm_rv_t_dof = 4.0;
  // RVS_WARN ARM_RV_DISAGREE when the per-arm velocities' chi^2 about their weighted mean (errors
  // with the VRAD_ARM floor) has a p-value below this.
  double arm_rv_pvalue_min = 1e-3;
  // Systematic error floors per input format, added in quadrature to the statistical errors
  // (*_ERR_STAT): keys VRAD [km/s], TEFF [K], LOGG [dex], FEH [dex], ALPHAFE [dex], and VRAD_ARM
  // [km/s] for the per-arm velocities. Calibrated by scripts/calibrate_floors.py from repeat
  // observations and published survey figures (docs/quality.md). Formats not listed: no floor.
  std::map<std::string, std::map<std::string, double>> error_floor = default_error_floors();
  // VSINI (Gray rotation kernel, docs/vsini.md): fitted where the effective resolving power of
  // the best arm, min(instrument, templates), reaches vsini_min_R (FWHM 300 km/s at 1000);
  // elsewhere NaN with FIT_INFO VSINI_UNRESOLVED. Bounds [0, vsini_max_kms]; the LM starts at
  // vsini_start_kms; limb_darkening is the linear coefficient eps of the profile.
  // RVS_WARN VSINI_LARGE above vsini_max_ok_kms.
  bool fit_vsini = true;
  double vsini_min_R = 1000.0;
  double vsini_max_kms = 500.0;
  double vsini_start_kms = 60.0;
  double limb_darkening = 0.6;
  double vsini_max_ok_kms = 350.0;
  // The smallest VSINI reported as a detection: a fraction of the LSF FWHM (km/s) of the
  // broadest fitted arm (c / R_eff, R_eff = min(instrument, templates) at the arm's middle).
  // Below it a fitted VSINI is an upper limit (FIT_INFO VSINI_UPPER_LIMIT) no smaller than that
  // floor: what line-spread and template mismatch make of slow rotators. The fraction is
  // vsini_fwhm_frac[format][library] (library: the library's preset name, else its template kind,
  // e.g. miles, "joined" for a join without a preset; "*" any library), looked up in the order
  // "format:SURVEY" library, "format:SURVEY" "*", format library, format "*"; else
  // vsini_min_fwhm_frac. Shipped values: cross-validated on the shared real stars by
  // scripts/calibrate_vsini.py, halfway (geometric) between the 97.5% quantile of VSINI/FWHM of
  // slow rotators (stars below 6500 K) and the 20% quantile of the same stars broadened by
  // rotation at 1.5 FWHM (issue 52, docs/vsini.md). A YAML scalar vsini_min_fwhm_frac applies
  // to every format and library (it empties vsini_fwhm_frac).
  double vsini_min_fwhm_frac = 1.0;
  std::map<std::string, std::map<std::string, double>> vsini_fwhm_frac = {
      {"lamost-dr8", {{"miles", 0.95}, {"lamost", 0.95}, {"desi", 1.0}, {"sdss", 1.0}}},
      {"lamost-dr10", {{"miles", 0.95}, {"lamost", 0.95}, {"desi", 1.0}, {"sdss", 1.0}}},
      {"desi", {{"miles", 1.05}, {"lamost", 1.05}, {"desi", 1.1}, {"sdss", 1.1}}}};
  // DESI: forward-model with the per-fibre resolution matrix (template LSF folded in,
  // src/fit/resolution.hpp) instead of one Gaussian LSF per arm. Default chosen by measurement
  // (docs/desi.md).
  bool resolution_matrix = true;
  // Nominal resolving power per input format when the file does not give one.
  std::map<std::string, double> default_R = {
      {"lamost-dr8", 1800.0}, {"lamost-dr10", 1800.0}, {"sdss", 2000.0}, {"desi", 4000.0}};
};

// True where VRAD of a file of `format` (and `survey`) is the arms' weighted mean: its
// arm_rv_scatter_kms values (format_value) list any of B, R, Z.
bool vrad_from_arms(const FitConfig& cfg, const std::string& format, const std::string& survey);

// The VSINI detection floor's fraction of the LSF FWHM for a file of `format` (and `survey`)
// fitted with a library of kind `library` (vsini_fwhm_frac, else vsini_min_fwhm_frac).
double vsini_floor_frac(const FitConfig& cfg, const std::string& format, const std::string& survey,
                        const std::string& library);

// Load `fit:` from a YAML file (missing keys keep defaults). Throws ConfigError naming the file
// and key on a malformed file or value.
FitConfig load_fit_config(const std::string& path);
std::string dump_fit_config(const FitConfig& cfg);  // YAML text

}  // namespace velox
