// Helpers shared by the unit tests: paths of the shared real data and a scratch directory.
#pragma once
#include <filesystem>
#include <string>

namespace velox::test {
inline std::string data_dir() {
  const char* env = std::getenv("VELOX_DATA_DIR");
  return env ? env : VELOX_TEST_DATA_DIR;
}
inline std::string data(const std::string& rel) { return data_dir() + "/" + rel; }
// A fresh scratch directory per test name.
inline std::string tmp_dir(const std::string& name) {
  auto p = std::filesystem::path(VELOX_TEST_TMP_DIR) / name;
  std::filesystem::remove_all(p);
  std::filesystem::create_directories(p);
  return p.string();
}
}  // namespace velox::test
