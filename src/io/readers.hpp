// Readers for survey spectra and template libraries (CFITSIO). Every reader returns VACUUM
// wavelengths in Angstrom. Errors: IoError naming the file, HDU/column and the reason.
#pragma once
#include <string>
#include <vector>

#include "io/spectrum.hpp"

namespace velox {

// Detect the format from the file's content (HDU names, header keys, image shape), not its name.
// Throws IoError if the file is not FITS or matches no known layout.
SpectrumFormat detect_format(const std::string& path);
SpectrumFormat parse_format(const std::string& name);  // "auto","lamost-dr8","lamost-dr10","sdss","desi"
std::string format_name(SpectrumFormat f);

// Read every target of a file. Per-target problems go into Spectrum::problem; whole-file
// problems throw IoError.
//  - LAMOST LRS DR8: primary image [5][n] (flux, ivar, wavelength, andmask, ormask); TARGETID=OBSID.
//  - LAMOST DR10: BINTABLE COADD (FLUX, IVAR, WAVELENGTH, ANDMASK, ...); TARGETID=OBSID.
//  - SDSS/BOSS spec-*.fits: HDU COADD (loglam, flux, ivar, and_mask); TARGETID=SPECOBJID from
//    SPALL, else (plate << 42 | mjd << 24 | fiber) (documented in docs/data-model.md).
//  - DESI coadd: FIBERMAP + {B,R,Z}_{WAVELENGTH,FLUX,IVAR,MASK,RESOLUTION}; TARGETID from FIBERMAP.
//    Unassigned fibres have negative TARGETIDs; fibres beyond the FIBERMAP rows get -1 + problem.
// Masks: nonzero = bad (LAMOST float masks become 0/nonzero ints; DESI uint32 bits are kept).
// ivar, NaN flux and ivar <= 0 are passed through unchanged: the fit masks them.
SpectrumFile read_spectra(const std::string& path, SpectrumFormat fmt = SpectrumFormat::Auto);

// One template spectrum with its labels.
struct TemplateSpectrum {
  std::string name;                 // e.g. "m0001V"
  std::vector<double> wave_vac_A;   // [n_pix] VACUUM Angstrom (MILES air is converted)
  std::vector<double> flux;         // [n_pix]
  double teff_K = NAN, logg = NAN, feh = NAN, alphafe = NAN;
};

struct TemplateSet {
  std::vector<TemplateSpectrum> spectra;
  double fwhm_A = NAN;             // constant FWHM of the templates' line-spread function, Angstrom
  double resolution_R = NAN;       // or constant R (PHOENIX-like); one of the two is set
  bool has_alpha = false;
  std::string kind;                // "miles" or "phoenix"
  std::vector<std::string> skipped;  // "name: reason" for templates that could not be used
};

// MILES: DIR holds fits/ (or the FITS files) and MILES_params.db. Air → vacuum (Morton 2000).
// Stars with missing labels (99999/9999) are skipped and listed in `skipped`.
// PHOENIX: DIR holds FITS files with PHXTEFF/PHXLOGG/PHXM_H/PHXALPHA and a WAVE_*.fits file
// (vacuum Angstrom); R from config. Detected from the directory content.
TemplateSet read_templates(const std::string& dir);

// Air → vacuum wavelength (Angstrom), Morton (2000) / Ciddor (1996) as used by SDSS & DESI.
double air_to_vacuum_A(double wave_air_A);
double vacuum_to_air_A(double wave_vac_A);

}  // namespace velox
