// Fit configuration: defaults, YAML loading (`--config FILE`, section `fit:`), YAML dumping for
// the provenance attribute. Units: km/s, vacuum Angstrom.
#pragma once
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace velox {

struct FitConfig {
  double vmin_kms = -1000.0, vmax_kms = 1000.0;  // velocity search range
  int cont_deg = 8;            // Legendre degree of the per-arm multiplicative continuum
  int ccf_cont_deg = 5;        // pseudo-continuum degree for the cross-correlation
  int n_starts = 2;            // LM starting points (best distinct chi^2-grid templates)
  int n_ccf_templates = 16;    // coarse templates cross-correlated (the library stores more)
  int ccf_lag_step = 2;        // coarse CCF lag step in template pixels (library dlnlam)
  int max_iter = 60;           // LM iteration limit
  int min_pixels = 50;         // fewer usable pixels => NO_PIXELS
  int min_arm_pixels = 20;     // an arm with fewer usable pixels is dropped
  double clip_sigma = 5.0;     // one re-fit after clipping |resid|/sigma above this; 0 = off
  double wave_min_A = 0.0, wave_max_A = 0.0;  // optional fit range (vacuum), 0 = none
  std::vector<std::pair<double, double>> mask_bands_A = {{6865.0, 6930.0}, {7165.0, 7330.0}};
  double chisq_improvement_min = 50.0;  // RVS_WARN bit 0 threshold (rvspecfit uses 50)
  double rv_err_max_kms = 100.0;        // RVS_WARN bit 2 threshold
  bool fit_vsini = false;               // VSINI is reported as NaN unless asked and resolvable
  // DESI: forward-model with the per-fibre resolution matrix (template LSF folded in,
  // src/fit/resolution.hpp) instead of one Gaussian LSF per arm. Default chosen by measurement
  // (docs/desi.md).
  bool resolution_matrix = true;
  // Nominal resolving power per input format when the file does not give one.
  std::map<std::string, double> default_R = {
      {"lamost-dr8", 1800.0}, {"lamost-dr10", 1800.0}, {"sdss", 2000.0}, {"desi", 4000.0}};
};

// Load `fit:` from a YAML file (missing keys keep defaults). Throws ConfigError naming the file
// and key on a malformed file or value.
FitConfig load_fit_config(const std::string& path);
std::string dump_fit_config(const FitConfig& cfg);  // YAML text

}  // namespace velox
