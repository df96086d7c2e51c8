// What a `velox fit` job is asked to do, decided before any fitting (docs/design.md "The fit stream
// and the job's scale-out", docs/running.md): the option check, the input list with its per-input
// catalog names, the merge-only mode (--merge without inputs) and the chunk size. The same on every
// rank; the MPI message loop (mpi/driver.hpp) and the root's bookkeeping (app/job.hpp) build on it.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "app/fit_run.hpp"

namespace velox {

// Check the options (the same on every rank, before MPI starts): their combination, the file
// names of --output/--merge (output_checks.hpp catalog_path_for; --output NAME.fits with
// --output-format fits becomes NAME.h5 here), and the --config file (every key known),
// selection and output format. Nothing is written. Throws ConfigError.
void validate_job_options(FitOptions& opt);

// --merge with --output-dir and no inputs: merge the existing per-input catalogs, fit nothing.
bool merge_only(const FitOptions& opt);

// A merged catalog is written (--output, or --merge with inputs): rank 0 needs every row, so
// the ranks send theirs with their status reports.
bool wants_merged(const OutputOptions& opt);

// The smallest batch of FitEngine::fit_stream's batch mode (the GPU, whose gpu_min_batch is
// usually larger): 1 for one thread, else 4 per thread. The CPU stream takes no batches.
size_t chunk_min_spectra(int threads);

// --epochs --group-by KEY naming a header key (not TARGETID): the job joins files into stars.
inline bool groups_files(const EngineOptions& o) {
  return o.epochs && !o.group_by.empty() && o.group_by != "TARGETID";
}
// The inputs whose primary header has the same non-empty KEY become one input group
// (job_outputs.hpp input_members), in the order of their first member, so that a star's files
// are fitted by one rank in one piece. Reads one header per file; an unreadable file or one
// without KEY stays alone (the reader reports it). Throws ConfigError for a path with a newline.
std::vector<std::string> group_inputs(const std::vector<std::string>& paths,
                                      const std::string& key);

// One input of the job, in the order collect_inputs() gives.
struct JobInput {
  std::string path;
  uintmax_t bytes = 0;  // file size; 0 when unreadable (the reader then reports it as failed)
  std::string catalog;  // per-input catalog DIR/<stem>.velox.h5 (--output-dir), else empty
};

// The inputs of `opt` (FILES, --input-list, --input-dir/--glob). Throws ConfigError when there
// are none, when one is a directory, or when two inputs would write the same per-input catalog.
// A missing file is not an error here: it becomes a failed input ("no such file").
std::vector<JobInput> plan_inputs(const FitOptions& opt);

// Merge-only mode: every DIR/*.velox.h5 (except the target) into the --merge catalog, with the
// first catalog's provenance. Returns kExitOk; throws ConfigError (no catalogs) or IoError.
int merge_existing(const OutputOptions& opt, const JobOptions& job);

}  // namespace velox
