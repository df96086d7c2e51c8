// SDSS/BOSS spec-PLATE-MJD-FIBER.fits: HDU COADD (loglam, flux, ivar, and_mask), HDU SPALL
// (BOSS) or SPECOBJ (SDSS-I/II) with the pipeline's redshift and SPECOBJID.
// Data model:
// https://data.sdss.org/datamodel/files/BOSS_SPECTRO_REDUX/RUN2D/spectra/PLATE4/spec.html
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <map>
#include <vector>

#include "common/error.hpp"
#include "io/readers_detail.hpp"

namespace velox::detail {
namespace {

// Nominal SDSS/BOSS resolving power (1500-2500 across the range; Smee et al. 2013), used where
// the file has no wdisp column.
constexpr double kSdssR = 2000.0;

// The arm's line spread from its wdisp column as a resolution matrix (ArmData's desispec layout):
// row i a Gaussian of sigma wdisp[i] pixels (the data model's "wavelength dispersion in pixel =
// dloglam units", Gaussian sigma), normalised over its taps, which reach 4 sigma of the 99th
// percentile row (at most 31 diagonals). BOSS's line spread runs from sigma 1.8 px (R ~1000) at
// 3600 A to 0.85 px (R ~2150) in the red: one R for the whole range mistakes the blue's extra width
// for rotation (the G1V star spec-3586-55181-0500 fitted VSINI 180 km/s at R 2000, 78 km/s with
// this matrix, with a lower chi^2; docs/vsini.md). Values outside 0.2-7 px (zeros at masked
// ends) take the arm's median. No usable value: no matrix, the nominal R.
void wdisp_matrix(const UninitVector<float>& wdisp, ArmData& arm) {
  const size_t n = wdisp.size();
  std::vector<double> sig(n, NAN), ok;
  for (size_t i = 0; i < n; ++i)
    if (wdisp[i] >= 0.2f && wdisp[i] <= 7.0f) {
      sig[i] = wdisp[i];
      ok.push_back(wdisp[i]);
    }
  if (ok.empty() || n == 0) return;
  std::sort(ok.begin(), ok.end());
  const double med = ok[ok.size() / 2];
  // The band: 4 sigma of the 99th percentile row, so that a few odd rows do not widen every
  // row's band (a wider row is cut there and renormalised).
  const double wide = ok[std::min(ok.size() - 1, ok.size() * 99 / 100)];
  for (double& v : sig)
    if (std::isnan(v)) v = med;
  const int h = std::min(15, static_cast<int>(std::ceil(4.0 * wide)));
  const int ndiag = 2 * h + 1;
  arm.ndiag = ndiag;
  arm.resolution.assign(static_cast<size_t>(ndiag) * n, 0.0f);
  std::vector<double> w(ndiag);
  for (size_t i = 0; i < n; ++i) {
    double sum = 0.0;
    for (int o = -h; o <= h; ++o) sum += w[o + h] = std::exp(-0.5 * (o / sig[i]) * (o / sig[i]));
    // Row i's tap at column j = i + o sits on diagonal d = h - o (offset o).
    for (int o = -h; o <= h; ++o) {
      const long j = static_cast<long>(i) + o;
      if (j < 0 || j >= static_cast<long>(n)) continue;
      arm.resolution[static_cast<size_t>(h - o) * n + j] = static_cast<float>(w[o + h] / sum);
    }
  }
  arm.resolution_R = NAN;  // read from the matrix (effective_resolution)
}

// Packs (plate, mjd, fiber) into one id when the file carries no SPECOBJID:
// plate << 42 | mjd << 24 | fiber (documented in docs/data-model.md). The fields must fit their
// bits (plate < 2^21, mjd < 2^18, fiber < 2^24); false otherwise (a corrupt header: shifting
// such values would overflow, found by fuzzing).
bool pack_plate_mjd_fiber(int64_t plate, int64_t mjd, int64_t fiber, int64_t& id) {
  if (plate < 0 || plate >= (1 << 21) || mjd < 0 || mjd >= (1 << 18) || fiber < 0 ||
      fiber >= (1 << 24))
    return false;
  id = (plate << 42) | (mjd << 24) | fiber;
  return true;
}

}  // namespace

namespace {

// The identity of the spec file's object (SPALL/SPECOBJ, header PLATEID/MJD/FIBERID).
Spectrum sdss_identity(fits::File& f) {
  Spectrum s;
  f.move_to(0);
  int64_t plate = f.key_long("PLATEID", -1), mjd = f.key_long("MJD", -1),
          fiber = f.key_long("FIBERID", -1);

  // Redshift table: SPALL (BOSS) or SPECOBJ (SDSS-I/II), one row.
  const auto names = f.hdu_names();
  for (const char* hdu : {"SPALL", "SPECOBJ"}) {
    if (std::find(names.begin(), names.end(), hdu) == names.end()) continue;
    f.move_to(hdu);
    if (f.num_rows() < 1) continue;
    for (const char* col : {"Z", "Z_ERR", "CLASS", "SUBCLASS"}) {
      if (f.has_column(col)) s.meta[col] = f.read_column_text(col).at(0);
    }
    int64_t v = 0;
    if (plate < 0 && f.has_column("PLATE") && parse_int64(f.read_column_text("PLATE")[0], v)) {
      plate = v;
    }
    if (mjd < 0 && f.has_column("MJD") && parse_int64(f.read_column_text("MJD")[0], v)) mjd = v;
    if (fiber < 0 && f.has_column("FIBERID") && parse_int64(f.read_column_text("FIBERID")[0], v)) {
      fiber = v;
    }
    // SPECOBJID is a string column in DR8+ files ('22A'), an integer in some others.
    if (f.has_column("SPECOBJID") && parse_int64(f.read_column_text("SPECOBJID")[0], v)) {
      s.targetid = v;
    }
    break;
  }
  if (s.targetid < 0 && !pack_plate_mjd_fiber(plate, mjd, fiber, s.targetid)) {
    s.targetid = -1;
    s.problem = "no SPECOBJID, and no PLATEID/MJD/FIBERID in range to build a TARGETID";
  }
  s.meta["PLATE"] = std::to_string(plate);
  s.meta["MJD"] = std::to_string(mjd);
  s.meta["FIBERID"] = std::to_string(fiber);
  s.row_in_file = 0;
  return s;
}

// The SPPIXMASK bits of a per-exposure frame that make a pixel bad (idlutils sdss_maskbits.par):
// 0-9 the fibre's trace, flat, arc and sky fibre; 18 FULLREJECT, 22 NOSKY, 23 BRIGHTSKY,
// 24 NODATA, 25 COMBINEREJ (the coadd rejected it: a cosmic ray or an artefact of this exposure),
// 27 BADSKYCHI. Not: 16 NEARBADPIXEL, 17 LOWFLAT, 19 PARTIALREJ (set on half of a B frame's
// pixels: some of the extraction profile was rejected), 20 SCATTEREDLIGHT, 21 CROSSTALK,
// 26 BADFLUXFACTOR; ivar carries their noise.
constexpr int32_t kFrameBadBits =
    0x3FF | (1 << 18) | (1 << 22) | (1 << 23) | (1 << 24) | (1 << 25) | (1 << 27);

// One arm of a per-exposure frame HDU (columns loglam, flux, ivar, mask).
ArmData frame_arm(fits::File& f, const std::string& name) {
  for (const char* col : {"loglam", "flux", "ivar"}) {
    if (!f.has_column(col)) f.fail(std::string("column ") + col + ": not found");
  }
  ArmData arm;
  arm.name = name;
  for (double l : f.read_column_double("loglam")) arm.wave_vac_A.push_back(std::pow(10.0, l));
  arm.flux = f.read_column_float("flux");
  arm.ivar = f.read_column_float("ivar");
  arm.mask = f.has_column("mask") ? f.read_column_int32("mask")
                                  : UninitVector<int32_t>(arm.wave_vac_A.size(), 0);
  for (auto& m : arm.mask) m &= kFrameBadBits;
  arm.resolution_R = kSdssR;
  if (f.has_column("wdisp")) wdisp_matrix(f.read_column_float("wdisp"), arm);
  return arm;
}

}  // namespace

void read_sdss_exposures(fits::File& f, SpectrumFile& out) {
  const Spectrum id = sdss_identity(f);
  // Frame HDUs are named <camera>-<exposure>-<flat>-<arc>, camera b1/b2/r1/r2 (BOSS) in the
  // spec file's order; one spectrum per exposure, its B and R frames as arms.
  const auto names = f.hdu_names();
  std::map<std::string, size_t> by_exposure;
  for (size_t h = 1; h < names.size(); ++h) {
    const std::string& n = names[h];
    if (n.size() < 12 || (n[0] != 'B' && n[0] != 'R' && n[0] != 'b' && n[0] != 'r') ||
        n[2] != '-' || !std::isdigit(static_cast<unsigned char>(n[1])))
      continue;
    const std::string expo = n.substr(3, 8);
    auto it = by_exposure.find(expo);
    if (it == by_exposure.end()) {
      it = by_exposure.emplace(expo, out.spectra.size()).first;
      Spectrum s = id;
      s.row_in_file = static_cast<int64_t>(out.spectra.size());
      out.spectra.push_back(std::move(s));
    }
    Spectrum& s = out.spectra[it->second];
    f.move_to(static_cast<int>(h));
    const std::string arm = n[0] == 'B' || n[0] == 'b' ? "B" : "R";
    for (const auto& a : s.arms)
      if (a.name == arm) {
        s.problem +=
            (s.problem.empty() ? "" : "; ") + ("two " + arm + " frames for exposure " + expo);
      }
    s.arms.push_back(frame_arm(f, arm));
    s.meta["EXPID"] = std::to_string(f.key_long("EXPOSURE", std::atol(expo.c_str())));
    const double tai = f.key_double("TAI-BEG", NAN);
    if (std::isfinite(tai)) s.meta["MJD"] = fmt::format("{:.6f}", tai / 86400.0);
  }
  if (out.spectra.empty()) read_sdss_spec(f, out);  // no frames: the coadd
}

void read_sdss_spec(fits::File& f, SpectrumFile& out) {
  Spectrum s = sdss_identity(f);

  f.move_to("COADD");
  for (const char* col : {"loglam", "flux", "ivar"}) {
    if (!f.has_column(col)) f.fail(std::string("column ") + col + ": not found");
  }
  ArmData arm;
  arm.name = "ALL";
  // loglam is float32: 10^loglam is good to ~3e-7 relative (0.08 km/s).
  for (double l : f.read_column_double("loglam")) arm.wave_vac_A.push_back(std::pow(10.0, l));
  arm.flux = f.read_column_float("flux");
  arm.ivar = f.read_column_float("ivar");
  arm.mask = f.has_column("and_mask") ? f.read_column_int32("and_mask")
                                      : UninitVector<int32_t>(arm.wave_vac_A.size(), 0);
  arm.resolution_R = kSdssR;
  if (f.has_column("wdisp")) wdisp_matrix(f.read_column_float("wdisp"), arm);
  s.arms.push_back(std::move(arm));
  out.spectra.push_back(std::move(s));
}

}  // namespace velox::detail
