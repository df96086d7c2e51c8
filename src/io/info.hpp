// `velox info FILE`: a human-readable summary of a velox HDF5 file.
#pragma once
#include <string>

namespace velox {

// Multi-line text describing `path`, chosen by the root attribute velox_kind:
//  - "catalog": rows, SUCCESS count, median and 16/84th percentiles of VRAD (km/s), TEFF (K),
//    LOGG and FEH (dex) over successful fits, how many rows set each RVS_WARN bit, provenance.
//  - "template-library": every root attribute, then every dataset with its shape and type.
// Throws IoError naming the file if it is not HDF5 or has no known velox_kind.
std::string describe_file(const std::string& path);

}  // namespace velox
