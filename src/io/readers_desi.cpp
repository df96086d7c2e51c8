// DESI coadd (and spectra) files: FIBERMAP + {B,R,Z}_{WAVELENGTH,FLUX,IVAR,MASK,RESOLUTION}.
// Data model:
// https://desidatamodel.readthedocs.io/en/latest/DESI_SPECTRO_REDUX/SPECPROD/healpix/SURVEY/PROGRAM/PIXGROUP/PIXNUM/coadd-SURVEY-PROGRAM-PIXNUM.html
#include <algorithm>

#include "common/error.hpp"
#include "io/readers_detail.hpp"

namespace velox::detail {
namespace {

// One arm's arrays for the fibres [r0, r1) of the file, as stored (row-major, C order).
struct ArmArrays {
  std::string name;
  std::vector<double> wave;       // [n_pix]
  std::vector<float> flux, ivar;  // [r1 - r0][n_pix]
  std::vector<int32_t> mask;      // [r1 - r0][n_pix]; zeros if the file has no MASK
  std::vector<float> res;         // [r1 - r0][n_diag][n_pix]; empty if no RESOLUTION
  size_t n_fib = 0, n_pix = 0, n_pix_ivar = 0, n_pix_mask = 0, n_diag = 0, n_pix_res = 0;
  size_t r0 = 0, r1 = 0;  // the fibres held (clamped to n_fib)
};

// Image HDU `name` and its C-order shape; throws IoError if the HDU is absent.
std::vector<int64_t> image_at(fits::File& f, const std::string& name) {
  f.move_to(name);
  if (!f.is_image()) f.fail("expected an image");
  return f.image_shape();
}

size_t last_axis(const std::vector<int64_t>& shape) { return shape.empty() ? 0 : shape.back(); }

ArmArrays read_arm(fits::File& f, const std::string& arm, const std::vector<std::string>& hdus,
                   size_t first, size_t count) {
  auto has = [&](const std::string& n) {
    return std::find(hdus.begin(), hdus.end(), n) != hdus.end();
  };
  ArmArrays a;
  a.name = arm;
  image_at(f, arm + "_WAVELENGTH");
  a.wave = f.read_image_double();
  const auto fshape = image_at(f, arm + "_FLUX");
  if (fshape.size() != 2) f.fail("expected a [n_fiber][n_pix] image");
  a.n_fib = fshape[0];
  a.n_pix = fshape[1];
  a.r0 = std::min(first, a.n_fib);
  a.r1 = a.r0 + std::min(count, a.n_fib - a.r0);
  const size_t nr = a.r1 - a.r0;
  a.flux = f.read_image_float(a.r0 * a.n_pix, nr * a.n_pix);
  a.n_pix_ivar = last_axis(image_at(f, arm + "_IVAR"));
  a.ivar = f.read_image_float(a.r0 * a.n_pix_ivar, nr * a.n_pix_ivar);
  if (has(arm + "_MASK")) {
    a.n_pix_mask = last_axis(image_at(f, arm + "_MASK"));
    a.mask = f.read_image_int32(a.r0 * a.n_pix_mask, nr * a.n_pix_mask);
  } else {
    a.n_pix_mask = a.n_pix;
    a.mask.assign(nr * a.n_pix, 0);
  }
  if (has(arm + "_RESOLUTION")) {
    const auto rshape = image_at(f, arm + "_RESOLUTION");
    if (rshape.size() != 3 || static_cast<size_t>(rshape[0]) != a.n_fib) {
      f.fail("expected a [n_fiber][n_diag][n_pix] image matching " + arm + "_FLUX");
    }
    a.n_diag = rshape[1];
    a.n_pix_res = rshape[2];
    const size_t row = a.n_diag * a.n_pix_res;
    a.res = f.read_image_float(a.r0 * row, nr * row);
  }
  return a;
}

}  // namespace

void read_desi_coadd(fits::File& f, SpectrumFile& out, size_t first, size_t count) {
  const auto hdus = f.hdu_names();
  // Healpix coadds name their pixel in the primary header (desidatamodel: HPXPIXEL, NSIDE 64,
  // nested); tile coadds have none.
  f.move_to(0);
  const std::string hpx = f.has_key("HPXPIXEL") ? std::to_string(f.key_long("HPXPIXEL", -1)) : "";
  out.survey = f.key_string("SURVEY", "");
  std::vector<ArmArrays> arms;
  for (const char* arm : {"B", "R", "Z"}) {
    if (std::find(hdus.begin(), hdus.end(), std::string(arm) + "_FLUX") != hdus.end()) {
      arms.push_back(read_arm(f, arm, hdus, first, count));
    }
  }
  if (arms.empty()) {
    throw IoError(f.path() + ": HDU B_FLUX/R_FLUX/Z_FLUX: none found (not a DESI coadd)");
  }
  size_t n_fib = 0;
  for (const auto& a : arms) n_fib = std::max(n_fib, a.n_fib);

  f.move_to("FIBERMAP");
  if (!f.has_column("TARGETID")) f.fail("column TARGETID: not found");
  const auto targetid = f.read_column_int64("TARGETID");
  std::map<std::string, std::vector<std::string>> meta_cols;
  // What target selection (fit/select.cpp) and the catalog's FIBERMAP columns need; the whole
  // FIBERMAP row goes to /fibermap separately (app/fit_outputs.cpp).
  for (const char* col : {"OBJTYPE",         "COADD_FIBERSTATUS",
                          "FIBERSTATUS",     "DESI_TARGET",
                          "BGS_TARGET",      "MWS_TARGET",
                          "SCND_TARGET",     "SV1_DESI_TARGET",
                          "SV1_BGS_TARGET",  "SV1_MWS_TARGET",
                          "SV1_SCND_TARGET", "SV3_DESI_TARGET",
                          "SV3_BGS_TARGET",  "SV3_MWS_TARGET",
                          "SV3_SCND_TARGET", "TARGET_RA",
                          "TARGET_DEC",      "REF_ID",
                          "REF_CAT",         "FIBER",
                          "EXPID",           "MJD"}) {
    if (f.has_column(col) && f.column_repeat(col) == 1) meta_cols[col] = f.read_column_text(col);
  }

  for (size_t i = std::min(first, n_fib); i < n_fib && i - first < count; ++i) {
    Spectrum s;
    s.row_in_file = static_cast<int64_t>(i);
    if (i < targetid.size()) {
      s.targetid = targetid[i];
      for (const auto& [col, values] : meta_cols) s.meta[col] = values[i];
      if (!hpx.empty()) s.meta["HPXPIXEL"] = hpx;
    } else {
      s.problem = "FIBERMAP has only " + std::to_string(targetid.size()) + " rows for " +
                  std::to_string(n_fib) + " fibres";
    }
    for (const auto& a : arms) {
      if (i >= a.r1) {
        s.problem += (s.problem.empty() ? "" : "; ") + ("arm " + a.name + ": no data for fibre");
        continue;
      }
      const size_t k = i - a.r0;  // the fibre's row in this block
      ArmData arm;
      arm.name = a.name;
      arm.wave_vac_A = a.wave;
      arm.flux = row_slice(a.flux, k, a.n_pix);
      arm.ivar = row_slice(a.ivar, k, a.n_pix_ivar);
      arm.mask = row_slice(a.mask, k, a.n_pix_mask);
      if (a.n_diag > 0) {
        arm.ndiag = static_cast<int>(a.n_diag);
        arm.resolution = row_slice(a.res, k, a.n_diag * a.n_pix_res);
      }
      s.arms.push_back(std::move(arm));
    }
    out.spectra.push_back(std::move(s));
  }
}

}  // namespace velox::detail
