#include "fit/select.hpp"

#include <cerrno>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>

#include "common/error.hpp"
#include "common/median.hpp"
#include "common/yaml_get.hpp"
#include "io/redrock_z.hpp"

namespace velox {
namespace {

bool parse_i64(const std::string& s, int64_t& v) {
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  const long long x = std::strtoll(s.c_str(), &end, 10);
  if (errno != 0 || end == s.c_str()) return false;
  while (*end == ' ') ++end;
  if (*end != '\0') return false;
  v = x;
  return true;
}

// One `select:` key; the list of these calls is the list of valid keys (YamlSection).
template <class T>
void get(YamlSection& s, const char* key, T& out, const std::string&) {
  s.get(key, out);
}

}  // namespace

void load_select_config(const std::string& path, SelectConfig& cfg) {
  YamlSection s(path, "select");
  if (!s) return;
  get(s, "objtype", cfg.objtype_allowed, path);
  get(s, "fiberstatus_allowed_bits", cfg.fiberstatus_allowed_bits, path);
  get(s, "objtypes", cfg.objtypes, path);
  get(s, "min_sn", cfg.min_sn, path);
  for (int b : cfg.fiberstatus_allowed_bits)
    if (b < 0 || b > 62)
      throw ConfigError(path + ": select.fiberstatus_allowed_bits: bit " + std::to_string(b) +
                        " outside 0..62");
  s.check_unknown();
}

void resolve_objtypes(SelectConfig& cfg) {
  cfg.target_bits.clear();
  for (const auto& p : cfg.objtypes) {
    if (p.empty()) continue;
    for (auto& b : resolve_target_pattern(p)) cfg.target_bits.push_back(std::move(b));
  }
}

void read_targetid_file(const std::string& path, std::set<int64_t>& ids) {
  std::ifstream in(path);
  if (!in) throw ConfigError(path + ": cannot read the TARGETID file");
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    const auto b = line.find_first_not_of(" \t\r");
    if (b == std::string::npos || line[b] == '#') continue;
    const auto e = line.find_last_not_of(" \t\r");
    int64_t v = 0;
    if (!parse_i64(line.substr(b, e - b + 1), v))
      throw ConfigError(path + ":" + std::to_string(n) + ": not a TARGETID: " + line);
    ids.insert(v);
  }
  if (in.bad()) throw IoError(path + ": read error in the TARGETID file", errno);
}

double selection_sn(const Spectrum& spec) {
  double best = -1e9;
  for (const auto& arm : spec.arms) {
    std::vector<double> sn;
    const size_t n = std::min({arm.flux.size(), arm.ivar.size()});
    for (size_t j = 0; j < n; ++j) {
      const bool masked = j < arm.mask.size() && arm.mask[j] != 0;
      if (masked || !(arm.ivar[j] > 0)) continue;
      const double v = arm.flux[j] * std::sqrt(static_cast<double>(arm.ivar[j]));
      if (std::isfinite(v)) sn.push_back(v);
    }
    const double m = median_inplace(sn);
    if (std::isfinite(m)) best = std::max(best, m);
  }
  return best;
}

bool select_target(const Spectrum& spec, const SelectConfig& cfg, std::string* why) {
  auto reject = [&](const std::string& reason) {
    if (why) *why = reason;
    return false;
  };
  if (!cfg.targetids.empty() && !cfg.targetids.count(spec.targetid))
    return reject("TARGETID not in --targetid list");
  const auto ot = spec.meta.find("OBJTYPE");
  if (ot != spec.meta.end() && !cfg.objtype_allowed.empty() &&
      std::find(cfg.objtype_allowed.begin(), cfg.objtype_allowed.end(), ot->second) ==
          cfg.objtype_allowed.end())
    return reject("OBJTYPE '" + ot->second + "'");
  for (const char* col : {"COADD_FIBERSTATUS", "FIBERSTATUS"}) {
    const auto it = spec.meta.find(col);
    if (it == spec.meta.end()) continue;
    int64_t status = 0;
    if (!parse_i64(it->second, status)) return reject(std::string(col) + " '" + it->second + "'");
    int64_t allowed = 0;
    for (int b : cfg.fiberstatus_allowed_bits) allowed |= int64_t{1} << b;
    if (status & ~allowed) return reject(std::string(col) + " " + it->second);
    break;  // COADD_FIBERSTATUS takes precedence, as in rvs_desi_fit
  }
  if (!cfg.target_bits.empty() || cfg.redrock) {
    bool hit = false;
    if (cfg.redrock) {
      const auto t = spec.meta.find("RR_SPECTYPE"), z = spec.meta.find("RR_Z");
      if (t != spec.meta.end() && z != spec.meta.end()) {
        hit = redrock_star({std::strtod(z->second.c_str(), nullptr), t->second});
        if (!hit && cfg.target_bits.empty())
          return reject("redrock SPECTYPE " + t->second + " (not a star)");
      } else if (cfg.target_bits.empty()) {
        return reject("not in the redrock file");
      }
    }
    for (const auto& tb : cfg.target_bits) {
      const auto it = spec.meta.find(tb.column);
      int64_t v = 0;
      if (it != spec.meta.end() && parse_i64(it->second, v) && ((v >> tb.bit) & 1)) hit = true;
    }
    if (!hit) return reject(cfg.redrock ? "no --objtypes bit set, not a redrock star"
                                        : "no --objtypes bit set");
  }
  if (std::isfinite(cfg.min_sn)) {
    const double sn = selection_sn(spec);
    if (!(sn > cfg.min_sn)) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "S/N %.2f <= --min-sn %.2f", sn, cfg.min_sn);
      return reject(buf);
    }
  }
  return true;
}

}  // namespace velox
