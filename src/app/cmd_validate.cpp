#include "app/cmd_validate.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "backend/cpu/cpu_backend.hpp"
#include "common/error.hpp"
#include "emulator/validate.hpp"

namespace velox {

int run_validate(const ValidateOptions& opt) {
  const BuildConfig bc = opt.config.empty() ? BuildConfig{} : load_build_config(opt.config);
  const FitConfig fc = opt.config.empty() ? FitConfig{} : load_fit_config(opt.config);
  const auto set = read_templates(opt.input);
  if (!set.skipped.empty())
    spdlog::info("validate: {} templates skipped (missing labels or unreadable)",
                 set.skipped.size());
  const int threads = opt.threads > 0 ? opt.threads : default_thread_count();
  const auto res = cross_validate(set, bc, fc, opt.folds, opt.seed, threads);
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
