// DESI target-selection bit masks by name, for `velox fit --objtypes`. The table in
// desi_targets.cpp is copied from desitarget (github.com/desihub/desitarget):
//   main survey  py/desitarget/data/targetmask.yaml           (desi_mask, bgs_mask, mws_mask)
//   SV1          py/desitarget/sv1/data/sv1_targetmask.yaml   (sv1_desi_mask, sv1_bgs_mask, ...)
//   SV3          py/desitarget/sv3/data/sv3_targetmask.yaml   (sv3_desi_mask, sv3_bgs_mask, ...)
// Each mask lives in one FIBERMAP column: DESI_TARGET, BGS_TARGET, MWS_TARGET (main) and the
// SV1_/SV3_-prefixed columns (SV1_DESI_TARGET, SV3_MWS_TARGET, ...).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace velox {

struct TargetBit {
  std::string column;  // FIBERMAP column, e.g. "DESI_TARGET", "SV3_MWS_TARGET"
  int bit = 0;         // 0..63
  std::string name;    // mask bit name, e.g. "MWS_ANY"
};

// Every (column, bit) a pattern names. A pattern is
//   NAME        a bit name, matched in every survey's masks (MWS_ANY -> DESI_TARGET bit 61,
//               SV1_DESI_TARGET bit 61, SV3_DESI_TARGET bit 61);
//   GLOB        a name with '*' / '?' wildcards (STD_* -> STD_FAINT, STD_WD, STD_BRIGHT);
//   COLUMN:BIT  an explicit column and bit number (SCND_TARGET:10), for bits not in the table.
// Throws ConfigError if the pattern matches nothing.
std::vector<TargetBit> resolve_target_pattern(const std::string& pattern);

// The whole built-in table (for docs and tests).
const std::vector<TargetBit>& target_bit_table();

bool glob_match(const std::string& pattern, const std::string& text);

}  // namespace velox
