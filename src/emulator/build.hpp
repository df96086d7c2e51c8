// Build a TemplateLibrary (PCA basis + GP coefficient model) from a labelled template set.
// Steps (docs/design.md "Forward model", docs/templates.md): air->vacuum (reader), restrict the
// wavelength range, resample to uniform ln(lambda), normalise the continuum, PCA, GP on the PCA
// coefficients with hyper-parameters chosen by analytic leave-one-out error (Rasmussen & Williams
// 2006, eq. 5.12), outlier rejection by LOO error, validation numbers stored in the file.
#pragma once
#include <string>
#include <vector>

#include "emulator/library.hpp"
#include "io/readers.hpp"

namespace velox {

struct BuildConfig {
  double dlnlam = 5e-5;        // template grid step in ln(lambda) (15 km/s)
  double wave_min_A = 0.0;     // vacuum; 0 = common coverage of all templates
  double wave_max_A = 0.0;
  int n_components = 40;       // PCA components K
  int norm_degree = 6;         // Legendre degree of the continuum normalisation
  double teff_min = 3000.0, teff_max = 20000.0;  // training-set Teff range [K]
  double outlier_loo_factor = 6.0;  // drop stars with LOO rms > max(factor * median, floor)
  double outlier_loo_floor = 0.01;  // (normalised flux rms)
  int n_ccf_templates = 40;    // coarse templates for the initial cross-correlation
  double template_R = 0.0;     // resolving power for libraries without FWHM (PHOENIX)
  std::vector<size_t> exclude; // indices into the template set to leave out (cross-validation)
  // Joined libraries (--preset, emulator/join.hpp): the filler's grid points on or off, and the
  // library's vacuum range (0: the preset's).
  bool join_grid = false;  // off: measured worse on LAMOST repeat pairs (docs/templates.md)
  double join_wave_min_A = 0.0, join_wave_max_A = 0.0;
  std::vector<std::string> join_sources;  // the preset's sources to use by name (empty: all)
  std::vector<std::string> exclude_names;  // templates to leave out by name (e.g. a held-out star)
  // Threads for the GP hyper-parameter search (its trials run side by side; the library is the
  // same bits for any count). 0: the machine's hardware threads.
  int threads = 0;
};

// A template enters the training set when its labels are finite and its Teff is inside
// [teff_min, teff_max] (exclusions from BuildConfig::exclude are applied separately).
bool usable_template(const TemplateSpectrum& t, const BuildConfig& cfg);

// Build from an already-read TemplateSet. Logs progress with spdlog. Throws ConfigError if too
// few usable templates remain (< 20).
TemplateLibrary build_library(const TemplateSet& set, const BuildConfig& cfg);

// Resample a spectrum given on an increasing grid wave_in onto wave_out (same medium):
// Keys cubic if wave_in is uniform, else linear. Points outside give NaN.
std::vector<double> resample(const std::vector<double>& wave_in, const std::vector<double>& flux_in,
                             const std::vector<double>& wave_out);

// Upper-envelope Legendre continuum (iteratively clipped) of flux on x in [-1,1]; returns cont.
std::vector<double> envelope_continuum(const std::vector<double>& flux, int degree, int n_iter);

}  // namespace velox

namespace velox {
// Load `templates:` from a YAML file (missing keys keep those of `base`). Throws ConfigError.
BuildConfig load_build_config(const std::string& path, const BuildConfig& base = BuildConfig{});
}  // namespace velox
