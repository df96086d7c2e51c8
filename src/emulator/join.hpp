// Joined template libraries: several template sources, each over its own wavelength range and
// part of label space, joined into one training set with one label space (TEFF, LOGG, FEH), one
// vacuum wavelength range and one line spread, which build_library then emulates as usual
// (docs/templates.md).
//
// Each training star keeps its own spectrum where it has one. Outside its source's range (and
// in its gaps) the FILLER (a Cannon model of synthetic spectra, io/cannon.hpp) evaluated at the
// star's labels takes over, blended linearly over `seam_A` at each edge. Both parts are brought
// to the library's line spread first (JoinConfig::lsf_broadest; never deconvolved) by a
// Gaussian of the quadrature difference on the source's own pixels, and each is divided by its
// own upper-envelope continuum. Optionally (JoinConfig::grid), the filler's own spectra join
// the training set at label-grid points where no real star is near (off by default: measured
// worse on LAMOST repeat pairs, docs/templates.md).
#pragma once
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "io/readers.hpp"

namespace velox {

struct JoinSource {
  std::string name;  // as the library's attributes record it: "miles", "kesseli", "stelib"...
  std::string path;  // template directory (read_templates detects the kind)
  // Vacuum range [A] in which this source's spectra are used (0: all they cover).
  double wave_min_A = 0.0, wave_max_A = 0.0;
  double teff_min_K = 0.0, teff_max_K = INFINITY;  // which of its stars train the library
  std::string teff_table;                          // Kesseli: the dwarf Teff table (optional)
};

struct JoinConfig {
  std::vector<JoinSource> sources;
  std::vector<std::string> filler;  // converted Cannon models (HDF5), scripts/cannon-to-h5.py
  double wave_min_A = 0.0, wave_max_A = 0.0;  // the library's vacuum range
  double seam_A = 50.0;  // linear blend between a star's own spectrum and the filler
  // The library's line spread at each wavelength: that of the source with the most stars there
  // (false; a broader source's stars then keep their extra width: Kesseli's BOSS FWHM is
  // 3.1 A at 6000 A against MILES' 2.5 A), or the broadest source's (true: every star degraded
  // to it). Measured on LAMOST DR10: VRAD robust sigma 4.0 km/s (most stars) against 4.6
  // (broadest); docs/templates.md.
  bool lsf_broadest = false;
  // A star is filled only where the filler is trained near its labels; a star that needs more
  // than min_own_fraction of the range filled and is outside the filler's training is dropped.
  double min_own_fraction = 0.9;
  double near_dlogt = 0.03, near_dlogg = 0.75, near_dfeh = 0.75;
  // Filler grid points join where no real star is this close (and the filler is trained near).
  bool grid = false;
  double grid_teff_min_K = 3500.0, grid_teff_max_K = 30000.0;
  double grid_dlogt = 0.03, grid_dlogg = 1.0, grid_dfeh = 0.5;
  double grid_gap_dlogt = 0.04, grid_gap_dlogg = 1.0, grid_gap_dfeh = 0.6;
  double dlnlam = 5e-5;  // the joined spectra's grid (the library's)
};

struct JoinReport {
  std::map<std::string, std::string> attrs;  // "join.*" attributes for the library
  std::vector<std::string> dropped;          // "name: reason"
};

// Reads every source and the filler and returns the joined training set (kind "joined",
// continuum-normalised flux on a grid uniform in ln lambda, the library's line spread in
// lsf_wave_A/lsf_fwhm_A). Throws ConfigError for an empty or inconsistent configuration and
// IoError for unreadable sources.
TemplateSet join_sources(const JoinConfig& cfg, JoinReport* report);

// The recommended joined library of a survey ("lamost", "sdss", "desi") from the shared data
// layout under data_dir (docs/templates.md gives the measurements that chose them). `cannon_dir`
// holds coolstars.h5 and hotdwarfs.h5 (converted models). Throws ConfigError for another name.
JoinConfig preset_join(const std::string& preset, const std::string& data_dir,
                       const std::string& cannon_dir);

}  // namespace velox
