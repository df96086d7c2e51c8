#include "app/templates_build.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "app/fit_outputs.hpp"
#include "common/error.hpp"
#include "io/redrock.hpp"

#ifndef VELOX_SCRIPTS_DIR
#define VELOX_SCRIPTS_DIR "scripts"
#endif

namespace velox {
namespace fs = std::filesystem;

namespace {

std::string env_or(const char* name, const std::string& dflt) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : dflt;
}

// The folder of velox's user scripts: $VELOX_SCRIPTS_DIR; else share/velox/scripts beside the
// running command (`cmake --install` puts both under one prefix, `pip install .` under the
// environment); else the source tree the command was built from.
std::string scripts_dir() {
  if (const std::string env = env_or("VELOX_SCRIPTS_DIR", ""); !env.empty()) return env;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const fs::path installed = exe.parent_path().parent_path() / "share" / "velox" / "scripts";
    if (fs::is_regular_file(installed / "cannon-to-h5.py", ec)) return installed.string();
  }
  return VELOX_SCRIPTS_DIR;
}

// A temporary folder removed when it goes out of scope.
struct TempDir {
  fs::path path;
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "velox-cannon-XXXXXX").string();
    if (!mkdtemp(tmpl.data()))
      throw IoError("cannot create a temporary folder in " + fs::temp_directory_path().string());
    path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

// Runs argv (no shell); throws IoError with `what` if it does not exit 0.
void run_checked(const std::vector<std::string>& argv, const std::string& what) {
  std::vector<char*> a;  // built before fork: the child only calls exec
  for (const auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
  a.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) throw IoError(what + ": fork failed");
  if (pid == 0) {
    execvp(a[0], a.data());
    _exit(127);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) throw IoError(what + ": waitpid failed: " + std::strerror(errno));
  if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
    throw IoError(what + ": cannot execute " + argv[0] + " (set VELOX_PYTHON)");
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw IoError(fmt::format("{}: `{}` failed (exit {})", what, fmt::join(argv, " "),
                              WIFEXITED(status) ? WEXITSTATUS(status) : -1));
}

}  // namespace

BuildConfig template_build_config(const TemplateInputOptions& opt, const std::string& config) {
  BuildConfig bc;
  if (!opt.preset.empty()) {
    bc.teff_min = 2300.0;
    bc.teff_max = 31000.0;
  }
  // The file may serve `velox fit` too: its fit: and select: sections are checked here as there,
  // so that a typo fails the build rather than the fit that reads them later.
  check_fit_config(config);
  return config.empty() ? bc : load_build_config(config, bc);
}

namespace {
std::string preset_data_dir(const TemplateInputOptions& opt) {
  return opt.data_dir.empty() ? env_or("VELOX_DATA_DIR", "../shared/data") : opt.data_dir;
}
}  // namespace

std::vector<std::string> preset_class_dirs(const TemplateInputOptions& opt) {
  std::vector<std::string> dirs;
  if (opt.preset.empty()) return dirs;
  const std::string data_dir = preset_data_dir(opt);
  for (const char* sub : {"/templates/redrock", "/templates/redrock_galaxy"}) {
    const std::string dir = data_dir + sub;
    if (!redrock_template_files(dir).empty())  // what read_redrock_templates reads
      dirs.push_back(dir);
    else
      spdlog::warn("templates --preset: no rrtemplate-*.fits in {}: the library has no {} classes",
                   dir,
                   sub == std::string("/templates/redrock") ? "star, WD, CV or QSO" : "GALAXY");
  }
  return dirs;
}

TemplateSet template_training_set(const TemplateInputOptions& opt, const BuildConfig& bc,
                                  std::map<std::string, std::string>* attrs) {
  if (opt.preset.empty()) {
    if (opt.input.empty()) throw ConfigError("templates: give --input DIR or --preset NAME");
    auto set = read_templates(opt.input, opt.teff_table);  // logs what it skipped
    if (attrs) (*attrs)["source"] = opt.input;
    return set;
  }
  if (!opt.input.empty()) throw ConfigError("templates: --input and --preset exclude each other");
  const std::string data_dir = preset_data_dir(opt);
  if (!fs::is_directory(data_dir + "/templates"))
    throw ConfigError("templates --preset: no templates/ folder in the data directory " + data_dir +
                      " (set VELOX_DATA_DIR or --data-dir)");
  std::unique_ptr<TempDir> tmp;
  std::string cannon_dir = opt.cannon_dir;
  if (cannon_dir.empty()) {
    tmp = std::make_unique<TempDir>();
    cannon_dir = tmp->path.string();
    const std::string py = env_or("VELOX_PYTHON", "/usr/bin/python3");
    const std::string script = scripts_dir() + "/cannon-to-h5.py";
    for (const char* m : {"coolstars", "hotdwarfs"}) {
      const std::string pkl = fmt::format(
          "{}/templates/doppler_cannon/cannongrid_3000_18000_{}_norm_cubic_model.pkl", data_dir, m);
      run_checked({py, script, pkl, fmt::format("{}/{}.h5", cannon_dir, m)},
                  "templates: converting the Cannon model " + pkl);
    }
  }
  JoinConfig jc = preset_join(opt.preset, data_dir, cannon_dir);
  if (!opt.teff_table.empty())
    for (auto& s : jc.sources) s.teff_table = opt.teff_table;
  jc.grid = bc.join_grid;
  jc.dlnlam = bc.dlnlam;
  if (!bc.join_sources.empty()) {
    std::vector<JoinSource> keep;
    for (const auto& name : bc.join_sources) {
      const auto it = std::find_if(jc.sources.begin(), jc.sources.end(),
                                   [&](const JoinSource& s) { return s.name == name; });
      if (it == jc.sources.end())
        throw ConfigError("templates.join_sources: the preset " + opt.preset + " has no source '" +
                          name + "'");
      keep.push_back(*it);
    }
    jc.sources = keep;
  }
  if (bc.join_wave_min_A > 0) jc.wave_min_A = bc.join_wave_min_A;
  if (bc.join_wave_max_A > 0) jc.wave_max_A = bc.join_wave_max_A;
  JoinReport rep;
  auto set = join_sources(jc, &rep);
  for (const auto& d : rep.dropped) spdlog::debug("join: dropped {}", d);
  if (attrs) {
    for (const auto& [k, v] : rep.attrs) (*attrs)[k] = v;
    (*attrs)["join.preset"] = opt.preset;
    (*attrs)["source"] = "preset " + opt.preset + " from " + data_dir;
  }
  return set;
}

}  // namespace velox
