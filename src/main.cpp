// velox: radial velocities and stellar parameters for survey spectra.
// Subcommands: templates build | templates validate | fit | info | bench. Exit codes:
// common/error.hpp and docs/user-guide.md. This file sits outside src/app/ because it joins the
// job logic (src/app/) to the MPI message loop (mpi/driver.hpp); src/app/ never includes mpi/.
#include <csignal>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <sstream>

#include "app/bench.hpp"
#include "app/cmd_validate.hpp"
#include "app/fit_run.hpp"
#include "app/job_plan.hpp"
#include "app/output_checks.hpp"
#include "app/templates_build.hpp"
#include "backend/cpu/isa.hpp"
#include "common/error.hpp"
#include "common/version.hpp"
#include "emulator/build.hpp"
#include "fit/classify.hpp"
#include "io/info.hpp"
#include "io/readers.hpp"
#include "io/redrock.hpp"
#include "mpi/driver.hpp"
#include "mpi/simulate.hpp"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

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
  c->add_flag("--epochs", o.epochs,
              "Fit every exposure; the spectra of one star (--group-by) share one set of labels "
              "with one VRAD per epoch (/epochs), and the catalog gets N_EPOCHS, "
              "VRAD_CHISQ_CONST, VRAD_LOGP_CONST, VRAD_MAXDIFF_SIG and FIT_INFO RV_VARIABLE "
              "(docs/epochs.md)");
  c->add_option("--group-by", o.group_by,
                "--epochs: the key that joins spectra into stars: TARGETID, or a header key the "
                "reader keeps (OBJNAME for LAMOST reobservations in separate files)")
      ->capture_default_str();
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

}  // namespace

// glibc's malloc returns the free top of its heaps to the kernel once it exceeds 128 kB (and
// moves that bound with its mmap threshold), so each DESI coadd's spectra, freed after their fit,
// were faulted in again, page by page and zeroed, by the next file's read: a third of the read
// time (perf: page faults, clear_page). Keeping up to 64 MB free per heap (and serving requests
// up to 32 MB from the heaps) made one thread read the DESI-layout coadd 1.3-1.5x as fast; peak
// RSS rose by 3-5 MB (kept memory is reused before a heap grows; docs/running.md). A user's own
// MALLOC_TRIM_THRESHOLD_ / MALLOC_MMAP_THRESHOLD_ or GLIBC_TUNABLES malloc settings are left as
// they are.
static void tune_allocator() {
#if defined(__GLIBC__)
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  if (std::getenv("MALLOC_TRIM_THRESHOLD_") || std::getenv("MALLOC_MMAP_THRESHOLD_") ||
      (tunables && std::strstr(tunables, "glibc.malloc.")))
    return;
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 64 << 20);
#endif
}

int main(int argc, char** argv) {
  tune_allocator();
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
  bool t_no_classes = false;
  build
      ->add_flag("--no-classes", t_no_classes,
                 "--preset: store no classification templates (by default a preset stores "
                 "templates/redrock and templates/redrock_galaxy of its data directory; "
                 "--classes replaces them)")
      ->excludes("--classes")
      ->needs("--preset");
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
  auto* info = app.add_subcommand(
      "info", "Summarise a catalog or a template library (or a FITS file's headers)");
  info->add_option("file", info_file, "velox HDF5 file, or a FITS file")->required();

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

  // A file-size limit (ulimit -f, as batch systems set) must fail a write with EFBIG, which the
  // job handles (app/output_faults.hpp), not kill the process with SIGXFSZ.
  std::signal(SIGXFSZ, SIG_IGN);
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
      // The classification templates are read before the training, so that a bad folder fails
      // the build at once; a preset's default folders are those holding templates.
      if (t_classes.empty() && !t_no_classes) t_classes = preset_class_dirs(t_in);
      std::vector<ClassTemplate> classes;
      for (const auto& dir : t_classes) {
        auto more = read_redrock_templates(dir, kClassBinDlnlam);
        spdlog::info("templates: {} classification templates from {}", more.size(), dir);
        classes.insert(classes.end(), std::make_move_iterator(more.begin()),
                       std::make_move_iterator(more.end()));
      }
      auto lib = build_library(set, bc);
      for (const auto& [k, v] : src_attrs) lib.attrs[k] = v;
      lib.classes.insert(lib.classes.end(), std::make_move_iterator(classes.begin()),
                         std::make_move_iterator(classes.end()));
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
