#include "app/fit_run.hpp"

#include <fmt/format.h>
#include <fnmatch.h>
#include <malloc.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <ctime>
#include <deque>
#include <filesystem>
#include <fstream>
#include <set>

#include "app/fit_identity.hpp"
#include "app/job_plan.hpp"
#include "backend/cpu/cpu_backend.hpp"
#include "backend/gpu.hpp"
#include "common/error.hpp"
#include "common/version.hpp"
#include "io/readers.hpp"
#include "io/rvs_warn.hpp"

namespace velox {

namespace fs = std::filesystem;

std::vector<std::string> collect_inputs(const InputOptions& opt) {
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
    // getline stops at a read error as at the end: a list cut short must not pass for whole.
    if (in.bad()) throw IoError(opt.input_list + ": read error in the input list", errno);
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
  if (!opt.desi_root.empty()) {
    if (opt.survey.empty() || opt.program.empty())
      throw ConfigError("--desi-root needs --survey and --program (e.g. --survey main --program dark)");
    const fs::path base = fs::path(opt.desi_root) / "healpix" / opt.survey / opt.program;
    const std::string name0 = "coadd-" + opt.survey + "-" + opt.program + "-";
    std::vector<std::pair<int64_t, std::string>> found;
    if (!opt.healpix.empty()) {
      for (int64_t pix : opt.healpix)
        found.emplace_back(pix, (base / std::to_string(pix / 100) / std::to_string(pix) /
                                 (name0 + std::to_string(pix) + ".fits"))
                                    .string());
    } else {
      std::error_code ec;
      if (!fs::is_directory(base, ec))
        throw ConfigError(base.string() + ": no such folder (check --desi-root, --survey, --program)");
      for (fs::directory_iterator g(base, ec), end; !ec && g != end; g.increment(ec)) {
        if (!g->is_directory()) continue;
        std::error_code ec2;
        for (fs::directory_iterator p(g->path(), ec2); !ec2 && p != end; p.increment(ec2)) {
          const std::string pix = p->path().filename().string();
          const fs::path f = p->path() / (name0 + pix + ".fits");
          if (p->is_directory() && fs::is_regular_file(f, ec2))
            found.emplace_back(std::strtoll(pix.c_str(), nullptr, 10), f.string());
        }
      }
      if (ec) throw ConfigError(base.string() + ": cannot list: " + ec.message());
    }
    std::sort(found.begin(), found.end());
    for (auto& f : found) files.push_back(std::move(f.second));
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

FitEngine::FitEngine(const FitOptions& opt, int threads, std::shared_ptr<const TemplateLibrary> lib)
    : cfg_(opt.config.empty() ? FitConfig{} : load_fit_config(opt.config)),
      fmt_(parse_format(opt.format)),
      lib_(lib ? std::move(lib)
               : std::make_shared<const TemplateLibrary>(TemplateLibrary::load(opt.templates))),
      cache_(std::make_unique<ArmModelCache>(*lib_)),
      outputs_(std::make_unique<FitOutputs>(opt, opt.config, opt)),
      threads_(threads > 0 ? threads : default_thread_count()),
      pool_(std::make_unique<ThreadPool>(threads_)) {
  if (opt.resolution_matrix >= 0) cfg_.resolution_matrix = opt.resolution_matrix != 0;
  cpu_batch_ = static_cast<size_t>(std::max(0, opt.cpu_batch));
  read_block_ = static_cast<size_t>(std::max(0, opt.read_block_fibres));
  epochs_ = opt.epochs;
  group_by_ = opt.group_by;
  const kern::PipelineConfig pc = pipeline_config(cfg_, *lib_);
  cpu_ = std::make_unique<CpuBackend>(*lib_, pc, *pool_);
  // Backend choice (docs/gpu.md): gpu demands a device, auto takes one when present.
  if (opt.device != "auto" && opt.device != "cpu" && opt.device != "gpu")
    throw ConfigError("--device " + opt.device + ": expected auto, cpu or gpu");
  if (opt.device != "cpu") {
    const GpuInfo g = query_gpus();
    if (g.device_count > 0) {
      const int dev = opt.gpu_device % g.device_count;
      // Chunks gather gpu_min_batch spectra; with --device gpu a smaller (last) one goes to the
      // GPU as well, with auto it runs on the CPU.
      gpu_chunk_ = static_cast<size_t>(std::max(1, opt.gpu_min_batch));
      const size_t min_batch = opt.device == "gpu" ? 1 : gpu_chunk_;
      gpu_ = make_cuda_backend(*lib_, pc, dev, min_batch, pool_.get());
      spdlog::info("device {}: CUDA device {} of {}: {} (chunks of >= {} spectra{})", opt.device,
                   dev, g.device_count, gpu_->name(), gpu_chunk_,
                   min_batch > 1 ? "; smaller ones on the CPU" : "");
    } else if (opt.device == "gpu") {
      throw ConfigError("--device gpu: no usable GPU: " + g.message);
    } else {
      // One neutral line; why there is no device (driver versions, error codes) is debug detail.
      spdlog::info("{}: CPU backend, {} threads",
                   g.compiled ? "no CUDA device" : "built without CUDA", threads_);
      spdlog::debug("GPU query: {}", g.message);
    }
  }
}

std::vector<PreparedSpectrum> FitEngine::prepare(const std::vector<FitJob>& jobs,
                                                 const std::function<void(size_t)>& prepared) {
  std::vector<PreparedSpectrum> prep(jobs.size());
  pool_->for_each(jobs.size(), [&](size_t i, int) {
    const FitJob& j = jobs[i];
    prep[i] = j.arms ? prepare_spectrum(*j.spectrum, *j.arms, *j.ctx)
                     : prepare_spectrum(*j.spectrum, *j.ctx);
    if (prepared) prepared(i);
  });
  return prep;
}

Backend& FitEngine::route(const BatchRequest& r) {
  if (!gpu_) return *cpu_;
  const std::string why = gpu_->unsupported(r);
  if (why.empty()) return *gpu_;
  if (routing_logged_.insert(why).second)
    spdlog::info("{}: batch runs on the CPU backend: {} (logged once)", gpu_->name(), why);
  return *cpu_;
}

EngineBatch FitEngine::submit(std::vector<FitJob> jobs, bool want_models,
                              const std::function<void(size_t)>& on_fitted,
                              const std::function<void(size_t)>& prepared) {
  const auto t0 = std::chrono::steady_clock::now();
  EngineBatch b;
  b.jobs = std::move(jobs);
  b.want_models = want_models;
  b.prep = prepare(b.jobs, prepared);
  std::vector<const Packed*> ready;
  std::vector<size_t> job_of;  // per ready spectrum: its job
  BatchRequest req;
  req.models = want_models;
  for (size_t i = 0; i < b.prep.size(); ++i) {
    const auto& p = b.prep[i];
    b.fitted.push_back(p.ready ? ready.size() : EngineBatch::npos);
    if (!p.ready) continue;
    ready.push_back(&p.packed);
    job_of.push_back(i);
    for (const auto& f : p.packed.full_lnlam) req.matrices = req.matrices || !f.empty();
  }
  req.n_spectra = ready.size();
  if (!ready.empty()) {
    b.backend = &route(req);
    // Once the backend has copied a spectrum into its batch, finish_row reads its flux and arm
    // slots alone: the rest goes at once, so that a batch is not held twice while it is packed
    // nor at all while it is on the device (docs/gpu.md "Host memory of a GPU rank"). The
    // diagnostics (want_models) read every array.
    // Freed arrays stay in glibc's arenas (about as large as the copy being built) unless they
    // are trimmed; every 256 spectra (about 100 MB of DESI spectra) they are given back.
    std::function<void(size_t)> packed;
    if (!want_models)
      packed = [&b, &job_of](size_t k) {
        b.prep[job_of[k]].packed.release_fit_arrays();
        if (k % 256 == 255) malloc_trim(0);
      };
    b.backend->submit(std::move(ready), want_models, on_fitted, packed);
    // The batch's input pixels and prepared arrays are freed, and the packed copy went up
    // (GPU) or was fitted (CPU): the rest of the free pages go back too.
    malloc_trim(0);
  }
  b.seconds = seconds_since(t0);
  seconds_fit_ += b.seconds;
  return b;
}

void FitEngine::finish(EngineBatch& b, std::vector<FitDiagnostics>* diags) {
  const auto t0 = std::chrono::steady_clock::now();
  if (b.backend) b.out = b.backend->collect();
  if (diags) diags->assign(b.want_models ? b.prep.size() : 0, {});
  pool_->for_each(b.prep.size(), [&](size_t i, int) {
    PreparedSpectrum& p = b.prep[i];
    const size_t k = b.fitted[i];
    if (k != EngineBatch::npos) {
      if (diags && b.want_models)
        diagnostics_of(p, *b.jobs[i].spectrum, b.jobs[i].arms, b.out.ivar[k], b.out.models[k],
                       &(*diags)[i]);
      finish_row(p, b.out.results[k], b.out.ivar[k], *b.jobs[i].ctx);
    }
    if (diags && b.want_models) (*diags)[i].messages = p.notes;
  });
  const double dt = seconds_since(t0);
  b.seconds += dt;
  seconds_fit_ += dt;
}

Provenance FitEngine::provenance(const EngineOptions& opt, const SelectOptions& sel,
                                 const JobOptions& job) const {
  Provenance prov;
  prov["velox_version"] = version();
  prov["git_commit"] = git_commit();
  prov["command_line"] = job.command_line;
  prov["config_yaml"] = dump_fit_config(cfg_);
  prov["fit_config_hash"] = fit_config_hash(cfg_, sel);  // resume/merge identity
  prov["config_path"] = opt.config;
  prov["templates_path"] = opt.templates;
  prov["templates_velox_version"] =
      lib_->attrs.count("velox_version") ? lib_->attrs.at("velox_version") : "";
  prov["templates_checksum"] = lib_->checksum;
  std::string labels;
  for (size_t i = 0; i < lib_->label_names.size(); ++i)
    labels += (i ? "," : "") + lib_->label_names[i];
  prov["templates_labels"] = labels;
  // A joined library's sources and what each served (docs/templates.md): templates_join.*
  for (const auto& [k, v] : lib_->attrs)
    if (k.rfind("join.", 0) == 0) prov["templates_" + k] = v;
  prov["templates_source"] = lib_->attrs.count("source") ? lib_->attrs.at("source") : "";
  prov["created_utc"] = utc_now();
  prov["hostname"] = hostname();
  prov["n_threads"] = std::to_string(threads_);
  return prov;
}

FitRunResult run_fit(const FitOptions& opt, std::shared_ptr<const TemplateLibrary> lib) {
  auto files = collect_inputs(opt);
  if (groups_files(opt)) files = group_inputs(files, opt.group_by);
  if (files.empty()) throw ConfigError("no input files (give FILES, --input-list or --input-dir)");
  FitEngine engine(opt, opt.threads, std::move(lib));
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
        res.files_failed += !r.ok || !r.error.empty();  // a group's unreadable member too
        if (!r.error.empty()) res.file_errors.push_back(r.error);
        res.n_spectra += r.n_fitted;  // not unreadable files, not unselected fibres
        for (auto& row : r.rows) res.rows.push_back(std::move(row));
      },
      chunk_min_spectra(engine.threads()));  // as the job (job_plan.hpp)
  res.seconds_fit = engine.seconds_fitting();
  return res;
}

}  // namespace velox
