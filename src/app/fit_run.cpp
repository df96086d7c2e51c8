#include "app/fit_run.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <mutex>

#include "app/fit_outputs.hpp"
#include "backend/cpu/cpu_backend.hpp"
#include "common/error.hpp"
#include "common/version.hpp"
#include "emulator/library.hpp"
#include "fit/config.hpp"
#include "fit/rvs_warn.hpp"
#include "io/h5.hpp"
#include "io/readers.hpp"

namespace velox {

namespace fs = std::filesystem;

std::vector<std::string> collect_inputs(const FitOptions& opt) {
  std::vector<std::string> files = opt.inputs;
  if (!opt.input_list.empty()) {
    std::ifstream in(opt.input_list);
    if (!in) throw ConfigError(opt.input_list + ": cannot read the input list");
    std::string line;
    while (std::getline(in, line)) {
      const auto b = line.find_first_not_of(" \t\r");
      if (b == std::string::npos || line[b] == '#') continue;
      const auto e = line.find_last_not_of(" \t\r");
      files.push_back(line.substr(b, e - b + 1));
    }
  }
  return files;
}

namespace {

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

std::string hostname() {
  char buf[256] = {0};
  gethostname(buf, sizeof buf - 1);
  return buf;
}

// Progress lines at a steady interval: files and targets done, rate, ETA.
class Progress {
 public:
  Progress(size_t n_files, bool quiet) : n_files_(n_files), quiet_(quiet) {}
  void targets_done(size_t n_targets_total, size_t files_done) {
    std::lock_guard<std::mutex> lock(mu_);
    targets_ = n_targets_total;
    files_ = files_done;
    const double t = elapsed();
    if (quiet_ || t - last_ < 5.0) return;
    last_ = t;
    const double rate = targets_ / std::max(t, 1e-9);
    const double frac = n_files_ ? static_cast<double>(files_) / n_files_ : 1.0;
    const double eta = frac > 0 ? t / frac - t : NAN;
    spdlog::info("progress: {}/{} files, {} targets, {:.1f} spectra/s, ETA {:.0f} s", files_,
                 n_files_, targets_, rate, eta);
  }
  double elapsed() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  }

 private:
  size_t n_files_, targets_ = 0, files_ = 0;
  bool quiet_;
  double last_ = 0.0;
  std::mutex mu_;
  std::chrono::steady_clock::time_point t0_ = std::chrono::steady_clock::now();
};

}  // namespace

FitRunResult run_fit(const FitOptions& opt) {
  FitRunResult res;
  const auto files = collect_inputs(opt);
  if (files.empty()) throw ConfigError("no input files (give FILES or --input-list)");
  const FitConfig cfg = opt.config.empty() ? FitConfig{} : load_fit_config(opt.config);
  const SpectrumFormat fmt_req = parse_format(opt.format);
  const auto lib = TemplateLibrary::load(opt.templates);
  ArmModelCache cache(lib);
  FitOutputs outputs(opt);  // selection, FIBERMAP columns, /fibermap, /models, FITS layout
  const int threads = opt.threads > 0 ? opt.threads : default_thread_count();
  if (!opt.quiet)
    spdlog::info("fit: {} input files, templates {} ({} stars, {}), {} threads", files.size(),
                 opt.templates, lib.n_train, lib.checksum, threads);

  Progress progress(files.size(), opt.quiet);
  size_t targets_before = 0, files_done = 0;
  // Read files in chunks of at least ~4 spectra per thread, then fit each chunk in parallel.
  const size_t chunk_min = static_cast<size_t>(std::max(64, 4 * threads));
  std::vector<SpectrumFile> chunk;
  std::vector<std::string> chunk_formats;
  std::vector<std::vector<char>> chunk_selected;  // per file, per spectrum: fitted?
  size_t chunk_spectra = 0;
  auto flush = [&] {
    std::vector<FitJob> jobs;
    std::vector<std::unique_ptr<FitContext>> ctxs;
    for (size_t f = 0; f < chunk.size(); ++f) {
      ctxs.push_back(std::make_unique<FitContext>(FitContext{lib, cache, cfg, chunk_formats[f]}));
      for (size_t i = 0; i < chunk[f].spectra.size(); ++i)
        if (chunk_selected[f][i]) jobs.push_back({&chunk[f].spectra[i], ctxs.back().get()});
    }
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<FitDiagnostics> diags;
    auto rows = fit_on_cpu(
        jobs, threads,
        [&](size_t d) { progress.targets_done(targets_before + d, files_done); },
        outputs.want_diagnostics() ? &diags : nullptr);
    res.seconds_fit += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    files_done += chunk.size();
    targets_before += rows.size();
    progress.targets_done(targets_before, files_done);
    outputs.collect(chunk, chunk_selected, std::move(rows), diags, res.rows);
    res.n_spectra += jobs.size();
    chunk.clear();
    chunk_formats.clear();
    chunk_selected.clear();
    chunk_spectra = 0;
  };
  for (const auto& path : files) {
    try {
      auto sf = read_spectra(path, fmt_req);
      if (sf.spectra.empty()) spdlog::warn("{}: no spectra in file", path);
      chunk_selected.push_back(outputs.on_file(path, sf));
      chunk_spectra += sf.spectra.size();
      chunk_formats.push_back(format_name(sf.format));
      chunk.push_back(std::move(sf));
    } catch (const std::exception& e) {
      // A bad file: one clear line, a failure row naming it, and the job goes on.
      spdlog::error("{}", e.what());
      ++res.files_failed;
      ++files_done;
      CatalogRow row;
      row.SOURCE_FILE = fs::path(path).filename().string();
      row.RVS_WARN = warn::kBadInput;
      row.SUCCESS = false;
      // Keep input order: flush what was read before this file first.
      if (!chunk.empty()) flush();
      res.rows.push_back(row);
      outputs.add_failure_row();
      continue;
    }
    if (chunk_spectra >= chunk_min) flush();
  }
  if (!chunk.empty()) flush();

  if (!opt.output.empty()) {
    Provenance prov;
    prov["velox_version"] = version();
    prov["git_commit"] = git_commit();
    prov["command_line"] = opt.command_line;
    prov["config_yaml"] = dump_fit_config(cfg);
    prov["templates_path"] = opt.templates;
    prov["templates_checksum"] = lib.checksum;
    std::string labels;
    for (size_t i = 0; i < lib.label_names.size(); ++i) labels += (i ? "," : "") + lib.label_names[i];
    prov["templates_labels"] = labels;
    prov["created_utc"] = utc_now();
    prov["hostname"] = hostname();
    prov["n_threads"] = std::to_string(threads);
    prov["n_input_files"] = std::to_string(files.size());
    prov["n_files_failed"] = std::to_string(res.files_failed);
    prov["mpi_world_size"] = "1";
    write_catalog(opt.output, res.rows, prov, [&](h5::File& f) { outputs.write_h5(f); });
    outputs.write_fits(opt.output, res.rows);
  }
  size_t n_ok = 0;
  for (const auto& r : res.rows) n_ok += r.SUCCESS;
  if (!opt.quiet)
    spdlog::info("fit: {} rows ({} SUCCESS) from {} files ({} failed) in {:.1f} s{}",
                 res.rows.size(), n_ok, files.size(), res.files_failed, progress.elapsed(),
                 opt.output.empty() ? "" : ", catalog " + opt.output);
  res.exit_code = res.files_failed > 0 ? kExitCompletedWithFailures : kExitOk;
  return res;
}

}  // namespace velox
