#include <yaml-cpp/yaml.h>

#include "common/error.hpp"
#include "common/yaml_get.hpp"
#include "emulator/build.hpp"

namespace velox {

BuildConfig load_build_config(const std::string& path, const BuildConfig& base) {
  BuildConfig c = base;
  YamlSection t(path, "templates");
  if (!t) return c;
  auto get = [&](const char* key, auto& out) { t.get(key, out); };  // the valid keys
  get("dlnlam", c.dlnlam);
  get("wave_min_A", c.wave_min_A);
  get("wave_max_A", c.wave_max_A);
  get("n_components", c.n_components);
  get("norm_degree", c.norm_degree);
  get("teff_min", c.teff_min);
  get("teff_max", c.teff_max);
  get("outlier_loo_factor", c.outlier_loo_factor);
  get("outlier_loo_floor", c.outlier_loo_floor);
  get("n_ccf_templates", c.n_ccf_templates);
  get("template_R", c.template_R);
  get("join_grid", c.join_grid);
  get("join_wave_min_A", c.join_wave_min_A);
  get("join_wave_max_A", c.join_wave_max_A);
  get("join_sources", c.join_sources);
  get("exclude_templates", c.exclude_names);
  if (c.n_components < 1 || c.n_components + 1 > 96)
    throw ConfigError(path + ": templates.n_components must be 1..95");
  if (!(c.dlnlam > 0 && c.dlnlam < 1e-3))
    throw ConfigError(path + ": templates.dlnlam out of range");
  t.check_unknown();
  return c;
}

}  // namespace velox
