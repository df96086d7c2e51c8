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
// The same for the targets [first, first + count) of a DESI coadd only (a block of its fibres;
// row_in_file stays the fibre's row in the file); other formats are read whole. Reading a large
// coadd in blocks bounds the memory a rank needs (docs/running.md "Memory").
SpectrumFile read_spectra(const std::string& path, SpectrumFormat fmt, size_t first,
                          size_t count);
// --epochs: the spectra of every exposure instead of the coadd where a file holds both. SDSS/BOSS
// spec files: one spectrum per exposure from the per-exposure frame HDUs (B1-EEEEEEEE-...,
// R1-...: loglam, flux, ivar, mask), arms B and R, meta EXPID (header EXPOSURE) and MJD (TAI-BEG
// / 86400), row_in_file = the exposure's index; a file without frames gives its coadd. Other
// formats: as read_spectra (a DESI spectra file already holds one row per exposure).
SpectrumFile read_exposures(const std::string& path, SpectrumFormat fmt = SpectrumFormat::Auto);
// The number of fibres of a DESI coadd (rows of its largest *_FLUX image, as read_spectra
// counts them) from the headers alone; 0 for any other format. Throws IoError as read_spectra.
size_t count_desi_fibres(const std::string& path, SpectrumFormat fmt = SpectrumFormat::Auto);

// One template spectrum with its labels.
struct TemplateSpectrum {
  std::string name;                 // e.g. "m0001V"
  std::vector<double> wave_vac_A;   // [n_pix] VACUUM Angstrom (MILES air is converted)
  std::vector<double> flux;         // [n_pix]
  double teff_K = NAN, logg = NAN, feh = NAN, alphafe = NAN;
  // An average of many spectra or a model (Kesseli, Cannon grid): build_library never drops it
  // as an outlier (its leave-one-out error measures how sparse its neighbours are, not noise).
  bool curated = false;
};

struct TemplateSet {
  std::vector<TemplateSpectrum> spectra;
  double fwhm_A = NAN;             // constant FWHM of the templates' line-spread function, Angstrom
  double resolution_R = NAN;       // or constant R (PHOENIX-like); one of the two is set
  // Or a line spread that varies with wavelength (Kesseli/BOSS): FWHM [A] at vacuum wavelengths
  // [A], both increasing, linear in between. Used when not empty (it overrides the two above).
  std::vector<double> lsf_wave_A, lsf_fwhm_A;
  bool has_alpha = false;
  std::string kind;                // "miles", "phoenix", "stelib", "kesseli", "cannon", "joined"
  std::string medium = "vacuum";   // the source files' medium ("air": converted on reading)
  bool curated = false;            // every spectrum is curated (TemplateSpectrum::curated)
  std::vector<std::string> skipped;  // "name: reason" for templates that could not be used
  // Of those, the stars the library's own tables give no labels (MILES_params.db 9999/99999 or
  // not listed, STELIB '-' header labels, a Kesseli subtype without a Teff): gaps of the
  // catalogue, logged at info level; the others (unreadable, inconsistent files) warn.
  size_t n_unlabelled = 0;
  // The velocity frame correction applied on reading, in words (Kesseli: the per-subtype shifts
  // to the redrock/Cannon frame); "" when none. Recorded in the library's attributes.
  std::string frame;

  // FWHM [A] of the line spread at vacuum wavelength lam [A]; NaN if none is known.
  double fwhm_at(double lam_A) const;
};

// Reads a template directory; its kind is detected from the content. Every kind returns VACUUM
// wavelengths in Angstrom and lists unusable templates in `skipped` ("name: reason").
//  - MILES: DIR holds fits/ (or the FITS files) and MILES_params.db. Air -> vacuum (Morton 2000).
//    Stars with missing labels (99999/9999) are skipped. FWHM 2.5 A (header FWHM).
//  - PHOENIX: FITS files with PHXTEFF/PHXLOGG/PHXM_H/PHXALPHA and a WAVE_*.fits file (vacuum
//    Angstrom); R from config.
//  - STELIB v3.2 (Le Borgne et al. 2003, A&A 402, 433; sdss/mangadap's copy):
//    STELIB_v3.2_<star>.fits, 1-D image, linear AIR wavelength (CRVAL1, CDELT1, CRPIX1), flux in
//    erg/s/cm2/A; labels from the header keys TEFF [K], LOG_G, FE_H ('-' or absent: skipped).
//    FWHM 3.4 A (mangadap's configuration). Runs of flux <= 0 or non-finite at either end (the
//    library's gaps) are trimmed; interior zeros and non-finite values (gaps) become NaN
//    (build_library skips a star with NaN inside the library's range; the joined build fills
//    them, emulator/join.hpp).
//  - Kesseli et al. 2017 (ApJS 230, 16) M-dwarf templates (PyHammer): M<n>_<feh>_Dwarf.fits or
//    M<n>.fits, HDU 1 table LogLam (log10 VACUUM A), Flux. Teff per spectral type M<n>V from the
//    Pecaut & Mamajek (2013) dwarf table (`teff_table`, or tables/EEM_dwarf_UBVIJHK_colors_Teff.txt
//    two folders above DIR), logg = 4.438 + log10(M/Msun) - 2 log10(R/Rsun) from the same table's
//    mass and radius, [Fe/H] the middle of the file's 0.5 dex bin (upper edge in the name; M9:
//    0.0). Line spread of BOSS: R from 1560 at 3650 A to 2650 at 10000 A (Smee et al. 2013,
//    AJ 146, 32), linear in between.
// Throws IoError if DIR is missing or holds no usable template.
TemplateSet read_templates(const std::string& dir, const std::string& teff_table = "");

// Air → vacuum wavelength (Angstrom), Morton (2000) / Ciddor (1996) as used by SDSS & DESI.
double air_to_vacuum_A(double wave_air_A);
double vacuum_to_air_A(double wave_vac_A);

}  // namespace velox
