// The `velox fit` job apart from communication (docs/design.md "The fit stream and the job's
// scale-out", docs/running.md): each rank's logging, threads and GPU; and rank 0's bookkeeping
// (RootJob). The MPI message loop (mpi/driver.hpp) moves inputs and results between ranks and calls
// into this; nothing here knows about MPI, so a single process uses it the same way.
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "app/fit_run.hpp"
#include "app/handout.hpp"
#include "app/job_outputs.hpp"
#include "app/job_plan.hpp"
#include "app/output_faults.hpp"

namespace velox {

// Where this process sits in the job: world rank/size and node-local rank/size (0/1/0/1 alone).
struct RankInfo {
  int rank = 0, size = 1;
  int local_rank = 0, local_size = 1;
};

// The "velox" default logger: stderr (ranks other than 0 at warn and above) plus, with
// --log-dir, DIR/rank-<rank>.log; lines carry "[rank N]" when size > 1. Level from --log-level.
// Throws ConfigError on an unwritable --log-dir.
void setup_job_logging(const JobOptions& opt, const RankInfo& where);

// Node-local GPU choice: local_rank modulo the device count; -1 when there is no device.
int device_for_local_rank(int local_rank, int n_devices);
// Devices visible to this process (CUDA_VISIBLE_DEVICES, else /dev/nvidia<N>), no CUDA needed.
int visible_gpu_count();

// --threads default: the cores in this rank's affinity mask; when the launcher did not bind
// (every rank sees all cores), the node's cores divided among its ranks.
int default_rank_threads(int local_size);

// This rank's options (gpu_device = device_for_local_rank, 0 without a GPU) and thread count
// (--threads, else default_rank_threads); logs one line saying so.
struct RankSetup {
  FitOptions opt;
  int threads = 1;
};
RankSetup place_rank(const FitOptions& opt, const RankInfo& where);

// The provenance attributes every catalog of the job carries (FitEngine::provenance plus
// mpi_world_size); each rank computes its own (hostname and time are the writer's).
Provenance job_provenance(const FitEngine& engine, const FitOptions& opt, int world_size);

// Writes the per-input catalogs of the inputs one rank fitted (--output-dir; no-op without):
// DIR/<stem>.velox.h5 (with /fibermap for DESI inputs) and, with --output-format fits,
// DIR/rvtab_<stem>.fits, atomically, with `base` plus input_path, mpi_rank and n_input_files.
// Failed inputs get none (a rerun retries them). Every rank writes its own, on its fitting
// thread. A write that fails (IoError) fails that input: r.ok = false, r.error and
// r.output_errno say why, no final file is left; when the job must stop (OutputFaultPolicy:
// the filesystem is full or gone, or writes keep failing) r.output_stop says why and
// request_output_stop() is called. Never throws for a write failure.
class InputCatalogWriter {
 public:
  InputCatalogWriter(const InputOptions& in, const OutputOptions& out, Provenance base, int rank);
  void write(FileResult& r);

 private:
  void write_files(const FileResult& r) const;

  std::string dir_;
  bool fits_ = false;  // --output-format fits: also DIR/rvtab_<stem>.fits
  bool tree_ = false;  // --desi-root: outputs in DIR/PIXGROUP/PIXNUM/
  Provenance prov_;
  OutputFaultPolicy faults_;
};

class Progress;

// Rank 0 of a fitting job (not merge-only). The constructor plans the inputs (plan_inputs),
// checks every output path (check_fit_outputs: before any work), prepares --output-dir
// (removes stale *.tmp, opens status.tsv), skips inputs whose per-input catalog exists (unless
// --overwrite), orders the rest largest file first (input order when the single-process side
// outputs are written), and loads the engine. The message loop then hands out next_input() (to
// rank 0's own fitting thread) and next_batch() (to workers), and passes every input's status,
// from any rank, to handle() (the per-input catalogs are written by the rank that fitted the
// input, InputCatalogWriter); finish() writes the merged catalog(s) and status.tsv and returns the
// exit code (3 when an input failed, 4 when interrupted). With --targetid / --targetid-file,
// finish() warns in one line about listed TARGETIDs that no input holds: each input's result
// reaches rank 0 whichever rank read it, so a target is "unknown" only when absent from all.
// Not thread-safe: the caller serialises next_input() against its own fitting thread.
// Throws ConfigError (inputs) and IoError (outputs).
class RootJob {
 public:
  RootJob(const FitOptions& opt, int world_size, int threads);
  // The coordinator simulation (mpi/simulate.hpp): these inputs (no files behind them), no
  // engine, no output checks; --output-dir gets status.tsv as in a real job.
  RootJob(const FitOptions& opt, int world_size, std::vector<JobInput> synthetic);
  ~RootJob();

  FitEngine& engine() { return *engine_; }
  const Provenance& provenance() const { return prov_; }
  size_t n_todo() const { return todo_.size(); }
  size_t n_handed() const { return next_; }  // inputs handed out so far

  // The next input to fit (index into the planned inputs, path); false when all are handed out.
  bool next_input(size_t& index, std::string& path);
  // The next batch for a rank fitting `rate_bytes_s` input bytes per second (batch_length; one
  // input while the rate is unknown) out of `n_ranks`; empty when all are handed out.
  std::vector<WorkItem> next_batch(double rate_bytes_s, int n_ranks, const HandoutPolicy& policy);
  // One input done (r.index, r.rank set): status line, progress, merged rows. `r.rows` are
  // needed only when a merged catalog is written (wants_merged).
  void handle(FileResult&& r);
  // Write the status lines handled so far to status.tsv (once per message, not per line).
  void flush_status();
  // Seconds since the first input was handed out (0 before).
  double seconds_since_first_handout() const;
  // A progress line every --progress-interval seconds (not with --quiet).
  void maybe_log_progress();
  // After every input handed out is handled: status.tsv, merged/--output catalogs, summary;
  // the exit code. `interrupted_by` (e.g. "SIGTERM"; empty: not interrupted) means the inputs
  // never handed out stay unfinished: status.tsv lists them as `interrupted`, --merge is not
  // written (the rerun that finishes the job writes it), --output is written with what was
  // fitted and the attributes interrupted = "true" and n_inputs_unfinished; exit code 4.
  int finish(const std::string& interrupted_by = "");

 private:
  FitOptions opt_;
  int world_size_;
  std::vector<JobInput> inputs_;
  std::vector<StatusLine> status_;
  std::vector<std::vector<CatalogRow>> kept_;  // rows for the merged catalog
  std::vector<char> side_hdus_;  // per input: FileResult::side_hdus (1 for skipped inputs)
  bool want_merged_ = false, side_outputs_ = false;
  std::unique_ptr<StatusFile> status_file_;
  std::vector<size_t> todo_;
  std::vector<uintmax_t> todo_bytes_;  // bytes of todo_[i], in hand-out order
  uintmax_t bytes_left_ = 0;           // of the inputs not yet handed out
  size_t next_ = 0;
  std::chrono::steady_clock::time_point t_first_{};
  std::unique_ptr<FitEngine> engine_;  // loaded after the resume scan, as before fitting
  Provenance prov_;
  std::unique_ptr<Progress> progress_;
  int files_failed_ = 0;
  // The --targetid / --targetid-file TARGETIDs found in the inputs so far, from every rank's
  // FileResult::targetids_listed and the kept catalogs of skipped inputs: finish() warns about
  // the listed ones absent from every input.
  std::set<int64_t> listed_found_;
};

}  // namespace velox
