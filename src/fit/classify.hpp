// Classification of a fitted spectrum against the library's redrock templates (docs/quality.md):
// normal star (STAR A/B/F/G/K/M), white dwarf (STAR WD), cataclysmic variable (STAR CV), QSO or
// GALAXY.
// Host side: rebinning in prepare_spectrum, the decision in finish_row; the chi^2 of each class
// is kernels/classify.hpp.
#pragma once
#include <string>
#include <vector>

#include "emulator/library.hpp"
#include "fit/ln_wave.hpp"
#include "io/spectrum.hpp"
#include "kernels/classify.hpp"

namespace velox {

// Bin width of the classification templates and spectra in ln(lambda): 2e-3 (600 km/s) resolves
// white-dwarf Balmer wings and QSO emission lines (FWHM >= 2000 km/s) at 1/10 of the pixels.
constexpr double kClassBinDlnlam = 2e-3;

// The lowest redshift at which a fit may call a spectrum a GALAXY: 0.005 (1500 km/s, beyond any
// star's velocity), the |z| cut of rvspecfit's redrock selection.
constexpr double kGalaxyZMin = 0.005;

// A spectrum rebinned for classification (arrays behind kern::ClassData).
struct ClassSpectrum {
  std::vector<double> lnlam, flux, ivar, xleg;
  std::vector<double> leg;  // [n][kern::kClassPolyDeg + 1] Legendre values at xleg
  std::vector<int> arm;
  int n_arms = 0;
  kern::ClassData view() const;
};

// Rebin the valid pixels of every arm (finite, ivar > 0, unmasked, outside `mask_bands_A`),
// all of the arm's wavelength range (not only the fit's template coverage), onto kClassBinDlnlam
// bins: ivar-weighted mean flux, summed ivar. grids, when given, holds arm_grid() of arms[a] at
// [a] where its id is not 0 (prepare_spectrum's lookups, which compare the whole wavelength
// array); the others are looked up.
ClassSpectrum rebin_for_classes(const std::vector<ArmView>& arms,
                                const std::vector<std::pair<double, double>>& mask_bands_A,
                                const std::vector<ArmGrid>* grids = nullptr);

struct ClassResult {
  std::string spectype, subtype;  // redrock names of the best class ("" if not classified)
  double dchi2 = NAN;             // chi^2 of the best class of another kind minus the best's (>= 0)
  double z = NAN;                 // redshift of the best class (a star: its VRAD / c, relativistic)
  bool not_star = false;  // the best class is a WD, CV, QSO or GALAXY by more than dchi2_min
};

// The best class: stars at the fitted VRAD and, with scan_z, QSOs and galaxies over their
// redshift ranges (galaxies from kGalaxyZMin; steps of 3e-3 in ln(1+z), refined to 5e-4).
// Kinds: normal stars, WD, CV, QSO, GALAXY. scan_z is for fits the MILES model already explains
// poorly: a 4-component QSO basis with a free
// redshift and additive polynomials fits 27 of the 134 real LAMOST stars better than redrock's
// star bases at their velocity (LAMOST's relative flux calibration; docs/quality.md), so a QSO
// class alone must not reject a good stellar fit.
ClassResult classify(const TemplateLibrary& lib, const ClassSpectrum& cs, double vrad_kms,
                     double dchi2_min, bool scan_z);

// MK class letter (O, B, A, F, G, K, M) of a dwarf of this Teff (K): the boundaries lie midway
// between the last subtype of a class and the first of the next in Pecaut & Mamajek (2013, ApJS
// 208, 9; the EEM_dwarf_UBVIJHK_colors_Teff table): O/B 32350, B/A 10050, A/F 7310, F/G 5960,
// G/K 5335, K/M 3890 K. "" for a Teff that is not finite and positive. A normal star's SUBTYPE
// (finish_row) is this letter of its fitted TEFF, so that SUBTYPE and TEFF never disagree; the
// redrock archetypes decide only the kind (normal star, WD, CV, QSO).
std::string mk_class_of_teff(double teff_K);

}  // namespace velox
