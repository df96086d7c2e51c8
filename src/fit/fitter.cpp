#include "fit/fitter.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <numeric>
#include <tuple>

#include "common/median.hpp"
#include "fit/ln_wave.hpp"
#include "fit/params.hpp"
#include "fit/prep_kernels.hpp"
#include "fit/resolution.hpp"
#include "io/rvs_warn.hpp"
#include "kernels/fit_pipeline.hpp"

namespace velox {

namespace {

using kern::kSpeedOfLight_kms;

// Per pixel of a grid: 0 wavelength not finite, 1 outside the fit range, 2 inside it (the
// template coverage [lam_lo, lam_hi], fit.wave_min_A/wave_max_A, outside fit.mask_bands_A). Kept
// per grid and range on this thread (the fibres of a file share their arms' grids).
const char* fit_range_of(const ArmGrid& grid, const double* wave, size_t n, double lam_lo,
                         double lam_hi, const FitConfig& cfg) {
  using Key = std::tuple<double, double, double, double, std::vector<std::pair<double, double>>>;
  thread_local GridWorkCache<Key, std::vector<char>> cache;
  const auto probe =
      std::forward_as_tuple(lam_lo, lam_hi, cfg.wave_min_A, cfg.wave_max_A, cfg.mask_bands_A);
  return cache
      .get(grid.id, probe,
           [&](std::vector<char>& range) {
             range.resize(n);
             for (size_t j = 0; j < n; ++j) {
               const double w = wave[j];
               bool in = !(w < lam_lo || w > lam_hi);
               if (cfg.wave_min_A > 0 && w < cfg.wave_min_A) in = false;
               if (cfg.wave_max_A > 0 && w > cfg.wave_max_A) in = false;
               for (const auto& b : cfg.mask_bands_A)
                 if (w >= b.first && w <= b.second) in = false;
               range[j] = !std::isfinite(w) ? 0 : in ? 2 : 1;
             }
           })
      .data();
}

// Per pixel of a grid: lib.nearest_pixel_ln for a per-template-pixel array of `size` values (the
// pixel TemplateLibrary::model_sigma_at_ln and template_fwhm_at_ln read); -1 where ln lambda is
// not above -inf. Kept per grid and library grid on this thread.
const long* template_pixel_of(const ArmGrid& grid, size_t n, const TemplateLibrary& lib,
                              size_t size) {
  thread_local GridWorkCache<std::tuple<double, double, size_t>, std::vector<long>> cache;
  return cache
      .get(grid.id, std::make_tuple(lib.lnlam0, lib.dlnlam, size),
           [&](std::vector<long>& tpix) {
             tpix.resize(n);
             for (size_t j = 0; j < n; ++j)
               tpix[j] = grid.ln[j] > -INFINITY ? lib.nearest_pixel_ln(grid.ln[j], size) : -1;
           })
      .data();
}

double arm_resolution(const ArmView& arm, const FitContext& ctx) {
  if (std::isfinite(arm.resolution_R) && arm.resolution_R > 0) return arm.resolution_R;
  if (arm.ndiag > 0) {
    const double r = effective_resolution(arm.wave_vac_A, arm.n_pix, arm.resolution, arm.ndiag);
    if (std::isfinite(r) && r > 100) return r;
  }
  auto it = ctx.cfg.default_R.find(ctx.format);
  return it != ctx.cfg.default_R.end() ? it->second : 2000.0;
}

// Velocity segments of the packed pixels: every arm, or the blue and red halves of a one-arm
// spectrum split at the format's dichroic (when both halves keep min_arm_pixels).
// wave0: the vacuum wavelengths of the input arm of slot 0.
void set_segments(const FitContext& ctx, const double* wave0, Packed& all, int64_t* fit_info) {
  auto add = [&](int arm, int i0, int i1, const std::string& name) {
    all.seg_arm[all.n_seg] = arm;
    all.seg_start[all.n_seg] = i0;
    all.seg_start[all.n_seg + 1] = i1;
    all.seg_names.push_back(name);
    ++all.n_seg;
  };
  if (all.n_arms > 1) {
    for (int a = 0; a < all.n_arms; ++a)
      add(a, all.arm_start[a], all.arm_start[a + 1], all.names[a]);
    return;
  }
  auto split = ctx.cfg.arm_split_A.find(ctx.format);
  if (all.n_arms != 1 || split == ctx.cfg.arm_split_A.end()) return;
  // Packed pixels are in wavelength order within an arm: the first at or above the split.
  const int n = static_cast<int>(all.input_pixel.size());
  const int k = static_cast<int>(
      std::lower_bound(all.input_pixel.begin(), all.input_pixel.end(), split->second,
                       [&](int j, double split_A) { return wave0[j] < split_A; }) -
      all.input_pixel.begin());
  if (k < ctx.cfg.min_arm_pixels || n - k < ctx.cfg.min_arm_pixels) return;
  add(0, 0, k, "B");
  add(0, k, n, "R");
  *fit_info |= info::kArmSplit;
}

// Survival function of the chi^2 distribution with k = 1..3 degrees of freedom.
double chi2_sf(double x, int k) {
  if (!(x > 0)) return 1.0;
  const double h = std::sqrt(x / 2.0);
  if (k == 1) return std::erfc(h);
  if (k == 2) return std::exp(-x / 2.0);
  return std::erfc(h) + std::sqrt(2.0 * x / M_PI) * std::exp(-x / 2.0);  // k == 3
}

CatalogRow failure(CatalogRow row, int64_t bits) {
  row.RVS_WARN |= bits;
  row.SUCCESS = false;
  return row;
}

}  // namespace

double error_floor(const FitConfig& cfg, const std::string& format, const std::string& column,
                   const std::string& survey) {
  const double* f = format_value(cfg.error_floor, format, survey, column);
  return f ? *f : 0.0;
}

kern::PipelineConfig pipeline_config(const FitConfig& cfg, const TemplateLibrary& lib) {
  kern::PipelineConfig pc;
  pc.vmin_kms = cfg.vmin_kms;
  pc.vmax_kms = cfg.vmax_kms;
  pc.cont_deg = cfg.cont_deg;
  pc.ccf_cont_deg = cfg.ccf_cont_deg;
  pc.n_starts = cfg.n_starts;
  pc.n_ccf_use = cfg.n_ccf_templates;
  pc.lag_step = std::max(1, cfg.ccf_lag_step);
  pc.clip_sigma = cfg.clip_sigma;
  pc.seg_max_iter = cfg.seg_max_iter;
  pc.vpost_half = std::max(0, cfg.vrad_moments_half);
  pc.vpost_step = cfg.vrad_moments_step;
  pc.lm.max_iter = cfg.max_iter;
  pc.lm.join_dchi2 = cfg.start_join_dchi2;
  for (const FitParam& p : fit_params(lib, cfg)) {
    pc.lm.lo[p.theta] = p.lo;
    pc.lm.hi[p.theta] = p.hi;
  }
  pc.fit_vsini = cfg.fit_vsini ? 1 : 0;
  pc.vsini_start = std::min(cfg.vsini_start_kms, 0.5 * pc.lm.hi[kern::vsini_index(lib.n_label)]);
  pc.limb_eps = cfg.limb_darkening;
  return pc;
}

PreparedSpectrum prepare_spectrum(const Spectrum& spec, const FitContext& ctx) {
  std::vector<ArmView> arms;
  for (const auto& arm : spec.arms) arms.push_back(arm.view());
  return prepare_spectrum(spec, arms, ctx);
}

PreparedSpectrum prepare_spectrum(const Spectrum& spec, const std::vector<ArmView>& arms,
                                  const FitContext& ctx) {
  PreparedSpectrum p;
  const auto& lib = ctx.lib;
  const auto& cfg = ctx.cfg;
  CatalogRow& row = p.row;
  Packed& all = p.packed;
  row.TARGETID = spec.targetid;
  row.SOURCE_FILE = spec.source_file;
  row.ROW_IN_FILE = spec.row_in_file;
  auto note = [&](const std::string& m) { p.notes.push_back(m); };
  if (!spec.problem.empty()) {
    note(spec.problem);
    row = failure(row, warn::kBadInput);
    return p;
  }
  auto ot = spec.meta.find("OBJTYPE");
  if (ot != spec.meta.end() && ot->second != "TGT") {
    note("OBJTYPE '" + ot->second + "': not a stellar target, not fitted");
    row = failure(row, warn::kNotFitted);
    return p;
  }

  // ---- Masking and packing --------------------------------------------------------------
  const double lam_lo = lib.wave_vac_A(2) * std::exp(kern::ln_doppler(cfg.vmax_kms));
  const double lam_hi = lib.wave_vac_A(lib.n_tpix - 4) * std::exp(kern::ln_doppler(cfg.vmin_kms));
  double best_R = 0.0;  // effective resolving power of the sharpest fitted arm (VSINI)
  double floor_R = INFINITY;  // the same of the broadest fitted arm (the VSINI detection floor)
  // Two passes over the arms: each arm's pixels first (which are used, the matrix rows'
  // moments), so that the packed arrays are allocated once at their exact size; then the packing.
  // Per-thread scratch, reused across spectra (no per-fibre allocations).
  thread_local std::array<std::vector<size_t>, kern::kMaxArms> idx_of;  // used pixels per slot
  thread_local std::array<ResolutionFold, kern::kMaxArms> fold_of;
  size_t in_slot[kern::kMaxArms] = {};  // the input arm of each slot
  ArmGrid grid_of[kern::kMaxArms];      // its grid (arm_grid's cache)
  double R_of[kern::kMaxArms] = {};     // its resolving power (arm_resolution)
  bool rm_of[kern::kMaxArms] = {};      // whether it has a resolution matrix (use_rm)
  static_assert(kern::kMaxArms < kArmGridCache, "the kept arms' grids fit in the cache");
  int n_slots = 0;
  size_t n_used = 0;
  // Every input arm's grid, for the class rebinning (the lookup compares the whole wavelength
  // array); none where the cache cannot keep them all (id 0: looked up again there).
  thread_local std::vector<ArmGrid> grid_in;
  grid_in.assign(arms.size() < static_cast<size_t>(kArmGridCache) ? arms.size() : 0, ArmGrid{});
  for (size_t a_in = 0; a_in < arms.size(); ++a_in) {
    const ArmView& arm = arms[a_in];
    if (n_slots >= kern::kMaxArms) break;
    const size_t n = arm.n_pix;
    // ln of the arm's wavelengths and what else the grid fixes: once per file and arm for DESI
    // coadds (fit/ln_wave.hpp).
    const ArmGrid grid = arm_grid(arm.wave_vac_A, n);
    if (a_in < grid_in.size()) grid_in[a_in] = grid;
    // Resolution-matrix forward model for this arm? Rows with the template LSF folded in; pixels
    // whose row is all zero or not finite are not fitted.
    const bool use_rm = cfg.resolution_matrix && arm.ndiag > 0 && arm.resolution;
    // The pixels the fit may use, before the matrix rows are known: finite, ivar > 0, not masked,
    // inside the template coverage, the configured range and outside the masked bands. What
    // depends on the wavelengths alone is kept per grid (fit_range_of).
    const char* range = fit_range_of(grid, arm.wave_vac_A, n, lam_lo, lam_hi, cfg);
    // Per pixel: 1 usable data, 2 usable data inside the fit range (the rows worth folding).
    // Per-thread scratch, reused across spectra (no per-fibre allocations).
    thread_local std::vector<char> use;
    std::vector<size_t>& idx = idx_of[n_slots];
    use.resize(n);
    static_assert(sizeof(int) == sizeof(int32_t), "masks are int32");
    const size_t n2 = prep_kernels().select_pixels(
        arm.flux, arm.ivar, reinterpret_cast<const int*>(arm.mask), range, n, use.data());
    long first = -1, last = -1;  // the first and last pixel of use 2
    if (n2 > 0) {
      first = static_cast<long>(std::find(use.begin(), use.end(), 2) - use.begin());
      last = static_cast<long>(use.rend() - std::find(use.rbegin(), use.rend(), 2)) - 1;
    }
    // With the matrix, only the rows of pixels the fit can use are folded (the others are never
    // applied): their moments now, their fold parameters below (the fit builds the rows).
    ResolutionFold& fold = fold_of[n_slots];
    if (use_rm) fold.set_span(arm.resolution, n, arm.ndiag, first, last);
    // The pixels of use 2 (and with the matrix a usable row), without a branch per pixel.
    idx.resize(n2 + 1);  // one slot past the last kept pixel is written (and dropped)
    size_t m = 0;
    const double* m0 = use_rm ? fold.row_sums() : nullptr;  // null with the matrix: no row usable
    if (use_rm && m0 && n2 > 0) {
      // fold.ok(j) without its branches: set_span read every row of [first, last]
      for (long j = first; j <= last; ++j) {
        idx[m] = static_cast<size_t>(j);
        const double v = m0[j];
        m += (use[static_cast<size_t>(j)] == 2) & (v > 1e-6) & (v < INFINITY);
      }
    } else if (!use_rm) {
      for (long j = first; n2 > 0 && j <= last; ++j) {
        idx[m] = static_cast<size_t>(j);
        m += use[static_cast<size_t>(j)] == 2;
      }
    }
    idx.resize(m);
    if (static_cast<int>(idx.size()) < cfg.min_arm_pixels) {
      // Excluded: noted where the arm has any usable pixel (data, and with the matrix a usable
      // row), inside the fit range or not.
      bool any_valid = !idx.empty();
      if (!any_valid && !use_rm)
        any_valid = std::any_of(use.begin(), use.end(), [](char u) { return u != 0; });
      if (!any_valid && use_rm)
        any_valid = any_resolution_row_ok(arm.resolution, n, arm.ndiag, use.data());
      if (any_valid) {
        row.FIT_INFO |= info::kArmExcluded;
        note(
            fmt::format("arm {}: {} usable pixels inside the template coverage "
                        "({:.0f}-{:.0f} A vacuum): excluded",
                        arm.name, idx.size(), lam_lo, lam_hi));
      }
      continue;
    }
    grid_of[n_slots] = grid;
    rm_of[n_slots] = use_rm;
    // The arm's resolving power now, while the rows the moments just read are in cache.
    R_of[n_slots] = arm_resolution(arm, ctx);
    in_slot[n_slots++] = a_in;
    n_used += idx.size();
  }
  // Exact capacity: grown by push_back, these vectors held up to twice their size while a batch
  // of prepared spectra waits for the GPU.
  for (auto* v : {&all.lnlam, &all.xleg}) v->reserve(n_used);
  for (auto* v : {&all.flux, &all.ivar}) v->reserve(n_used);
  for (auto* v : {&all.full_idx, &all.input_pixel}) v->reserve(n_used);
  // A kept arm with a matrix: fold parameters for every used pixel.
  const bool any_rm = std::any_of(rm_of, rm_of + n_slots, [](bool b) { return b; });
  if (any_rm) all.fold.resize(3 * n_used);
  for (int slot = 0; slot < n_slots; ++slot) {
    const size_t a_in = in_slot[slot];
    const ArmView& arm = arms[a_in];
    const size_t n = arm.n_pix;
    // The first pass looked up every input arm's grid: with more arms than the grid cache keeps,
    // a kept arm's entry may have been evicted, so it is looked up again.
    if (arms.size() >= static_cast<size_t>(kArmGridCache))
      grid_of[slot] = arm_grid(arm.wave_vac_A, n);
    const double* ln_wave = grid_of[slot].ln;
    const bool use_rm = rm_of[slot];
    const std::vector<size_t>& idx = idx_of[slot];
    const ResolutionFold& fold = fold_of[slot];
    const double lo = ln_wave[idx.front()];
    const double hi = ln_wave[idx.back()];
    // Per-arm velocity zero point (FitConfig::arm_zero_point_kms): ln lambda - ln(1 + zp/c) for
    // the segment's pixels (one-arm formats: the halves at arm_split_A).
    double zp_b = 0.0, zp_r = 0.0;
    const auto split_fmt = cfg.arm_split_A.find(ctx.format);
    const bool split_arm = split_fmt != cfg.arm_split_A.end() && arms.size() == 1;
    auto zp = [&](const std::string& name) {
      const double* z = format_value(cfg.arm_zero_point_kms, ctx.format, ctx.survey, name);
      return z ? *z : 0.0;
    };
    zp_b = std::log1p((split_arm ? zp("B") : zp(std::string(arm.name))) / kSpeedOfLight_kms);
    zp_r = split_arm ? std::log1p(zp("R") / kSpeedOfLight_kms) : zp_b;
    const double split_A = split_arm ? split_fmt->second : INFINITY;
    const size_t n0 = all.lnlam.size(), n_all = n0 + idx.size();
    for (auto* v : {&all.lnlam, &all.xleg}) v->resize(n_all);
    for (auto* v : {&all.flux, &all.ivar}) v->resize(n_all);
    for (auto* v : {&all.full_idx, &all.input_pixel}) v->resize(n_all);
    // The pixel's index in the model's full grid (below), which starts ndiag/2 pixels before
    // the first used pixel.
    const long full_off = use_rm ? arm.ndiag / 2 - static_cast<long>(idx.front()) : 0;
    {
      const prep::PackIn in{ln_wave, arm.wave_vac_A, arm.flux, arm.ivar, split_A, zp_b, zp_r, lo,
                            hi,      use_rm,         full_off};
      const prep::PackOut out{all.lnlam.data() + n0,    all.xleg.data() + n0,
                              all.flux.data() + n0,     all.ivar.data() + n0,
                              all.full_idx.data() + n0, all.input_pixel.data() + n0};
      prep_kernels().pack_pixels(in, idx.data(), idx.size(), out);
    }
    // The emulator's own variance (FitConfig::model_variance): (scale sigma_m F)^2 added to 1/ivar,
    // F the running median of the flux over +-15 used pixels, on the packed flux and ivar in place.
    if (cfg.model_variance && !lib.model_sigma.empty() && cfg.model_variance_scale > 0) {
      // The window of +-15 used pixels slides one pixel at a time, kept sorted
      // (fit/isa/prep_slot.cpp: a per-pixel nth_element made preparation 7x slower on LAMOST).
      thread_local std::vector<double> msig;  // the emulator's sigma at each used pixel
      msig.resize(idx.size());
      // lib.model_sigma_at_ln at each used pixel, through the grid's template pixels
      const long* tp = template_pixel_of(grid_of[slot], arm.n_pix, lib, lib.model_sigma.size());
      for (size_t k = 0; k < idx.size(); ++k) {
        const long t = tp[idx[k]];
        msig[k] = t >= 0 ? lib.model_sigma[static_cast<size_t>(t)] : 0.0;
      }
      prep_kernels().model_ivar(all.flux.data() + n0, msig.data(), cfg.model_variance_scale,
                                idx.size(), all.ivar.data() + n0);
    }
    if (use_rm) {
      // The model's full grid spans the used pixels plus ndiag/2 pixels beyond each end (the
      // reach of their rows; pixels before the first or after the last used one are not
      // evaluated), with ln lambda extrapolated at the end spacing beyond the arm, so that every
      // matrix row of an edge pixel finds the model where its weight lies (without the padding
      // the arm's first and last pixels lost up to ~40% of their row's weight). Only the used
      // pixels' rows are read (full_idx).
      const long h = arm.ndiag / 2;
      const long nl = static_cast<long>(n);
      const long j_lo = static_cast<long>(idx.front()) - h;  // arm pixel of full index 0
      const long n_grid =
          static_cast<long>(idx.back()) - static_cast<long>(idx.front()) + 1 + 2 * h;
      UninitVector<double> full(n_grid);  // every entry written below
      const double d0 = std::log(arm.wave_vac_A[1] / arm.wave_vac_A[0]);
      const double d1 = std::log(arm.wave_vac_A[n - 1] / arm.wave_vac_A[n - 2]);
      // Grid pixel jj is arm pixel j = jj + j_lo: before the arm, in it, after it (three loops
      // without a branch per pixel). A matrix arm is never split: one zero point.
      const long in_lo = std::clamp(-j_lo, 0L, n_grid),
                 in_hi = std::clamp(nl - j_lo, in_lo, n_grid);
      for (long jj = 0; jj < in_lo; ++jj) full[jj] = (ln_wave[0] + (jj + j_lo) * d0) - zp_b;
      for (long jj = in_lo; jj < in_hi; ++jj) full[jj] = ln_wave[jj + j_lo] - zp_b;
      for (long jj = in_hi; jj < n_grid; ++jj)
        full[jj] = (ln_wave[n - 1] + (jj + j_lo - nl + 1) * d1) - zp_b;
      // The used pixels' fold parameters with the template LSF removed (fit/resolution.hpp);
      // the fit builds their rows from them (kernels/fold.hpp), diagonal-major [ndiag][n_grid]
      // at column full_idx. A line spread varying with wavelength (joined libraries) is taken
      // at each pixel.
      const double fwhm_fixed = std::isfinite(lib.fwhm_A) ? lib.fwhm_A : 0.0;
      thread_local std::vector<double> fwhm_pp;
      if (!lib.lsf_fwhm_A.empty()) {
        fwhm_pp.resize(idx.size());
        if (lib.n_tpix > 0) {  // lib.template_fwhm_at_ln, through the grid's template pixels
          const long* tp = template_pixel_of(grid_of[slot], arm.n_pix, lib, lib.lsf_fwhm_A.size());
          for (size_t k = 0; k < idx.size(); ++k)
            fwhm_pp[k] = lib.lsf_fwhm_A[static_cast<size_t>(std::max(tp[idx[k]], 0L))];
        } else {
          for (size_t k = 0; k < idx.size(); ++k)
            fwhm_pp[k] = lib.template_fwhm_at_ln(ln_wave[idx[k]]);
        }
      }
      fold.params(idx.data(), idx.size(), arm.wave_vac_A,
                  lib.lsf_fwhm_A.empty() ? nullptr : fwhm_pp.data(), fwhm_fixed,
                  all.fold.data() + 3 * n0);
      all.full_lnlam.push_back(std::move(full));
      all.ndiag.push_back(arm.ndiag);
    } else {
      if (any_rm) std::fill(all.fold.data() + 3 * n0, all.fold.data() + 3 * n_all, 0.0);
      all.full_lnlam.emplace_back();
      all.ndiag.push_back(0);
    }
    // With the matrix the basis stays at the templates' own resolution (R -> infinity: no
    // Gaussian), since the folded rows carry the instrument's remaining blur.
    const double R_inst = R_of[slot];
    all.models.push_back(ctx.cache.get(use_rm ? 1e9 : R_inst));
    {
      // The model cannot be sharper than the templates: R_eff = min(instrument, templates) at
      // the arm's middle.
      const double mid = std::sqrt(arm.wave_vac_A[idx.front()] * arm.wave_vac_A[idx.back()]);
      const double f_lib = lib.template_fwhm_A(mid);
      const double R_lib = f_lib > 0 ? mid / f_lib : R_inst;
      best_R = std::max(best_R, std::min(R_inst, R_lib));
      floor_R = std::min(floor_R, std::min(R_inst, R_lib));
    }
    all.names.emplace_back(arm.name);
    all.input_arm.push_back(static_cast<int>(a_in));
    all.arm_start[all.n_arms + 1] = static_cast<int>(all.flux.size());
    ++all.n_arms;
  }
  set_segments(ctx, all.n_arms > 0 ? arms[all.input_arm[0]].wave_vac_A : nullptr, all,
               &row.FIT_INFO);
  all.fit_vsini = cfg.fit_vsini && best_R >= cfg.vsini_min_R ? 1 : 0;
  all.vsini_R = best_R;
  all.vsini_floor_R = std::isfinite(floor_R) ? floor_R : 0.0;
  if (cfg.fit_vsini && !all.fit_vsini && all.n_arms > 0) {
    row.FIT_INFO |= info::kVsiniUnresolved;
    note(fmt::format("VSINI not fitted: effective resolving power {:.0f} below fit.vsini_min_R {:.0f}",
                     best_R, cfg.vsini_min_R));
  }
  row.NPIX_TOT = static_cast<int32_t>(all.flux.size());
  if (row.NPIX_TOT < cfg.min_pixels || all.n_arms == 0) {
    note(fmt::format("only {} usable pixels (need {})", row.NPIX_TOT, cfg.min_pixels));
    row = failure(row, warn::kNoPixels);
    return p;
  }
  {
    // flux * sqrt(ivar) in FP32 (as always: a float times the float sqrt), reused across spectra
    thread_local std::vector<float> sn;
    thread_local std::vector<uint32_t> scratch;
    sn.resize(all.flux.size());
    prep_kernels().sn_values(all.flux.data(), all.ivar.data(), sn.size(), sn.data());
    row.SN = median_upper_f32(sn.data(), sn.size(), scratch);
  }
  // Rebinned for the classification only when the spectrum will be fitted.
  if (cfg.classify && !lib.classes.empty())
    p.cls = rebin_for_classes(arms, cfg.mask_bands_A, &grid_in);
  else
    row.FIT_INFO |= info::kNoClassification;
  p.ready = true;
  return p;
}

void diagnostics_of(const PreparedSpectrum& p, const Spectrum& spec,
                    const std::vector<ArmView>* arms, const std::vector<float>& ivar,
                    const std::vector<double>& model, FitDiagnostics* diag) {
  if (model.empty()) return;
  const Packed& all = p.packed;
  for (int a = 0; a < all.n_arms; ++a) {
    const size_t in = static_cast<size_t>(all.input_arm[a]);
    const double* wave = arms ? (*arms)[in].wave_vac_A : spec.arms[in].wave_vac_A.data();
    for (int i = all.arm_start[a]; i < all.arm_start[a + 1]; ++i) {
      if (!(ivar[i] > 0)) continue;
      diag->wave_vac_A.push_back(wave[all.input_pixel[i]]);
      diag->flux.push_back(all.flux[i]);
      diag->ivar.push_back(ivar[i]);
      diag->model.push_back(model[i]);
      diag->arm_of_pixel.push_back(a);
    }
  }
}

ArmMean combine_arm_velocities(const std::vector<ArmVelocity>& arms, double t_dof) {
  ArmMean m;
  std::vector<ArmVelocity> a;
  for (const auto& x : arms)
    if (std::isfinite(x.v) && x.var > 0.0 && std::isfinite(x.var)) a.push_back(x);
  if (a.empty()) return m;
  std::vector<double> u(a.size(), 1.0);  // the Student-t factors (1: Gaussian)
  auto mean = [&](double* w_sum) {
    double sw = 0.0, swv = 0.0;
    for (size_t i = 0; i < a.size(); ++i) {
      sw += u[i] / a[i].var;
      swv += u[i] * a[i].v / a[i].var;
    }
    *w_sum = sw;
    return swv / sw;
  };
  double w_sum = 0.0, v = mean(&w_sum);
  if (a.size() >= 3 && t_dof > 0.0) {
    for (int it = 0; it < 100; ++it) {
      for (size_t i = 0; i < a.size(); ++i) {
        const double r = a[i].v - v;
        u[i] = std::min(1.0, (t_dof + 1.0) / (t_dof + r * r / a[i].var));
      }
      const double v1 = mean(&w_sum);
      m.iterations = it + 1;
      const bool done = std::fabs(v1 - v) < 1e-9;
      v = v1;
      if (done) break;
    }
  }
  m.ok = true;
  m.vrad = v;
  m.err = 1.0 / std::sqrt(w_sum);
  return m;
}

double vsini_floor_kms(const Packed& pk, const FitContext& ctx) {
  const double frac = vsini_floor_frac(ctx.cfg, ctx.format, ctx.survey, ctx.lib.kind());
  return pk.vsini_floor_R > 0 ? frac * kern::kSpeedOfLight_kms / pk.vsini_floor_R : 0.0;
}

void apply_vsini_floor(CatalogRow& row, double floor_kms, const FitConfig& cfg) {
  // Detections only above the resolution floor (FitConfig::vsini_fwhm_frac, a fraction of the
  // broadest arm's LSF FWHM): below it the broadening is what LSF and template mismatch make,
  // so the star gets an upper limit of at least the floor (its VSINI + 2 sigma when that is
  // larger), never a detection.
  if (!std::isfinite(row.VSINI_UPPER) && row.VSINI < floor_kms) {
    const double e = std::isfinite(row.VSINI_ERR) ? row.VSINI_ERR : 0.0;
    row.VSINI_UPPER = std::max(floor_kms, row.VSINI + 2.0 * e);
  } else if (std::isfinite(row.VSINI_UPPER)) {
    row.VSINI_UPPER = std::max(row.VSINI_UPPER, floor_kms);
  }
  if (std::isfinite(row.VSINI_UPPER)) {
    row.FIT_INFO |= info::kVsiniUpperLimit;
    row.VSINI_ERR = NAN;  // not detected: the limit, not an error bar, describes it
  } else {
    row.FIT_INFO &= ~info::kVsiniUpperLimit;
  }
  if (row.VSINI > cfg.vsini_max_ok_kms)
    row.RVS_WARN |= warn::kVsiniLarge;
  else
    row.RVS_WARN &= ~warn::kVsiniLarge;
}

void finish_row(PreparedSpectrum& p, const kern::PipelineResult& res,
                const std::vector<float>& ivar, const FitContext& ctx) {
  const auto& lib = ctx.lib;
  const auto& cfg = ctx.cfg;
  const Packed& all = p.packed;
  CatalogRow& row = p.row;
  row.VRAD_CCF = res.v_ccf;
  if (res.status != kern::kPipeOk) {
    p.notes.push_back("continuum normal equations singular for every template / every LM start");
    row = failure(row, warn::kFitFailed);
    return;
  }
  const kern::LMState& best = res.best;
  row.CHISQ_C = res.chi2_c;
  for (int a = 0; a < all.n_arms; ++a) {
    double* chisq = nullptr;
    int32_t* npix = nullptr;
    double* sn = nullptr;
    double* chisq_c = nullptr;
    if (all.names[a] == "B") chisq = &row.CHISQ_B, chisq_c = &row.CHISQ_C_B, npix = &row.NPIX_B, sn = &row.SN_B;
    if (all.names[a] == "R") chisq = &row.CHISQ_R, chisq_c = &row.CHISQ_C_R, npix = &row.NPIX_R, sn = &row.SN_R;
    if (all.names[a] == "Z") chisq = &row.CHISQ_Z, chisq_c = &row.CHISQ_C_Z, npix = &row.NPIX_Z, sn = &row.SN_Z;
    if (!chisq) continue;
    *chisq = res.chi2_arm[a];
    *chisq_c = res.chi2_c_arm[a];
    *npix = res.npix_arm[a];
    std::vector<double> s;
    for (int i = all.arm_start[a]; i < all.arm_start[a + 1]; ++i)
      if (ivar[i] > 0) s.push_back(all.flux[i] * std::sqrt(ivar[i]));
    *sn = median_upper(s);
  }

  // ---- Results and flags -------------------------------------------------------------------
  row.NPIX_TOT = res.npix;
  row.VRAD_SKEW = res.v_skew;
  row.VRAD_KURT = res.v_kurt;
  row.CHISQ_TOT = best.chi2;
  row.NITER = best.niter;
  // Every parameter of the table: theta -> value, covariance -> statistical error, + floor.
  const int np = best.np;
  auto add_floor = [&](double stat, const char* column, double* total) {
    const double f = error_floor(cfg, ctx.format, column, ctx.survey);
    *total = std::sqrt(stat * stat + f * f);
  };
  const int dof = row.NPIX_TOT - np - all.n_arms * (cfg.cont_deg + 1);
  row.RCHISQ = dof > 0 ? row.CHISQ_TOT / dof : NAN;
  // Statistical errors grow by sqrt(chi^2/dof) where it exceeds 1 (residuals the noise and the
  // model variance do not explain), never shrink (issue 25).
  const double chi_scale = row.RCHISQ > 1.0 ? std::sqrt(row.RCHISQ) : 1.0;
  const bool vsini_fitted = p.packed.fit_vsini;  // set by prepare_spectrum (fit.fit_vsini, R)
  for (const FitParam& q : fit_params(lib, cfg)) {
    if (q.name == "VSINI" && !vsini_fitted) continue;  // NaN: not resolved or not asked
    const double th = best.theta[q.theta];
    const double var = q.theta < np && best.hess_ok ? best.cov[q.theta * np + q.theta] : NAN;
    // NaN where not constrained (VSINI at 0); a rounding-negative variance is 0, as before.
    const double e_theta = std::isnan(var) ? NAN : std::sqrt(std::max(0.0, var));
    const double value = q.log10 ? std::pow(10.0, th) : th;
    row.*q.value = value;
    const double stat = chi_scale * (q.log10 ? std::log(10.0) * value * e_theta : e_theta);
    if (q.err_stat) {
      row.*q.err_stat = stat;
      add_floor(stat, q.name.c_str(), &(row.*q.err));
    } else {
      row.*q.err = stat;
    }
    if (q.label && (th - q.lo < 1e-3 * (q.hi - q.lo) || q.hi - th < 1e-3 * (q.hi - q.lo)))
      row.RVS_WARN |= warn::kLabelEdge;
  }
  if (vsini_fitted) {
    row.VSINI_UPPER = res.vsini_upper;
    apply_vsini_floor(row, vsini_floor_kms(all, ctx), cfg);
  }
  // The format's arm scatter [km/s] of a velocity segment (B, R, Z), nullptr where not listed.
  auto scatter = [&](const std::string& arm) {
    return format_value(cfg.arm_rv_scatter_kms, ctx.format, ctx.survey, arm);
  };
  // ---- VRAD from the arms where their wavelength calibrations scatter ----------------------
  // (FitConfig::arm_rv_scatter_kms): each arm's velocity weighs 1 / (stat^2 + scatter^2), so an
  // arm whose calibration wanders from star to star (LAMOST's red arms) cannot pull VRAD off the
  // reference arm's scale; the joint fit weighs arms by their noise alone. An arm's velocity
  // error is at fixed labels and continuum; each is scaled by k = the joint VRAD's statistical
  // error / the arms' combined one (>= 1: what marginalising the labels adds), so that with no
  // scatter the combination's error is the joint fit's.
  if (vrad_from_arms(cfg, ctx.format, ctx.survey)) {
    double w0 = 0.0;
    for (int s = 0; s < all.n_seg; ++s) {
      const double e = chi_scale * res.v_seg_err[s];
      if (std::isfinite(res.v_seg[s]) && e > 0) w0 += 1.0 / (e * e);
    }
    const double k = w0 > 0.0 && row.VRAD_ERR_STAT > 0.0
                         ? std::max(1.0, row.VRAD_ERR_STAT * std::sqrt(w0))
                         : 1.0;
    std::vector<ArmVelocity> arms_v;
    for (int s = 0; s < all.n_seg; ++s) {
      const double v = res.v_seg[s], e = k * chi_scale * res.v_seg_err[s];
      if (!std::isfinite(v) || !(e > 0)) continue;
      const double* t = scatter(all.seg_names[s]);
      const double tau = t ? *t : 0.0;
      arms_v.push_back({v, e * e + tau * tau});
    }
    const ArmMean m = combine_arm_velocities(arms_v, cfg.arm_rv_t_dof);
    if (m.ok) {
      row.VRAD = m.vrad;
      row.VRAD_ERR_STAT = m.err;
      add_floor(row.VRAD_ERR_STAT, "VRAD", &row.VRAD_ERR);
      row.FIT_INFO |= info::kVradFromArms;
    }
  }
  if (!best.hess_ok) row.RVS_WARN |= warn::kHessianSingular;
  if (best.status == kern::kLMMaxIter) row.RVS_WARN |= warn::kNotConverged;
  if (row.CHISQ_C - row.CHISQ_TOT < cfg.chisq_improvement_min)
    row.RVS_WARN |= warn::kChisqNotBetter;
  if (row.VRAD - cfg.vmin_kms < 5.0 || cfg.vmax_kms - row.VRAD < 5.0) row.RVS_WARN |= warn::kRvEdge;
  if (!(row.VRAD_ERR <= cfg.rv_err_max_kms)) row.RVS_WARN |= warn::kRvErrLarge;
  if (res.n_clipped > 0) row.FIT_INFO |= info::kClipped;

  // ---- Statistical errors, floors, fit quality ---------------------------------------------
  row.MISMATCH = std::sqrt(std::max(row.RCHISQ - 1.0, 0.0)) / row.SN;
  // Flag only an excess that noise cannot make: chi^2/dof above 1 by more than 5 of its standard
  // deviations sqrt(2/dof) (at S/N 5 noise alone would otherwise reach MISMATCH 0.04).
  if (row.MISMATCH > cfg.mismatch_max && row.RCHISQ - 1.0 > 5.0 * std::sqrt(2.0 / dof))
    row.RVS_WARN |= warn::kModelMismatch;

  // ---- Per-arm velocities ------------------------------------------------------------------
  // The measured segments' velocities and total variances, the format's arm scatter
  // (fit.arm_rv_scatter_kms) included, for ARM_RV_DISAGREE: a disagreement beyond the
  // calibration's wander, about their Gaussian-weighted mean.
  std::vector<ArmVelocity> seg;
  for (int s = 0; s < all.n_seg; ++s) {
    const double v = res.v_seg[s];
    double e = NAN;
    add_floor(chi_scale * res.v_seg_err[s], "VRAD_ARM", &e);
    // The catalog columns of the segment's arm name (B, R, Z; others have none).
    static const struct {
      const char* name;
      double CatalogRow::*v;
      double CatalogRow::*e;
    } kArmColumns[] = {{"B", &CatalogRow::VRAD_B, &CatalogRow::VRAD_B_ERR},
                       {"R", &CatalogRow::VRAD_R, &CatalogRow::VRAD_R_ERR},
                       {"Z", &CatalogRow::VRAD_Z, &CatalogRow::VRAD_Z_ERR}};
    double *col = nullptr, *col_err = nullptr;
    for (const auto& c : kArmColumns)
      if (all.seg_names[s] == c.name) col = &(row.*c.v), col_err = &(row.*c.e);
    if (!col || !std::isfinite(v) || !(e > 0)) continue;
    *col = v;
    *col_err = e;
    const double* tau = scatter(all.seg_names[s]);
    const double et = tau ? std::sqrt(e * e + *tau * *tau) : e;
    seg.push_back({v, et * et});
  }
  if (seg.size() >= 2) {
    const double mean = combine_arm_velocities(seg, 0.0).vrad;
    double chi2 = 0.0;
    for (const auto& a : seg) chi2 += (a.v - mean) * (a.v - mean) / a.var;
    if (chi2_sf(chi2, static_cast<int>(seg.size()) - 1) < cfg.arm_rv_pvalue_min)
      row.RVS_WARN |= warn::kArmRvDisagree;
  }
  // ---- Template classification ---------------------------------------------------------------
  if (!p.cls.flux.empty()) {
    // QSOs and galaxies are considered only where the stellar model is poor (classify.hpp).
    const bool poor = (row.RVS_WARN & (warn::kChisqNotBetter | warn::kModelMismatch)) != 0 ||
                      row.MISMATCH > 0.5 * cfg.mismatch_max;
    const ClassResult c = classify(lib, p.cls, row.VRAD, cfg.class_dchi2_min, poor);
    row.SPECTYPE = c.spectype;
    row.SUBTYPE = c.subtype;
    // A normal star's subtype follows its fitted TEFF (mk_class_of_teff): redrock's archetypes at
    // R ~ 1800 called LAMOST F stars (TEFF 6187 K) M (issue 25). WD, CV and QSO keep theirs.
    static const std::string kNormal = "OBAFGKM";
    if (c.spectype == "STAR" && c.subtype.size() == 1 && kNormal.find(c.subtype) != std::string::npos) {
      const std::string mk = mk_class_of_teff(row.TEFF);
      if (!mk.empty()) row.SUBTYPE = mk;
    }
    row.CLASS_DCHI2 = c.dchi2;
    row.CLASS_Z = c.z;
    if (c.not_star) row.RVS_WARN |= warn::kNotStar;
  }
  row.SUCCESS = (row.RVS_WARN & warn::kReject) == 0;
}

namespace {

// Arm slot a's rows from p.fold into out[ndiag][n_full] (a matrix arm with fold parameters).
void expand_arm(const Packed& p, int a, float* out) {
  const int i0 = p.arm_start[a], i1 = p.arm_start[a + 1];
  prep_kernels().expand_rows(p.fold.data() + 3 * static_cast<size_t>(i0),
                             static_cast<size_t>(i1 - i0), p.ndiag[a], p.full_idx.data() + i0, out,
                             1, static_cast<ptrdiff_t>(p.full_lnlam[a].size()));
}

bool has_rows(const Packed& p, int a) {
  return a >= 0 && a < p.n_arms && a < static_cast<int>(p.full_lnlam.size()) &&
         !p.full_lnlam[a].empty() && !p.fold.empty();
}

}  // namespace

kern::FitData folded_view(const Packed& p, std::vector<float>* rm, double* Tf, double* dTf) {
  rm->assign(p.n_rm_total(), 0.0f);
  kern::FitData d = p.view(Tf, dTf, rm->data());
  for (int a = 0; a < p.n_arms; ++a)
    if (has_rows(p, a)) expand_arm(p, a, rm->data() + (d.rmat[a] - rm->data()));
  d.fold = nullptr;
  d.rmat_w = nullptr;
  return d;
}

std::vector<float> folded_rows(const Packed& p, int a) {
  if (!has_rows(p, a)) return {};
  std::vector<float> rows(p.full_lnlam[a].size() * static_cast<size_t>(p.ndiag[a]), 0.0f);
  expand_arm(p, a, rows.data());
  return rows;
}

}  // namespace velox
