#include "mpi/driver.hpp"

#include <fmt/format.h>
#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <map>
#include <mutex>
#include <thread>

#include "app/job_outputs.hpp"
#include "backend/cpu/cpu_backend.hpp"
#include "backend/gpu.hpp"
#include "common/error.hpp"
#include "io/h5.hpp"
#include "mpi/wire.hpp"

namespace velox::mpi {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

bool merge_only(const FitOptions& o) {
  return o.inputs.empty() && o.input_list.empty() && o.input_dir.empty() && !o.merge.empty();
}

// Spectra per chunk: one thread per spectrum needs no batching; several threads share a chunk,
// and a few spectra each keep them busy without holding back many inputs from other ranks.
size_t chunk_min_spectra(int threads) { return threads <= 1 ? 1 : 4 * static_cast<size_t>(threads); }

void setup_logging(const FitOptions& opt, const Comm& comm) {
  const auto level = spdlog::get_level();  // from --log-level
  auto console = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
  if (comm.rank() != 0) console->set_level(std::max(level, spdlog::level::warn));
  std::vector<spdlog::sink_ptr> sinks{console};
  if (!opt.log_dir.empty()) {
    fs::create_directories(opt.log_dir);
    const auto path = fs::path(opt.log_dir) / fmt::format("rank-{}.log", comm.rank());
    sinks.push_back(std::make_shared<spdlog::sinks::basic_file_sink_mt>(path.string(), false));
  }
  auto logger = std::make_shared<spdlog::logger>("velox", sinks.begin(), sinks.end());
  logger->set_level(level);
  if (comm.size() > 1)
    logger->set_pattern(fmt::format("[%Y-%m-%d %H:%M:%S.%e] [rank {}] [%^%l%$] %v", comm.rank()));
  spdlog::set_default_logger(logger);
}

// Rank 0's progress lines: files and targets done out of the total, rate and ETA. The total
// targets and the ETA are extrapolated from the bytes done (inputs go largest first).
class Progress {
 public:
  Progress(size_t n_files, uintmax_t n_bytes, double interval_s, bool quiet)
      : n_files_(n_files), n_bytes_(n_bytes), interval_(interval_s), quiet_(quiet) {}
  void file_done(size_t targets, uintmax_t bytes) {
    ++files_;
    targets_ += targets;
    bytes_ += bytes;
  }
  void maybe_log() {
    const double t = elapsed();
    if (quiet_ || t - last_ < interval_) return;
    last_ = t;
    const double frac = n_bytes_ ? static_cast<double>(bytes_) / n_bytes_ : 0.0;
    const double eta = frac > 0 ? t / frac - t : NAN;
    const double est = frac > 0 ? targets_ / frac : NAN;
    spdlog::info("progress: {}/{} files, {}/~{:.0f} targets, {:.1f} spectra/s, ETA {:.0f} s",
                 files_, n_files_, targets_, est, rate(), eta);
  }
  double elapsed() const { return std::chrono::duration<double>(Clock::now() - t0_).count(); }
  double rate() const { return targets_ / std::max(elapsed(), 1e-9); }
  size_t targets() const { return targets_; }

 private:
  size_t n_files_, files_ = 0, targets_ = 0;
  uintmax_t n_bytes_, bytes_ = 0;
  double interval_;
  bool quiet_;
  double last_ = 0.0;
  Clock::time_point t0_ = Clock::now();
};

struct Input {
  std::string path;
  uintmax_t bytes = 0;
  std::string catalog;  // per-input catalog (--output-dir), else empty
};

std::vector<Input> plan_inputs(const FitOptions& opt) {
  const auto paths = collect_inputs(opt);
  if (paths.empty())
    throw ConfigError("no input files (give FILES, --input-list or --input-dir/--glob)");
  std::vector<Input> inputs;
  std::map<std::string, std::string> by_catalog;
  for (const auto& p : paths) {
    Input in{p, 0, ""};
    std::error_code ec;
    in.bytes = fs::file_size(p, ec);
    if (ec) in.bytes = 0;  // unreadable: the reader reports it as a failed input
    if (!opt.output_dir.empty()) {
      in.catalog = per_input_catalog(opt.output_dir, p);
      auto [it, fresh] = by_catalog.emplace(in.catalog, p);
      if (!fresh)
        throw ConfigError(fmt::format("inputs {} and {} would both write {}", it->second, p,
                                      in.catalog));
    }
    inputs.push_back(std::move(in));
  }
  return inputs;
}

// The merged catalog of an existing output dir (`--merge` without inputs).
int merge_existing(const FitOptions& opt) {
  const auto files = catalogs_in(opt.output_dir, opt.merge);
  if (files.empty()) throw ConfigError(opt.output_dir + ": no *.velox.h5 catalogs to merge");
  std::vector<CatalogRow> rows;
  Provenance prov;
  for (const auto& f : files) {
    Provenance p;
    auto part = read_catalog(f, &p);
    if (prov.empty()) prov = p;
    rows.insert(rows.end(), part.begin(), part.end());
  }
  for (const char* k : {"input_path", "mpi_rank"}) prov.erase(k);
  prov["merge_command_line"] = opt.command_line;
  prov["n_input_files"] = std::to_string(files.size());
  write_catalog(opt.merge, rows, prov);
  spdlog::info("merge: {} rows from {} catalogs in {} -> {}", rows.size(), files.size(),
               opt.output_dir, opt.merge);
  return kExitOk;
}

// Rank 0: the queue, its own fitting thread, the results of every rank, and all writing.
int run_root(const FitOptions& opt, Comm& comm, int threads) {
  if (merge_only(opt)) return merge_existing(opt);
  const auto inputs = plan_inputs(opt);
  const size_t n = inputs.size();
  std::vector<StatusLine> status(n);
  std::vector<std::vector<CatalogRow>> kept(n);  // rows for the merged catalog
  const bool want_merged = !opt.output.empty() || !opt.merge.empty();
  std::unique_ptr<StatusFile> status_file;
  std::vector<size_t> todo;
  if (!opt.output_dir.empty()) {
    fs::create_directories(opt.output_dir);
    if (size_t k = remove_stale_temps(opt.output_dir))
      spdlog::info("removed {} partial catalogs (*.velox.h5.tmp) left by an interrupted run", k);
    status_file = std::make_unique<StatusFile>(opt.output_dir);
  }
  for (size_t i = 0; i < n; ++i) {
    if (!inputs[i].catalog.empty() && !opt.overwrite && fs::exists(inputs[i].catalog)) {
      try {
        auto rows = read_catalog(inputs[i].catalog);
        status[i] = {inputs[i].path, "skipped", rows.size(), 0.0, -1, ""};
        status_file->append(status[i]);
        if (want_merged) kept[i] = std::move(rows);
        continue;
      } catch (const std::exception& e) {
        spdlog::warn("{} (refitting {})", e.what(), inputs[i].path);
      }
    }
    todo.push_back(i);
  }
  // The DESI side outputs (/fibermap, /models, rvspecfit FITS) are collected by this rank's
  // engine in processing order; they are written only by a single-process --output run, which
  // therefore keeps input order. Otherwise largest first, so long inputs do not start last.
  const bool side_outputs = comm.size() == 1 && opt.output_dir.empty() && !opt.output.empty();
  if ((opt.save_models || opt.output_format == "fits") && !side_outputs)
    spdlog::warn("--save-models / --output-format fits are written only by a single-process run "
                 "with --output (not under mpirun or with --output-dir); ignored");
  if (!side_outputs)
    std::stable_sort(todo.begin(), todo.end(),
                     [&](size_t a, size_t b) { return inputs[a].bytes > inputs[b].bytes; });
  uintmax_t todo_bytes = 0;
  for (size_t i : todo) todo_bytes += inputs[i].bytes;

  FitEngine engine(opt, threads);
  Provenance prov = engine.provenance(opt);
  prov["mpi_world_size"] = std::to_string(comm.size());
  spdlog::info("fit: {} inputs ({} to fit, {} skipped: output exists), {} ranks x {} threads, "
               "templates {} ({} stars, {})",
               n, todo.size(), n - todo.size(), comm.size(), engine.threads(), opt.templates,
               engine.library().n_train, engine.library().checksum);

  Progress progress(todo.size(), todo_bytes, opt.progress_interval_s, opt.quiet);
  int files_failed = 0;
  auto handle = [&](FileResult&& r) {
    const Input& in = inputs[r.index];
    if (!r.ok && r.rank != 0) spdlog::error("{} (rank {})", r.error, r.rank);
    if (r.ok && !in.catalog.empty()) {
      Provenance p = prov;
      p["input_path"] = in.path;
      p["mpi_rank"] = std::to_string(r.rank);
      p["n_input_files"] = "1";
      write_catalog(in.catalog, r.rows, p);
    }
    status[r.index] = status_of(r);
    if (status_file) status_file->append(status[r.index]);
    files_failed += !r.ok;
    progress.file_done(r.n_targets, in.bytes);
    if (want_merged) kept[r.index] = std::move(r.rows);
  };

  // The queue, shared by rank 0's fitting thread and the workers' requests.
  std::mutex mu;
  std::condition_variable cv;
  size_t next = 0;
  bool stop = false, local_done = false;
  std::deque<FileResult> inbox;
  std::exception_ptr local_error;
  auto pop = [&](size_t& index, std::string& path) {
    std::lock_guard<std::mutex> lock(mu);
    if (stop || next == todo.size()) return false;
    index = todo[next++];
    path = inputs[index].path;
    return true;
  };
  std::thread local([&] {
    try {
      engine.fit_stream(pop, [&](FileResult&& r) {
        std::lock_guard<std::mutex> lock(mu);
        inbox.push_back(std::move(r));
        cv.notify_one();
      }, chunk_min_spectra(engine.threads()));
    } catch (...) {
      local_error = std::current_exception();
    }
    std::lock_guard<std::mutex> lock(mu);
    local_done = true;
    cv.notify_one();
  });
  // Stop and join the local thread however this function is left.
  struct Joiner {
    std::thread& t;
    std::mutex& mu;
    bool& stop;
    ~Joiner() {
      {
        std::lock_guard<std::mutex> lock(mu);
        stop = true;
      }
      if (t.joinable()) t.join();
    }
  } joiner{local, mu, stop};

  size_t n_done = 0;
  int n_stopped = 0;
  while (n_done < todo.size() || n_stopped < comm.size() - 1) {
    int source = 0, tag = 0;
    size_t bytes = 0;
    bool busy = false;
    while (comm.probe(source, tag, bytes)) {
      busy = true;
      auto msg = comm.recv(source, tag, bytes);
      if (tag == kTagRequest) {
        size_t index = 0;
        std::string path;
        if (pop(index, path)) {
          comm.send(source, kTagWork, pack_work(index, path));
        } else {
          comm.send(source, kTagWork, {});
          ++n_stopped;
        }
      } else if (tag == kTagResult) {
        handle(unpack_result(msg));
        ++n_done;
      }
    }
    std::deque<FileResult> mine;
    {
      std::unique_lock<std::mutex> lock(mu);
      if (!busy && inbox.empty() && !local_done)
        cv.wait_for(lock, std::chrono::milliseconds(comm.size() > 1 ? 1 : 200));
      mine.swap(inbox);
      if (local_error) std::rethrow_exception(local_error);
    }
    for (auto& r : mine) {
      handle(std::move(r));
      ++n_done;
    }
    progress.maybe_log();
  }
  const double seconds = progress.elapsed();

  if (status_file) status_file->finish(status);
  prov["n_input_files"] = std::to_string(n);
  prov["n_files_failed"] = std::to_string(files_failed);
  std::vector<CatalogRow> merged;
  for (auto& rows : kept) merged.insert(merged.end(), rows.begin(), rows.end());
  for (const auto& out : {opt.output, opt.merge}) {
    if (out.empty()) continue;
    if (side_outputs && out == opt.output) {
      write_catalog(out, merged, prov, [&](h5::File& f) { engine.outputs().write_h5(f); });
      engine.outputs().write_fits(out, merged);
    } else {
      write_catalog(out, merged, prov);
    }
  }
  size_t n_ok = 0;
  for (const auto& r : merged) n_ok += r.SUCCESS;
  spdlog::info("fit: {} inputs fitted ({} failed, {} skipped), {} targets in {:.2f} s = {:.2f} "
               "spectra/s on {} ranks",
               todo.size(), files_failed, n - todo.size(), progress.targets(), seconds,
               progress.targets() / std::max(seconds, 1e-9), comm.size());
  if (want_merged)
    spdlog::info("fit: merged catalog {} with {} rows ({} SUCCESS)",
                 opt.output.empty() ? opt.merge : opt.output, merged.size(), n_ok);
  // Every rank returns the job's exit code, so mpirun/srun report it as is.
  const int code = files_failed > 0 ? kExitCompletedWithFailures : kExitOk;
  for (int r = 1; r < comm.size(); ++r)
    comm.send(r, kTagExit, std::vector<char>(reinterpret_cast<const char*>(&code),
                                             reinterpret_cast<const char*>(&code) + sizeof code));
  if (files_failed)
    spdlog::warn("fit: {} input files failed{}; exit code {} (completed with failures)",
                 files_failed, status_file ? " (see status.tsv)" : "", int(kExitCompletedWithFailures));
  return code;
}

// Workers: ask rank 0 for an input, fit, send the rows back, until rank 0 says stop.
int run_worker(const FitOptions& opt, Comm& comm, int threads) {
  if (merge_only(opt)) return kExitOk;
  FitEngine engine(opt, threads);
  auto next = [&](size_t& index, std::string& path) {
    comm.send(0, kTagRequest, {});
    const auto msg = comm.wait_recv(0, kTagWork);
    if (msg.empty()) return false;
    unpack_work(msg, index, path);
    spdlog::debug("fitting {}", path);
    return true;
  };
  engine.fit_stream(next, [&](FileResult&& r) {
    r.rank = comm.rank();
    comm.send(0, kTagResult, pack_result(r));
  }, chunk_min_spectra(engine.threads()));
  const auto msg = comm.wait_recv(0, kTagExit);
  int code = kExitOk;
  if (msg.size() == sizeof code) std::memcpy(&code, msg.data(), sizeof code);
  return code;
}

}  // namespace

void validate_job_options(const FitOptions& opt) {
  const bool any_input = !opt.inputs.empty() || !opt.input_list.empty() || !opt.input_dir.empty();
  if (!opt.merge.empty() && opt.output_dir.empty())
    throw ConfigError("--merge needs --output-dir (the per-input catalogs it merges)");
  if (!opt.output.empty() && !opt.output_dir.empty())
    throw ConfigError("give either --output (one catalog) or --output-dir (one per input, "
                      "merged with --merge)");
  if (opt.output.empty() && opt.output_dir.empty())
    throw ConfigError("no output: give --output FILE or --output-dir DIR");
  if (!any_input && opt.merge.empty())
    throw ConfigError("no input files (give FILES, --input-list or --input-dir/--glob)");
  if (any_input && opt.templates.empty()) throw ConfigError("--templates is required to fit");
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

int run_fit_job(const FitOptions& opt, Comm& comm) {
  try {
    setup_logging(opt, comm);
    const int threads = opt.threads > 0 ? opt.threads : default_rank_threads(comm.local_size());
    const GpuInfo g = query_gpus();
    const int n_gpu = g.compiled ? g.device_count : visible_gpu_count();
    FitOptions o = opt;
    o.gpu_device = std::max(0, device_for_local_rank(comm.local_rank(), n_gpu));
    spdlog::info("rank {}/{}: node-local rank {}/{}, {} GPUs ({}) -> device {}, {} threads",
                 comm.rank(), comm.size(), comm.local_rank(), comm.local_size(), n_gpu,
                 g.compiled ? "CUDA backend built" : "built without CUDA",
                 device_for_local_rank(comm.local_rank(), n_gpu), threads);
    return comm.rank() == 0 ? run_root(o, comm, threads) : run_worker(o, comm, threads);
  } catch (const ConfigError& e) {
    spdlog::error("{}", e.what());
    if (comm.size() > 1) comm.abort(kExitUsage);
    return kExitUsage;
  } catch (const std::exception& e) {
    spdlog::error("{}", e.what());
    if (comm.size() > 1) comm.abort(kExitFatal);
    return kExitFatal;
  }
}

}  // namespace velox::mpi
