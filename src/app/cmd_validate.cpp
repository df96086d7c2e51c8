#include "app/cmd_validate.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "app/validate_library.hpp"
#include "backend/cpu/cpu_backend.hpp"
#include "common/error.hpp"

namespace velox {

int run_validate(const ValidateOptions& opt) {
  const BuildConfig bc = template_build_config(opt.templates, opt.config);
  const FitConfig fc = opt.config.empty() ? FitConfig{} : load_fit_config(opt.config);
  const auto set = template_training_set(opt.templates, bc, nullptr);
  const int threads = opt.threads > 0 ? opt.threads : default_thread_count();
  const auto res = cross_validate(set, bc, fc, opt.folds, opt.seed, threads, opt.holdout);
  fmt::print("{}", format_validation_summary(res));
  if (!opt.output.empty()) {
    write_validation_csv(opt.output, res);
    spdlog::info("validate: wrote {}", opt.output);
  }
  if (!opt.summary.empty()) {
    write_validation_summary_csv(opt.summary, res);
    spdlog::info("validate: wrote {}", opt.summary);
  }
  return kExitOk;
}

}  // namespace velox
