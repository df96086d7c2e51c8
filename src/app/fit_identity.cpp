#include "app/fit_identity.hpp"

#include <fmt/format.h>

#include <cstdint>

#include "common/fnv.hpp"

namespace velox {

namespace {

// One field: its bytes, then a 0xff separator, so ("ab","c") and ("a","bc") differ.
void fnv(uint64_t& h, const std::string& s) {
  fnv1a(h, s.data(), s.size());
  const unsigned char sep = 0xff;
  fnv1a(h, &sep, 1);
}

}  // namespace

std::string fit_config_hash(const FitConfig& cfg, const SelectOptions& opt) {
  uint64_t h = kFnvOffset;
  fnv(h, dump_fit_config(cfg));
  for (const auto& o : opt.objtypes) fnv(h, "objtype:" + o);
  for (auto t : opt.targetids) fnv(h, "targetid:" + std::to_string(t));
  fnv(h, "targetid_file:" + opt.targetid_file);
  fnv(h, fmt::format("min_sn:{}", opt.min_sn));
  fnv(h, opt.include_unselected ? "include_unselected" : "");
  fnv(h, opt.redrock.empty() ? "" : "redrock");  // auto or a file: the same selection rule
  return fmt::format("fnv1a64:{:016x}", h);
}

FitIdentity identity_of(const Provenance& prov) {
  FitIdentity id;
  if (auto it = prov.find("templates_checksum"); it != prov.end()) id.templates_checksum = it->second;
  if (auto it = prov.find("fit_config_hash"); it != prov.end()) id.fit_config_hash = it->second;
  return id;
}

std::string identity_difference(const FitIdentity& have, const FitIdentity& want,
                                const std::string& want_name) {
  auto shown = [](const std::string& s) { return s.empty() ? std::string("none recorded") : s; };
  std::string d;
  if (have.templates_checksum != want.templates_checksum)
    d = fmt::format("template library {} ({}: {})", shown(have.templates_checksum), want_name,
                    shown(want.templates_checksum));
  if (have.fit_config_hash != want.fit_config_hash)
    d += fmt::format("{}fit configuration {} ({}: {})", d.empty() ? "" : "; ",
                     shown(have.fit_config_hash), want_name, shown(want.fit_config_hash));
  return d;
}

}  // namespace velox
