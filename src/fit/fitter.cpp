#include "fit/fitter.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "backend/backend.hpp"
#include "fit/resolution.hpp"
#include "fit/rvs_warn.hpp"
#include "kernels/fit_pipeline.hpp"

namespace velox {

namespace {

using kern::kSpeedOfLight_kms;

double median(std::vector<double> v) {
  if (v.empty()) return NAN;
  const size_t m = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + m, v.end());
  return v[m];
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

CatalogRow failure(CatalogRow row, int64_t bits) {
  row.RVS_WARN |= bits;
  row.SUCCESS = false;
  return row;
}


}  // namespace

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
  pc.lm.max_iter = cfg.max_iter;
  pc.lm.lo[0] = cfg.vmin_kms;
  pc.lm.hi[0] = cfg.vmax_kms;
  for (int l = 0; l < lib.n_label; ++l) {
    pc.lm.lo[1 + l] = lib.label_min[l];
    pc.lm.hi[1 + l] = lib.label_max[l];
  }
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
  for (size_t a_in = 0; a_in < arms.size(); ++a_in) {
    const ArmView& arm = arms[a_in];
    if (all.n_arms >= kern::kMaxArms) break;
    const size_t n = arm.n_pix;
    // Resolution-matrix forward model for this arm? Rows with the template LSF folded in; pixels
    // whose row is all zero or not finite are not fitted.
    const bool use_rm = cfg.resolution_matrix && arm.ndiag > 0 && arm.resolution;
    std::vector<float> rows;
    std::vector<char> row_ok;
    if (use_rm)
      fold_resolution_rows(arm.wave_vac_A, n, arm.resolution, arm.ndiag,
                           std::isfinite(lib.fwhm_A) ? lib.fwhm_A : 0.0, &rows, &row_ok);
    std::vector<size_t> idx;
    size_t n_valid = 0;
    for (size_t j = 0; j < n; ++j) {
      const double w = arm.wave_vac_A[j];
      const float f = arm.flux[j], iv = arm.ivar[j];
      const bool valid = std::isfinite(w) && std::isfinite(f) && std::isfinite(iv) && iv > 0 &&
                         (!arm.mask || arm.mask[j] == 0) && (!use_rm || row_ok[j]);
      if (!valid) continue;
      ++n_valid;
      if (w < lam_lo || w > lam_hi) continue;
      if (cfg.wave_min_A > 0 && w < cfg.wave_min_A) continue;
      if (cfg.wave_max_A > 0 && w > cfg.wave_max_A) continue;
      bool in_band = false;
      for (const auto& b : cfg.mask_bands_A) in_band = in_band || (w >= b.first && w <= b.second);
      if (in_band) continue;
      idx.push_back(j);
    }
    if (static_cast<int>(idx.size()) < cfg.min_arm_pixels) {
      if (n_valid > 0) {
        row.RVS_WARN |= warn::kArmExcluded;
        note(fmt::format("arm {}: {} usable pixels inside the template coverage "
                         "({:.0f}-{:.0f} A vacuum): excluded",
                         arm.name, idx.size(), lam_lo, lam_hi));
      }
      continue;
    }
    const double lo = std::log(arm.wave_vac_A[idx.front()]);
    const double hi = std::log(arm.wave_vac_A[idx.back()]);
    for (size_t j : idx) {
      const double ll = std::log(arm.wave_vac_A[j]);
      all.lnlam.push_back(ll);
      all.xleg.push_back(hi > lo ? 2.0 * (ll - lo) / (hi - lo) - 1.0 : 0.0);
      all.wave.push_back(arm.wave_vac_A[j]);
      all.flux.push_back(arm.flux[j]);
      all.ivar.push_back(arm.ivar[j]);
      all.arm.push_back(all.n_arms);
      all.full_idx.push_back(use_rm ? static_cast<int>(j) : -1);
      all.input_pixel.push_back(static_cast<int>(j));
    }
    if (use_rm) {
      std::vector<double> full(n);
      for (size_t j = 0; j < n; ++j) full[j] = std::log(arm.wave_vac_A[j]);
      all.full_lnlam.push_back(std::move(full));
      all.rmat.push_back(std::move(rows));
      all.ndiag.push_back(arm.ndiag);
    } else {
      all.full_lnlam.emplace_back();
      all.rmat.emplace_back();
      all.ndiag.push_back(0);
    }
    // With the matrix the basis stays at the templates' own resolution (R -> infinity: no
    // Gaussian), since the folded rows carry the instrument's remaining blur.
    all.models.push_back(ctx.cache.get(use_rm ? 1e9 : arm_resolution(arm, ctx)));
    all.names.emplace_back(arm.name);
    all.input_arm.push_back(static_cast<int>(a_in));
    all.arm_start[all.n_arms + 1] = static_cast<int>(all.flux.size());
    ++all.n_arms;
  }
  row.NPIX_TOT = static_cast<int32_t>(all.flux.size());
  if (row.NPIX_TOT < cfg.min_pixels || all.n_arms == 0) {
    note(fmt::format("only {} usable pixels (need {})", row.NPIX_TOT, cfg.min_pixels));
    row = failure(row, warn::kNoPixels);
    return p;
  }
  {
    std::vector<double> sn(all.flux.size());
    for (size_t i = 0; i < sn.size(); ++i) sn[i] = all.flux[i] * std::sqrt(all.ivar[i]);
    row.SN = median(sn);
  }
  p.ready = true;
  return p;
}

CatalogRow fit_spectrum(const Spectrum& spec, const FitContext& ctx, FitDiagnostics* diag) {
  PreparedSpectrum p = prepare_spectrum(spec, ctx);
  if (diag) diag->messages = p.notes;
  if (!p.ready) return p.row;
  // The numerical fit: a one-spectrum batch on the serial team (the CPU backend's path).
  const BatchOutput out =
      fit_batch_serial({&p}, ctx.lib, pipeline_config(ctx.cfg, ctx.lib), diag != nullptr);
  if (diag) diagnostics_of(p, out.ivar[0], out.models[0], diag);
  finish_row(p, out.results[0], out.ivar[0], ctx);
  if (diag && out.results[0].status != kern::kPipeOk) diag->messages.push_back(p.notes.back());
  return p.row;
}

void diagnostics_of(const PreparedSpectrum& p, const std::vector<float>& ivar,
                    const std::vector<double>& model, FitDiagnostics* diag) {
  if (model.empty()) return;
  const Packed& all = p.packed;
  for (size_t i = 0; i < all.flux.size(); ++i) {
    if (!(ivar[i] > 0)) continue;
    diag->wave_vac_A.push_back(all.wave[i]);
    diag->flux.push_back(all.flux[i]);
    diag->ivar.push_back(ivar[i]);
    diag->model.push_back(model[i]);
    diag->arm_of_pixel.push_back(all.arm[i]);
  }
}

void finish_row(PreparedSpectrum& p, const kern::PipelineResult& res,
                const std::vector<float>& ivar, const FitContext& ctx) {
  const auto& lib = ctx.lib;
  const auto& cfg = ctx.cfg;
  const Packed& all = p.packed;
  CatalogRow& row = p.row;
  const int L = lib.n_label, np = 1 + L;
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
    if (all.names[a] == "B") chisq = &row.CHISQ_B, npix = &row.NPIX_B, sn = &row.SN_B;
    if (all.names[a] == "R") chisq = &row.CHISQ_R, npix = &row.NPIX_R, sn = &row.SN_R;
    if (all.names[a] == "Z") chisq = &row.CHISQ_Z, npix = &row.NPIX_Z, sn = &row.SN_Z;
    if (!chisq) continue;
    *chisq = res.chi2_arm[a];
    *npix = res.npix_arm[a];
    std::vector<double> s;
    for (int i = all.arm_start[a]; i < all.arm_start[a + 1]; ++i)
      if (ivar[i] > 0) s.push_back(all.flux[i] * std::sqrt(ivar[i]));
    *sn = median(s);
  }

  // ---- Results and flags -------------------------------------------------------------------
  row.NPIX_TOT = res.npix;
  row.CHISQ_TOT = best.chi2;
  row.NITER = best.niter;
  const double* cov = best.cov;
  auto err = [&](int q) { return best.hess_ok ? std::sqrt(std::max(0.0, cov[q * np + q])) : NAN; };
  row.VRAD = best.theta[0];
  row.VRAD_ERR = err(0);
  row.TEFF = std::pow(10.0, best.theta[1]);
  row.TEFF_ERR = std::log(10.0) * row.TEFF * err(1);
  row.LOGG = best.theta[2];
  row.LOGG_ERR = err(2);
  row.FEH = best.theta[3];
  row.FEH_ERR = err(3);
  if (L >= 4) {
    row.ALPHAFE = best.theta[4];
    row.ALPHAFE_ERR = err(4);
  }
  if (!best.hess_ok) row.RVS_WARN |= warn::kHessianSingular;
  if (best.status == kern::kLMMaxIter) row.RVS_WARN |= warn::kNotConverged;
  if (row.CHISQ_C - row.CHISQ_TOT < cfg.chisq_improvement_min) row.RVS_WARN |= warn::kChisqNotBetter;
  if (row.VRAD - cfg.vmin_kms < 5.0 || cfg.vmax_kms - row.VRAD < 5.0) row.RVS_WARN |= warn::kRvEdge;
  if (!(row.VRAD_ERR <= cfg.rv_err_max_kms)) row.RVS_WARN |= warn::kRvErrLarge;
  for (int l = 0; l < L; ++l) {
    const double span = lib.label_max[l] - lib.label_min[l];
    if (best.theta[1 + l] - lib.label_min[l] < 1e-3 * span ||
        lib.label_max[l] - best.theta[1 + l] < 1e-3 * span)
      row.RVS_WARN |= warn::kLabelEdge;
  }
  row.SUCCESS = (row.RVS_WARN & warn::kFatal) == 0;
}

}  // namespace velox
