// The fitting engine behind `velox fit` and `velox bench`: load the configuration and template
// library once, then fit a stream of input files in chunks: prepare (host threads) -> a backend
// (backend/backend.hpp: the CPU thread pool, or the rank's persistent GPU engine) -> finish. The
// job around it (inputs, resume, outputs, status file) lives in app/job.hpp, the MPI message loop
// in mpi/driver.hpp. Exit codes: common/error.hpp.
#pragma once
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "app/fit_options.hpp"
#include "app/fit_outputs.hpp"
#include "backend/backend.hpp"
#include "backend/cpu/cpu_backend.hpp"
#include "emulator/library.hpp"
#include "fit/config.hpp"
#include "io/catalog.hpp"
#include "io/spectrum.hpp"
#include "model/arm_model.hpp"

namespace velox {

// FitOptions and its parts: app/fit_options.hpp.

// Inputs from `inputs`, `input_list`, `input_dir`/`glob` (sorted by name) and the healpix
// coadds of `desi_root` (sorted by pixel), in that order, without duplicates. Throws ConfigError
// on an unreadable list or directory, or --desi-root without --survey and --program. A named
// --healpix pixel without its coadd is listed anyway (it fails as "no such file").
std::vector<std::string> collect_inputs(const InputOptions& opt);

// The outcome of one input file.
struct FileResult {
  size_t index = 0;  // the caller's index of this input
  std::string path;
  bool ok = true;
  std::string error;             // why the file failed (names the file)
  std::vector<CatalogRow> rows;  // one per target, in file order; a failed file has one
                                 // failure row (RVS_WARN = BAD_INPUT, SUCCESS = false)
  size_t n_targets = 0;          // targets read (0 for a failed file)
  // Spectra fitted (the rows neither BAD_INPUT nor NOT_FITTED; --epochs: the epochs, not their
  // stars): what the job's spectra/s counts. Set with the rows, kept when they are dropped.
  size_t n_fitted = 0;
  // The TARGETIDs of --targetid / --targetid-file found in this input (selected or not), in file
  // order: rank 0 warns about the listed ones no input holds (RootJob::finish).
  std::vector<int64_t> targetids_listed;
  double seconds = 0.0;  // read time plus this file's share of its chunk's fit time
  int rank = 0;          // MPI rank that fitted it
  // False when the input's format has no FIBERMAP/SCORES HDUs (LAMOST, SDSS): the writers then
  // do not reopen it for them (side_tables). True when unknown.
  bool side_hdus = true;
  // Set by InputCatalogWriter when this input's outputs could not be written (ok is then false
  // and error says why): the errno (0 if unknown), and the reason the whole job must stop
  // (app/output_faults.hpp; empty: only this input failed).
  int output_errno = 0;
  std::string output_stop;
};

// One batch of spectra between FitEngine::submit and FitEngine::finish.
struct EngineBatch {
  std::vector<FitJob> jobs;
  std::vector<PreparedSpectrum> prep;  // per job; after finish(), prep[i].row is its catalog row
  Backend* backend = nullptr;          // null: nothing was ready to fit
  bool want_models = false;
  // After finish(): the backend's output and, per job, its index there (npos: not fitted).
  BatchOutput out;
  std::vector<size_t> fitted;
  static constexpr size_t npos = ~size_t{0};
  double seconds = 0.0;  // caller's wall time spent on this batch
};

// Fits files one chunk at a time, or spectra already in memory (submit/finish: the Python API).
// Not copyable: the model cache refers to the library.
class FitEngine {
 public:
  // Loads the config and, unless `lib` is given, the library opt.templates. threads <= 0:
  // default_thread_count(). Throws ConfigError / IoError. It reads, selects, fits and keeps the
  // side outputs: every part of FitOptions but JobOptions.
  FitEngine(const FitOptions& opt, int threads,
            std::shared_ptr<const TemplateLibrary> lib = nullptr);
  FitEngine(const FitEngine&) = delete;
  FitEngine& operator=(const FitEngine&) = delete;

  // Pull inputs with `next` (false = no more) and fit them, calling `done` once per file in the
  // order they were pulled (app/fit_stream.cpp): reader threads read and select while the
  // backend fits. On the CPU the engine's persistent threads fit one spectrum at a time from a
  // shared queue (no chunk barrier; `chunk_min_spectra` is not used); with the GPU (or
  // cpu_batch) batches of at least `chunk_min_spectra` and gpu_min_batch spectra, batch k fitted
  // while batch k+1 is prepared. `next` and `done` are called on the calling thread only. A bad
  // file becomes a failed FileResult; never throws for input problems (device errors throw
  // std::runtime_error). `on_fitted` (may be empty) gets a running count of spectra fitted (CPU)
  // or of the current batch (GPU), from any thread.
  using NextInput = std::function<bool(size_t& index, std::string& path)>;
  void fit_stream(const NextInput& next, const std::function<void(FileResult&&)>& done,
                  size_t chunk_min_spectra, const std::function<void(size_t)>& on_fitted = {});

  // Prepare `jobs` on the engine's threads and submit the ready ones to the backend route()
  // picks; `on_fitted` as in fit_stream. Batches are finished in the order they were submitted.
  // `prepared(i)` (may be empty) runs on an engine thread once job i is prepared, before the
  // backend gets the batch: the caller may then free that job's input pixels, so that a batch
  // does not hold its inputs and its prepared copies at once (jobs are distinct spectra: calls
  // for different i may run concurrently).
  EngineBatch submit(std::vector<FitJob> jobs, bool want_models,
                     const std::function<void(size_t)>& on_fitted = {},
                     const std::function<void(size_t)>& prepared = {});
  // Wait for a submitted batch and finish its rows (in parallel); with want_models, `diags`
  // (may be null) gets the diagnostics of every job.
  void finish(EngineBatch& b, std::vector<FitDiagnostics>* diags = nullptr);

  // The context spectra of input format `format` (format_name()) are fitted in.
  FitContext context(const std::string& format, const std::string& survey = "") {
    return FitContext{*lib_, *cache_, cfg_, format, survey};
  }
  // prepare_spectrum for every job, in parallel on the engine's threads; input order.
  // `prepared(i)` (may be empty) runs after job i's.
  std::vector<PreparedSpectrum> prepare(const std::vector<FitJob>& jobs,
                                        const std::function<void(size_t)>& prepared = {});
  // The backend a batch goes to: the GPU when there is one and it supports the request, else the
  // CPU. Logs each distinct reason for not using the GPU once.
  Backend& route(const BatchRequest& r);
  Backend& cpu_backend() { return *cpu_; }
  Backend* gpu_backend() { return gpu_.get(); }

  // Provenance attributes shared by every catalog this engine's job writes.
  // `sel` enters fit_config_hash; `job` gives the command line.
  Provenance provenance(const EngineOptions& eng, const SelectOptions& sel,
                        const JobOptions& job) const;

  int threads() const { return threads_; }
  // Selection and the DESI side outputs (/fibermap, /models, rvspecfit FITS) of this engine's
  // rows, in the order fit_stream reported them.
  FitOutputs& outputs() { return *outputs_; }
  bool uses_gpu() const { return gpu_ != nullptr; }
  const TemplateLibrary& library() const { return *lib_; }
  // Wall time spent fitting: the fit streams (reading overlapped) and submit/finish calls.
  double seconds_fitting() const { return seconds_fit_; }

 private:
  struct InputFile;  // one input on its way through fit_stream (fit_stream.cpp)
  // Read and select one input (any thread); an unreadable one becomes a failed result.
  void read_input(InputFile& in);
  // The fibres of `path` when it is a DESI coadd to read in blocks of read_block_ fibres (an
  // uncompressed .fits of more than read_block_ x 0.5 MB holding more than read_block_ fibres),
  // else 0 (read whole). Opens only the headers.
  size_t read_block_fibres(const std::string& path) const;
  // Side outputs and `done` for one input, in input order (the calling thread).
  void report_input(InputFile& in, std::vector<CatalogRow>&& fitted,
                    const std::vector<FitDiagnostics>& diags,
                    const std::function<void(FileResult&&)>& done);

  FitConfig cfg_;
  SpectrumFormat fmt_;
  std::shared_ptr<const TemplateLibrary> lib_;
  std::unique_ptr<ArmModelCache> cache_;
  std::unique_ptr<FitOutputs> outputs_;
  int threads_;
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<CpuBackend> cpu_;
  std::unique_ptr<Backend> gpu_;  // null: no GPU in use
  size_t gpu_chunk_ = 0;          // spectra a chunk gathers when the GPU is in use
  size_t cpu_batch_ = 0;          // FitOptions::cpu_batch
  size_t read_block_ = 0;         // FitOptions::read_block_fibres
  bool epochs_ = false;           // FitOptions::epochs
  std::string group_by_;          // FitOptions::group_by
  std::set<std::string> routing_logged_;
  std::mutex outputs_mu_;  // FitOutputs::on_file from the reader threads
  double seconds_fit_ = 0.0;
};

// The failure row written for an input file that could not be read.
CatalogRow bad_input_row(const std::string& path);

struct FitRunResult {
  std::vector<CatalogRow> rows;
  int files_failed = 0;
  std::vector<std::string> file_errors;  // why each failed file failed (names the file)
  size_t n_spectra = 0;
  double seconds_fit = 0.0;  // wall time spent in fitting (excludes library load and I/O)
};

// Fit every input in this process and keep the rows in input order, writing nothing (used by
// `velox bench` and Python's velox.fit_files). `lib`: an already loaded library (null: load
// opt.templates). Throws ConfigError / IoError for fatal problems.
FitRunResult run_fit(const FitOptions& opt, std::shared_ptr<const TemplateLibrary> lib = nullptr);

}  // namespace velox
