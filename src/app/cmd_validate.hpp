// `velox templates validate`: k-fold cross-validation of the template emulator's label recovery
// (app/validate_library.hpp). Prints the summary; writes the per-star and summary CSV tables.
#pragma once
#include <cstdint>
#include <string>

#include "app/templates_build.hpp"

namespace velox {

struct ValidateOptions {
  TemplateInputOptions templates;  // a template directory or a preset
  std::string config;   // YAML config: sections templates: and fit: (optional)
  std::string output;   // per-star CSV (optional)
  std::string summary;  // summary CSV (optional)
  int folds = 10;
  std::string holdout;  // leave-one-out of the templates whose name starts with this
  uint64_t seed = 1;
  int threads = 0;  // 0 = cores available to the process
};

// Returns an exit code (common/error.hpp); ConfigError / IoError propagate to main.
int run_validate(const ValidateOptions& opt);

}  // namespace velox
