// Reader of DESI's redrock classification templates (redrock-templates, BSD-3): files
// rrtemplate-<RRTYPE>-<RRSUBTYP>-v*.fits with HDU BASIS_VECTORS [n_basis][n_pix], rest-frame
// VACUUM wavelengths given by CRVAL1/CDELT1 (linear in Angstrom, or in log10 Angstrom when the
// header has LOGLAM = 1), and for QSOs an image HDU REDSHIFTS (the redshift grid).
// Source: https://github.com/desihub/redrock-templates; data model in redrock's templates.py.
#pragma once
#include <string>
#include <system_error>
#include <vector>

#include "io/class_template.hpp"

namespace velox {

// The paths of the rrtemplate-*.fits files in `dir`, sorted by name; empty if there are none or
// `dir` cannot be listed (`ec`, when not null, gets the listing's error).
std::vector<std::string> redrock_template_files(const std::string& dir,
                                                std::error_code* ec = nullptr);

// Every rrtemplate-*.fits in `dir` (sorted by name), box-averaged onto rest-frame bins of
// `dlnlam` in ln(lambda_vac / A). Stars get z_min = z_max = 0 (fitted at the star's VRAD); QSOs
// the range of their REDSHIFTS grid. Throws IoError naming the file and HDU on a malformed file,
// ConfigError if `dir` holds no template.
std::vector<ClassTemplate> read_redrock_templates(const std::string& dir, double dlnlam);

}  // namespace velox
