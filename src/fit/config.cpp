#include "fit/config.hpp"

#include <yaml-cpp/yaml.h>

#include "fit/yaml_get.hpp"

#include "common/error.hpp"

namespace velox {

namespace {
// One `fit:` key; the list of these calls is the list of valid keys (YamlSection).
template <class T>
void get(YamlSection& f, const char* key, T& out, const std::string&) {
  f.get(key, out);
}
}  // namespace

FitConfig load_fit_config(const std::string& path) {
  FitConfig c;
  YamlSection f(path, "fit");
  if (!f) return c;
  get(f, "vmin_kms", c.vmin_kms, path);
  get(f, "vmax_kms", c.vmax_kms, path);
  get(f, "cont_deg", c.cont_deg, path);
  get(f, "ccf_cont_deg", c.ccf_cont_deg, path);
  get(f, "n_starts", c.n_starts, path);
  get(f, "n_ccf_templates", c.n_ccf_templates, path);
  get(f, "ccf_lag_step", c.ccf_lag_step, path);
  get(f, "max_iter", c.max_iter, path);
  get(f, "min_pixels", c.min_pixels, path);
  get(f, "min_arm_pixels", c.min_arm_pixels, path);
  get(f, "clip_sigma", c.clip_sigma, path);
  get(f, "wave_min_A", c.wave_min_A, path);
  get(f, "wave_max_A", c.wave_max_A, path);
  get(f, "chisq_improvement_min", c.chisq_improvement_min, path);
  get(f, "rv_err_max_kms", c.rv_err_max_kms, path);
  get(f, "fit_vsini", c.fit_vsini, path);
  get(f, "resolution_matrix", c.resolution_matrix, path);
  if (f["mask_bands_A"]) {
    std::vector<std::vector<double>> bands;
    get(f, "mask_bands_A", bands, path);
    c.mask_bands_A.clear();
    for (const auto& b : bands) {
      if (b.size() != 2 || !(b[0] < b[1]))
        throw ConfigError(path + ": fit.mask_bands_A: each band must be [min, max] Angstrom");
      c.mask_bands_A.emplace_back(b[0], b[1]);
    }
  }
  if (f["default_R"]) {
    // Formats given override their default; the others keep theirs. The defaults name every
    // input format.
    std::map<std::string, double> given;
    get(f, "default_R", given, path);
    std::vector<std::string> formats;
    for (const auto& kv : FitConfig{}.default_R) formats.push_back(kv.first);
    for (const auto& [format, R] : given) {
      if (!c.default_R.count(format))
        throw ConfigError(path + ": fit.default_R." + format +
                          ": unknown input format (did you "
                          "mean " +
                          nearest_name(format, formats) + "?)");
      c.default_R[format] = R;
    }
  }
  if (c.cont_deg < 0 || c.cont_deg > 15) throw ConfigError(path + ": fit.cont_deg must be 0..15");
  if (c.ccf_cont_deg < 0 || c.ccf_cont_deg > 15)
    throw ConfigError(path + ": fit.ccf_cont_deg must be 0..15");
  if (!(c.vmin_kms < c.vmax_kms)) throw ConfigError(path + ": fit.vmin_kms must be < vmax_kms");
  if (c.n_starts < 1) throw ConfigError(path + ": fit.n_starts must be >= 1");
  f.check_unknown();
  return c;
}

std::string dump_fit_config(const FitConfig& c) {
  YAML::Emitter e;
  e << YAML::BeginMap << YAML::Key << "fit" << YAML::Value << YAML::BeginMap;
  e << YAML::Key << "vmin_kms" << YAML::Value << c.vmin_kms;
  e << YAML::Key << "vmax_kms" << YAML::Value << c.vmax_kms;
  e << YAML::Key << "cont_deg" << YAML::Value << c.cont_deg;
  e << YAML::Key << "ccf_cont_deg" << YAML::Value << c.ccf_cont_deg;
  e << YAML::Key << "n_starts" << YAML::Value << c.n_starts;
  e << YAML::Key << "n_ccf_templates" << YAML::Value << c.n_ccf_templates;
  e << YAML::Key << "ccf_lag_step" << YAML::Value << c.ccf_lag_step;
  e << YAML::Key << "max_iter" << YAML::Value << c.max_iter;
  e << YAML::Key << "min_pixels" << YAML::Value << c.min_pixels;
  e << YAML::Key << "min_arm_pixels" << YAML::Value << c.min_arm_pixels;
  e << YAML::Key << "clip_sigma" << YAML::Value << c.clip_sigma;
  e << YAML::Key << "wave_min_A" << YAML::Value << c.wave_min_A;
  e << YAML::Key << "wave_max_A" << YAML::Value << c.wave_max_A;
  e << YAML::Key << "mask_bands_A" << YAML::Value << YAML::BeginSeq;
  for (const auto& b : c.mask_bands_A)
    e << YAML::Flow << YAML::BeginSeq << b.first << b.second << YAML::EndSeq;
  e << YAML::EndSeq;
  e << YAML::Key << "chisq_improvement_min" << YAML::Value << c.chisq_improvement_min;
  e << YAML::Key << "rv_err_max_kms" << YAML::Value << c.rv_err_max_kms;
  e << YAML::Key << "fit_vsini" << YAML::Value << c.fit_vsini;
  e << YAML::Key << "resolution_matrix" << YAML::Value << c.resolution_matrix;
  e << YAML::Key << "default_R" << YAML::Value << c.default_R;
  e << YAML::EndMap << YAML::EndMap;
  return e.c_str();
}

}  // namespace velox
