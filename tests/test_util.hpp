// Helpers shared by the unit tests: paths of the shared real data and a scratch directory.
#pragma once
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

namespace velox::test {
inline std::string data_dir() {
  const char* env = std::getenv("VELOX_DATA_DIR");
  return env ? env : VELOX_TEST_DATA_DIR;
}
inline std::string data(const std::string& rel) { return data_dir() + "/" + rel; }
// A fresh scratch directory per test name and process. ctest runs test cases as separate
// processes in parallel; a directory shared between them let one process wipe a file another
// was reading (CI failure: the fuzz tests' small library read back empty). The process id keeps
// them apart; a directory is removed when its process exits normally, so a crashed test leaves
// its files for inspection.
inline std::string tmp_dir(const std::string& name) {
  struct Cleanup {
    std::vector<std::filesystem::path> dirs;
    ~Cleanup() {
      std::error_code ec;
      for (const auto& d : dirs) std::filesystem::remove_all(d, ec);
    }
  };
  static Cleanup cleanup;
  auto p = std::filesystem::path(VELOX_TEST_TMP_DIR) / (name + "." + std::to_string(::getpid()));
  std::filesystem::remove_all(p);
  std::filesystem::create_directories(p);
  cleanup.dirs.push_back(p);
  return p.string();
}

// The largest difference of a model against a reference, relative to the reference's scale:
// *dt_rel over T[n] (scale max |T_ref|), *ddt_rel over each column q of dT[n][np] (scale
// max |dT_ref[.][q]|, columns that are all zero skipped). Each result is max(itself, new).
inline void worst_rel_diff(const std::vector<double>& T, const std::vector<double>& dT,
                           const std::vector<double>& T_ref, const std::vector<double>& dT_ref,
                           int np, double* dt_rel, double* ddt_rel) {
  double tmax = 0.0;
  std::vector<double> dmax(np, 0.0);
  for (size_t i = 0; i < T_ref.size(); ++i) {
    tmax = std::max(tmax, std::fabs(T_ref[i]));
    for (int q = 0; q < np; ++q) dmax[q] = std::max(dmax[q], std::fabs(dT_ref[i * np + q]));
  }
  for (size_t i = 0; i < T_ref.size(); ++i) {
    *dt_rel = std::max(*dt_rel, std::fabs(T[i] - T_ref[i]) / tmax);
    for (int q = 0; q < np; ++q)
      if (dmax[q] > 0)
        *ddt_rel = std::max(*ddt_rel, std::fabs(dT[i * np + q] - dT_ref[i * np + q]) / dmax[q]);
  }
}
}  // namespace velox::test
