// Helpers shared by the unit tests: paths of the shared real data and a scratch directory.
#pragma once
#include <unistd.h>

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
}  // namespace velox::test
