// `velox info FILE`: a human-readable summary of a velox HDF5 file, or of a FITS file's headers.
#pragma once
#include <string>

namespace velox {

// Multi-line text describing `path`, chosen by the root attribute velox_kind:
//  - "catalog": rows, SUCCESS count, median and 16/84th percentiles of VRAD (km/s), TEFF (K),
//    LOGG and FEH (dex) over successful fits, how many rows set each RVS_WARN bit, provenance.
//  - "template-library": every root attribute, then every dataset with its shape and type.
// A FITS file (a spectra input, a velox rvtab table, anything): its HDUs (image shapes, table
// rows and columns) and whether `velox fit` reads it (the format detected and its spectra, or
// why not), from the headers (a LAMOST or SDSS file is read whole: one spectrum).
// Throws IoError naming the file if it is neither HDF5 nor FITS (saying what info reads), or
// HDF5 with no known velox_kind.
std::string describe_file(const std::string& path);

}  // namespace velox
