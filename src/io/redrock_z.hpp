// Redrock's redshift catalogs beside DESI coadds (desidatamodel: redrock-SURVEY-PROGRAM-PIXNUM.fits
// with HDU REDSHIFTS; older zbest-*.fits with HDU ZBEST), read as rvspecfit's desi_fit.py reads
// them (get_zbest_fname, select_fibers_to_fit): TARGETID, Z and SPECTYPE of every target.
#pragma once
#include <cstdint>
#include <map>
#include <string>

namespace velox {

struct RedrockZ {
  double z = 0.0;        // redshift (dimensionless)
  std::string spectype;  // STAR, GALAXY, QSO
};

// The redrock file of `input` (coadd-X.fits[.gz] or spectra-X.fits[.gz]): redrock-X.fits, then
// zbest-X.fits, each also with .gz, in the input's folder. Empty when there is none.
std::string find_redrock_file(const std::string& input);

// REDSHIFTS (or ZBEST) of `path`, by TARGETID. Throws IoError naming the file on a missing HDU
// or column.
std::map<int64_t, RedrockZ> read_redrock_z(const std::string& path);

// rvspecfit's redrock selection of a star: SPECTYPE STAR, or |Z| below 1500 km/s / c (0.005).
inline bool redrock_star(const RedrockZ& r) {
  return r.spectype == "STAR" || (r.z < 0.005 && r.z > -0.005);
}

}  // namespace velox
