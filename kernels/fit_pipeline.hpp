// The whole fit of ONE spectrum as a team kernel: pseudo-normalisation → CCF over the coarse
// templates → chi^2 grid → Levenberg-Marquardt from the best starts (VSINI held at 0) → with
// VSINI fitted, one LM with VSINI free from the best start → one re-fit after clipping outliers →
// per-arm chi^2, the continuum-only chi^2, the VSINI upper limit of slow rotators. The CPU
// backend runs it with SimdTeam (src/backend/cpu), the CUDA backend with one warp per spectrum
// (src/backend/cuda). Host code does the masking/packing before and the flags after; everything
// numerical is here.
#pragma once
#include <cmath>

#include "kernels/ccf.hpp"
#include "kernels/fold.hpp"
#include "kernels/lm.hpp"

namespace velox::kern {

constexpr int kMaxCcfTemplates = 64;

// Numbers the pipeline needs (a POD copy of FitConfig + the library's label box).
struct PipelineConfig {
  double vmin_kms = -1000.0, vmax_kms = 1000.0;
  int cont_deg = 8, ccf_cont_deg = 5;
  int n_starts = 2, n_ccf_use = 8, lag_step = 4;  // FitConfig defaults
  double clip_sigma = 5.0;
  int seg_max_iter = 6;  // Gauss-Newton steps per velocity segment; 0 = no per-arm velocities
  // VSINI (theta[1 + L]): fitted when fit_vsini, starting from vsini_start km/s (where the
  // kernel already has a slope: at 0 its derivative vanishes); limb_eps is the Gray profile's
  // limb darkening. Slow rotators: not detected when chi^2(VSINI = 0) - chi^2 < vsini_detect_dchi2
  // x max(1, chi^2/dof); the upper limit is where chi^2 rises by vsini_upper_dchi2 x that scale.
  int fit_vsini = 0;
  double vsini_start = 60.0, limb_eps = 0.6;
  double vsini_detect_dchi2 = 4.0, vsini_upper_dchi2 = 2.71;
  // VRAD_SKEW / VRAD_KURT (velocity_moments): 2 * vpost_half + 1 velocities spaced
  // vpost_step x VRAD_ERR around VRAD; vpost_half = 0: not measured (NaN).
  int vpost_half = 6;
  double vpost_step = 1.0;
  LMConfig lm;  // max_iter and the box (lo/hi) for [v, labels, vsini]
};

// Global-memory scratch of one spectrum (n = FitData::n_pix, np = 1 + L, n_out = ccf_lags()).
struct PipelineScratch {
  double* T;     // [n]
  double* dT;    // [n * np]
  double* fn;    // [n]
  double* wts;   // [n]
  double* frac;  // [n]
  int* t0;       // [n]
  float* ivar;   // [n] working copy of ivar (clipped pixels set to 0)
  double* ccf;   // [n_out]
  double* acc;   // [8 * n_out]
  double* emu;   // [emulator_scratch_size(em)] emulator row weights
};

// Per-spectrum shared state (shared memory on the GPU).
struct PipelineShared {
  EvalWork w;
  LMState cur, best;
  double grid_chi2[kMaxCcfTemplates];
  int grid_idx[kMaxCcfTemplates];
  int n_grid;
  double pbest, v_ccf;
  int jbest, obest;
};

enum PipelineStatus : int { kPipeOk = 0, kPipeFitFailed = 1 };

struct PipelineResult {
  int status;
  double v_ccf;
  LMState best;
  double chi2_c;                // continuum-only chi^2 (NaN if singular)
  double chi2_c_arm[kMaxArms];  // its per-arm parts (NaN for absent arms or if singular)
  double chi2_arm[kMaxArms];
  int npix_arm[kMaxArms];
  int npix;
  double v_seg[kMaxSeg];      // per-segment VRAD with the labels fixed (NaN: not measured), km/s
  double v_seg_err[kMaxSeg];  // its statistical error (1 / sqrt of the profiled Hessian), km/s
  int n_clipped;              // pixels clipped before the re-fit
  double vsini_upper;         // km/s: upper limit when VSINI is fitted but not detected, else NaN
  double dchi2_vsini0;        // chi^2(VSINI = 0, rest at best) - chi^2 (NaN if VSINI not fitted)
  double v_skew, v_kurt;      // VRAD posterior's skewness and kurtosis (velocity_moments), or NaN
  int n_eval[3];              // model evaluations (EvalWork::n_eval) and LM iterations (all
  int n_lm_iter;              // LM runs: starts, VSINI, re-fit) of this fit: `velox bench` counters
};

// Gauss-Newton on v alone over the pixels of d with the labels held at th (th[0], the start, is
// replaced by the result): continuum profiled out, each step halved until chi^2 does not rise,
// at most `max_iter` steps, stopping once a step is below 2% of its error. *v and *err (1 / sqrt
// of the profiled Hessian, km/s) are NaN when the first evaluation fails; *chi2 is the final
// chi^2. Expects emulator_coeffs_into(th + 1) done. T, dT: pixel scratch as for lm_fit.
template <class Team>
VX_HD VX_NOINLINE void velocity_newton(const Team& team, const EmulatorView& em, const GridView& g,
                                       const FitData& d, const PipelineConfig& cfg, int max_iter,
                                       double* th, EvalWork* w, double* T, double* dT, double* v,
                                       double* err, double* chi2_out) {
  const int np = kMaxParams;  // every theta entry (VSINI too) is copied; only v is stepped
  *v = NAN, *err = NAN, *chi2_out = NAN;
  if (!(evaluate<true>(team, &em, g, d, cfg.cont_deg, th, true, w, T, dT) && w->hess[0] > 0))
    return;
  double chi2 = w->chi2, grad = w->grad[0], h = w->hess[0];
  for (int it = 0; it < max_iter; ++it) {
    double step = grad / h;
    bool moved = false;
    for (int half = 0; half < 4 && !moved; ++half, step *= 0.5) {
      double tr[kMaxParams];
      for (int q = 0; q < np; ++q) tr[q] = th[q];
      tr[0] = fmin(fmax(th[0] + step, cfg.lm.lo[0]), cfg.lm.hi[0]);
      if (evaluate<true>(team, &em, g, d, cfg.cont_deg, tr, true, w, T, dT) && w->chi2 <= chi2 &&
          w->hess[0] > 0) {
        moved = true;
        th[0] = tr[0];
        chi2 = w->chi2;
        grad = w->grad[0];
        h = w->hess[0];
      }
    }
    if (!moved || fabs(step) < 0.02 / sqrt(h)) break;  // converged to 2% of its error
  }
  *v = th[0];
  *err = 1.0 / sqrt(h);
  *chi2_out = chi2;
}

// Velocity of every segment of d (an arm, or a blue/red half) with the labels held at theta:
// velocity_newton over the segment's pixels. The error is the profiled Hessian's at the final
// point, so segments are independent measurements of VRAD (RV systematics between arms show up
// as their disagreement).
template <class Team>
VX_HD VX_NOINLINE void segment_velocities(const Team& team, const EmulatorView& em,
                                          const GridView& g, const FitData& d,
                                          const PipelineConfig& cfg, const double* theta,
                                          EvalWork* w, double* T, double* dT, PipelineResult* out) {
  if (d.n_seg > 0 && cfg.seg_max_iter > 0) emulator_coeffs_into(team, em, theta + 1, w);
  for (int s = 0; s < kMaxSeg; ++s) {
    double v = NAN, err = NAN, chi2 = NAN;
    if (s < d.n_seg && cfg.seg_max_iter > 0) {
      const FitData sd = segment_view(d, s);
      double th[kMaxParams];
      for (int q = 0; q < kMaxParams; ++q) th[q] = theta[q];
      velocity_newton(team, em, g, sd, cfg, cfg.seg_max_iter, th, w, T + d.seg_start[s],
                      dT + d.seg_start[s], &v, &err, &chi2);
    }
    team.single([&] {
      out->v_seg[s] = v;
      out->v_seg_err[s] = err;
    });
    team.sync();
  }
}

// Slow rotators: chi^2 at VSINI = 0 (the rest at the best fit) against the best chi^2; when the
// difference is below the detection threshold, the upper limit is where chi^2 (the rest held,
// a conditional rather than a profile limit) rises by vsini_upper_dchi2 above the best: brackets
// doubling from best + 25 km/s, then one regula-falsi step and a final interpolation. Both
// thresholds scale with max(1, chi^2/dof) so that model mismatch does not shrink the limit.
// Needs out->npix and sh->best; leaves w, sc.T describing the last trial point.
template <class Team>
VX_HD VX_NOINLINE void vsini_upper_limit(const Team& team, const EmulatorView& em,
                                         const GridView& g, const FitData& d,
                                         const PipelineConfig& cfg, PipelineShared* sh,
                                         const PipelineScratch& sc, PipelineResult* out) {
  EvalWork* w = &sh->w;
  const int L = em.n_label, vs = vsini_index(L);
  const int dof = out->npix - n_fit_params(L, 1) - d.n_arms * (cfg.cont_deg + 1);
  const double scale = dof > 0 ? fmax(1.0, sh->best.chi2 / dof) : 1.0;
  const double chi2_best = sh->best.chi2, vmax = cfg.lm.hi[vs];
  double th[kMaxParams];
  for (int q = 0; q < kMaxParams; ++q) th[q] = sh->best.theta[q];
  auto dchi2_at = [&](double vsini) {
    th[vs] = vsini;
    return evaluate(team, &em, g, d, cfg.cont_deg, th, false, w, sc.T, sc.dT) ? w->chi2 - chi2_best
                                                                              : INFINITY;
  };
  // At a best VSINI below half a template pixel the model is the VSINI = 0 one: d0 = 0.
  const double half_px = 0.5 * kSpeedOfLight_kms * g.dlnlam;
  const double d0 = sh->best.theta[vs] < half_px ? 0.0 : dchi2_at(0.0);
  double upper = NAN;
  if (d0 < cfg.vsini_detect_dchi2 * scale) {
    // Bracket [lo, hi] of the crossing (hi doubling), then one regula-falsi step and a final
    // interpolation, both linear in vsini^2 (the broadening adds in quadrature to the line
    // widths, so chi^2 is closer to linear in vsini^2 than in vsini): a few percent of the
    // bracket (docs/vsini.md).
    const double target = cfg.vsini_upper_dchi2 * scale;
    double lo = fmax(sh->best.theta[vs], 0.0), hi = fmin(lo + 25.0, vmax);
    double dlo = 0.0, dhi = dchi2_at(hi);
    while (dhi < target && hi < vmax) {
      lo = hi;
      dlo = dhi;
      hi = fmin(2.0 * hi, vmax);
      dhi = dchi2_at(hi);
    }
    auto cross = [&] {
      const double u = lo * lo + (target - dlo) / (dhi - dlo) * (hi * hi - lo * lo);
      return sqrt(fmax(u, 0.0));
    };
    if (dhi < target) {
      upper = vmax;  // not constrained inside the box
    } else {
      const double x = cross();
      const double dx = dchi2_at(x);
      if (dx < target) {
        lo = x;
        dlo = dx;
      } else {
        hi = x;
        dhi = dx;
      }
      upper = cross();
    }
  }
  team.single([&] {
    out->dchi2_vsini0 = d0;
    out->vsini_upper = upper;
  });
  team.sync();
}

// VRAD_SKEW and VRAD_KURT as rvspecfit defines them (rvspecfit spec_fit.find_best, used by
// desi_fit.py for the DESI MWS tables): the conditional velocity posterior
// p(v) ~ exp(-(chi^2(v) - chi^2_min) / 2), labels and VSINI held at the best fit, continuum
// profiled, sampled on a grid; moments about VRAD with s^2 = sum p (v - VRAD)^2:
// skew = sum p (v - VRAD)^3 / s^3, kurt = sum p (v - VRAD)^4 / s^4 (not excess: 3 for a
// Gaussian). The grid is 2 * vpost_half + 1 velocities spaced vpost_step x err (err: VRAD's
// statistical error, labels free, so at least the conditional width), i.e. +-6 err by default,
// where rvspecfit refines its grid to err / 5 over +-10 err: for a Gaussian the sums at spacing
// err are exact to 1e-8 (Riemann sums of a Gaussian converge as exp(-2 pi^2 s^2 / h^2)); the 13
// velocity-only evaluations add 12% to a LAMOST fit's FLOPs (docs/performance.md).
// Velocities outside the fit's box are left out. NaN when err is not finite and positive or no
// point evaluates. Accumulated online with a running chi^2 minimum (no per-point storage).
template <class Team>
VX_HD VX_NOINLINE void velocity_moments(const Team& team, const EmulatorView& em, const GridView& g,
                                        const FitData& d, const PipelineConfig& cfg,
                                        const double* theta, double err, EvalWork* w, double* T,
                                        double* dT, PipelineResult* out) {
  const int K = cfg.vpost_half;
  double m = INFINITY, s0 = 0.0, s2 = 0.0, s3 = 0.0, s4 = 0.0;  // lane 0's (team.single)
  if (K > 0 && err > 0 && err < INFINITY) {
    emulator_coeffs_into(team, em, theta + 1, w);
    const double h = cfg.vpost_step * err;
    for (int k = -K; k <= K; ++k) {
      double th[kMaxParams];
      for (int q = 0; q < kMaxParams; ++q) th[q] = theta[q];
      th[0] = theta[0] + k * h;
      if (th[0] < cfg.lm.lo[0] || th[0] > cfg.lm.hi[0]) continue;
      const int ok = evaluate<true>(team, &em, g, d, cfg.cont_deg, th, false, w, T, dT);
      team.single([&] {
        if (!ok || !(w->chi2 < INFINITY)) return;
        const double c = w->chi2, x = k * h;
        if (c < m) {  // rescale the sums to the new minimum
          const double f = m < INFINITY ? exp(-0.5 * (m - c)) : 0.0;
          s0 *= f, s2 *= f, s3 *= f, s4 *= f;
          m = c;
        }
        const double p = exp(-0.5 * (c - m));
        s0 += p, s2 += p * x * x, s3 += p * x * x * x, s4 += p * x * x * x * x;
      });
      team.sync();
    }
  }
  team.single([&] {
    out->v_skew = out->v_kurt = NAN;
    if (s0 > 0) {
      const double var = s2 / s0;
      out->v_skew = var > 1e-20 ? s3 / s0 / (var * sqrt(var)) : 0.0;
      out->v_kurt = var > 1e-20 ? s4 / s0 / (var * var) : 0.0;
    }
  });
  team.sync();
}

// Outlier clipping before the re-fit (fit_one, fit_velocity_held): the model at theta, then
// every used pixel with |flux - model| sqrt(ivar) > cfg.clip_sigma gets ivar 0 in sc.ivar (sc.fn
// is reused for the model). Sets out->n_clipped and returns it.
template <class Team>
VX_HD VX_INLINE int clip_outliers(const Team& team, const EmulatorView& em, const GridView& g,
                                  const FitData& d, const PipelineConfig& cfg, const double* theta,
                                  const PipelineScratch& sc, EvalWork* w, PipelineResult* out) {
  evaluate(team, &em, g, d, cfg.cont_deg, theta, false, w, sc.T, sc.dT);
  model_at_pixels(team, d, cfg.cont_deg, sc.T, w, sc.fn);
  team.reduce_sum(d.n_pix, 1, w->red, [&](int i, auto acc) {
    const double z = (d.flux[i] - sc.fn[i]) * sqrt((double)sc.ivar[i]);
    if (sc.ivar[i] > 0 && fabs(z) > cfg.clip_sigma) {
      sc.ivar[i] = 0.0f;
      acc[0] += 1.0;
    }
  });
  team.single([&] { out->n_clipped = (int)w->red[0]; });
  team.sync();
  return (int)w->red[0];
}

// The statistics of the solution sh->best (fit_one, fit_velocity_held): out->best, the per-arm
// chi^2 and used pixels (ivar > 0 after clipping), and the continuum-only chi^2 (total and per
// arm; NaN if singular). Leaves w describing the continuum-only fit.
template <class Team>
VX_HD VX_INLINE void solution_statistics(const Team& team, const EmulatorView& em,
                                         const GridView& g, const FitData& d,
                                         const PipelineConfig& cfg, const PipelineScratch& sc,
                                         PipelineShared* sh, PipelineResult* out) {
  EvalWork* w = &sh->w;
  evaluate(team, &em, g, d, cfg.cont_deg, sh->best.theta, false, w, sc.T, sc.dT);
  team.single([&] {
    out->best = sh->best;
    for (int a = 0; a < kMaxArms; ++a) {
      out->chi2_arm[a] = a < d.n_arms ? w->chi2_arm[a] : NAN;
      out->npix_arm[a] = 0;
    }
  });
  team.sync();
  for (int a = 0; a < d.n_arms; ++a) {
    team.reduce_sum(d.arm_start[a + 1] - d.arm_start[a], 1, w->red, [&](int ii, auto acc) {
      if (sc.ivar[d.arm_start[a] + ii] > 0) acc[0] += 1.0;
    });
    team.single([&] { out->npix_arm[a] = (int)w->red[0]; });
    team.sync();
  }
  double theta0[kMaxParams] = {0, 0, 0, 0, 0};
  evaluate(team, (const EmulatorView*)nullptr, g, d, cfg.cont_deg, theta0, false, w, sc.T, sc.dT);
  team.single([&] {
    out->chi2_c = w->ok ? w->chi2 : NAN;
    for (int a = 0; a < kMaxArms; ++a)
      out->chi2_c_arm[a] = w->ok && a < d.n_arms ? w->chi2_arm[a] : NAN;
  });
  team.sync();
}

// Number of coarse CCF lags for the velocity range (template pixels, step lag_step).
VX_HD VX_INLINE int ccf_lag_lo(const PipelineConfig& c, const GridView& g) {
  return (int)floor(ln_doppler(c.vmin_kms) / g.dlnlam);
}
VX_HD VX_INLINE int ccf_lags(const PipelineConfig& c, const GridView& g) {
  const int hi = (int)ceil(ln_doppler(c.vmax_kms) / g.dlnlam);
  const int step = c.lag_step > 0 ? c.lag_step : 1;
  return (hi - ccf_lag_lo(c, g)) / step + 1;
}

// Fit one spectrum. `d.ivar` must point to sc.ivar (the pipeline zeroes clipped pixels there).
// ccf_tmpl[a] = coarse templates of arm a ([n_ccf][n_tpix]); ccf_labels[n_ccf][L] their labels.
template <class Team>
VX_HD void fit_one(const Team& team, const EmulatorView& em, const GridView& g, const FitData& d,
                   const float* const* ccf_tmpl, int n_ccf, const double* ccf_labels,
                   const PipelineConfig& cfg, const PipelineScratch& sc, PipelineShared* sh,
                   PipelineResult* out) {
  fold_rows(team, d);  // the matrix rows into the worker's scratch (kernels/fold.hpp)
  const int L = em.n_label;
  EvalWork* w = &sh->w;
  if (n_ccf > kMaxCcfTemplates) n_ccf = kMaxCcfTemplates;
  const int vs = vsini_index(L);
  team.single([&] {
    w->emu = sc.emu;
    w->fit_vsini = 0;
    w->limb_eps = cfg.limb_eps;
    out->vsini_upper = NAN;
    out->dchi2_vsini0 = NAN;
    w->n_eval[0] = w->n_eval[1] = w->n_eval[2] = 0;
    out->n_eval[0] = out->n_eval[1] = out->n_eval[2] = out->n_lm_iter = 0;
  });
  team.sync();
  // ---- CCF ---------------------------------------------------------------------------------
  pseudo_normalise(team, d, cfg.ccf_cont_deg, 4, w, sc.fn, sc.wts);
  pixel_positions(team, g, d, sc.t0, sc.frac);
  const int lag_lo = ccf_lag_lo(cfg, g);
  const int step = cfg.lag_step > 0 ? cfg.lag_step : 1;
  const int n_out = ccf_lags(cfg, g);
  const int n_use = cfg.n_ccf_use < 1 ? 1 : (cfg.n_ccf_use < n_ccf ? cfg.n_ccf_use : n_ccf);
  team.single([&] {
    sh->pbest = -INFINITY;
    sh->jbest = 0;
    sh->obest = 0;
  });
  team.sync();
  for (int j = 0; j < n_use; ++j) {
    cross_correlate(team, g, d, ccf_tmpl, j, lag_lo, n_out, step, sc.t0, sc.frac, sc.fn, sc.wts, w,
                    sc.acc, sc.ccf);
    team.single([&] {
      for (int o = 0; o < n_out; ++o)
        if (sc.ccf[o] > sh->pbest) {
          sh->pbest = sc.ccf[o];
          sh->jbest = j;
          sh->obest = o;
        }
    });
    team.sync();
  }
  // Fine lags around the best template's peak, then a parabola through the top three.
  const int lag_c = lag_lo + sh->obest * step;
  cross_correlate(team, g, d, ccf_tmpl, sh->jbest, lag_c - 3, 7, 1, sc.t0, sc.frac, sc.fn, sc.wts,
                  w, sc.acc, sc.ccf);
  team.single([&] {
    const double* fine = sc.ccf;
    int ob = 0;
    for (int o = 1; o < 7; ++o)
      if (fine[o] > fine[ob]) ob = o;
    double lag_peak = lag_c - 3 + ob;
    if (ob > 0 && ob < 6) {
      const double den = fine[ob - 1] - 2 * fine[ob] + fine[ob + 1];
      if (den < 0) lag_peak += 0.5 * (fine[ob - 1] - fine[ob + 1]) / den;
    }
    sh->v_ccf =
        fmin(fmax(velocity_from_ln_doppler(lag_peak * g.dlnlam), cfg.vmin_kms), cfg.vmax_kms);
    sh->n_grid = 0;
  });
  team.sync();
  const double v_ccf = sh->v_ccf;
  out->v_ccf = v_ccf;

  // ---- chi^2 grid: every coarse template at the CCF velocity, sorted (insertion) -------------
  // The CPU computes the stencils once for all templates (sc.t0 and sc.frac are free after the
  // CCF; an arm with a resolution matrix keeps its full grid's in d.dTf, free until the LM).
  const bool stencils = Team::kVec > 1;
  if (stencils) grid_stencils_at(team, g, d, v_ccf, sc.t0, sc.frac);
  for (int j = 0; j < n_ccf; ++j) {
    if (stencils)
      fixed_template_stencils(team, g, d, ccf_tmpl, j, sc.t0, sc.frac, sc.T);
    else
      fixed_template_at_pixels(team, g, d, ccf_tmpl, j, v_ccf, sc.T);
    profile_continuum(team, d, cfg.cont_deg, 1, false, sc.T, sc.dT, w);
    team.single([&] {
      if (!w->ok) return;
      int k = sh->n_grid++;
      while (k > 0 && sh->grid_chi2[k - 1] > w->chi2) {
        sh->grid_chi2[k] = sh->grid_chi2[k - 1];
        sh->grid_idx[k] = sh->grid_idx[k - 1];
        --k;
      }
      sh->grid_chi2[k] = w->chi2;
      sh->grid_idx[k] = j;
    });
    team.sync();
  }
  if (sh->n_grid == 0) {
    team.single([&] { out->status = kPipeFitFailed; });
    team.sync();
    return;
  }

  // ---- LM from the best starts, then one re-fit after clipping ------------------------------
  team.single([&] {
    sh->best.chi2 = INFINITY;
    sh->best.status = kLMEvalFailed;
    out->n_clipped = 0;
  });
  team.sync();
  const int n_starts = cfg.n_starts < sh->n_grid ? cfg.n_starts : sh->n_grid;
  for (int s = 0; s < n_starts; ++s) {
    team.single([&] {
      sh->cur.theta[0] = v_ccf;
      for (int l = 0; l < L; ++l) sh->cur.theta[1 + l] = ccf_labels[sh->grid_idx[s] * L + l];
      for (int q = 1 + L; q < kMaxParams; ++q) sh->cur.theta[q] = 0.0;  // VSINI held at 0
    });
    team.sync();
    // Later starts stop once inside the best start's basin (LMConfig::join_dchi2).
    lm_fit(team, em, g, d, cfg.cont_deg, cfg.lm, &sh->cur, w, sc.T, sc.dT,
           s > 0 ? &sh->best : nullptr);
    team.single([&] {
      out->n_lm_iter += sh->cur.niter;
      if (sh->cur.status != kLMEvalFailed && sh->cur.status != kLMJoined &&
          sh->cur.chi2 < sh->best.chi2)
        sh->best = sh->cur;
    });
    team.sync();
  }
  if (!(sh->best.chi2 < INFINITY)) {
    team.single([&] { out->status = kPipeFitFailed; });
    team.sync();
    return;
  }
  const bool fit_vs = cfg.fit_vsini && d.fit_vsini;
  if (fit_vs) {
    // VSINI free, from the best start: kept if it lowers chi^2 (else VSINI = 0 stays, with no
    // VSINI variance: the kernel is the identity there). A probe first: if rotation at
    // vsini_start with the rest held does not lower chi^2, the star is a slow rotator and the LM
    // is skipped (it would walk back to 0; the upper limit is measured below). This keeps the
    // cost of VSINI on slow rotators to one evaluation here (docs/vsini.md).
    team.single([&] {
      w->fit_vsini = 1;
      sh->cur = sh->best;
      sh->cur.theta[vs] = cfg.vsini_start;
    });
    team.sync();
    const int ok = evaluate(team, &em, g, d, cfg.cont_deg, sh->cur.theta, false, w, sc.T, sc.dT);
    if (ok && w->chi2 < sh->best.chi2) {
      lm_fit(team, em, g, d, cfg.cont_deg, cfg.lm, &sh->cur, w, sc.T, sc.dT);
      team.single([&] {
        out->n_lm_iter += sh->cur.niter;
        if (sh->cur.status != kLMEvalFailed && sh->cur.chi2 < sh->best.chi2) sh->best = sh->cur;
      });
      team.sync();
    }
  }
  if (cfg.clip_sigma > 0) {
    if (clip_outliers(team, em, g, d, cfg, sh->best.theta, sc, w, out) > 0) {
      team.single([&] { sh->cur = sh->best; });
      team.sync();
      lm_fit(team, em, g, d, cfg.cont_deg, cfg.lm, &sh->cur, w, sc.T, sc.dT);
      team.single([&] {
        out->n_lm_iter += sh->cur.niter;
        if (sh->cur.status != kLMEvalFailed) sh->best = sh->cur;
      });
      team.sync();
    }
  }
  // ---- Statistics at the solution -----------------------------------------------------------
  solution_statistics(team, em, g, d, cfg, sc, sh, out);
  if (fit_vs) vsini_upper_limit(team, em, g, d, cfg, sh, sc, out);
  segment_velocities(team, em, g, d, cfg, sh->best.theta, w, sc.T, sc.dT, out);
  {
    const double var_v = sh->best.hess_ok ? sh->best.cov[0] : NAN;
    velocity_moments(team, em, g, d, cfg, sh->best.theta, var_v > 0 ? sqrt(var_v) : NAN, w, sc.T,
                     sc.dT, out);
  }
  team.single([&] {
    int n = 0;
    for (int a = 0; a < d.n_arms; ++a) n += out->npix_arm[a];
    out->npix = n;
    for (int k = 0; k < 3; ++k) out->n_eval[k] = w->n_eval[k];
    out->status = kPipeOk;
  });
  team.sync();
}

// Pass 2 of a star's joint fit over its epochs (docs/epochs.md): one epoch's velocity with the
// labels (and VSINI) held at the star's joint values theta[1..]: velocity_newton from theta[0]
// (the epoch's own VRAD), one re-fit after clipping |resid|/sigma > clip_sigma, then the
// statistics fit_one reports (per-arm chi^2 and pixels, continuum-only chi^2, segment
// velocities). out->best has np = 1: cov[0] is VRAD's variance; the labels carry no error here.
// VRAD_SKEW/KURT and the VSINI limit are not measured (NaN). `d.ivar` must point to sc.ivar.
template <class Team>
VX_HD void fit_velocity_held(const Team& team, const EmulatorView& em, const GridView& g,
                             const FitData& d, const PipelineConfig& cfg, const double* theta,
                             const PipelineScratch& sc, PipelineShared* sh, PipelineResult* out) {
  fold_rows(team, d);
  EvalWork* w = &sh->w;
  const int vs = vsini_index(em.n_label);
  team.single([&] {
    w->emu = sc.emu;
    w->fit_vsini = cfg.fit_vsini && d.fit_vsini && theta[vs] > 0 ? 1 : 0;
    w->limb_eps = cfg.limb_eps;
    w->n_eval[0] = w->n_eval[1] = w->n_eval[2] = 0;
    out->n_eval[0] = out->n_eval[1] = out->n_eval[2] = out->n_lm_iter = 0;
    out->v_ccf = NAN;
    out->vsini_upper = NAN;
    out->dchi2_vsini0 = NAN;
    out->v_skew = NAN;
    out->v_kurt = NAN;
    out->n_clipped = 0;
    for (int q = 0; q < kMaxParams; ++q) sh->best.theta[q] = theta[q];
    if (!w->fit_vsini) sh->best.theta[vs] = 0.0;
  });
  team.sync();
  const int max_iter = 2 * (cfg.seg_max_iter > 0 ? cfg.seg_max_iter : 6);
  double v = NAN, err = NAN, chi2 = NAN;
  double th[kMaxParams];
  for (int q = 0; q < kMaxParams; ++q) th[q] = sh->best.theta[q];
  emulator_coeffs_into(team, em, th + 1, w);
  velocity_newton(team, em, g, d, cfg, max_iter, th, w, sc.T, sc.dT, &v, &err, &chi2);
  if (cfg.clip_sigma > 0 && v == v) {
    if (clip_outliers(team, em, g, d, cfg, th, sc, w, out) > 0) {
      emulator_coeffs_into(team, em, th + 1, w);
      velocity_newton(team, em, g, d, cfg, max_iter, th, w, sc.T, sc.dT, &v, &err, &chi2);
    }
  }
  if (!(v == v)) {
    team.single([&] { out->status = kPipeFitFailed; });
    team.sync();
    return;
  }
  team.single([&] {
    for (int q = 0; q < kMaxParams; ++q) sh->best.theta[q] = th[q];
    sh->best.chi2 = chi2;
    sh->best.np = 1;
    sh->best.cov[0] = err * err;
    sh->best.hess_ok = 1;
    sh->best.niter = 0;
    sh->best.status = kLMConverged;
  });
  team.sync();
  solution_statistics(team, em, g, d, cfg, sc, sh, out);
  segment_velocities(team, em, g, d, cfg, th, w, sc.T, sc.dT, out);
  team.single([&] {
    int n = 0;
    for (int a = 0; a < d.n_arms; ++a) n += out->npix_arm[a];
    out->npix = n;
    for (int k = 0; k < 3; ++k) out->n_eval[k] = w->n_eval[k];
    out->status = kPipeOk;
  });
  team.sync();
}

}  // namespace velox::kern
