// Which targets of an input file are fitted: the selection of rvspecfit's rvs_desi_fit
// (desi_fit.py select_fibers_to_fit), applied by the driver before fitting. docs/desi.md.
#pragma once
#include <cmath>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "io/desi_targets.hpp"
#include "io/spectrum.hpp"

namespace velox {

struct SelectConfig {
  // OBJTYPE values that are fitted (FIBERMAP OBJTYPE; empty list = any). Inputs without an
  // OBJTYPE (LAMOST, SDSS) pass.
  std::vector<std::string> objtype_allowed = {"TGT"};
  // Bits of COADD_FIBERSTATUS (coadds) or FIBERSTATUS (spectra files) that do NOT reject a
  // fibre; the default (none) fits only status 0, as rvs_desi_fit.
  std::vector<int> fiberstatus_allowed_bits;
  // --objtypes: patterns (names, globs, COLUMN:BIT) and their resolved bits; a target passes if
  // any bit is set in its FIBERMAP. Empty = no target-mask cut.
  std::vector<std::string> objtypes;
  std::vector<TargetBit> target_bits;
  std::set<int64_t> targetids;  // --targetid / --targetid-file; empty = all
  double min_sn = NAN;          // --min-sn: fit only if selection_sn() > min_sn; NaN = no cut
  bool include_unselected = false;  // rows (RVS_WARN NOT_FITTED) for the fibres not selected
  // --redrock: the redrock class selects stars as rvspecfit's --zbest_select does (meta
  // RR_SPECTYPE / RR_Z, set from the redrock file): SPECTYPE STAR or |Z| < 0.005 passes; with
  // --objtypes a target passes if either selects it (rvspecfit ORs them).
  bool redrock = false;
};

// Reads the `select:` section of a YAML config into `cfg` (missing keys keep their values):
//   select:
//     objtype: [TGT]                    # allowed OBJTYPE values
//     fiberstatus_allowed_bits: [9]     # (COADD_)FIBERSTATUS bits that are tolerated
//     objtypes: [MWS_ANY, "STD_*"]      # as --objtypes
//     min_sn: 2.0                       # as --min-sn
// Throws ConfigError naming the file and key.
void load_select_config(const std::string& path, SelectConfig& cfg);

// Resolves cfg.objtypes into cfg.target_bits (ConfigError for an unknown name).
void resolve_objtypes(SelectConfig& cfg);

// Adds the TARGETIDs listed in `path` (one per line, '#' comments). Throws ConfigError.
void read_targetid_file(const std::string& path, std::set<int64_t>& ids);

// S/N used by --min-sn, as rvs_desi_fit's get_sns: per arm, the median over pixels with
// ivar > 0 and mask == 0 (and finite) of flux * sqrt(ivar); the target's value is the largest
// over its arms. No valid pixel gives -1e9 (never selected by a cut).
double selection_sn(const Spectrum& spec);

// True if `spec` is to be fitted. Otherwise `why` (if given) gets a short reason, e.g.
// "OBJTYPE 'SKY'" or "COADD_FIBERSTATUS 512".
bool select_target(const Spectrum& spec, const SelectConfig& cfg, std::string* why);

}  // namespace velox
