// The fitted-parameter table (params.hpp).
#include "fit/params.hpp"

#include <algorithm>
#include <stdexcept>

#include "emulator/library.hpp"
#include "fit/config.hpp"
#include "kernels/fit_eval.hpp"

namespace velox {

std::vector<FitParam> fit_params(const TemplateLibrary& lib, const FitConfig& cfg) {
  std::vector<FitParam> ps;
  FitParam v;
  v.name = "VRAD";
  v.theta = 0;
  v.lo = cfg.vmin_kms;
  v.hi = cfg.vmax_kms;
  v.value = &CatalogRow::VRAD;
  v.err = &CatalogRow::VRAD_ERR;
  v.err_stat = &CatalogRow::VRAD_ERR_STAT;
  v.unit = "km/s";
  v.description = "radial velocity, barycentric as the input's wavelengths";
  ps.push_back(v);
  struct LabelSpec {
    const char* library_name;
    const char* column;
    bool log10;
    double CatalogRow::*value;
    double CatalogRow::*err;
    double CatalogRow::*err_stat;
    const char* unit;
    const char* description;
  };
  static const LabelSpec kLabels[] = {
      {"LOG10_TEFF", "TEFF", true, &CatalogRow::TEFF, &CatalogRow::TEFF_ERR,
       &CatalogRow::TEFF_ERR_STAT, "K", "effective temperature"},
      {"LOGG", "LOGG", false, &CatalogRow::LOGG, &CatalogRow::LOGG_ERR, &CatalogRow::LOGG_ERR_STAT,
       "dex", "surface gravity log10(g / cm s^-2)"},
      {"FEH", "FEH", false, &CatalogRow::FEH, &CatalogRow::FEH_ERR, &CatalogRow::FEH_ERR_STAT,
       "dex", "iron abundance [Fe/H]"},
      {"ALPHAFE", "ALPHAFE", false, &CatalogRow::ALPHAFE, &CatalogRow::ALPHAFE_ERR,
       &CatalogRow::ALPHAFE_ERR_STAT, "dex", "alpha-element enhancement [alpha/Fe]"}};
  for (int l = 0; l < lib.n_label; ++l) {
    const std::string& name = l < static_cast<int>(lib.label_names.size()) ? lib.label_names[l] : "";
    const LabelSpec* spec = nullptr;
    for (const auto& s : kLabels)
      if (name == s.library_name) spec = &s;
    if (!spec)
      throw std::invalid_argument("template library label '" + name +
                                  "' is not a known parameter (LOG10_TEFF, LOGG, FEH, ALPHAFE)");
    FitParam p;
    p.name = spec->column;
    p.theta = 1 + l;
    p.log10 = spec->log10;
    p.lo = lib.label_min[l];
    p.hi = lib.label_max[l];
    p.value = spec->value;
    p.err = spec->err;
    p.err_stat = spec->err_stat;
    p.unit = spec->unit;
    p.description = spec->description;
    p.label = true;
    ps.push_back(p);
  }
  FitParam r;
  r.name = "VSINI";
  r.theta = kern::vsini_index(lib.n_label);
  // The kernel's rotation stencil holds kMaxRotHalf template pixels each side.
  const double grid_max = (kern::kMaxRotHalf + 0.5) * kern::kSpeedOfLight_kms * lib.grid().dlnlam;
  r.lo = 0.0;
  r.hi = std::min(cfg.vsini_max_kms, 0.999 * grid_max);
  r.value = &CatalogRow::VSINI;
  r.err = &CatalogRow::VSINI_ERR;
  r.err_stat = nullptr;  // no floor: VSINI_ERR is statistical
  r.unit = "km/s";
  r.description = "projected rotational velocity (Gray profile)";
  ps.push_back(r);
  return ps;
}

}  // namespace velox
