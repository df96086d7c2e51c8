#include "app/job.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iterator>
#include <optional>
#include <thread>

#include "app/fit_identity.hpp"
#include "app/job_plan.hpp"
#include "app/output_checks.hpp"
#include "backend/cpu/cpu_backend.hpp"
#include "backend/gpu.hpp"
#include "common/error.hpp"
#include "common/stop.hpp"
#include "io/h5.hpp"

namespace velox {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

void setup_job_logging(const JobOptions& opt, const RankInfo& where) {
  const auto level = spdlog::get_level();  // from --log-level
  auto console = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
  if (where.rank != 0) console->set_level(std::max(level, spdlog::level::warn));
  std::vector<spdlog::sink_ptr> sinks{console};
  if (!opt.log_dir.empty()) {
    check_output_folder("--log-dir", opt.log_dir);  // ConfigError: one plain line, exit 2
    const auto path = fs::path(opt.log_dir) / fmt::format("rank-{}.log", where.rank);
    sinks.push_back(std::make_shared<spdlog::sinks::basic_file_sink_mt>(path.string(), false));
  }
  auto logger = std::make_shared<spdlog::logger>("velox", sinks.begin(), sinks.end());
  logger->set_level(level);
  if (where.size > 1)
    logger->set_pattern(fmt::format("[%Y-%m-%d %H:%M:%S.%e] [rank {}] [%^%l%$] %v", where.rank));
  spdlog::set_default_logger(logger);
}

int device_for_local_rank(int local_rank, int n_devices) {
  return n_devices > 0 ? local_rank % n_devices : -1;
}

int visible_gpu_count() {
  if (const char* v = std::getenv("CUDA_VISIBLE_DEVICES")) {
    const std::string s(v);
    return s.empty() ? 0 : static_cast<int>(std::count(s.begin(), s.end(), ',')) + 1;
  }
  int n = 0;
  while (fs::exists("/dev/nvidia" + std::to_string(n))) ++n;
  return n;
}

int default_rank_threads(int local_size) {
  const int mine = default_thread_count();
  const int node = static_cast<int>(std::thread::hardware_concurrency());
  if (local_size > 1 && node > 0 && mine >= node) return std::max(1, node / local_size);
  return mine;
}

RankSetup place_rank(const FitOptions& opt, const RankInfo& where) {
  RankSetup s{opt, opt.threads > 0 ? opt.threads : default_rank_threads(where.local_size)};
  // More threads than the cores this rank may run on only slow the fit and multiply its scratch
  // memory (--threads 1000 on 2 cores: 4x slower, 2.5x the memory): capped, with a warning.
  const int cores = default_thread_count();
  if (opt.threads > cores && cores > 0) {
    spdlog::warn(
        "--threads {}: this process may run on {} cores (its CPU affinity); using {} "
        "threads (more than the cores only slows the fit and takes more memory)",
        opt.threads, cores, cores);
    s.threads = s.opt.threads = cores;
  }
  const GpuInfo g = query_gpus();
  const int n_gpu = g.compiled ? g.device_count : visible_gpu_count();
  s.opt.gpu_device = std::max(0, device_for_local_rank(where.local_rank, n_gpu));
  // Placement matters under MPI; a single process says only which backend it uses (fit_run.cpp).
  spdlog::log(where.size > 1 ? spdlog::level::info : spdlog::level::debug,
              "rank {}/{}: node-local rank {}/{}, {} GPUs ({}) -> device {}, {} threads",
              where.rank, where.size, where.local_rank, where.local_size, n_gpu,
              g.compiled ? "CUDA backend built" : "built without CUDA",
              device_for_local_rank(where.local_rank, n_gpu), s.threads);
  return s;
}

// Rank 0's progress lines: files and targets done out of the total, rate and ETA. The total
// targets and the ETA are extrapolated from the bytes done (inputs go largest first).
class Progress {
 public:
  Progress(size_t n_files, uintmax_t n_bytes, double interval_s, bool quiet)
      : n_files_(n_files), n_bytes_(n_bytes), interval_(interval_s), quiet_(quiet) {}
  void file_done(size_t targets, size_t fitted, uintmax_t bytes) {
    ++files_;
    targets_ += targets;
    fitted_ += fitted;
    bytes_ += bytes;
  }
  void maybe_log() {
    const double t = elapsed();
    if (quiet_ || t - last_ < interval_) return;
    last_ = t;
    if (files_ == 0) {  // nothing to extrapolate from yet (a GPU rank's first batch, a large file)
      spdlog::info("progress: 0/{} files after {:.0f} s: no input finished yet", n_files_, t);
      return;
    }
    const double frac = n_bytes_ ? static_cast<double>(bytes_) / n_bytes_ : 0.0;
    if (frac <= 0) {  // the inputs' sizes are unknown: no estimate, no ETA
      spdlog::info("progress: {}/{} files, {} targets read, {} spectra fitted = {:.1f} spectra/s",
                   files_, n_files_, targets_, fitted_, rate());
      return;
    }
    const double eta = t / frac - t;
    const double est = targets_ / frac;
    spdlog::info(
        "progress: {}/{} files, {}/~{:.0f} targets read, {} spectra fitted = {:.1f} spectra/s, "
        "ETA {:.0f} s",
        files_, n_files_, targets_, est, fitted_, rate(), eta);
  }
  double elapsed() const { return std::chrono::duration<double>(Clock::now() - t0_).count(); }
  // Spectra fitted per second (not the fibres read: sky fibres and unselected targets are read
  // but not fitted).
  double rate() const { return fitted_ / std::max(elapsed(), 1e-9); }
  size_t targets() const { return targets_; }
  size_t fitted() const { return fitted_; }

 private:
  size_t n_files_, files_ = 0, targets_ = 0, fitted_ = 0;
  uintmax_t n_bytes_, bytes_ = 0;
  double interval_;
  bool quiet_;
  double last_ = 0.0;
  Clock::time_point t0_ = Clock::now();
};

Provenance job_provenance(const FitEngine& engine, const FitOptions& opt, int world_size) {
  Provenance p = engine.provenance(opt, opt, opt);
  p["mpi_world_size"] = std::to_string(world_size);
  return p;
}

InputCatalogWriter::InputCatalogWriter(const InputOptions& in, const OutputOptions& opt,
                                       Provenance base, int rank)
    : dir_(opt.output_dir),
      fits_(opt.output_format == "fits"),
      tree_(!in.desi_root.empty()),
      prov_(std::move(base)),
      faults_(opt.output_dir) {
  prov_["mpi_rank"] = std::to_string(rank);
  prov_["n_input_files"] = "1";
}

void InputCatalogWriter::write(FileResult& r) {
  // A failed input, or a partial input group (a member unreadable), gets none: a rerun retries it.
  if (dir_.empty() || !r.ok || !r.error.empty()) return;
  try {
    write_files(r);
    faults_.ok();
  } catch (const std::exception& e) {
    const auto* io = dynamic_cast<const IoError*>(&e);
    r.ok = false;
    r.output_errno = io ? io->error_number : 0;
    r.error = fmt::format("outputs not written ({}): {}", errno_text(r.output_errno), e.what());
    r.output_stop = faults_.failed(r.output_errno);
    spdlog::error("{}: {}", r.path, r.error);
    if (!r.output_stop.empty()) {
      if (!output_stop_requested())
        spdlog::error("stopping the job: {}; the inputs finished so far are saved", r.output_stop);
      request_output_stop();
    }
  }
}

void InputCatalogWriter::write_files(const FileResult& r) const {
  Provenance p = prov_;
  p["input_path"] = r.path;
  // --epochs: the side tables follow the stars (/catalog); their epochs go to /epochs.
  std::vector<CatalogRow> stars, epochs;
  split_epoch_rows(r.rows, &stars, &epochs);
  const SideTables side = side_tables({{r.path, stars.data(), stars.size(), r.side_hdus}}, fits_);
  const std::string cat = per_input_catalog(dir_, r.path, tree_);
  std::error_code ec;
  // The healpix tree (--desi-root) below the output folder, never the folder itself: a vanished
  // output folder (an unmounted filesystem) must fail the write, not be made anew.
  if (!fs::is_directory(dir_, ec))
    throw IoError(dir_ + ": the output folder is gone", ENOENT);
  fs::create_directories(fs::path(cat).parent_path(), ec);
  if (ec) throw IoError(cat + ": cannot create its folder: " + ec.message(), ec.value());
  // The FITS table first: the HDF5 catalog's existence marks the input finished (resume). When
  // the catalog then fails, the table goes too: an input has both final files or neither.
  const std::string rvtab = fits_ ? per_input_rvtab(dir_, r.path, tree_) : "";
  if (fits_) write_rvtab_fits(rvtab, stars, p, side, epochs);
  try {
    write_catalog(cat, r.rows, p, [&](h5::File& f) { write_side_h5(f, side); });
  } catch (...) {
    if (fits_) fs::remove(rvtab, ec);
    throw;
  }
}

RootJob::RootJob(const FitOptions& opt, int world_size, int threads)
    : opt_(opt), world_size_(world_size), inputs_(plan_inputs(opt_)) {
  const size_t n = inputs_.size();
  status_.resize(n);
  kept_.resize(n);
  side_hdus_.assign(n, 1);
  want_merged_ = wants_merged(opt_);
  check_fit_outputs(opt_, inputs_);  // creates --output-dir and --log-dir
  if (!opt_.output_dir.empty())
    if (size_t k = remove_stale_temps(opt_.output_dir))
      spdlog::info("removed {} partial catalogs (*.velox.h5.tmp) left by an interrupted run", k);
  // The engine first: its library checksum and configuration hash decide which existing
  // per-input catalogs a resume may keep (fit_identity.hpp). Nothing is written before the
  // check below, so a refusal leaves the output directory as it was.
  engine_ = std::make_unique<FitEngine>(opt_, threads);
  prov_ = job_provenance(*engine_, opt_, world_size_);
  const FitIdentity current = identity_of(prov_);
  std::vector<std::string> changed;  // "catalog: difference", refused without --refit-changed
  size_t n_unsealed = 0;             // kept catalogs without a row seal (older velox)
  for (size_t i = 0; i < n; ++i) {
    if (!inputs_[i].catalog.empty() && !opt_.overwrite && fs::exists(inputs_[i].catalog)) {
      // A catalog counts as done only once it reads back whole (its row seal): a damaged,
      // incomplete or unsealed one is refitted, with a word saying which and why.
      try {
        Provenance p;
        bool sealed = false;
        auto rows = read_catalog(inputs_[i].catalog, &p, &sealed);
        // Only this input's own per-input catalog counts (not a merge or another input's
        // catalog put at its name: check_fit_outputs refuses those as foreign).
        if (p.count(kMergeOfAttr) || !p.count("input_path") ||
            input_stem(p["input_path"]) != input_stem(inputs_[i].path))
          throw IoError(inputs_[i].catalog + ": is not the per-input catalog of " +
                        inputs_[i].path);
        // A catalog of a velox before the seal (2026-11) is accepted unchecked when it has rows;
        // an empty one is what a lost write at close left then: refitted.
        if (!sealed && rows.empty())
          throw IoError(inputs_[i].catalog +
                        ": has no seal of its rows (written by a velox before 2026-11) and no "
                        "rows");
        n_unsealed += !sealed;
        const std::string diff = identity_difference(identity_of(p), current);
        if (diff.empty()) {
          status_[i] = {inputs_[i].path, "skipped", rows.size(), 0.0, -1, ""};
          // Its selected rows (all its rows with --include-unselected) count as found.
          for (const auto& row : rows)
            if (engine_->outputs().selection().targetids.count(row.TARGETID))
              listed_found_.insert(row.TARGETID);
          if (want_merged_) kept_[i] = std::move(rows);
          continue;
        }
        if (!opt_.refit_changed) changed.push_back(inputs_[i].catalog + ": " + diff);
      } catch (const std::exception& e) {
        spdlog::warn("resume: {}; refitting {}", e.what(), inputs_[i].path);
      }
    }
    todo_.push_back(i);
  }
  if (n_unsealed)
    spdlog::warn(
        "resume: {} per-input catalogs were written by a velox before 2026-11, without a seal of "
        "their rows: kept as they read (rerun with --overwrite to refit and seal them)",
        n_unsealed);
  if (!changed.empty())
    throw ConfigError(fmt::format(
        "{} of the per-input catalogs in {} were fitted with another template library or fit "
        "configuration; velox never mixes them silently. First: {}. Add --refit-changed to "
        "refit those inputs, or choose another --output-dir",
        changed.size(), opt_.output_dir, changed.front()));
  if (opt_.refit_changed)
    for (size_t i : todo_)
      if (fs::exists(inputs_[i].catalog))
        spdlog::info("--refit-changed: refitting {} (its catalog {} was fitted otherwise)",
                     inputs_[i].path, inputs_[i].catalog);
  if (!opt_.output_dir.empty()) {
    status_file_ = std::make_unique<StatusFile>(opt_.output_dir, n);
    for (size_t i = 0; i < n; ++i)
      if (!status_[i].status.empty()) status_file_->append(status_[i]);
  }
  flush_status();
  // The DESI side outputs (/fibermap, /models, rvspecfit FITS) are collected by this rank's
  // engine in processing order; they are written only by a single-process --output run, which
  // therefore keeps input order. Otherwise largest first, so long inputs do not start last.
  side_outputs_ = world_size_ == 1 && opt_.output_dir.empty() && !opt_.output.empty();
  if (opt_.save_models && !side_outputs_)
    spdlog::warn(
        "--save-models: models are written only by a single-process run with --output (not "
        "under mpirun or with --output-dir); ignored");
  if (!(side_outputs_ && opt_.save_models))  // models are kept in processing order
    std::stable_sort(todo_.begin(), todo_.end(),
                     [&](size_t a, size_t b) { return inputs_[a].bytes > inputs_[b].bytes; });
  for (size_t i : todo_) todo_bytes_.push_back(inputs_[i].bytes);
  for (auto b : todo_bytes_) bytes_left_ += b;

  spdlog::info(
      "fit: {} inputs ({} to fit, {} skipped: output exists), {} ranks x {} threads, "
      "templates {} ({} stars, {})",
      n, todo_.size(), n - todo_.size(), world_size_, engine_->threads(), opt_.templates,
      engine_->library().n_train, engine_->library().checksum);
  progress_ =
      std::make_unique<Progress>(todo_.size(), bytes_left_, opt_.progress_interval_s, opt_.quiet);
}

RootJob::RootJob(const FitOptions& opt, int world_size, std::vector<JobInput> synthetic)
    : opt_(opt), world_size_(world_size), inputs_(std::move(synthetic)) {
  const size_t n = inputs_.size();
  status_.resize(n);
  kept_.resize(n);
  side_hdus_.assign(n, 1);
  want_merged_ = wants_merged(opt_);
  if (!opt_.output_dir.empty()) status_file_ = std::make_unique<StatusFile>(opt_.output_dir, n);
  for (size_t i = 0; i < n; ++i) {
    todo_.push_back(i);
    todo_bytes_.push_back(inputs_[i].bytes);
    bytes_left_ += inputs_[i].bytes;
  }
  prov_["mpi_world_size"] = std::to_string(world_size_);
  progress_ =
      std::make_unique<Progress>(todo_.size(), bytes_left_, opt_.progress_interval_s, opt_.quiet);
}

RootJob::~RootJob() = default;

bool RootJob::next_input(size_t& index, std::string& path) {
  if (next_ == todo_.size()) return false;
  if (next_ == 0) t_first_ = Clock::now();
  bytes_left_ -= todo_bytes_[next_];
  index = todo_[next_++];
  path = inputs_[index].path;
  return true;
}

std::vector<WorkItem> RootJob::next_batch(double rate_bytes_s, int n_ranks,
                                          const HandoutPolicy& policy) {
  const size_t k = batch_length(todo_bytes_.data() + next_, todo_.size() - next_, bytes_left_,
                                rate_bytes_s, n_ranks, policy);
  std::vector<WorkItem> batch(k);
  for (auto& it : batch) {
    it.bytes = todo_bytes_[next_];
    next_input(it.index, it.path);
  }
  return batch;
}

void RootJob::handle(FileResult&& r) {
  const JobInput& in = inputs_[r.index];
  if (!r.ok && r.rank != 0) spdlog::error("{} (rank {})", r.error, r.rank);
  if (!r.output_stop.empty()) request_output_stop();  // a worker's outputs failed: stop the job
  status_[r.index] = status_of(r);
  if (status_file_) status_file_->append(status_[r.index]);
  files_failed_ += !r.ok || !r.error.empty();  // failed, or an input group with a bad member
  progress_->file_done(r.n_targets, r.n_fitted, in.bytes);
  if (want_merged_) kept_[r.index] = std::move(r.rows);
  side_hdus_[r.index] = r.side_hdus;
  listed_found_.insert(r.targetids_listed.begin(), r.targetids_listed.end());
}

void RootJob::flush_status() {
  if (status_file_) status_file_->flush();
}

double RootJob::seconds_since_first_handout() const {
  return next_ == 0 ? 0.0 : std::chrono::duration<double>(Clock::now() - t_first_).count();
}

void RootJob::maybe_log_progress() { progress_->maybe_log(); }

int RootJob::finish(const std::string& interrupted_by) {
  const size_t n = inputs_.size();
  const double seconds = progress_->elapsed();
  size_t n_unfinished = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!status_[i].status.empty()) continue;  // ok, failed or skipped
    status_[i] = {inputs_[i].path,
                  "interrupted",
                  0,
                  0.0,
                  -1,
                  "not fitted: the job was stopped by " + interrupted_by +
                      (output_stop_requested() ? " (free space or fix the output folder, then "
                                                 "rerun the same command to resume)"
                                               : "; rerun the same command to resume")};
    ++n_unfinished;
  }
  int code = kExitOk;
  // Every write below is checked and none of them throws: a failure is logged and ends in
  // kExitOutputFailed (the per-input catalogs already written stay, and hold every result).
  auto output_failed = [&](const std::string& what, const std::exception& e) {
    spdlog::error("fit: {} not written: {}", what, e.what());
    code = kExitOutputFailed;
  };
  if (status_file_) {
    try {
      status_file_->finish(status_);
    } catch (const std::exception& e) {
      output_failed("status.tsv (in input order)", e);
    }
  }

  prov_["n_input_files"] = std::to_string(n);
  prov_["n_files_failed"] = std::to_string(files_failed_);
  if (n_unfinished) {
    prov_["interrupted"] = "true";
    prov_["n_inputs_unfinished"] = std::to_string(n_unfinished);
  }
  // The merged rows (moved out of kept_, input order) and each input's span of them.
  // --epochs: the epoch rows (EPOCH >= 0) follow all stars, outside the spans.
  std::vector<CatalogRow> merged, epochs;
  std::vector<size_t> start;
  for (auto& rows : kept_) {
    start.push_back(merged.size());
    split_epoch_rows(rows, &merged, &epochs);
    rows.clear();
  }
  start.push_back(merged.size());
  std::vector<std::string> input_paths;
  for (const auto& in : inputs_) input_paths.push_back(in.path);
  std::optional<SideTables> side;
  for (const auto& out : {opt_.output, opt_.merge}) {
    if (out.empty()) continue;
    if (n_unfinished && out == opt_.merge) {
      spdlog::warn(
          "fit: merged catalog {} not written: {} inputs unfinished (the per-input "
          "catalogs hold every result; the rerun writes it)",
          out, n_unfinished);
      continue;
    }
    // FIBERMAP/SCORES re-read from the inputs (any rank fitted them); models only from this
    // process's engine (a single-process --output run).
    const bool models = side_outputs_ && out == opt_.output;
    const bool fits = opt_.output_format == "fits";
    if (!side) {
      std::vector<InputRows> per_input;
      for (size_t i = 0; i < n; ++i)
        per_input.push_back({inputs_[i].path, merged.data() + start[i], start[i + 1] - start[i],
                             side_hdus_[i] != 0});
      side = side_tables(per_input, fits);
    }
    Provenance prov = prov_;
    if (out == opt_.merge && !opt_.output_dir.empty())
      prov[kMergeOfAttr] = merge_folder_id(opt_.output_dir);
    try {
      if (fits) write_rvtab_fits(FitOutputs::fits_path(out), merged, prov, *side, epochs);
      std::vector<CatalogRow> all;
      if (!epochs.empty()) {
        all = merged;
        all.insert(all.end(), epochs.begin(), epochs.end());
      }
      write_catalog(out, epochs.empty() ? merged : all, prov, [&](h5::File& f) {
        write_input_list(f, input_paths);
        write_side_h5(f, *side);
        if (models) engine_->outputs().write_h5(f);
      });
    } catch (const IoError& e) {
      if (fits) {
        std::error_code ec;
        fs::remove(FitOutputs::fits_path(out), ec);  // both files or neither
      }
      output_failed(out == opt_.merge ? "the merged catalog " + out : "the catalog " + out, e);
    }
  }
  size_t n_ok = 0;
  for (const auto& r : merged) n_ok += r.SUCCESS;
  spdlog::info(
      "fit: {} inputs fitted ({} failed, {} skipped{}), {} spectra fitted of {} targets read in "
      "{:.2f} s = {:.2f} spectra/s on {} ranks",
      todo_.size() - n_unfinished, files_failed_, n - todo_.size(),
      n_unfinished ? fmt::format(", {} unfinished", n_unfinished) : "", progress_->fitted(),
      progress_->targets(), seconds, progress_->fitted() / std::max(seconds, 1e-9), world_size_);
  if (want_merged_ && !(n_unfinished && opt_.output.empty()))
    spdlog::info("fit: merged catalog {} with {} rows ({} SUCCESS){}",
                 opt_.output.empty() ? opt_.merge : opt_.output, merged.size(), n_ok,
                 n_unfinished ? ", incomplete (attribute interrupted)" : "");
  // Listed TARGETIDs in none of the inputs (a typo, or the wrong inputs): one line, at most 10
  // named. Not after an interruption (inputs unread); a failed input may hold some.
  std::vector<int64_t> unknown;
  if (engine_ && !n_unfinished)
    for (int64_t id : engine_->outputs().selection().targetids)
      if (!listed_found_.count(id)) unknown.push_back(id);
  if (!unknown.empty()) {
    constexpr size_t kNamed = 10;
    const std::vector<int64_t> named(unknown.begin(),
                                     unknown.begin() + std::min(unknown.size(), kNamed));
    spdlog::warn(
        "fit: {} of the {} TARGETIDs of --targetid/--targetid-file are in none of the "
        "inputs: {}{}{}",
        unknown.size(), engine_->outputs().selection().targetids.size(), fmt::join(named, ", "),
        unknown.size() > kNamed ? fmt::format(" and {} more", unknown.size() - kNamed) : "",
        files_failed_ ? " (or in the inputs that failed)" : "");
  }
  if (files_failed_)
    spdlog::warn("fit: {} input files failed{}{}", files_failed_,
                 status_file_ ? " (see status.tsv)" : "",
                 n_unfinished ? "" : "; exit code 3 (completed with failures)");
  if (output_stop_requested() || code == kExitOutputFailed) {
    spdlog::error(
        "fit: stopped by {}: {} of {} inputs unfinished, {} failed{}; exit code {}: free space "
        "or fix the output folder, then rerun the same command to {}",
        output_stop_requested() ? interrupted_by : "an output write failure", n_unfinished, n,
        files_failed_, status_file_ ? " (see status.tsv)" : "", int(kExitOutputFailed),
        opt_.output_dir.empty() ? "fit them all again" : "resume");
    return kExitOutputFailed;
  }
  if (n_unfinished) {
    spdlog::warn(
        "fit: interrupted by {}: {} of {} inputs unfinished{}; exit code {}: rerun the "
        "same command to {}",
        interrupted_by, n_unfinished, n, status_file_ ? " (status.tsv: interrupted)" : "",
        int(kExitInterrupted), opt_.output_dir.empty() ? "fit them all again" : "resume");
    return kExitInterrupted;
  }
  return files_failed_ > 0 ? kExitCompletedWithFailures : kExitOk;
}

}  // namespace velox
