// libFuzzer entry point of one fuzz target (VELOX_FUZZ_TARGET, set by tests/CMakeLists.txt).
// Run through scripts/fuzz.sh; see tests/fuzz/fuzz_targets.hpp.
#include <spdlog/spdlog.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "fuzz/fuzz_targets.hpp"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  spdlog::set_level(spdlog::level::off);  // readers' warnings would flood the fuzzer's output
  if (const char* lib = std::getenv("VELOX_FUZZ_LIBRARY")) velox::fuzz::set_fit_library(lib);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  velox::fuzz::run_target(VELOX_FUZZ_TARGET, data, size);
  return 0;
}
