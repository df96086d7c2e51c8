// velox: radial velocities and stellar parameters for survey spectra.
// Subcommands: templates build | templates validate | fit | info | bench. Exit codes:
// common/error.hpp and docs/user-guide.md. This file sits outside src/app/ because it joins the
// job logic (src/app/) to the MPI message loop (mpi/driver.hpp); src/app/ never includes mpi/.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <set>
#include <sstream>

#include "app/cmd_validate.hpp"
#include "app/fit_run.hpp"
#include "app/job_plan.hpp"
#include "app/output_checks.hpp"
#include "app/templates_build.hpp"
#include "backend/cpu/flop_count.hpp"
#include "backend/cpu/isa.hpp"
#include "common/error.hpp"
#include "common/version.hpp"
#include "emulator/build.hpp"
#include "fit/classify.hpp"
#include "io/redrock.hpp"
#include "io/info.hpp"
#include "io/readers.hpp"
#include "mpi/driver.hpp"
#include "mpi/simulate.hpp"

using namespace velox;

namespace {

// A lower bound for a numeric option, with a plain error ("--threads: must be a number >= 0,
// not -3") and no tag in --help (whose text says the range).
template <class T>
CLI::Validator at_least(T min) {
  return CLI::Validator(
      [min](std::string& s) -> std::string {
        T v{};
        if (CLI::detail::lexical_cast(s, v) && v >= min) return "";
        return "must be a number >= " + CLI::detail::to_string(min) + ", not " + s;
      },
      "");
}

// The command line for provenance, with the input files named on it (often a long shell glob)
// replaced by their count: the list itself is stored as the dataset /provenance/inputs.
std::string command_line(int argc, char** argv, const std::vector<std::string>& inputs) {
  std::multiset<std::string> positional(inputs.begin(), inputs.end());
  std::string s;
  size_t n_dropped = 0;
  for (int i = 0; i < argc; ++i) {
    const auto it = positional.find(argv[i]);
    if (i > 0 && it != positional.end()) {
      positional.erase(it);
      if (n_dropped++ == 0) s += " <" + std::to_string(inputs.size()) + " input files>";
      continue;
    }
    s += (i ? " " : "") + std::string(argv[i]);
  }
  return s;
}

// Options common to `fit` and `bench`: the library, the inputs and how they are fitted.
void add_input_options(CLI::App* c, FitOptions& o) {
  c->add_option("--templates", o.templates,
                "Template library (HDF5, from `velox templates build`)");
  c->add_option("--threads", o.threads, "CPU threads per rank; 0 = the cores given to the rank")
      ->check(at_least(0))
      ->capture_default_str();
  c->add_option("--config", o.config, "YAML configuration file (sections fit: and select:)");
  c->add_option("--format", o.format, "Input format")
      ->check(CLI::IsMember({"auto", "lamost-dr8", "lamost-dr10", "sdss", "desi"}))
      ->capture_default_str();
  c->add_option("--input-list", o.input_list, "File with one input path per line");
  c->add_option("--input-dir", o.input_dir, "Directory of inputs (matched with --glob)");
  c->add_option("--glob", o.glob, "Pattern for file names in --input-dir")->capture_default_str();
  c->add_option("inputs", o.inputs, "Input spectrum files (FITS)");
  c->add_option("--desi-root", o.desi_root,
                "DESI: the spectro production folder holding healpix/SURVEY/PROGRAM/PIXGROUP/"
                "PIXNUM/coadd-*.fits (with --survey, --program, and --healpix or every pixel)");
  c->add_option("--survey", o.survey, "DESI survey for --desi-root (main, sv1, sv3, ...)");
  c->add_option("--program", o.program, "DESI program for --desi-root (dark, bright, ...)");
  c->add_option("--healpix", o.healpix, "DESI healpix pixels (NSIDE 64, nested) for --desi-root")
      ->allow_extra_args(false)
      ->delimiter(',');
  auto* rm = c->add_flag_callback(
      "--resolution-matrix", [&o] { o.resolution_matrix = 1; },
      "DESI: forward-model with each fibre's resolution matrix (default, unless the config "
      "says fit.resolution_matrix: false)");
  auto* no_rm = c->add_flag_callback(
      "--no-resolution-matrix", [&o] { o.resolution_matrix = 0; },
      "DESI: forward-model with one Gaussian LSF per arm instead");
  rm->excludes(no_rm);
  c->add_option("--read-block-fibres", o.read_block_fibres,
                "Read and fit a large DESI coadd N fibres at a time (bounded memory); 0 = whole "
                "files")
      ->check(at_least(0))
      ->capture_default_str();
  // Tests only (hidden): the GPU's batched path of the fit stream on the CPU backend.
  c->add_option("--cpu-batch", o.cpu_batch, "")->check(at_least(0))->group("");
  c->add_option("--device", o.device,
                "auto|cpu|gpu: auto uses a CUDA device when one exists (bench: a list, cpu,gpu)")
      ->capture_default_str();
}

// Options of `fit` only: DESI target selection and the outputs.
void add_fit_options(CLI::App* c, FitOptions& o) {
  add_input_options(c, o);
  // DESI production mode: target selection and outputs (docs/desi.md).
  c->add_option("--objtypes", o.objtypes, "Fit only targets with one of these DESI target bits "
                "(names, globs, COLUMN:BIT; comma-separated)")
      ->allow_extra_args(false)
      ->delimiter(',');
  c->add_option("--targetid", o.targetids, "Fit only these TARGETIDs (comma-separated)")
      ->allow_extra_args(false)
      ->delimiter(',');
  c->add_option("--targetid-file", o.targetid_file, "Fit only the TARGETIDs listed in FILE");
  c->add_option("--min-sn", o.min_sn, "Fit only targets with median S/N per pixel above this");
  c->add_flag("--include-unselected", o.include_unselected,
              "Rows (RVS_WARN NOT_FITTED) for fibres that are not selected");
  c->add_option("--redrock", o.redrock,
                "DESI: auto (the redrock-*.fits beside each coadd) or FILE: fit only redrock "
                "stars (SPECTYPE STAR or |Z| < 0.005; with --objtypes, either selects), and "
                "fill RR_Z, RR_SPECTYPE");
  c->add_flag("--save-models", o.save_models, "Store best-fit models in /models/<arm>");
  c->add_option("--output-format", o.output_format,
                "h5, or fits: also an rvspecfit-layout table NAME.fits beside the catalog "
                "NAME.h5")
      ->check(CLI::IsMember({"h5", "fits"}))
      ->capture_default_str();
}

// `--isa LEVEL` of fit and bench (bench: a comma-separated list, run alternately).
void add_isa_option(CLI::App* c, std::string& isa, const char* what) {
  c->add_option("--isa", isa,
                std::string("CPU kernel instruction set, baseline|avx2|avx512 (default: the "
                            "environment variable VELOX_ISA, else the best this CPU has)") +
                    what);
}

// The levels named by --isa (comma-separated; ConfigError for an unknown or unsupported one),
// or the active level.
std::vector<CpuIsa> isa_list(const std::string& arg) {
  std::vector<CpuIsa> v;
  std::stringstream ss(arg);
  for (std::string name; std::getline(ss, name, ',');) {
    v.push_back(parse_isa(name));
    set_active_isa(v.back());  // checks that the CPU has it
  }
  if (v.empty()) v.push_back(active_isa());
  set_active_isa(v.front());
  return v;
}

// One device's benchmark, medians over `repeat` runs of three rates (spectra/s): host prepare
// (masking, packing), the backend alone (the kernels on the device, from prepared spectra in
// memory, replicated to `replicate` spectra; on the CPU once per instruction set of `isas`,
// alternated within each run), and end to end from the files (library load, reading, prepare,
// fit; no catalog written; the first instruction set).
// One host thread's time per input format: format_name -> (seconds, spectra).
using SecondsPerFormat = std::map<std::string, std::pair<double, size_t>>;

struct BenchResult {
  size_t n_files = 0, n_backend = 0;
  std::vector<double> prepare_rates, e2e_rates;
  std::map<CpuIsa, std::vector<double>> backend_rates;  // per instruction set
  // Work of one backend run (the same for every run and level up to rounding): evaluations by
  // kind (kern::PipelineResult::n_eval), LM iterations and the analytic FLOPs (flop_count.hpp).
  double n_eval[3] = {0, 0, 0}, n_lm_iter = 0, flops = 0;
  double n_pix = 0, flops_fixed = 0, flops_eval[3] = {0, 0, 0};  // sums of the FLOP model's terms
  size_t n_ok = 0;
  std::string backend_name;  // "cpu": rates per instruction set and the peak share
  // One host thread's prepare time per input format (after the runs, for the first device only).
  SecondsPerFormat prepare_1t;
};

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? NAN : v[v.size() / 2];
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

BenchResult bench_device(const FitOptions& base, const std::string& device, int repeat,
                         size_t replicate, const std::vector<SpectrumFile>& files,
                         const std::vector<CpuIsa>& isas, bool host_prepare) {
  BenchResult b;
  FitOptions o = base;
  o.quiet = true;
  o.device = device;
  FitEngine engine(o, o.threads);  // ConfigError: the device is unavailable
  if (device == "gpu" && !engine.gpu_backend()) throw ConfigError("no GPU backend");
  Backend& backend = engine.gpu_backend() ? *engine.gpu_backend() : engine.cpu_backend();
  b.backend_name = backend.name();
  std::vector<std::unique_ptr<FitContext>> ctxs;
  std::vector<FitJob> jobs;
  for (const auto& f : files) {
    ctxs.push_back(std::make_unique<FitContext>(engine.context(format_name(f.format))));
    for (const auto& s : f.spectra) jobs.push_back({&s, ctxs.back().get()});
  }
  for (int r = 0; r < repeat; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    const std::vector<PreparedSpectrum> prep = engine.prepare(jobs);
    b.prepare_rates.push_back(jobs.size() / seconds_since(t0));
    std::vector<const PreparedSpectrum*> unique, batch;
    for (const auto& p : prep)
      if (p.ready) unique.push_back(&p);
    if (unique.empty()) throw ConfigError("bench: no spectrum to fit in the inputs");
    const size_t n = replicate > 0 ? replicate : unique.size();
    for (size_t i = 0; i < n; ++i) batch.push_back(unique[i % unique.size()]);
    // On the GPU the instruction set does not matter: one backend run.
    const size_t n_isa = backend.name() == "cpu" ? isas.size() : 1;
    for (size_t k = 0; k < n_isa; ++k) {
      set_active_isa(isas[k]);
      t0 = std::chrono::steady_clock::now();
      const BatchOutput out = backend.run(batch);
      b.backend_rates[isas[k]].push_back(n / seconds_since(t0));
      if (r > 0 || k > 0) continue;
      const FitContext ctx = engine.context(format_name(files.front().format));
      const kern::PipelineConfig pc = pipeline_config(ctx.cfg, ctx.lib);
      for (size_t i = 0; i < out.results.size(); ++i) {
        const kern::PipelineResult& res = out.results[i];
        if (res.status != kern::kPipeOk) continue;
        ++b.n_ok;
        for (int e = 0; e < 3; ++e) b.n_eval[e] += res.n_eval[e];
        b.n_lm_iter += res.n_lm_iter;
        const FlopShape shape = flop_shape(*batch[i], pc, ctx.lib);
        b.flops += fit_flops(shape, res);
        b.n_pix += batch[i]->packed.flux.size();
        b.flops_fixed += fixed_flops(shape);
        const EvalKind kinds[3] = {EvalKind::kChi2, EvalKind::kJacobian, EvalKind::kVelocityOnly};
        for (int e = 0; e < 3; ++e) b.flops_eval[e] += eval_flops(shape, kinds[e]);
      }
    }
    set_active_isa(isas.front());
    b.n_backend = n;
    t0 = std::chrono::steady_clock::now();
    const auto res = run_fit(o);
    const double wall = seconds_since(t0);
    b.n_files = res.n_spectra;
    b.e2e_rates.push_back(res.n_spectra / wall);
    spdlog::info("bench {} run {}: prepare {:.1f}/s, {} on {} spectra {:.2f}/s ({}), end to end "
                 "{} spectra {:.2f}/s",
                 device, r + 1, b.prepare_rates.back(), backend.name(), n,
                 b.backend_rates[isas.front()].back(), isa_name(isas.front()), res.n_spectra,
                 b.e2e_rates.back());
  }
  // What one host thread prepares per second, per format, with the arm models already built by
  // the runs (the pool's rate is above); the host does not depend on the device.
  if (!host_prepare) return b;
  for (const FitJob& job : jobs) {
    auto& [sec, n] = b.prepare_1t[job.ctx->format];
    const auto t0 = std::chrono::steady_clock::now();
    (void)prepare_spectrum(*job.spectrum, *job.ctx);
    sec += seconds_since(t0);
    ++n;
  }
  return b;
}

// The work per spectrum and, on the CPU, the achieved GFLOP/s and share of the nominal peak of
// the cores used (flop_count.hpp) at instruction set `isa` and backend rate `rate` spectra/s.
void print_work(const std::string& dev, const BenchResult& b, CpuIsa isa, double rate,
                int threads, bool prefix) {
  if (b.n_ok == 0) return;
  const double per = 1.0 / b.n_ok, gflop = b.flops * per / 1e9, gflops = gflop * rate;
  if (prefix) fmt::print("velox bench [{}]: ", dev);
  fmt::print("per spectrum {:.1f} model evaluations ({:.1f} chi2-only, {:.1f} "
             "with the Jacobian, {:.1f} velocity-only), {:.1f} LM iterations, {:.3f} GFLOP "
             "(analytic); {:.2f} GFLOP/s",
             (b.n_eval[0] + b.n_eval[1] + b.n_eval[2]) * per, b.n_eval[0] * per,
             b.n_eval[1] * per, b.n_eval[2] * per, b.n_lm_iter * per, gflop, gflops);
  if (b.backend_name == "cpu") {
    const int cores = std::min(threads, default_thread_count());
    static const double ghz = core_ghz();
    const double peak = cores * ghz * flop_per_cycle(isa);
    if (peak > 0)
      fmt::print(" = {:.1f}% of the {} peak ({} core{} x {:.2f} GHz measured x {:.0f} "
                 "FLOP/cycle; /proc/cpuinfo: {:.2f} GHz)",
                 100.0 * gflops / peak, isa_name(isa), cores, cores > 1 ? "s" : "", ghz,
                 flop_per_cycle(isa), cpuinfo_ghz());
  }
  fmt::print("\n");
}

// What a GPU host needs (issue 26): per input format, one host thread's read and prepare rates
// and the host threads that reading plus preparing take to feed a device at `feed_rate`
// spectra/s (finishing rows and writing are not counted). Nothing without prepare times.
void print_host_feed(const SecondsPerFormat& reads, const BenchResult& b, double feed_rate) {
  for (const auto& [format, sp] : b.prepare_1t) {
    auto it = reads.find(format);
    if (it == reads.end() || sp.second == 0 || it->second.second == 0) continue;
    const double t_read = it->second.first / it->second.second, t_prep = sp.first / sp.second;
    fmt::print("velox bench [host]: {}: 1 thread reads {:.0f} spectra/s and prepares {:.0f} "
               "spectra/s; feeding {:.0f} spectra/s takes {:.1f} host threads (read {:.1f} + "
               "prepare {:.1f})\n",
               format, 1.0 / t_read, 1.0 / t_prep, feed_rate, feed_rate * (t_read + t_prep),
               feed_rate * t_read, feed_rate * t_prep);
  }
}

// `--device cpu,gpu` benchmarks each device in turn in the same run, with the GPU/CPU ratio of
// the backend rates when both ran; `--isa a,b` runs the CPU backend at each instruction set in
// turn within every run, with the rate ratios to the first.
int cmd_bench(const FitOptions& base, int repeat, size_t replicate,
              const std::vector<CpuIsa>& isas, double feed_rate) {
  std::vector<std::string> devices;
  std::stringstream ss(base.device);
  for (std::string d; std::getline(ss, d, ',');) devices.push_back(d);
  // Read every input once; the backend runs replicate these spectra in memory.
  std::vector<SpectrumFile> files;
  SecondsPerFormat reads;
  for (const auto& path : collect_inputs(base)) {
    const auto t0 = std::chrono::steady_clock::now();
    files.push_back(read_spectra(path, parse_format(base.format)));
    auto& [sec, n] = reads[format_name(files.back().format)];
    sec += seconds_since(t0);
    n += files.back().spectra.size();
  }
  const std::string threads = base.threads > 0 ? std::to_string(base.threads) : "all";
  std::map<std::string, double> backend_rate;
  for (const auto& dev : devices) {
    BenchResult b;
    try {
      // The host's prepare rate with the first device that runs (no backend rate yet).
      b = bench_device(base, dev, repeat, replicate, files, isas, backend_rate.empty());
    } catch (const ConfigError& e) {
      fmt::print("velox bench [{}]: unavailable: {}\n", dev, e.what());
      continue;
    }
    // The CPU's rates per instruction set in --isa order; the GPU has one entry.
    std::vector<CpuIsa> ran;
    for (CpuIsa isa : isas)
      if (b.backend_rates.count(isa)) ran.push_back(isa);
    const std::vector<double>& rates0 = b.backend_rates[ran.front()];
    const double fit_med = median_of(rates0);
    backend_rate[dev] = fit_med;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    const int n_threads = base.threads > 0 ? base.threads : default_thread_count();
    fmt::print("velox bench [{}]: {} threads, {} runs (medians): prepare {:.1f} spectra/s; "
               "backend {:.2f} spectra/s on {} spectra (min {:.2f}, max {:.2f}; {:.2f} per "
               "thread); end to end {:.2f} spectra/s on {} spectra from files; peak RSS {:.0f} MB",
               dev, threads, repeat, median_of(b.prepare_rates), fit_med, b.n_backend,
               *std::min_element(rates0.begin(), rates0.end()),
               *std::max_element(rates0.begin(), rates0.end()),
               fit_med / std::max(1, base.threads > 0 ? base.threads : 1),
               median_of(b.e2e_rates), b.n_files, ru.ru_maxrss / 1024.0);
    fmt::print(b.backend_name == "cpu" ? "; CPU kernel isa {}\n" : "\n", isa_name(ran.front()));
    for (size_t k = 1; k < ran.size(); ++k) {
      const std::vector<double>& r = b.backend_rates[ran[k]];
      fmt::print("velox bench [{}]: isa {}: backend {:.2f} spectra/s (min {:.2f}, max {:.2f}), "
                 "x{:.3f} the {} rate (medians of the alternated runs)\n",
                 dev, isa_name(ran[k]), median_of(r), *std::min_element(r.begin(), r.end()),
                 *std::max_element(r.begin(), r.end()), median_of(r) / fit_med,
                 isa_name(ran.front()));
    }
    if (b.n_ok > 0)
      fmt::print("velox bench [{}]: FLOP model (means over the spectra): {:.0f} pixels; one "
                 "evaluation {:.2f} MFLOP chi2-only, {:.2f} with the Jacobian, {:.2f} "
                 "velocity-only; CCF, chi2 grid and the other fixed stages {:.1f} MFLOP\n",
                 dev, b.n_pix / b.n_ok, b.flops_eval[0] / b.n_ok / 1e6,
                 b.flops_eval[1] / b.n_ok / 1e6, b.flops_eval[2] / b.n_ok / 1e6,
                 b.flops_fixed / b.n_ok / 1e6);
    for (CpuIsa isa : ran) {
      if (ran.size() > 1) fmt::print("velox bench [{}]: isa {}: ", dev, isa_name(isa));
      print_work(dev, b, isa, median_of(b.backend_rates[isa]), n_threads, ran.size() == 1);
    }
    print_host_feed(reads, b, feed_rate);
  }
  if (backend_rate.count("cpu") && backend_rate.count("gpu"))
    fmt::print("velox bench: GPU/CPU backend ratio x{:.2f}\n",
               backend_rate["gpu"] / backend_rate["cpu"]);
  return kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"velox: radial velocities and stellar parameters for survey spectra"};
  app.set_version_flag("--version", std::string(version()) + " (" + git_commit() +
                                        "); CPU kernel isa " + isa_summary());
  app.require_subcommand(1);
  std::string log_level = "info";
  app.add_option("--log-level", log_level, "Log level")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error"}))
      ->capture_default_str();

  auto* tmpl = app.add_subcommand("templates", "Template library tools");
  tmpl->require_subcommand(1);
  auto* build = tmpl->add_subcommand("build", "Build an emulator library from labelled templates");
  std::string t_output, t_config;
  std::vector<std::string> t_classes;
  TemplateInputOptions t_in;
  bool t_overwrite = false;
  auto add_template_inputs = [](CLI::App* c, TemplateInputOptions& o) {
    c->add_option("--input", o.input,
                  "Template directory (MILES, PHOENIX, STELIB or Kesseli M-dwarf layout)");
    c->add_option("--preset", o.preset,
                  "A survey's joined library (MILES + Kesseli M dwarfs + Cannon filler) from the "
                  "data directory (docs/templates.md)")
        ->check(CLI::IsMember({"lamost", "sdss", "desi"}));
    c->add_option("--data-dir", o.data_dir,
                  "Data directory of --preset (default: $VELOX_DATA_DIR, else ../shared/data)");
    c->add_option("--teff-table", o.teff_table,
                  "Kesseli templates: the dwarf Teff table (default: tables/ beside the data)");
    c->add_option("--cannon-dir", o.cannon_dir,
                  "--preset: folder of converted Cannon models (coolstars.h5, hotdwarfs.h5, "
                  "scripts/cannon-to-h5.py); default: converted on the fly");
  };
  add_template_inputs(build, t_in);
  build->add_option("--classes", t_classes,
                    "Directory of DESI redrock templates (rrtemplate-*.fits) stored in the library "
                    "to classify fits (star/WD/CV/QSO/GALAXY, docs/quality.md); repeat it for "
                    "several directories (e.g. templates/redrock and templates/redrock_galaxy)")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  build->add_option("--output", t_output, "Output library (HDF5)")->required();
  build->add_option("--config", t_config, "YAML configuration file (section templates:)");
  build->add_flag("--overwrite", t_overwrite,
                  "Replace --output even if it is not a velox template library");
  ValidateOptions val_opt;
  auto* val = tmpl->add_subcommand("validate", "Label recovery by k-fold cross-validation");
  add_template_inputs(val, val_opt.templates);
  val->add_option("--folds", val_opt.folds, "Number of folds")
      ->check(at_least(2))
      ->capture_default_str();
  val->add_option("--holdout", val_opt.holdout,
                  "Leave-one-out of the templates whose name starts with this (e.g. kesseli: "
                  "in a --preset library); --folds is then ignored");
  val->add_option("--seed", val_opt.seed, "Seed of the fold split and injected velocities")
      ->capture_default_str();
  val->add_option("--threads", val_opt.threads, "CPU threads; 0 = the cores available")
      ->check(at_least(0))
      ->capture_default_str();
  val->add_option("--config", val_opt.config, "YAML configuration file (templates: and fit:)");
  val->add_option("--output", val_opt.output, "Per-star table (CSV)");
  val->add_option("--summary", val_opt.summary, "Summary table (CSV)");

  FitOptions fit_opt;
  auto* fit = app.add_subcommand("fit", "Fit spectra and write an HDF5 catalog");
  add_fit_options(fit, fit_opt);
  std::string fit_isa, bench_isa;
  add_isa_option(fit, fit_isa, "");
  fit->add_option("--output", fit_opt.output, "One merged output catalog (HDF5)");
  fit->add_option("--output-dir", fit_opt.output_dir,
                  "One catalog per input, DIR/<stem>.velox.h5, plus DIR/status.tsv; reruns skip "
                  "inputs whose catalog exists");
  fit->add_option("--merge", fit_opt.merge,
                  "With --output-dir: also write one merged catalog (alone: merge the dir)");
  fit->add_flag("--overwrite", fit_opt.overwrite,
                "Replace an existing --output catalog (never replaced without it); refit "
                "inputs whose catalog exists; replace a --merge file that is not a velox "
                "catalog (inputs and the library are never overwritten)");
  fit->add_flag("--refit-changed", fit_opt.refit_changed,
                "With --output-dir: refit inputs whose per-input catalog was written with "
                "another template library or fit configuration (without it such a resume, or "
                "--merge of such catalogs, exits 2 naming both)");
  fit->add_option("--log-dir", fit_opt.log_dir, "Write DIR/rank-<N>.log for every MPI rank");
  fit->add_option("--batch-seconds", fit_opt.batch_seconds,
                 "MPI: seconds of work per batch of inputs handed to a rank (at its measured "
                 "rate; smaller near the end)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  fit->add_option("--progress-interval", fit_opt.progress_interval_s,
                  "Seconds between progress lines")
      ->check(at_least(0.0))
      ->capture_default_str();

  mpi::SimOptions sim_opt;
  auto* sim = app.add_subcommand(
      "simulate-coordinator",
      "Measure rank 0's hand-out with ranks that sleep instead of fitting (under mpirun)");
  sim->add_option("--inputs", sim_opt.n_inputs, "Inputs in the queue")->capture_default_str();
  sim->add_option("--spectra-per-input", sim_opt.spectra_per_input, "Spectra per input")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  sim->add_option("--rate", sim_opt.rate, "Spectra per second per rank; 0 = no sleep")
      ->check(at_least(0.0))
      ->capture_default_str();
  sim->add_option("--batch-seconds", sim_opt.batch_seconds, "As velox fit --batch-seconds")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  sim->add_option("--status-dir", sim_opt.status_dir, "Write DIR/status.tsv as a real job does");

  std::string info_file;
  auto* info = app.add_subcommand("info", "Summarise a catalog or a template library");
  info->add_option("file", info_file, "velox HDF5 file")->required();

  FitOptions bench_opt;
  int repeat = 5;
  size_t replicate = 0;
  double feed_rate = 10000.0;
  auto* bench = app.add_subcommand("bench", "Throughput benchmark of the fit (no output)");
  add_input_options(bench, bench_opt);
  add_isa_option(bench, bench_isa, "; a comma-separated list runs the backend at each level in "
                 "turn within every run (same inputs), with the rate ratios to the first");
  bench->add_option("--repeat", repeat, "Number of timed runs (median reported)")
      ->check(at_least(1))
      ->capture_default_str();
  bench
      ->add_option("--replicate", replicate,
                   "Backend rate on N spectra: the inputs' prepared spectra repeated in memory; "
                   "0 = the inputs once")
      ->capture_default_str();
  bench
      ->add_option("--feed-rate", feed_rate,
                   "Device rate [spectra/s] for the host-threads estimate (read + prepare)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? kExitOk : kExitUsage;
  }
  // Logs go to stderr, so stdout carries only results (`velox info`, `velox bench`).
  spdlog::set_default_logger(spdlog::stderr_color_mt("velox"));
  spdlog::set_level(spdlog::level::from_str(log_level));
  try {
    if (build->parsed()) {
      const std::string cmdline = command_line(argc, argv, {});
      check_output_file("--output", t_output, "template-library", t_overwrite);
      const BuildConfig bc = template_build_config(t_in, t_config);
      std::map<std::string, std::string> src_attrs;
      auto set = template_training_set(t_in, bc, &src_attrs);
      auto lib = build_library(set, bc);
      for (const auto& [k, v] : src_attrs) lib.attrs[k] = v;
      for (const auto& dir : t_classes) {
        auto more = read_redrock_templates(dir, kClassBinDlnlam);
        spdlog::info("templates: {} classification templates from {}", more.size(), dir);
        lib.classes.insert(lib.classes.end(), std::make_move_iterator(more.begin()),
                           std::make_move_iterator(more.end()));
      }
      lib.attrs["build.command_line"] = cmdline;
      lib.save(t_output);
      spdlog::info("templates: wrote {}", t_output);
      return kExitOk;
    }
    if (val->parsed()) {
      // CSV outputs: only the folder is checked (an existing table is replaced).
      check_output_file("--output", val_opt.output, "", true);
      check_output_file("--summary", val_opt.summary, "", true);
      return run_validate(val_opt);
    }
    if (fit->parsed()) {
      fit_opt.command_line = command_line(argc, argv, fit_opt.inputs);
      validate_job_options(fit_opt);
      if (!fit_isa.empty()) set_active_isa(parse_isa(fit_isa));
      spdlog::debug("CPU kernel instruction set: {}", isa_name(active_isa()));
      mpi::Comm comm(&argc, &argv);  // MPI only when started by mpirun/srun
      return mpi::run_fit_job(fit_opt, comm);
    }
    if (sim->parsed()) {
      mpi::Comm comm(&argc, &argv);
      return mpi::run_coordinator_sim(sim_opt, comm);
    }
    if (info->parsed()) {
      fmt::print("{}", describe_file(info_file));
      return kExitOk;
    }
    if (bench->parsed()) {
      bench_opt.command_line = command_line(argc, argv, bench_opt.inputs);
      if (bench_opt.templates.empty()) throw ConfigError("--templates is required");
      return cmd_bench(bench_opt, repeat, replicate, isa_list(bench_isa), feed_rate);
    }
  } catch (const ConfigError& e) {
    spdlog::error("{}", e.what());
    return kExitUsage;
  } catch (const std::exception& e) {
    spdlog::error("{}", e.what());
    return kExitFatal;
  }
  return kExitOk;
}
