// The options of `velox fit` (docs/user-guide.md), split by what reads them.
#pragma once
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace velox {

// The options of `velox fit`, by what reads them (issue 27): each part is its own struct, and
// FitOptions is all of them (the command line and the Python API fill it; functions take the
// part they need).

// Where the inputs come from and how they are read (collect_inputs, job_plan, the readers).
struct InputOptions {
  std::vector<std::string> inputs;  // input files
  std::string input_list;           // file with one input path per line ('#' comments)
  std::string input_dir;            // directory scanned with `glob`
  std::string glob = "*.fits*";     // fnmatch pattern on file names inside input_dir
  // DESI healpix discovery (desidatamodel): DESI_ROOT/healpix/SURVEY/PROGRAM/PIXGROUP/PIXNUM/
  // coadd-SURVEY-PROGRAM-PIXNUM.fits with PIXGROUP = PIXNUM / 100; every pixel when `healpix` is
  // empty. Per-input outputs then go to OUTPUT_DIR/PIXGROUP/PIXNUM/ (rvspecfit's tree).
  std::string desi_root, survey, program;
  std::vector<int64_t> healpix;
  std::string format = "auto";
  // A DESI coadd larger than read_block_fibres x 0.5 MB (uncompressed) is read and fitted
  // read_block_fibres fibres at a time, so a rank's memory is bounded whatever the file size
  // (its rows are still reported as one input). 0: whole files.
  int read_block_fibres = 32;
};

// Which targets of an input are fitted (FitOutputs' selection; part of the config hash).
// DESI production mode (app/fit_outputs.hpp, docs/desi.md).
struct SelectOptions {
  std::vector<std::string> objtypes;  // --objtypes: target-mask names / globs / COLUMN:BIT
  std::vector<int64_t> targetids;     // --targetid
  std::string targetid_file;          // --targetid-file
  double min_sn = NAN;                // --min-sn (rvs_desi_fit's S/N); NaN = no cut
  bool include_unselected = false;    // --include-unselected
  std::string redrock;  // --redrock auto|FILE: skip redrock non-stars; RR_Z, RR_SPECTYPE
};

// The fit: library, configuration, device and threads.
struct EngineOptions {
  std::string templates;        // template library (HDF5)
  std::string config;           // YAML config (optional)
  int threads = 0;              // 0 = the cores given to this process (rank)
  std::string device = "auto";  // --device auto|cpu|gpu
  int resolution_matrix = -1;   // --(no-)resolution-matrix: 1/0; -1 = config (default on)
  int gpu_device = 0;           // CUDA device index (node-local rank modulo the count)
  int cpu_batch = 0;            // > 0: the CPU fits the stream in batches of this many spectra,
                                // as the GPU does (tests that path without a device)
  int gpu_min_batch = 2048;     // --device auto: chunks accumulate this many spectra for the
                                // GPU; a smaller final chunk runs on the CPU
  // --epochs (docs/epochs.md): every exposure read (read_exposures), the spectra of one input
  // that share the --group-by key fitted as one star (app/epochs.hpp); the catalog holds the
  // stars and /epochs their epochs. group_by: TARGETID or a header/FIBERMAP key the reader keeps
  // (OBJNAME for LAMOST, whose files the job then groups, job_plan.hpp).
  bool epochs = false;
  std::string group_by = "TARGETID";
};

// What is written, and whether existing outputs are replaced.
struct OutputOptions {
  std::string output;                // merged catalog path; empty = none
  std::string output_dir;            // one catalog per input, DIR/<stem>.velox.h5; empty = none
  std::string merge;                 // merged catalog of the output dir, written at the end
  bool overwrite = false;            // refit inputs whose per-input catalog exists
  bool refit_changed = false;        // refit inputs whose catalog has another library/config
  bool save_models = false;          // --save-models
  std::string output_format = "h5";  // --output-format h5|fits (fits: + rvspecfit layout)
};

// How the job runs and reports.
struct JobOptions {
  std::string log_dir;  // per-rank log files; empty = console only
  double progress_interval_s = 5.0;
  double batch_seconds = 1.0;  // MPI: work per batch handed to a rank (app/handout.hpp)
  std::string command_line;    // for provenance
  bool quiet = false;          // no progress lines (bench)
};

struct FitOptions : InputOptions, SelectOptions, EngineOptions, OutputOptions, JobOptions {};

}  // namespace velox
