// What makes the rows of two catalogs comparable (issue 24, docs/running.md "Resuming"): the
// template library's checksum and a hash of the fit configuration. Every catalog records both
// (attributes templates_checksum and fit_config_hash); resume and --merge refuse to mix rows
// whose identities differ, unless --refit-changed refits them.
#pragma once
#include <string>

#include "app/fit_run.hpp"
#include "io/catalog.hpp"

namespace velox {

struct FitIdentity {
  std::string templates_checksum;  // TemplateLibrary::checksum, "fnv1a64:<16 hex>"
  std::string fit_config_hash;     // fit_config_hash(); empty in catalogs older than issue 24
};

// FNV-1a 64 ("fnv1a64:<16 hex>") of everything that changes a catalog's rows apart from the
// library: the effective fit configuration (dump_fit_config, after --(no-)resolution-matrix)
// and the target selection (--objtypes, --targetid, --targetid-file path, --min-sn,
// --include-unselected, --redrock). Threads, device, batch sizes and output paths are not in it: they
// change no row beyond rounding.
std::string fit_config_hash(const FitConfig& cfg, const SelectOptions& opt);

// The identity recorded in a catalog's provenance (missing attributes read as "").
FitIdentity identity_of(const Provenance& prov);

// Empty when `have` and `want` are the same fit; else what differs, naming both values, e.g.
// "template library fnv1a64:aaaa.. (this run: fnv1a64:bbbb..)", `want_name` naming `want`. A catalog without a
// fit_config_hash (written before it existed) differs from every run.
std::string identity_difference(const FitIdentity& have, const FitIdentity& want,
                                const std::string& want_name = "this run");

}  // namespace velox
