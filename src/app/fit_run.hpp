// The `velox fit` job on one process: read inputs in chunks, fit on the CPU backend, gather the
// rows (failures included) and write the HDF5 catalog atomically. Exit codes: common/error.hpp.
#pragma once
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "io/catalog.hpp"

namespace velox {

struct FitOptions {
  std::string templates;            // template library (HDF5)
  std::string output;               // catalog path; empty = do not write (bench)
  std::vector<std::string> inputs;  // input files
  std::string input_list;           // file with one input path per line ('#' comments)
  std::string config;               // YAML config (optional)
  std::string format = "auto";
  int threads = 0;                  // 0 = all cores available to the process
  std::string command_line;         // for provenance
  bool quiet = false;               // no progress lines (bench)
  // DESI production mode (app/fit_outputs.hpp, docs/desi.md)
  std::vector<std::string> objtypes;  // --objtypes: target-mask names / globs / COLUMN:BIT
  std::vector<int64_t> targetids;     // --targetid
  std::string targetid_file;          // --targetid-file
  double min_sn = NAN;                // --min-sn (rvs_desi_fit's S/N); NaN = no cut
  bool include_unselected = false;    // --include-unselected
  bool save_models = false;           // --save-models
  std::string output_format = "h5";   // --output-format h5|fits (fits: + rvspecfit layout)
};

struct FitRunResult {
  std::vector<CatalogRow> rows;
  int files_failed = 0;
  size_t n_spectra = 0;
  double seconds_fit = 0.0;  // wall time spent in fitting (excludes library load and I/O)
  int exit_code = 0;
};

// Expand inputs + input_list. Throws ConfigError on an unreadable list.
std::vector<std::string> collect_inputs(const FitOptions& opt);

// Run the whole job. Never throws for bad inputs (they become failure rows); throws ConfigError /
// IoError for fatal problems (no templates, unwritable output).
FitRunResult run_fit(const FitOptions& opt);

}  // namespace velox
