// velox: radial velocities and stellar parameters for survey spectra.
// Subcommands: templates build | fit | info | bench. Exit codes: common/error.hpp and
// docs/user-guide.md.
#include <spdlog/spdlog.h>
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>

#include "app/fit_run.hpp"
#include "common/error.hpp"
#include "common/version.hpp"
#include "emulator/build.hpp"
#include "io/info.hpp"
#include "io/readers.hpp"
#include "mpi/driver.hpp"

using namespace velox;

namespace {

std::string join_argv(int argc, char** argv) {
  std::string s;
  for (int i = 0; i < argc; ++i) s += (i ? " " : "") + std::string(argv[i]);
  return s;
}

void add_fit_options(CLI::App* c, FitOptions& o) {
  c->add_option("--templates", o.templates, "Template library (HDF5, from `velox templates build`)");
  c->add_option("--threads", o.threads, "CPU threads per rank (default: cores given to the rank)");
  c->add_option("--config", o.config, "YAML configuration file (section fit:)");
  c->add_option("--format", o.format, "Input format: auto|lamost-dr8|lamost-dr10|sdss|desi");
  c->add_option("--input-list", o.input_list, "File with one input path per line");
  c->add_option("--input-dir", o.input_dir, "Directory of inputs (matched with --glob)");
  c->add_option("--glob", o.glob, "Pattern for file names in --input-dir")
      ->capture_default_str();
  c->add_option("inputs", o.inputs, "Input spectrum files (FITS)");
}

int cmd_bench(const FitOptions& base, int repeat) {
  std::vector<double> rates;
  size_t n = 0;
  for (int r = 0; r < repeat; ++r) {
    FitOptions o = base;
    o.quiet = true;
    const auto res = run_fit(o);
    n = res.n_spectra;
    rates.push_back(res.n_spectra / res.seconds_fit);
    spdlog::info("bench run {}: {} spectra in {:.3f} s = {:.2f} spectra/s", r + 1, res.n_spectra,
                 res.seconds_fit, rates.back());
  }
  auto sorted = rates;
  std::sort(sorted.begin(), sorted.end());
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  const int threads = base.threads > 0 ? base.threads : 0;
  fmt::print("velox bench: {} spectra, {} threads, {} runs: median {:.2f} spectra/s "
             "(min {:.2f}, max {:.2f}); {:.2f} spectra/s per thread; peak RSS {:.0f} MB\n",
             n, threads ? std::to_string(threads) : "all", repeat, sorted[sorted.size() / 2],
             sorted.front(), sorted.back(),
             sorted[sorted.size() / 2] / std::max(1, threads ? threads : 1), ru.ru_maxrss / 1024.0);
  return kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"velox: radial velocities and stellar parameters for survey spectra"};
  app.set_version_flag("--version", std::string(version()) + " (" + git_commit() + ")");
  app.require_subcommand(1);
  std::string log_level = "info";
  app.add_option("--log-level", log_level, "trace|debug|info|warn|error");

  auto* tmpl = app.add_subcommand("templates", "Template library tools");
  tmpl->require_subcommand(1);
  auto* build = tmpl->add_subcommand("build", "Build an emulator library from labelled templates");
  std::string t_input, t_output, t_config;
  build->add_option("--input", t_input, "Template directory (MILES or PHOENIX layout)")->required();
  build->add_option("--output", t_output, "Output library (HDF5)")->required();
  build->add_option("--config", t_config, "YAML configuration file (section templates:)");

  FitOptions fit_opt;
  auto* fit = app.add_subcommand("fit", "Fit spectra and write an HDF5 catalog");
  add_fit_options(fit, fit_opt);
  fit->add_option("--output", fit_opt.output, "One merged output catalog (HDF5)");
  fit->add_option("--output-dir", fit_opt.output_dir,
                  "One catalog per input, DIR/<stem>.velox.h5, plus DIR/status.tsv; reruns skip "
                  "inputs whose catalog exists");
  fit->add_option("--merge", fit_opt.merge,
                  "With --output-dir: also write one merged catalog (alone: merge the dir)");
  fit->add_flag("--overwrite", fit_opt.overwrite, "Refit inputs whose catalog exists");
  fit->add_option("--log-dir", fit_opt.log_dir, "Write DIR/rank-<N>.log for every MPI rank");
  fit->add_option("--progress-interval", fit_opt.progress_interval_s,
                  "Seconds between progress lines")
      ->capture_default_str();

  std::string info_file;
  auto* info = app.add_subcommand("info", "Summarise a catalog or a template library");
  info->add_option("file", info_file, "velox HDF5 file")->required();

  FitOptions bench_opt;
  int repeat = 5;
  auto* bench = app.add_subcommand("bench", "Throughput benchmark of the fit (no output)");
  add_fit_options(bench, bench_opt);
  bench->add_option("--repeat", repeat, "Number of timed runs (median reported)");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? kExitOk : kExitUsage;
  }
  spdlog::set_level(spdlog::level::from_str(log_level));
  const std::string cmdline = join_argv(argc, argv);
  try {
    if (build->parsed()) {
      const BuildConfig bc = t_config.empty() ? BuildConfig{} : load_build_config(t_config);
      auto set = read_templates(t_input);
      for (const auto& s : set.skipped) spdlog::debug("templates: skipped {}", s);
      if (!set.skipped.empty()) spdlog::info("templates: {} templates skipped (missing labels or unreadable)", set.skipped.size());
      auto lib = build_library(set, bc);
      lib.attrs["source"] = t_input;
      lib.attrs["build.command_line"] = cmdline;
      lib.save(t_output);
      spdlog::info("templates: wrote {}", t_output);
      return kExitOk;
    }
    if (fit->parsed()) {
      fit_opt.command_line = cmdline;
      mpi::validate_job_options(fit_opt);
      mpi::Comm comm(&argc, &argv);  // MPI only when started by mpirun/srun
      return mpi::run_fit_job(fit_opt, comm);
    }
    if (info->parsed()) {
      fmt::print("{}", describe_file(info_file));
      return kExitOk;
    }
    if (bench->parsed()) {
      bench_opt.command_line = cmdline;
      if (bench_opt.templates.empty()) throw ConfigError("--templates is required");
      return cmd_bench(bench_opt, std::max(1, repeat));
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
