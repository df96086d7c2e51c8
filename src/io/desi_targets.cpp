// Bit tables from desitarget's target mask YAML files (see desi_targets.hpp for the paths).
// Only the bits useful for choosing stellar targets are listed; others can be named as
// COLUMN:BIT on the command line.
#include "io/desi_targets.hpp"

#include <cstdlib>

#include "common/error.hpp"

namespace velox {
namespace {

struct Entry {
  const char* name;
  int bit;
};

// desi_mask (targetmask.yaml), sv3_desi_mask (sv3_targetmask.yaml).
const Entry kDesiMain[] = {
    {"LRG", 0},          {"ELG", 1},           {"QSO", 2},          {"QSO_HIZ", 4},
    {"ELG_LOP", 5},      {"ELG_HIP", 6},       {"ELG_VLO", 7},      {"SKY", 32},
    {"STD_FAINT", 33},   {"STD_WD", 34},       {"STD_BRIGHT", 35},  {"BAD_SKY", 36},
    {"SUPP_SKY", 37},    {"NO_TARGET", 49},    {"BRIGHT_OBJECT", 50}, {"IN_BRIGHT_OBJECT", 51},
    {"NEAR_BRIGHT_OBJECT", 52}, {"BGS_ANY", 60}, {"MWS_ANY", 61},   {"SCND_ANY", 62}};
const Entry kDesiSv3[] = {
    {"LRG", 0},        {"ELG", 1},         {"QSO", 2},        {"QSO_HIZ", 4},   {"ELG_LOP", 5},
    {"ELG_HIP", 6},    {"SKY", 32},        {"STD_FAINT", 33}, {"STD_WD", 34},   {"STD_BRIGHT", 35},
    {"BAD_SKY", 36},   {"SUPP_SKY", 37},   {"BGS_ANY", 60},   {"MWS_ANY", 61},  {"SCND_ANY", 62}};
// sv1_desi_mask (sv1_targetmask.yaml); bit 62 is named SECONDARY_ANY there.
const Entry kDesiSv1[] = {{"LRG", 0},         {"ELG", 1},          {"QSO", 2},
                          {"SKY", 32},        {"STD_FAINT", 33},   {"STD_WD", 34},
                          {"STD_BRIGHT", 35}, {"BAD_SKY", 36},     {"BGS_ANY", 60},
                          {"MWS_ANY", 61},    {"SECONDARY_ANY", 62}, {"SCND_ANY", 62}};
// bgs_mask, sv3_bgs_mask, sv1_bgs_mask (sv1 has no BGS_FAINT_HIP).
const Entry kBgs[] = {{"BGS_FAINT", 0}, {"BGS_BRIGHT", 1}, {"BGS_WISE", 2}, {"BGS_FAINT_HIP", 3}};
const Entry kBgsSv1[] = {{"BGS_FAINT", 0}, {"BGS_BRIGHT", 1}, {"BGS_WISE", 2}};
// mws_mask (targetmask.yaml) and sv3_mws_mask (same bits 0-13, 33-35, 60-62).
const Entry kMwsMain[] = {
    {"MWS_BROAD", 0},           {"MWS_WD", 1},               {"MWS_NEARBY", 2},
    {"MWS_BROAD_NORTH", 4},     {"MWS_BROAD_SOUTH", 5},      {"MWS_BHB", 6},
    {"MWS_MAIN_BLUE", 8},       {"MWS_MAIN_BLUE_NORTH", 9},  {"MWS_MAIN_BLUE_SOUTH", 10},
    {"MWS_MAIN_RED", 11},       {"MWS_MAIN_RED_NORTH", 12},  {"MWS_MAIN_RED_SOUTH", 13},
    {"MWS_FAINT_BLUE", 14},     {"MWS_FAINT_BLUE_NORTH", 15}, {"MWS_FAINT_BLUE_SOUTH", 16},
    {"MWS_FAINT_RED", 17},      {"MWS_FAINT_RED_NORTH", 18}, {"MWS_FAINT_RED_SOUTH", 19},
    {"GAIA_STD_FAINT", 33},     {"GAIA_STD_WD", 34},         {"GAIA_STD_BRIGHT", 35},
    {"BACKUP_BRIGHT", 60},      {"BACKUP_FAINT", 61},        {"BACKUP_VERY_FAINT", 62}};
const Entry kMwsSv3[] = {
    {"MWS_BROAD", 0},          {"MWS_WD", 1},              {"MWS_NEARBY", 2},
    {"MWS_BROAD_NORTH", 4},    {"MWS_BROAD_SOUTH", 5},     {"MWS_BHB", 6},
    {"MWS_MAIN_BLUE", 8},      {"MWS_MAIN_BLUE_NORTH", 9}, {"MWS_MAIN_BLUE_SOUTH", 10},
    {"MWS_MAIN_RED", 11},      {"MWS_MAIN_RED_NORTH", 12}, {"MWS_MAIN_RED_SOUTH", 13},
    {"GAIA_STD_FAINT", 33},    {"GAIA_STD_WD", 34},        {"GAIA_STD_BRIGHT", 35},
    {"BACKUP_BRIGHT", 60},     {"BACKUP_FAINT", 61},       {"BACKUP_VERY_FAINT", 62}};
// sv1_mws_mask.
const Entry kMwsSv1[] = {
    {"MWS_MAIN", 0},          {"MWS_WD", 1},               {"MWS_NEARBY", 2},
    {"MWS_MAIN_NORTH", 4},    {"MWS_MAIN_SOUTH", 5},       {"MWS_MAIN_BLUE", 8},
    {"MWS_MAIN_BLUE_NORTH", 9}, {"MWS_MAIN_BLUE_SOUTH", 10}, {"MWS_MAIN_RED", 11},
    {"MWS_MAIN_RED_NORTH", 12}, {"MWS_MAIN_RED_SOUTH", 13}};

template <size_t N>
void add(std::vector<TargetBit>& out, const char* column, const Entry (&entries)[N]) {
  for (const auto& e : entries) out.push_back({column, e.bit, e.name});
}

}  // namespace

const std::vector<TargetBit>& target_bit_table() {
  static const std::vector<TargetBit> table = [] {
    std::vector<TargetBit> t;
    add(t, "DESI_TARGET", kDesiMain);
    add(t, "BGS_TARGET", kBgs);
    add(t, "MWS_TARGET", kMwsMain);
    add(t, "SV1_DESI_TARGET", kDesiSv1);
    add(t, "SV1_BGS_TARGET", kBgsSv1);
    add(t, "SV1_MWS_TARGET", kMwsSv1);
    add(t, "SV3_DESI_TARGET", kDesiSv3);
    add(t, "SV3_BGS_TARGET", kBgs);
    add(t, "SV3_MWS_TARGET", kMwsSv3);
    return t;
  }();
  return table;
}

bool glob_match(const std::string& p, const std::string& s) {
  size_t i = 0, j = 0, star = std::string::npos, mark = 0;
  while (j < s.size()) {
    if (i < p.size() && (p[i] == '?' || p[i] == s[j])) {
      ++i, ++j;
    } else if (i < p.size() && p[i] == '*') {
      star = i++;
      mark = j;
    } else if (star != std::string::npos) {
      i = star + 1;
      j = ++mark;
    } else {
      return false;
    }
  }
  while (i < p.size() && p[i] == '*') ++i;
  return i == p.size();
}

std::vector<TargetBit> resolve_target_pattern(const std::string& pattern) {
  std::vector<TargetBit> out;
  const auto colon = pattern.find(':');
  if (colon != std::string::npos) {
    const std::string col = pattern.substr(0, colon), num = pattern.substr(colon + 1);
    char* end = nullptr;
    const long bit = std::strtol(num.c_str(), &end, 10);
    if (col.empty() || num.empty() || *end != '\0' || bit < 0 || bit > 63)
      throw ConfigError("--objtypes " + pattern + ": expected NAME, GLOB or COLUMN:BIT (0-63)");
    out.push_back({col, static_cast<int>(bit), pattern});
    return out;
  }
  for (const auto& t : target_bit_table())
    if (glob_match(pattern, t.name)) out.push_back(t);
  if (out.empty())
    throw ConfigError("--objtypes " + pattern +
                      ": no DESI target bit of that name (see docs/desi.md; use COLUMN:BIT for "
                      "bits not in velox's table)");
  return out;
}

}  // namespace velox
