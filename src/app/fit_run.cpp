#include "app/fit_run.hpp"

#include <fmt/format.h>
#include <fnmatch.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <set>

#include "backend/cpu/cpu_backend.hpp"
#include "backend/gpu.hpp"
#include "common/error.hpp"
#include "common/version.hpp"
#include "fit/rvs_warn.hpp"
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
  if (!opt.input_dir.empty()) {
    std::error_code ec;
    std::vector<std::string> found;
    for (fs::directory_iterator it(opt.input_dir, ec), end; !ec && it != end; it.increment(ec)) {
      const std::string name = it->path().filename().string();
      if (it->is_regular_file() && fnmatch(opt.glob.c_str(), name.c_str(), 0) == 0)
        found.push_back(it->path().string());
    }
    if (ec) throw ConfigError(opt.input_dir + ": cannot list the input directory: " + ec.message());
    std::sort(found.begin(), found.end());
    files.insert(files.end(), found.begin(), found.end());
  }
  std::set<std::string> seen;
  std::vector<std::string> unique;
  for (auto& f : files)
    if (seen.insert(f).second) unique.push_back(std::move(f));
  return unique;
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

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

CatalogRow bad_input_row(const std::string& path) {
  CatalogRow row;
  row.SOURCE_FILE = fs::path(path).filename().string();
  row.RVS_WARN = warn::kBadInput;
  row.SUCCESS = false;
  return row;
}

FitEngine::FitEngine(const FitOptions& opt, int threads)
    : cfg_(opt.config.empty() ? FitConfig{} : load_fit_config(opt.config)),
      fmt_(parse_format(opt.format)),
      lib_(TemplateLibrary::load(opt.templates)),
      cache_(std::make_unique<ArmModelCache>(lib_)),
      outputs_(std::make_unique<FitOutputs>(opt)),
      threads_(threads > 0 ? threads : default_thread_count()) {
  if (opt.resolution_matrix >= 0) cfg_.resolution_matrix = opt.resolution_matrix != 0;
  // Backend choice (docs/gpu.md): gpu demands a device, auto takes one when present.
  if (opt.device != "auto" && opt.device != "cpu" && opt.device != "gpu")
    throw ConfigError("--device " + opt.device + ": expected auto, cpu or gpu");
  if (opt.device != "cpu") {
    const GpuInfo g = query_gpus();
    if (g.device_count > 0) {
      use_gpu_ = true;
      gpu_device_ = opt.gpu_device % g.device_count;
      gpu_min_batch_ = opt.device == "gpu" ? 1 : static_cast<size_t>(std::max(1, opt.gpu_min_batch));
      spdlog::info("device {}: CUDA device {} of {} (chunks of >= {} spectra; smaller ones on the "
                   "CPU)", opt.device, gpu_device_, g.device_count, gpu_min_batch_);
    } else if (opt.device == "gpu") {
      throw ConfigError("--device gpu: no usable GPU: " + g.message);
    } else {
      spdlog::info("device auto: CPU backend, {} threads ({})", threads_, g.message);
    }
  }
}

std::vector<CatalogRow> FitEngine::fit_jobs(const std::vector<FitJob>& jobs,
                                            const std::function<void(size_t)>& on_fitted,
                                            std::vector<FitDiagnostics>* diags) {
  // The CUDA batch does not carry resolution matrices yet: chunks with matrices stay on the CPU.
  bool has_matrix = false;
  for (const auto& j : jobs)
    for (const auto& a : j.spectrum->arms) has_matrix = has_matrix || a.ndiag > 0;
  if (!use_gpu_ || jobs.size() < gpu_min_batch_ || diags || (cfg_.resolution_matrix && has_matrix))
    return fit_on_cpu(jobs, threads_, on_fitted, diags);
  // GPU: host masking/packing, one batched kernel launch sequence, host flags.
  std::vector<PreparedSpectrum> prep(jobs.size());
  std::vector<PreparedSpectrum*> ready;
  for (size_t i = 0; i < jobs.size(); ++i) {
    prep[i] = prepare_spectrum(*jobs[i].spectrum, *jobs[i].ctx);
    if (prep[i].ready) ready.push_back(&prep[i]);
  }
  std::vector<std::vector<float>> ivar;
  const auto res = fit_prepared_on_gpu(ready, &ivar, *jobs.front().ctx, gpu_device_);
  for (size_t k = 0; k < ready.size(); ++k) {
    const size_t i = static_cast<size_t>(ready[k] - prep.data());
    finish_row(*ready[k], res[k], ivar[k], *jobs[i].ctx);
  }
  std::vector<CatalogRow> rows;
  rows.reserve(prep.size());
  for (auto& p : prep) rows.push_back(std::move(p.row));
  if (on_fitted) on_fitted(rows.size());
  return rows;
}

void FitEngine::fit_stream(const NextInput& next, const std::function<void(FileResult&&)>& done,
                           size_t chunk_min_spectra, const std::function<void(size_t)>& on_fitted) {
  struct Pending {
    FileResult res;
    SpectrumFile file;
    std::string format;
    std::vector<char> selected;  // per spectrum: fitted (selection, fit/select.hpp)?
  };
  std::vector<Pending> chunk;
  size_t chunk_spectra = 0;
  auto flush = [&] {
    std::vector<FitJob> jobs;
    std::vector<std::unique_ptr<FitContext>> ctxs;
    for (auto& p : chunk) {
      ctxs.push_back(std::make_unique<FitContext>(FitContext{lib_, *cache_, cfg_, p.format}));
      for (size_t i = 0; i < p.file.spectra.size(); ++i)
        if (p.selected[i]) jobs.push_back({&p.file.spectra[i], ctxs.back().get()});
    }
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<FitDiagnostics> diags;
    auto rows = fit_jobs(jobs, on_fitted, outputs_->want_diagnostics() ? &diags : nullptr);
    const double dt = seconds_since(t0);
    seconds_fit_ += dt;
    size_t k = 0;
    for (auto& p : chunk) {
      size_t n = 0;
      for (char c : p.selected) n += c != 0;
      std::vector<CatalogRow> fitted(std::make_move_iterator(rows.begin() + k),
                                     std::make_move_iterator(rows.begin() + k + n));
      std::vector<FitDiagnostics> dg;
      if (!diags.empty()) dg.assign(diags.begin() + k, diags.begin() + k + n);
      k += n;
      std::vector<SpectrumFile> one;
      one.push_back(std::move(p.file));
      outputs_->collect(one, {p.selected}, std::move(fitted), dg, p.res.rows);
      p.res.seconds += jobs.empty() ? 0.0 : dt * n / jobs.size();
      done(std::move(p.res));
    }
    chunk.clear();
    chunk_spectra = 0;
  };
  size_t index = 0;
  std::string path;
  while (next(index, path)) {
    Pending p;
    p.res.index = index;
    p.res.path = path;
    const auto t0 = std::chrono::steady_clock::now();
    try {
      p.file = read_spectra(path, fmt_);
      if (p.file.spectra.empty()) spdlog::warn("{}: no spectra in file", path);
      p.format = format_name(p.file.format);
      p.res.n_targets = p.file.spectra.size();
      p.selected = outputs_->on_file(path, p.file);
    } catch (const std::exception& e) {
      // A bad file: one clear line, a failure row naming it, and the job goes on. Files read
      // before it are reported first, so `done` sees inputs in the order they were pulled.
      spdlog::error("{}", e.what());
      if (!chunk.empty()) flush();
      p.res.ok = false;
      p.res.error = e.what();
      p.res.rows = {bad_input_row(path)};
      outputs_->add_failure_row();
      p.res.seconds = seconds_since(t0);
      done(std::move(p.res));
      continue;
    }
    p.res.seconds = seconds_since(t0);
    for (char c : p.selected) chunk_spectra += c != 0;
    chunk.push_back(std::move(p));
    if (chunk_spectra >= chunk_min_spectra) flush();
  }
  if (!chunk.empty()) flush();
}

Provenance FitEngine::provenance(const FitOptions& opt) const {
  Provenance prov;
  prov["velox_version"] = version();
  prov["git_commit"] = git_commit();
  prov["command_line"] = opt.command_line;
  prov["config_yaml"] = dump_fit_config(cfg_);
  prov["templates_path"] = opt.templates;
  prov["templates_checksum"] = lib_.checksum;
  std::string labels;
  for (size_t i = 0; i < lib_.label_names.size(); ++i)
    labels += (i ? "," : "") + lib_.label_names[i];
  prov["templates_labels"] = labels;
  prov["created_utc"] = utc_now();
  prov["hostname"] = hostname();
  prov["n_threads"] = std::to_string(threads_);
  return prov;
}

FitRunResult run_fit(const FitOptions& opt) {
  const auto files = collect_inputs(opt);
  if (files.empty()) throw ConfigError("no input files (give FILES, --input-list or --input-dir)");
  FitEngine engine(opt, opt.threads);
  FitRunResult res;
  size_t i = 0;
  engine.fit_stream(
      [&](size_t& index, std::string& path) {
        if (i == files.size()) return false;
        index = i;
        path = files[i++];
        return true;
      },
      [&](FileResult&& r) {
        res.files_failed += !r.ok;
        // Spectra actually fitted (not unreadable files, not unselected fibres).
        for (const auto& row : r.rows)
          res.n_spectra += (row.RVS_WARN & (warn::kBadInput | warn::kNotFitted)) == 0;
        for (auto& row : r.rows) res.rows.push_back(std::move(row));
      },
      static_cast<size_t>(std::max(64, 4 * engine.threads())));
  res.seconds_fit = engine.seconds_fitting();
  return res;
}

}  // namespace velox
