// The velox output catalog: HDF5 file with a 1-D compound dataset /catalog, one row per target
// (failures included). Column names follow rvspecfit / DESI. Data model: docs/data-model.md.
#pragma once
#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <variant>
#include <vector>

namespace velox {
namespace h5 {
class File;
}

// One catalog row. Units: km/s, K, dex. NaN where a value was not measured.
struct CatalogRow {
  int64_t TARGETID = -1;
  std::string SOURCE_FILE;   // input basename (stored as fixed-length string, <= 127 chars)
  int64_t ROW_IN_FILE = -1;  // fibre/row index inside SOURCE_FILE
  double VRAD = NAN, VRAD_ERR = NAN;  // heliocentric as the input; km/s
  double VRAD_CCF = NAN;              // initial guess from the cross-correlation, km/s
  // Skewness and kurtosis (not excess) of the velocity posterior, as rvspecfit defines them
  // (kern::velocity_moments); NaN where not measured.
  double VRAD_SKEW = NAN, VRAD_KURT = NAN;
  double TEFF = NAN, TEFF_ERR = NAN;        // K
  double LOGG = NAN, LOGG_ERR = NAN;        // dex (cgs)
  double FEH = NAN, FEH_ERR = NAN;          // dex
  double ALPHAFE = NAN, ALPHAFE_ERR = NAN;  // dex; NaN when the library has no [alpha/Fe]
  double VSINI = NAN, VSINI_ERR = NAN;      // km/s; NaN when not fitted (FIT_INFO VSINI_UNRESOLVED)
  double VSINI_UPPER = NAN;  // km/s: upper limit when rotation is not detected (FIT_INFO
                             //   VSINI_UPPER_LIMIT), else NaN; docs/vsini.md
  // Statistical parts of the errors above (the *_ERR columns add the systematic floor of the
  // instrument in quadrature, fit.error_floor).
  double VRAD_ERR_STAT = NAN, TEFF_ERR_STAT = NAN, LOGG_ERR_STAT = NAN, FEH_ERR_STAT = NAN,
         ALPHAFE_ERR_STAT = NAN;
  // Per-arm velocities with the labels fixed (DESI arms; blue/red halves of LAMOST and SDSS
  // spectra); errors include the VRAD_ARM floor. km/s, NaN where not measured.
  double VRAD_B = NAN, VRAD_B_ERR = NAN, VRAD_R = NAN, VRAD_R_ERR = NAN, VRAD_Z = NAN,
         VRAD_Z_ERR = NAN;
  double CHISQ_TOT = NAN;  // total chi^2 of the best fit
  double CHISQ_C = NAN;    // chi^2 of the continuum-only fit (same pixels)
  int32_t NPIX_TOT = 0;    // pixels used in the fit
  double SN = NAN;         // median S/N per pixel over used pixels
  int32_t NITER = 0;       // Levenberg-Marquardt iterations of the kept solution
  double RCHISQ = NAN;     // CHISQ_TOT per degree of freedom
  double MISMATCH = NAN;   // sqrt(max(RCHISQ - 1, 0)) / SN: residual rms beyond noise / flux
  // Per spectrograph arm (DESI B/R/Z); single-arm formats leave NaN / 0.
  double CHISQ_B = NAN, CHISQ_R = NAN, CHISQ_Z = NAN;        // chi^2 of the best fit per arm
  double CHISQ_C_B = NAN, CHISQ_C_R = NAN, CHISQ_C_Z = NAN;  // continuum-only chi^2 per arm
  int32_t NPIX_B = 0, NPIX_R = 0, NPIX_Z = 0;                // pixels used per arm (0 = excluded)
  double SN_B = NAN, SN_R = NAN, SN_Z = NAN;                 // median S/N per pixel per arm
  int64_t RVS_WARN = 0;  // quality bitmask, bits in io/rvs_warn.hpp
  bool SUCCESS = false;  // a star, fitted, trustworthy at the reported errors (no reject bit)
  int64_t FIT_INFO = 0;  // informational bits (io/rvs_warn.hpp, velox::info), not warnings
  // Template classification (redrock classes, docs/quality.md): "" when not classified.
  std::string SPECTYPE, SUBTYPE;
  double CLASS_DCHI2 = NAN;  // chi^2 of the best other kind minus the best class's
  double CLASS_Z = NAN;      // redshift of the best class (a star: VRAD / c; QSO, GALAXY: scanned)
  // Copied from the DESI FIBERMAP by the driver (app/fit_outputs.cpp); NaN / -1 / "" if absent.
  double TARGET_RA = NAN, TARGET_DEC = NAN;  // deg
  int64_t REF_ID = -1;
  std::string REF_CAT;
  int32_t FIBER = -1, EXPID = -1;
  // DESI file conventions (issue 24): the redrock file's Z and SPECTYPE of this target
  // (--redrock; NaN / "" without one), and the input's healpix (NSIDE 64, nested; the coadd
  // header's HPXPIXEL, -1 if absent).
  double RR_Z = NAN;
  std::string RR_SPECTYPE;
  int64_t HEALPIX = -1;
  // --epochs (docs/epochs.md): rows with EPOCH >= 0 are one epoch of a star (the /epochs table),
  // EPOCH -1 the star (/catalog). VRAD of a star is then the weighted mean over its epochs.
  int32_t EPOCH = -1;
  int32_t N_EPOCHS = 0;           // epochs in the star's velocity statistics (0: no --epochs)
  double MJD = NAN;               // epoch rows: MJD of the exposure (start), days
  double VRAD_CHISQ_CONST = NAN;  // chi^2 of a constant VRAD, N_EPOCHS - 1 degrees of freedom
  double VRAD_LOGP_CONST = NAN;   // log10 of its p-value
  double VRAD_MAXDIFF_SIG = NAN;  // largest |v_i - v_j| / sqrt(e_i^2 + e_j^2) over epoch pairs
};

// One catalog column: its name (= the CatalogRow field name), the field, unit and description.
// The single table of columns (catalog.cpp) drives the HDF5 layout and the MPI wire format.
using CatalogField =
    std::variant<int32_t CatalogRow::*, int64_t CatalogRow::*, double CatalogRow::*,
                 bool CatalogRow::*, std::string CatalogRow::*>;
struct CatalogColumn {
  const char* name;
  CatalogField field;
  const char* unit;  // astropy-parsable unit string; "" for counts and flags
  const char* desc;
};
const std::vector<CatalogColumn>& catalog_columns();

// Packed records, the layout of /catalog: columns in catalog_columns() order without padding;
// int32/int64/float64 native, bool one byte (0/1), strings fixed-length null-padded (at most
// 127 bytes). catalog_record_offsets()[c] is column c's byte offset; the last element is the
// record size. The Python module hands these records to NumPy as a structured array.
std::vector<size_t> catalog_record_offsets();
std::vector<unsigned char> pack_catalog_rows(const std::vector<CatalogRow>& rows);

// Provenance stored as file attributes of the catalog (all strings).
using Provenance = std::map<std::string, std::string>;

// --epochs: the star rows (EPOCH < 0, /catalog) and the epoch rows (EPOCH >= 0, /epochs) of
// `rows`, each in order; either output may be null.
void split_epoch_rows(const std::vector<CatalogRow>& rows, std::vector<CatalogRow>* stars,
                      std::vector<CatalogRow>* epochs);

// Write rows to `path` atomically (write `path`.tmp, read it back whole, then rename). Creates /catalog (and, when
// some row has EPOCH >= 0, /epochs with the epoch columns: docs/epochs.md) with
// `unit` and `description` metadata for every column (see catalog.cpp) and the provenance as
// root attributes. Throws IoError naming the file on failure; never leaves a partial `path`.
// `extra`, if given, writes more datasets (/fibermap, /models) into the file before it is
// committed.
void write_catalog(const std::string& path, const std::vector<CatalogRow>& rows,
                   const Provenance& provenance, const std::function<void(h5::File&)>& extra = {});

// The job's input files, in input order, as the 1-D string dataset /provenance/inputs of a
// merged catalog: the command_line attribute gives only their number (a shell glob can name
// thousands). Throws IoError.
void write_input_list(h5::File& f, const std::vector<std::string>& inputs);

// Read /catalog back, then the rows of /epochs if present (for `velox info`, merges, resume and
// tests). A catalog carries a seal of its rows and their count (root attribute velox_rows_seal,
// written by write_catalog, which reads every catalog back before it commits it): rows that do
// not match it throw IoError ("... do not match their seal"). `sealed`, if given, tells whether
// the file had a seal (catalogs of velox before 2026-11 have none; resume and merges refit or
// refuse those). Throws IoError.
std::vector<CatalogRow> read_catalog(const std::string& path, Provenance* provenance = nullptr,
                                     bool* sealed = nullptr);

}  // namespace velox
