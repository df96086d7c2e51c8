#include "fit/fitter.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "fit/rvs_warn.hpp"
#include "kernels/ccf.hpp"
#include "kernels/lm.hpp"
#include "kernels/team.hpp"

namespace velox {

namespace {

using kern::kSpeedOfLight_kms;

// The usable pixels of one spectrum, arms contiguous, plus the views the kernels take.
struct Packed {
  std::vector<double> lnlam, xleg, wave;
  std::vector<float> flux, ivar;
  std::vector<int> arm;  // arm slot of each pixel
  int n_arms = 0;
  int arm_start[kern::kMaxArms + 1] = {};
  std::vector<std::shared_ptr<const ArmModel>> models;  // per arm slot
  std::vector<std::string> names;

  kern::FitData view() const {
    kern::FitData d;
    d.n_pix = static_cast<int>(flux.size());
    d.n_arms = n_arms;
    for (int a = 0; a <= n_arms; ++a) d.arm_start[a] = arm_start[a];
    d.lnlam = lnlam.data();
    d.xleg = xleg.data();
    d.flux = flux.data();
    d.ivar = ivar.data();
    for (int a = 0; a < n_arms; ++a) d.basis[a] = models[a]->basis.data();
    return d;
  }
  // Keep pixels with keep[i] != 0 (arms that become too small are dropped).
  Packed compact(const std::vector<char>& keep, int min_arm_pixels) const {
    Packed p;
    for (int a = 0; a < n_arms; ++a) {
      const size_t start = p.flux.size();
      for (int i = arm_start[a]; i < arm_start[a + 1]; ++i) {
        if (!keep[i]) continue;
        p.lnlam.push_back(lnlam[i]);
        p.xleg.push_back(xleg[i]);
        p.wave.push_back(wave[i]);
        p.flux.push_back(flux[i]);
        p.ivar.push_back(ivar[i]);
        p.arm.push_back(p.n_arms);
      }
      if (static_cast<int>(p.flux.size() - start) < min_arm_pixels) {
        for (auto* v : {&p.lnlam, &p.xleg, &p.wave}) v->resize(start);
        p.flux.resize(start);
        p.ivar.resize(start);
        p.arm.resize(start);
        continue;
      }
      p.models.push_back(models[a]);
      p.names.push_back(names[a]);
      p.arm_start[p.n_arms + 1] = static_cast<int>(p.flux.size());
      ++p.n_arms;
    }
    return p;
  }
};

double median(std::vector<double> v) {
  if (v.empty()) return NAN;
  const size_t m = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + m, v.end());
  return v[m];
}

double arm_resolution(const ArmData& arm, const FitContext& ctx) {
  if (std::isfinite(arm.resolution_R) && arm.resolution_R > 0) return arm.resolution_R;
  if (arm.ndiag > 0) {
    const double r = effective_resolution(arm.wave_vac_A, arm.resolution, arm.ndiag);
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

CatalogRow fit_spectrum(const Spectrum& spec, const FitContext& ctx, FitDiagnostics* diag) {
  const auto& lib = ctx.lib;
  const auto& cfg = ctx.cfg;
  CatalogRow row;
  row.TARGETID = spec.targetid;
  row.SOURCE_FILE = spec.source_file;
  row.ROW_IN_FILE = spec.row_in_file;
  auto note = [&](const std::string& m) {
    if (diag) diag->messages.push_back(m);
  };
  if (!spec.problem.empty()) {
    note(spec.problem);
    return failure(row, warn::kBadInput);
  }
  auto ot = spec.meta.find("OBJTYPE");
  if (ot != spec.meta.end() && ot->second != "TGT") {
    note("OBJTYPE '" + ot->second + "': not a stellar target, not fitted");
    return failure(row, warn::kNotFitted);
  }

  // ---- Masking and packing --------------------------------------------------------------
  const double lam_lo = lib.wave_vac_A(2) * std::exp(kern::ln_doppler(cfg.vmax_kms));
  const double lam_hi = lib.wave_vac_A(lib.n_tpix - 4) * std::exp(kern::ln_doppler(cfg.vmin_kms));
  Packed all;
  for (const auto& arm : spec.arms) {
    if (all.n_arms >= kern::kMaxArms) break;
    const size_t n = arm.size();
    std::vector<size_t> idx;
    size_t n_valid = 0;
    for (size_t j = 0; j < n; ++j) {
      const double w = arm.wave_vac_A[j];
      const float f = arm.flux[j], iv = arm.ivar[j];
      const bool valid = std::isfinite(w) && std::isfinite(f) && std::isfinite(iv) && iv > 0 &&
                         (arm.mask.empty() || arm.mask[j] == 0);
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
    }
    all.models.push_back(ctx.cache.get(arm_resolution(arm, ctx)));
    all.names.push_back(arm.name);
    all.arm_start[all.n_arms + 1] = static_cast<int>(all.flux.size());
    ++all.n_arms;
  }
  row.NPIX_TOT = static_cast<int32_t>(all.flux.size());
  if (row.NPIX_TOT < cfg.min_pixels || all.n_arms == 0) {
    note(fmt::format("only {} usable pixels (need {})", row.NPIX_TOT, cfg.min_pixels));
    return failure(row, warn::kNoPixels);
  }
  {
    std::vector<double> sn(all.flux.size());
    for (size_t i = 0; i < sn.size(); ++i) sn[i] = all.flux[i] * std::sqrt(all.ivar[i]);
    row.SN = median(sn);
  }

  const kern::SerialTeam team;
  const auto em = lib.view();
  const auto grid = lib.grid();
  const int L = lib.n_label, np = 1 + L;
  const int cont_deg = cfg.cont_deg;
  kern::EvalWork work;
  std::vector<double> T, dT, fn, wts;
  auto resize_scratch = [&](size_t n) {
    T.assign(n, 0.0);
    dT.assign(n * np, 0.0);
    fn.assign(n, 0.0);
    wts.assign(n, 0.0);
  };
  Packed cur = all;
  resize_scratch(cur.flux.size());
  kern::FitData d = cur.view();

  // ---- Initial guess: CCF over the coarse templates, then a chi^2 grid --------------------
  const int n_ccf = cur.models[0]->n_ccf;
  const float* tmpl[kern::kMaxArms];
  for (int a = 0; a < cur.n_arms; ++a) tmpl[a] = cur.models[a]->ccf_templates.data();
  kern::pseudo_normalise(team, d, cfg.ccf_cont_deg, 4, &work, fn.data(), wts.data());
  std::vector<int> t0(d.n_pix);
  std::vector<double> frac(d.n_pix);
  kern::pixel_positions(team, grid, d, t0.data(), frac.data());
  const int lag_lo = static_cast<int>(std::floor(kern::ln_doppler(cfg.vmin_kms) / grid.dlnlam));
  const int lag_hi = static_cast<int>(std::ceil(kern::ln_doppler(cfg.vmax_kms) / grid.dlnlam));
  const int step = std::max(1, cfg.ccf_lag_step);
  const int n_out = (lag_hi - lag_lo) / step + 1;
  // Templates are in farthest-point order, so the first n_use span the label space.
  const int n_use = std::max(1, std::min(cfg.n_ccf_templates, n_ccf));
  std::vector<double> ccf(n_out), acc(8 * static_cast<size_t>(n_out));
  int jbest = 0, obest = 0;
  double pbest = -INFINITY;
  for (int j = 0; j < n_use; ++j) {
    kern::cross_correlate(team, grid, d, tmpl, j, lag_lo, n_out, step, t0.data(), frac.data(),
                          fn.data(), wts.data(), &work, acc.data(), ccf.data());
    const int o = static_cast<int>(std::max_element(ccf.begin(), ccf.end()) - ccf.begin());
    if (ccf[o] > pbest) {
      pbest = ccf[o];
      jbest = j;
      obest = o;
    }
  }
  // Fine lags around the best template's peak, then a parabola through the top three.
  const int lag_c = lag_lo + obest * step;
  double fine[7];
  kern::cross_correlate(team, grid, d, tmpl, jbest, lag_c - 3, 7, 1, t0.data(), frac.data(),
                        fn.data(), wts.data(), &work, acc.data(), fine);
  const int ob = static_cast<int>(std::max_element(fine, fine + 7) - fine);
  double lag_peak = lag_c - 3 + ob;
  if (ob > 0 && ob < 6) {
    const double den = fine[ob - 1] - 2 * fine[ob] + fine[ob + 1];
    if (den < 0) lag_peak += 0.5 * (fine[ob - 1] - fine[ob + 1]) / den;
  }
  const double v_ccf = std::clamp(kern::velocity_from_ln_doppler(lag_peak * grid.dlnlam),
                                  cfg.vmin_kms, cfg.vmax_kms);
  row.VRAD_CCF = v_ccf;

  // chi^2 grid: every coarse template at the CCF velocity, continuum profiled.
  std::vector<std::pair<double, int>> grid_chi2;
  for (int j = 0; j < n_ccf; ++j) {
    kern::fixed_template_at_pixels(team, grid, d, tmpl, j, v_ccf, T.data());
    kern::profile_continuum(team, d, cont_deg, 1, false, T.data(), dT.data(), &work);
    if (work.ok) grid_chi2.emplace_back(work.chi2, j);
  }
  if (grid_chi2.empty()) {
    note("continuum normal equations singular for every template");
    return failure(row, warn::kFitFailed);
  }
  std::sort(grid_chi2.begin(), grid_chi2.end());

  // ---- LM refinement from the best starts (+ one clipped re-fit) -------------------------
  kern::LMConfig lmc;
  lmc.max_iter = cfg.max_iter;
  lmc.lo[0] = cfg.vmin_kms;
  lmc.hi[0] = cfg.vmax_kms;
  for (int l = 0; l < L; ++l) {
    lmc.lo[1 + l] = lib.label_min[l];
    lmc.hi[1 + l] = lib.label_max[l];
  }
  kern::LMState best;
  best.chi2 = INFINITY;
  best.status = kern::kLMEvalFailed;
  const int n_starts = std::min<int>(cfg.n_starts, grid_chi2.size());
  for (int s = 0; s < n_starts; ++s) {
    kern::LMState st;
    st.theta[0] = v_ccf;
    for (int l = 0; l < L; ++l) st.theta[1 + l] = lib.ccf_labels[grid_chi2[s].second * L + l];
    kern::lm_fit(team, em, grid, d, cont_deg, lmc, &st, &work, T.data(), dT.data());
    if (st.status != kern::kLMEvalFailed && st.chi2 < best.chi2) best = st;
  }
  if (!std::isfinite(best.chi2)) {
    note("Levenberg-Marquardt failed at every start");
    return failure(row, warn::kFitFailed);
  }
  if (cfg.clip_sigma > 0) {
    std::vector<double> model(d.n_pix);
    kern::evaluate(team, &em, grid, d, cont_deg, best.theta, false, &work, T.data(), dT.data());
    kern::model_at_pixels(team, d, cont_deg, T.data(), &work, model.data());
    std::vector<char> keep(d.n_pix, 1);
    int n_clip = 0;
    for (int i = 0; i < d.n_pix; ++i) {
      const double z = (cur.flux[i] - model[i]) * std::sqrt(cur.ivar[i]);
      if (std::fabs(z) > cfg.clip_sigma) {
        keep[i] = 0;
        ++n_clip;
      }
    }
    if (n_clip > 0) {
      Packed clipped = cur.compact(keep, cfg.min_arm_pixels);
      if (static_cast<int>(clipped.flux.size()) >= cfg.min_pixels && clipped.n_arms > 0) {
        cur = std::move(clipped);
        resize_scratch(cur.flux.size());
        d = cur.view();
        kern::LMState st = best;
        kern::lm_fit(team, em, grid, d, cont_deg, lmc, &st, &work, T.data(), dT.data());
        if (st.status != kern::kLMEvalFailed) best = st;
      }
    }
  }
  // Per-arm chi^2, S/N and pixel counts at the solution (DESI B/R/Z columns).
  kern::evaluate(team, &em, grid, d, cont_deg, best.theta, false, &work, T.data(), dT.data());
  if (diag) {
    diag->model.resize(d.n_pix);
    kern::model_at_pixels(team, d, cont_deg, T.data(), &work, diag->model.data());
  }
  for (int a = 0; a < cur.n_arms; ++a) {
    double* chisq = nullptr;
    int32_t* npix = nullptr;
    double* sn = nullptr;
    if (cur.names[a] == "B") chisq = &row.CHISQ_B, npix = &row.NPIX_B, sn = &row.SN_B;
    if (cur.names[a] == "R") chisq = &row.CHISQ_R, npix = &row.NPIX_R, sn = &row.SN_R;
    if (cur.names[a] == "Z") chisq = &row.CHISQ_Z, npix = &row.NPIX_Z, sn = &row.SN_Z;
    if (!chisq) continue;
    *chisq = work.chi2_arm[a];
    *npix = cur.arm_start[a + 1] - cur.arm_start[a];
    std::vector<double> s;
    for (int i = cur.arm_start[a]; i < cur.arm_start[a + 1]; ++i)
      s.push_back(cur.flux[i] * std::sqrt(cur.ivar[i]));
    *sn = median(s);
  }
  // Continuum-only chi^2 on the same pixels (for RVS_WARN bit 0).
  double theta0[kern::kMaxParams] = {0};
  if (kern::evaluate(team, static_cast<const kern::EmulatorView*>(nullptr), grid, d, cont_deg,
                     theta0, false, &work, T.data(), dT.data()))
    row.CHISQ_C = work.chi2;

  // ---- Results and flags -------------------------------------------------------------------
  row.NPIX_TOT = d.n_pix;
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
  if (diag) {
    diag->wave_vac_A = cur.wave;
    diag->flux.assign(cur.flux.begin(), cur.flux.end());
    diag->ivar.assign(cur.ivar.begin(), cur.ivar.end());
    diag->arm_of_pixel = cur.arm;
  }
  return row;
}

}  // namespace velox
