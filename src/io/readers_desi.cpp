// DESI coadd (and spectra) files: FIBERMAP + {B,R,Z}_{WAVELENGTH,FLUX,IVAR,MASK,RESOLUTION}.
// Data model:
// https://desidatamodel.readthedocs.io/en/latest/DESI_SPECTRO_REDUX/SPECPROD/healpix/SURVEY/PROGRAM/PIXGROUP/PIXNUM/coadd-SURVEY-PROGRAM-PIXNUM.html
#include <algorithm>
#include <array>

#include "common/error.hpp"
#include "io/readers_detail.hpp"

namespace velox::detail {
namespace {

// One arm's wavelengths and image shapes, and the fibres [r0, r1) of the file to read.
struct ArmShape {
  std::string name;
  WaveArray wave;  // [n_pix], shared by the fibres' arms
  size_t n_fib = 0, n_pix = 0, n_pix_ivar = 0, n_pix_mask = 0, n_diag = 0, n_pix_res = 0;
  size_t r0 = 0, r1 = 0;  // the fibres held (clamped to n_fib)
  bool has_mask = false, has_res = false;
};

// Image HDU `name` and its C-order shape; throws IoError if the HDU is absent.
std::vector<int64_t> image_at(fits::File& f, const std::string& name) {
  f.move_to(name);
  if (!f.is_image()) f.fail("expected an image");
  return f.image_shape();
}

size_t last_axis(const std::vector<int64_t>& shape) { return shape.empty() ? 0 : shape.back(); }

ArmShape shape_arm(fits::File& f, const std::string& arm, const std::vector<std::string>& hdus,
                   size_t first, size_t count) {
  auto has = [&](const std::string& n) {
    return std::find(hdus.begin(), hdus.end(), n) != hdus.end();
  };
  ArmShape a;
  a.name = arm;
  image_at(f, arm + "_WAVELENGTH");
  const auto wave = f.read_image_double();
  a.wave = std::vector<double>(wave.begin(), wave.end());
  const auto fshape = image_at(f, arm + "_FLUX");
  if (fshape.size() != 2) f.fail("expected a [n_fiber][n_pix] image");
  a.n_fib = fshape[0];
  a.n_pix = fshape[1];
  // Each data HDU is checked as it is met (check_image: its data lie inside the file), so that a
  // truncated file names the HDU it ends in, as reading it would.
  f.check_image();
  a.r0 = std::min(first, a.n_fib);
  a.r1 = a.r0 + std::min(count, a.n_fib - a.r0);
  a.n_pix_ivar = last_axis(image_at(f, arm + "_IVAR"));
  f.check_image();
  a.has_mask = has(arm + "_MASK");
  a.n_pix_mask = a.has_mask ? last_axis(image_at(f, arm + "_MASK")) : a.n_pix;
  if (a.has_mask) f.check_image();
  a.has_res = has(arm + "_RESOLUTION");
  if (a.has_res) {
    const auto rshape = image_at(f, arm + "_RESOLUTION");
    if (rshape.size() != 3 || static_cast<size_t>(rshape[0]) != a.n_fib) {
      f.fail("expected a [n_fiber][n_diag][n_pix] image matching " + arm + "_FLUX");
    }
    a.n_diag = rshape[1];
    a.n_pix_res = rshape[2];
    f.check_image();
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
  std::vector<ArmShape> arms;
  for (const char* arm : {"B", "R", "Z"}) {
    if (std::find(hdus.begin(), hdus.end(), std::string(arm) + "_FLUX") != hdus.end()) {
      arms.push_back(shape_arm(f, arm, hdus, first, count));
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

  // The spectra with their metadata and empty arms first; then each image HDU once, every fibre's
  // row read straight into its arm (no block of fibres copied row by row).
  const size_t out0 = out.spectra.size();
  std::vector<std::array<int, 3>> slot;  // per spectrum: the arm's index in s.arms, -1 if none
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
    std::array<int, 3> sl = {-1, -1, -1};
    for (size_t ai = 0; ai < arms.size(); ++ai) {
      const ArmShape& a = arms[ai];
      if (i >= a.r1) {
        s.problem += (s.problem.empty() ? "" : "; ") + ("arm " + a.name + ": no data for fibre");
        continue;
      }
      ArmData arm;
      arm.name = a.name;
      arm.wave_vac_A = a.wave;
      if (a.has_res && a.n_diag > 0) arm.ndiag = static_cast<int>(a.n_diag);
      sl[ai] = static_cast<int>(s.arms.size());
      s.arms.push_back(std::move(arm));
    }
    slot.push_back(sl);
    out.spectra.push_back(std::move(s));
  }
  for (size_t ai = 0; ai < arms.size(); ++ai) {
    const ArmShape& a = arms[ai];
    // Each fibre's row of this arm in one image HDU; `read` reads fibre i's row into its arm.
    auto each_fibre = [&](const auto& read) {
      for (size_t k = 0; k < slot.size(); ++k) {
        if (slot[k][ai] < 0) continue;
        Spectrum& s = out.spectra[out0 + k];
        read(static_cast<size_t>(s.row_in_file), s.arms[static_cast<size_t>(slot[k][ai])]);
      }
    };
    // One HDU's rows of `row` elements into each fibre's arm (`member`). A tile-compressed HDU is
    // read as one block of the fibres and sliced (a tile may hold many fibres' rows: read row by
    // row, it would be decompressed again for each).
    auto rows_of = [&](const std::string& hdu, size_t row, auto member, auto read) {
      image_at(f, a.name + hdu);
      if (!f.is_compressed_image()) {
        each_fibre([&](size_t i, ArmData& arm) { arm.*member = read(i * row, row); });
        return;
      }
      const auto block = read(a.r0 * row, (a.r1 - a.r0) * row);
      each_fibre([&](size_t i, ArmData& arm) { arm.*member = row_slice(block, i - a.r0, row); });
    };
    auto floats = [&](uint64_t first, uint64_t n) { return f.read_image_float(first, n); };
    rows_of("_FLUX", a.n_pix, &ArmData::flux, floats);
    rows_of("_IVAR", a.n_pix_ivar, &ArmData::ivar, floats);
    if (a.has_mask) {
      rows_of("_MASK", a.n_pix_mask, &ArmData::mask,
              [&](uint64_t first, uint64_t n) { return f.read_image_int32(first, n); });
    } else {
      each_fibre([&](size_t, ArmData& arm) { arm.mask.assign(a.n_pix, 0); });
    }
    if (a.has_res && a.n_diag > 0)
      rows_of("_RESOLUTION", a.n_diag * a.n_pix_res, &ArmData::resolution, floats);
  }
}

}  // namespace velox::detail
