// LAMOST low-resolution spectra: DR8 (primary image [5][n]) and DR10 (BINTABLE COADD).
// Data model: http://www.lamost.org/dr8/v2.0/doc/lr-data-production-description
#include <cmath>

#include "common/error.hpp"
#include "io/readers_detail.hpp"

namespace velox::detail {
namespace {

// LAMOST LRS resolving power (about 1800 at 5500 A; LAMOST data release notes).
constexpr double kLamostR = 1800.0;

// TARGETID = header OBSID of the primary HDU, plus the pipeline's answers as metadata.
Spectrum lamost_spectrum(fits::File& f) {
  f.move_to(0);
  Spectrum s;
  int64_t obsid = -1;
  if (!f.has_key("OBSID") || !parse_int64(f.key_string("OBSID"), obsid)) {
    s.problem = "primary header has no integer OBSID";
  }
  s.targetid = obsid;
  header_meta(f, {"Z", "Z_ERR", "CLASS", "SUBCLASS", "OBJNAME", "RA", "DEC", "SNRG", "SNRR", "MJD"},
              s.meta);
  return s;
}

// LAMOST masks are stored as floats; any nonzero value is a bad pixel. Values that are not
// finite or do not fit an int32 (a corrupt file: converting them would be undefined) become 1.
UninitVector<int32_t> float_mask(const UninitVector<float>& m) {
  UninitVector<int32_t> out(m.size());
  for (size_t i = 0; i < m.size(); ++i) {
    const bool fits_int = std::isfinite(m[i]) && std::fabs(m[i]) < 2147483520.0f;
    out[i] = fits_int ? static_cast<int32_t>(m[i]) : 1;
    if (out[i] == 0 && m[i] != 0.0f) out[i] = 1;
  }
  return out;
}

}  // namespace

void read_lamost_dr8(fits::File& f, SpectrumFile& out) {
  Spectrum s = lamost_spectrum(f);
  const auto shape = f.image_shape();
  if (shape.size() != 2 || shape[0] < 3) {
    f.fail("expected a [5][n_pix] image (flux, ivar, wavelength, andmask, ormask)");
  }
  const size_t n = shape[1];
  const auto img = f.read_image_float();
  ArmData arm;
  arm.name = "ALL";
  arm.flux = row_slice(img, 0, n);
  arm.ivar = row_slice(img, 1, n);
  const auto wave = row_slice(img, 2, n);
  arm.wave_vac_A.assign(wave.begin(), wave.end());
  arm.mask = shape[0] > 3 ? float_mask(row_slice(img, 3, n)) : UninitVector<int32_t>(n, 0);
  arm.resolution_R = kLamostR;
  s.arms.push_back(std::move(arm));
  out.spectra.push_back(std::move(s));
}

void read_lamost_dr10(fits::File& f, SpectrumFile& out) {
  const Spectrum header = lamost_spectrum(f);
  f.move_to("COADD");
  for (const char* col : {"FLUX", "IVAR", "WAVELENGTH"}) {
    if (!f.has_column(col)) f.fail(std::string("column ") + col + ": not found");
  }
  const size_t n_flux = f.column_repeat("FLUX"), n_ivar = f.column_repeat("IVAR"),
               n_wave = f.column_repeat("WAVELENGTH");
  const auto flux = f.read_column_float("FLUX");
  const auto ivar = f.read_column_float("IVAR");
  const auto wave = f.read_column_double("WAVELENGTH");
  const bool has_mask = f.has_column("ANDMASK");
  const size_t n_mask = has_mask ? f.column_repeat("ANDMASK") : n_wave;
  const auto mask = has_mask ? f.read_column_float("ANDMASK") : UninitVector<float>();
  for (int64_t row = 0; row < f.num_rows(); ++row) {
    Spectrum s = header;
    s.row_in_file = row;
    ArmData arm;
    arm.name = "ALL";
    const auto w = row_slice(wave, row, n_wave);
    arm.wave_vac_A.assign(w.begin(), w.end());
    arm.flux = row_slice(flux, row, n_flux);
    arm.ivar = row_slice(ivar, row, n_ivar);
    arm.mask =
        has_mask ? float_mask(row_slice(mask, row, n_mask)) : UninitVector<int32_t>(n_wave, 0);
    arm.resolution_R = kLamostR;
    s.arms.push_back(std::move(arm));
    out.spectra.push_back(std::move(s));
  }
}

}  // namespace velox::detail
