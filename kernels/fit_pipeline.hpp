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

// ---- The machines' states (kernels/machine.hpp) ------------------------------------------

// Gauss-Newton on v alone over the pixels of d (or of its segment `seg`) with the labels held
// at th (velocity-only evaluations: the driver has done kReqEmu for th's labels): continuum
// profiled out, each step halved until chi^2 does not rise, at most `max_iter` steps, stopping
// once a step is below 2% of its error. Set pc = 0, th, max_iter and seg, then step (newton_step).
// On return th[0] is the velocity, v = th[0], err (1 / sqrt of the profiled Hessian, km/s) and
// chi2 its chi^2; all three NaN when the first evaluation fails.
struct NewtonMachine {
  int pc = 0;
  int max_iter = 0, seg = -1, it = 0, half = 0, moved = 0;
  double th[kMaxParams];
  double chi2 = 0.0, grad = 0.0, h = 0.0, step = 0.0;
  double v = 0.0, err = 0.0, chi2_out = 0.0;  // results
};

// The statistics of the solution sh->best (stats_step): out->best, the per-arm chi^2 and used
// pixels (ivar > 0 after clipping), and the continuum-only chi^2 (total and per arm; NaN if
// singular). Leaves w describing the continuum-only fit.
struct StatsMachine {
  int pc = 0;
  int have_eval = 0;  // w holds the evaluation at best.theta already (the clip's, nothing clipped)
};

// Velocity of every segment of d (an arm, or a blue/red half) with the labels held at theta
// (seg_step): Gauss-Newton over the segment's pixels. The error is the profiled Hessian's at the
// final point, so segments are independent measurements of VRAD (RV systematics between arms
// show up as their disagreement). Set pc = 0 and theta.
struct SegMachine {
  int pc = 0, s = 0;
  double theta[kMaxParams];
  NewtonMachine nt;
};

// fit_one's control flow (fit_step).
struct FitMachine {
  int pc = 0;
  int n_ccf = 0, j = 0, s = 0, n_use = 0, n_out = 0, lag_lo = 0, lag_step = 1, lag_c = 0;
  int n_starts = 0, fit_vs = 0, k = 0;
  double th[kMaxParams];
  // The VSINI upper limit of slow rotators.
  double chi2_best = 0.0, scale = 1.0, target = 0.0, d0 = 0.0, upper = 0.0;
  double lo = 0.0, hi = 0.0, dlo = 0.0, dhi = 0.0, x = 0.0;
  // The velocity posterior's moments.
  double mo_m = 0.0, mo_h = 0.0, s0 = 0.0, s2 = 0.0, s3 = 0.0, s4 = 0.0;
  LMMachine lm;
  StatsMachine st;
  SegMachine sg;
};

// fit_velocity_held's control flow (held_step).
struct HeldMachine {
  int pc = 0;
  double th[kMaxParams];
  double v = 0.0, err = 0.0, chi2 = 0.0;
  NewtonMachine nt;
  StatsMachine st;
  SegMachine sg;
};

// Per-spectrum shared state (a device array on the GPU, one per warp slot).
struct PipelineShared {
  EvalWork w;
  LMState cur, best;
  double grid_chi2[kMaxCcfTemplates];
  int grid_idx[kMaxCcfTemplates];
  double ccf_peak[kMaxCcfTemplates];  // kReqCcf over n_k templates: each one's highest CCF
  int ccf_peak_lag[kMaxCcfTemplates];  // and its first lag index reaching it
  double grid_raw[kMaxCcfTemplates];  // kReqGrid: each template's chi^2 (w->chi2), in j order
  int grid_ok[kMaxCcfTemplates];      // and its w->ok
  int n_grid;
  double pbest, v_ccf;
  int jbest, obest;
  FitRequest rq;  // the request of the machine below, served by the driver
  int more;       // the last step asked for a request
  KeptRows kept[kMaxArms];  // FitData::tv_keep: what the kept rows hold (reset per fit)
  double vgrid_chi2[kVGridPoints];  // kReqVGrid's chi^2 per point (NaN: outside the box, failed)
  double clip_n[kMaxArms];          // kReqClip's clipped pixels per arm (clip_arm)
  FitMachine fm;
  HeldMachine hm;
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

// The VSINI where chi^2 crosses `target`, linear in vsini^2 between (lo, dlo) and (hi, dhi).
VX_HD VX_INLINE double vsini_crossing(double lo, double dlo, double hi, double dhi,
                                      double target) {
  const double u = lo * lo + (target - dlo) / (dhi - dlo) * (hi * hi - lo * lo);
  return sqrt(fmax(u, 0.0));
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

// ---- Requests ------------------------------------------------------------------------------

VX_HD VX_INLINE void request_vonly(FitRequest* rq, const double* theta, int jac, int seg) {
  request_eval(rq, theta, jac);
  rq->vel_only = 1;
  rq->seg = seg;
}

VX_HD VX_INLINE void request_theta(FitRequest* rq, int kind, const double* theta) {
  rq->kind = kind;
  for (int q = 0; q < kMaxParams; ++q) rq->theta[q] = theta[q];
}

// Pixels clipped in all n_arms arms (clip_arm's counts; the machine's step, after kReqClip).
VX_HD VX_INLINE int clip_total(const PipelineShared* sh, int n_arms) {
  int n = 0;
  for (int a = 0; a < n_arms; ++a) n += (int)sh->clip_n[a];
  return n;
}

// ---- The steps (one worker; Team only for linkage, see lm_step) -----------------------------

// A fit's last step: the used pixels and evaluation counts into the result, status ok.
VX_HD VX_INLINE void finish_result(const FitData& d, const EvalWork* w, PipelineResult* out) {
  int n = 0;
  for (int a = 0; a < d.n_arms; ++a) n += out->npix_arm[a];
  out->npix = n;
  for (int k = 0; k < 3; ++k) out->n_eval[k] = w->n_eval[k];
  out->status = kPipeOk;
}

template <class Team>
VX_HD VX_NOINLINE bool newton_step(NewtonMachine& m, const PipelineConfig& cfg, const EvalWork* w,
                                   FitRequest* rq) {
  VX_MACHINE_BEGIN(m)
  m.v = NAN, m.err = NAN, m.chi2_out = NAN;
  request_vonly(rq, m.th, 1, m.seg);
  VX_YIELD(m, 1);
  if (!(rq->ok && w->hess[0] > 0)) VX_MACHINE_EXIT(m);
  m.chi2 = w->chi2, m.grad = w->grad[0], m.h = w->hess[0];
  for (m.it = 0; m.it < m.max_iter; ++m.it) {
    m.step = m.grad / m.h;
    m.moved = 0;
    for (m.half = 0; m.half < 4 && !m.moved; ++m.half, m.step *= 0.5) {
      {
        double tr[kMaxParams];  // every theta entry (VSINI too) is copied; only v is stepped
        for (int q = 0; q < kMaxParams; ++q) tr[q] = m.th[q];
        tr[0] = fmin(fmax(m.th[0] + m.step, cfg.lm.lo[0]), cfg.lm.hi[0]);
        request_vonly(rq, tr, 1, m.seg);
      }
      VX_YIELD(m, 2);
      if (rq->ok && w->chi2 <= m.chi2 && w->hess[0] > 0) {
        m.moved = 1;
        m.th[0] = rq->theta[0];
        m.chi2 = w->chi2;
        m.grad = w->grad[0];
        m.h = w->hess[0];
      }
    }
    if (!m.moved || fabs(m.step) < 0.02 / sqrt(m.h)) break;  // converged to 2% of its error
  }
  m.v = m.th[0];
  m.err = 1.0 / sqrt(m.h);
  m.chi2_out = m.chi2;
  VX_MACHINE_END(m)
}

template <class Team>
VX_HD VX_NOINLINE bool stats_step(StatsMachine& m, const FitData& d, PipelineShared* sh,
                                  PipelineResult* out, FitRequest* rq) {
  const EvalWork* w = &sh->w;
  VX_MACHINE_BEGIN(m)
  if (!m.have_eval) {
    request_eval(rq, sh->best.theta, 0);
    VX_YIELD(m, 1);
  }
  out->best = sh->best;
  for (int a = 0; a < kMaxArms; ++a) {
    out->chi2_arm[a] = a < d.n_arms ? w->chi2_arm[a] : NAN;
    out->npix_arm[a] = 0;
  }
  rq->kind = kReqArmPixels;
  VX_YIELD(m, 2);
  {
    const double theta0[kMaxParams] = {0, 0, 0, 0, 0};
    request_eval(rq, theta0, 0);
    rq->no_emu = 1;
  }
  VX_YIELD(m, 3);
  out->chi2_c = w->ok ? w->chi2 : NAN;
  for (int a = 0; a < kMaxArms; ++a)
    out->chi2_c_arm[a] = w->ok && a < d.n_arms ? w->chi2_arm[a] : NAN;
  VX_MACHINE_END(m)
}

template <class Team>
VX_HD VX_NOINLINE bool seg_step(SegMachine& m, const FitData& d, const PipelineConfig& cfg,
                                const EvalWork* w, PipelineResult* out, FitRequest* rq) {
  VX_MACHINE_BEGIN(m)
  if (d.n_seg > 0 && cfg.seg_max_iter > 0) {
    request_theta(rq, kReqEmu, m.theta);
    VX_YIELD(m, 1);
  }
  for (m.s = 0; m.s < kMaxSeg; ++m.s) {
    out->v_seg[m.s] = NAN;
    out->v_seg_err[m.s] = NAN;
    if (m.s < d.n_seg && cfg.seg_max_iter > 0) {
      m.nt.pc = 0;
      m.nt.max_iter = cfg.seg_max_iter;
      m.nt.seg = m.s;
      for (int q = 0; q < kMaxParams; ++q) m.nt.th[q] = m.theta[q];
      while (newton_step<Team>(m.nt, cfg, w, rq)) VX_YIELD(m, 2);
      out->v_seg[m.s] = m.nt.v;
      out->v_seg_err[m.s] = m.nt.err;
    }
  }
  VX_MACHINE_END(m)
}

// The fit of one spectrum (fit_one): CCF, chi^2 grid, LM from the best starts, VSINI, clipping
// and the re-fit, the statistics at the solution. The inputs are fit_one's.
// The coarse templates a fit's chi^2 grid takes (all of the library's n_ccf, at most
// kMaxCcfTemplates), and how many of them its coarse CCF cross-correlates (cfg.n_ccf_use, at
// least 1): fit_step's request sizes, and the staged engine's items per request.
VX_HD VX_INLINE int grid_templates(int n_ccf) {
  return n_ccf > kMaxCcfTemplates ? kMaxCcfTemplates : n_ccf;
}
VX_HD VX_INLINE int ccf_templates_used(const PipelineConfig& cfg, int n_ccf) {
  const int n = grid_templates(n_ccf);
  return cfg.n_ccf_use < 1 ? 1 : (cfg.n_ccf_use < n ? cfg.n_ccf_use : n);
}

template <class Team>
VX_HD VX_NOINLINE bool fit_step(FitMachine& m, int L, const GridView& g, const FitData& d,
                                int n_ccf, const double* ccf_labels, const PipelineConfig& cfg,
                                const PipelineScratch& sc, PipelineShared* sh,
                                PipelineResult* out, FitRequest* rq) {
  EvalWork* w = &sh->w;
  const int vs = vsini_index(L);
  VX_MACHINE_BEGIN(m)
  for (int a = 0; a < kMaxArms; ++a) sh->kept[a].basis = nullptr;  // a new spectrum's rows
  rq->kind = kReqFold;  // the matrix rows into the worker's scratch (kernels/fold.hpp)
  VX_YIELD(m, 1);
  m.n_ccf = grid_templates(n_ccf);
  w->emu = sc.emu;
  w->fit_vsini = 0;
  w->limb_eps = cfg.limb_eps;
  out->vsini_upper = NAN;
  out->dchi2_vsini0 = NAN;
  // The VSINI upper limit below reads out->npix before the end sets it. The CPU's results were
  // always value-initialised (0: the limit's chi^2/dof scale is 1), the GPU's device array held
  // whatever an earlier batch left there: 0 here gives both the CPU's limits. (The scale meant
  // max(1, chi^2/dof) of the fit; using it changes the limits: issue 52, VSINI calibration.)
  out->npix = 0;
  w->n_eval[0] = w->n_eval[1] = w->n_eval[2] = 0;
  out->n_eval[0] = out->n_eval[1] = out->n_eval[2] = out->n_lm_iter = 0;
  // ---- CCF -------------------------------------------------------------------------------
  rq->kind = kReqCcfPrep;
  VX_YIELD(m, 2);
  m.lag_lo = ccf_lag_lo(cfg, g);
  m.lag_step = cfg.lag_step > 0 ? cfg.lag_step : 1;
  m.n_out = ccf_lags(cfg, g);
  m.n_use = ccf_templates_used(cfg, n_ccf);
  sh->pbest = -INFINITY;
  sh->jbest = 0;
  sh->obest = 0;
  // Every template in one request (one engine round instead of n_use): each template's first
  // highest lag, then the first highest over the templates in order (the first maximum over
  // templates and lags, as when each CCF was its own request).
  rq->kind = kReqCcf;
  rq->j = 0;
  rq->n_k = m.n_use;
  rq->lag0 = m.lag_lo;
  rq->n_lags = m.n_out;
  rq->lag_step = m.lag_step;
  VX_YIELD(m, 3);
  for (m.j = 0; m.j < m.n_use; ++m.j)
    if (sh->ccf_peak[m.j] > sh->pbest) {
      sh->pbest = sh->ccf_peak[m.j];
      sh->jbest = m.j;
      sh->obest = sh->ccf_peak_lag[m.j];
    }
  // Fine lags around the best template's peak, then a parabola through the top three.
  m.lag_c = m.lag_lo + sh->obest * m.lag_step;
  rq->kind = kReqCcf;
  rq->j = sh->jbest;
  rq->n_k = 0;  // one template, its lags into sc.ccf
  rq->lag0 = m.lag_c - 3;
  rq->n_lags = 7;
  rq->lag_step = 1;
  VX_YIELD(m, 4);
  {
    const double* fine = sc.ccf;
    int ob = 0;
    for (int o = 1; o < 7; ++o)
      if (fine[o] > fine[ob]) ob = o;
    double lag_peak = m.lag_c - 3 + ob;
    if (ob > 0 && ob < 6) {
      const double den = fine[ob - 1] - 2 * fine[ob] + fine[ob + 1];
      if (den < 0) lag_peak += 0.5 * (fine[ob - 1] - fine[ob + 1]) / den;
    }
    sh->v_ccf =
        fmin(fmax(velocity_from_ln_doppler(lag_peak * g.dlnlam), cfg.vmin_kms), cfg.vmax_kms);
    sh->n_grid = 0;
  }
  out->v_ccf = sh->v_ccf;
  // ---- chi^2 grid: every coarse template at the CCF velocity, sorted (insertion) -----------
  // (A team with SIMD forms computes the stencils once for all templates: kReqGridPrep.)
  rq->kind = kReqGridPrep;
  rq->v = sh->v_ccf;
  VX_YIELD(m, 5);
  // Every template in one request (one engine round instead of n_ccf), served in j order.
  rq->kind = kReqGrid;
  rq->j = 0;
  rq->n_k = m.n_ccf;
  rq->v = sh->v_ccf;
  VX_YIELD(m, 6);
  for (m.j = 0; m.j < m.n_ccf; ++m.j) {
    if (sh->grid_ok[m.j]) {
      int k = sh->n_grid++;
      while (k > 0 && sh->grid_chi2[k - 1] > sh->grid_raw[m.j]) {
        sh->grid_chi2[k] = sh->grid_chi2[k - 1];
        sh->grid_idx[k] = sh->grid_idx[k - 1];
        --k;
      }
      sh->grid_chi2[k] = sh->grid_raw[m.j];
      sh->grid_idx[k] = m.j;
    }
  }
  if (sh->n_grid == 0) {
    out->status = kPipeFitFailed;
    VX_MACHINE_EXIT(m);
  }
  // ---- LM from the best starts, then one re-fit after clipping ----------------------------
  sh->best.chi2 = INFINITY;
  sh->best.status = kLMEvalFailed;
  out->n_clipped = 0;
  m.n_starts = cfg.n_starts < sh->n_grid ? cfg.n_starts : sh->n_grid;
  for (m.s = 0; m.s < m.n_starts; ++m.s) {
    sh->cur.theta[0] = sh->v_ccf;
    for (int l = 0; l < L; ++l) sh->cur.theta[1 + l] = ccf_labels[sh->grid_idx[m.s] * L + l];
    for (int q = 1 + L; q < kMaxParams; ++q) sh->cur.theta[q] = 0.0;  // VSINI held at 0
    // Later starts stop once inside the best start's basin (LMConfig::join_dchi2).
    m.lm.pc = 0;
    while (lm_step<Team>(m.lm, cfg.lm, L, &sh->cur, m.s > 0 ? &sh->best : nullptr, w, rq))
      VX_YIELD(m, 7);
    out->n_lm_iter += sh->cur.niter;
    if (sh->cur.status != kLMEvalFailed && sh->cur.status != kLMJoined &&
        sh->cur.chi2 < sh->best.chi2)
      sh->best = sh->cur;
  }
  if (!(sh->best.chi2 < INFINITY)) {
    out->status = kPipeFitFailed;
    VX_MACHINE_EXIT(m);
  }
  m.fit_vs = cfg.fit_vsini && d.fit_vsini;
  if (m.fit_vs) {
    // VSINI free, from the best start: kept if it lowers chi^2 (else VSINI = 0 stays, with no
    // VSINI variance: the kernel is the identity there). A probe first: if rotation at
    // vsini_start with the rest held does not lower chi^2, the star is a slow rotator and the
    // LM is skipped (it would walk back to 0; the upper limit is measured below). This keeps
    // the cost of VSINI on slow rotators to one evaluation here (docs/vsini.md).
    w->fit_vsini = 1;
    sh->cur = sh->best;
    sh->cur.theta[vs] = cfg.vsini_start;
    request_eval(rq, sh->cur.theta, 0);
    VX_YIELD(m, 8);
    if (rq->ok && w->chi2 < sh->best.chi2) {
      m.lm.pc = 0;
      while (lm_step<Team>(m.lm, cfg.lm, L, &sh->cur, nullptr, w, rq)) VX_YIELD(m, 9);
      out->n_lm_iter += sh->cur.niter;
      if (sh->cur.status != kLMEvalFailed && sh->cur.chi2 < sh->best.chi2) sh->best = sh->cur;
    }
  }
  if (cfg.clip_sigma > 0) {
    request_eval(rq, sh->best.theta, 0);  // the model clip_arm reads
    VX_YIELD(m, 10);
    out->n_clipped = 0;
    if (rq->ok) {
      request_theta(rq, kReqClip, sh->best.theta);
      VX_YIELD(m, 20);
      out->n_clipped = clip_total(sh, d.n_arms);
    }
    if (out->n_clipped > 0) {
      sh->cur = sh->best;
      m.lm.pc = 0;
      while (lm_step<Team>(m.lm, cfg.lm, L, &sh->cur, nullptr, w, rq)) VX_YIELD(m, 11);
      out->n_lm_iter += sh->cur.niter;
      if (sh->cur.status != kLMEvalFailed) sh->best = sh->cur;
    }
  }
  // ---- Statistics at the solution ---------------------------------------------------------
  m.st.pc = 0;
  // Nothing clipped: best is where the clip evaluated, and w still holds that evaluation (the
  // clip writes only ivar, and only where it clips), so the statistics take it.
  m.st.have_eval = cfg.clip_sigma > 0 && out->n_clipped == 0;
  while (stats_step<Team>(m.st, d, sh, out, rq)) VX_YIELD(m, 12);
  if (m.fit_vs) {
    // Slow rotators: chi^2 at VSINI = 0 (the rest at the best fit) against the best chi^2; when
    // the difference is below the detection threshold, the upper limit is where chi^2 (the rest
    // held, a conditional rather than a profile limit) rises by vsini_upper_dchi2 above the
    // best: brackets doubling from best + 25 km/s, then one regula-falsi step and a final
    // interpolation, both linear in vsini^2 (the broadening adds in quadrature to the line
    // widths, so chi^2 is closer to linear in vsini^2 than in vsini): a few percent of the
    // bracket (docs/vsini.md). Both thresholds scale with max(1, chi^2/dof) so that model
    // mismatch does not shrink the limit. (out->npix is 0 here, set at the start: see there.)
    {
      const int dof = out->npix - n_fit_params(L, 1) - d.n_arms * (cfg.cont_deg + 1);
      m.scale = dof > 0 ? fmax(1.0, sh->best.chi2 / dof) : 1.0;
    }
    m.chi2_best = sh->best.chi2;
    for (int q = 0; q < kMaxParams; ++q) m.th[q] = sh->best.theta[q];
    // At a best VSINI below half a template pixel the model is the VSINI = 0 one: d0 = 0.
    if (sh->best.theta[vs] < 0.5 * kSpeedOfLight_kms * g.dlnlam) {
      m.d0 = 0.0;
    } else {
      m.th[vs] = 0.0;
      request_eval(rq, m.th, 0);
      VX_YIELD(m, 13);
      m.d0 = rq->ok ? w->chi2 - m.chi2_best : INFINITY;
    }
    m.upper = NAN;
    if (m.d0 < cfg.vsini_detect_dchi2 * m.scale) {
      m.target = cfg.vsini_upper_dchi2 * m.scale;
      m.lo = fmax(sh->best.theta[vs], 0.0);
      m.hi = fmin(m.lo + 25.0, cfg.lm.hi[vs]);
      m.dlo = 0.0;
      m.th[vs] = m.hi;
      request_eval(rq, m.th, 0);
      VX_YIELD(m, 14);
      m.dhi = rq->ok ? w->chi2 - m.chi2_best : INFINITY;
      while (m.dhi < m.target && m.hi < cfg.lm.hi[vs]) {
        m.lo = m.hi;
        m.dlo = m.dhi;
        m.hi = fmin(2.0 * m.hi, cfg.lm.hi[vs]);
        m.th[vs] = m.hi;
        request_eval(rq, m.th, 0);
        VX_YIELD(m, 15);
        m.dhi = rq->ok ? w->chi2 - m.chi2_best : INFINITY;
      }
      if (m.dhi < m.target) {
        m.upper = cfg.lm.hi[vs];  // not constrained inside the box
      } else {
        m.x = vsini_crossing(m.lo, m.dlo, m.hi, m.dhi, m.target);
        m.th[vs] = m.x;
        request_eval(rq, m.th, 0);
        VX_YIELD(m, 16);
        {
          const double dx = rq->ok ? w->chi2 - m.chi2_best : INFINITY;
          if (dx < m.target) {
            m.lo = m.x;
            m.dlo = dx;
          } else {
            m.hi = m.x;
            m.dhi = dx;
          }
        }
        m.upper = vsini_crossing(m.lo, m.dlo, m.hi, m.dhi, m.target);
      }
    }
    out->dchi2_vsini0 = m.d0;
    out->vsini_upper = m.upper;
  }
  m.sg.pc = 0;
  for (int q = 0; q < kMaxParams; ++q) m.sg.theta[q] = sh->best.theta[q];
  while (seg_step<Team>(m.sg, d, cfg, w, out, rq)) VX_YIELD(m, 17);
  // VRAD_SKEW and VRAD_KURT as rvspecfit defines them (rvspecfit spec_fit.find_best, used by
  // desi_fit.py for the DESI MWS tables): the conditional velocity posterior
  // p(v) ~ exp(-(chi^2(v) - chi^2_min) / 2), labels and VSINI held at the best fit, continuum
  // profiled, sampled on a grid; moments about VRAD with s^2 = sum p (v - VRAD)^2:
  // skew = sum p (v - VRAD)^3 / s^3, kurt = sum p (v - VRAD)^4 / s^4 (not excess: 3 for a
  // Gaussian). The grid is 2 * vpost_half + 1 velocities spaced vpost_step x err (err: VRAD's
  // statistical error, labels free, so at least the conditional width), i.e. +-6 err by
  // default, where rvspecfit refines its grid to err / 5 over +-10 err: for a Gaussian the sums
  // at spacing err are exact to 1e-8 (Riemann sums of a Gaussian converge as
  // exp(-2 pi^2 s^2 / h^2)); the 13 velocity-only evaluations add 12% to a LAMOST fit's FLOPs
  // (docs/performance.md). Velocities outside the fit's box are left out. NaN when err is not
  // finite and positive or no point evaluates. Accumulated online with a running chi^2 minimum
  // (no per-point storage).
  m.mo_m = INFINITY, m.s0 = 0.0, m.s2 = 0.0, m.s3 = 0.0, m.s4 = 0.0;
  {
    const double var_v = sh->best.hess_ok ? sh->best.cov[0] : NAN;
    m.mo_h = var_v > 0 ? sqrt(var_v) : NAN;  // VRAD's error; then the grid step
  }
  if (cfg.vpost_half > 0 && m.mo_h > 0 && m.mo_h < INFINITY) {
    request_theta(rq, kReqEmu, sh->best.theta);
    VX_YIELD(m, 18);
    m.mo_h = cfg.vpost_step * m.mo_h;
    // The grid's velocities in one request each kVGridPoints (issue 51: one step for the 13),
    // served by serve_vgrid; their chi^2 summed here in the grid's order.
    for (m.k = -cfg.vpost_half; m.k <= cfg.vpost_half; m.k += kVGridPoints) {
      request_theta(rq, kReqVGrid, sh->best.theta);
      rq->v = m.mo_h;
      rq->k0 = m.k;
      rq->n_k = cfg.vpost_half + 1 - m.k < kVGridPoints ? cfg.vpost_half + 1 - m.k : kVGridPoints;
      VX_YIELD(m, 19);
      for (int i = 0; i < rq->n_k; ++i) {
        const double c = sh->vgrid_chi2[i], x = (m.k + i) * m.mo_h;
        if (!(c < INFINITY)) continue;  // outside the box, or the evaluation failed
        if (c < m.mo_m) {               // rescale the sums to the new minimum
          const double f = m.mo_m < INFINITY ? exp(-0.5 * (m.mo_m - c)) : 0.0;
          m.s0 *= f, m.s2 *= f, m.s3 *= f, m.s4 *= f;
          m.mo_m = c;
        }
        const double p = exp(-0.5 * (c - m.mo_m));
        m.s0 += p, m.s2 += p * x * x, m.s3 += p * x * x * x, m.s4 += p * x * x * x * x;
      }
    }
  }
  out->v_skew = out->v_kurt = NAN;
  if (m.s0 > 0) {
    const double var = m.s2 / m.s0;
    out->v_skew = var > 1e-20 ? m.s3 / m.s0 / (var * sqrt(var)) : 0.0;
    out->v_kurt = var > 1e-20 ? m.s4 / m.s0 / (var * var) : 0.0;
  }
  finish_result(d, w, out);
  VX_MACHINE_END(m)
}

// Pass 2 of a star's joint fit over its epochs (fit_velocity_held).
template <class Team>
VX_HD VX_NOINLINE bool held_step(HeldMachine& m, int L, const FitData& d,
                                 const PipelineConfig& cfg, const double* theta,
                                 const PipelineScratch& sc, PipelineShared* sh,
                                 PipelineResult* out, FitRequest* rq) {
  EvalWork* w = &sh->w;
  const int vs = vsini_index(L);
  VX_MACHINE_BEGIN(m)
  for (int a = 0; a < kMaxArms; ++a) sh->kept[a].basis = nullptr;  // a new spectrum's rows
  rq->kind = kReqFold;
  VX_YIELD(m, 1);
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
  for (int q = 0; q < kMaxParams; ++q) m.th[q] = sh->best.theta[q];
  m.v = NAN, m.err = NAN, m.chi2 = NAN;
  request_theta(rq, kReqEmu, m.th);
  VX_YIELD(m, 2);
  m.nt.pc = 0;
  m.nt.max_iter = 2 * (cfg.seg_max_iter > 0 ? cfg.seg_max_iter : 6);
  m.nt.seg = -1;
  for (int q = 0; q < kMaxParams; ++q) m.nt.th[q] = m.th[q];
  while (newton_step<Team>(m.nt, cfg, w, rq)) VX_YIELD(m, 3);
  for (int q = 0; q < kMaxParams; ++q) m.th[q] = m.nt.th[q];
  m.v = m.nt.v, m.err = m.nt.err, m.chi2 = m.nt.chi2_out;
  if (cfg.clip_sigma > 0 && m.v == m.v) {
    request_eval(rq, m.th, 0);  // the model clip_arm reads
    VX_YIELD(m, 4);
    if (rq->ok) {
      request_theta(rq, kReqClip, m.th);
      VX_YIELD(m, 9);
      out->n_clipped = clip_total(sh, d.n_arms);
    }
    if (out->n_clipped > 0) {
      request_theta(rq, kReqEmu, m.th);
      VX_YIELD(m, 5);
      m.nt.pc = 0;
      for (int q = 0; q < kMaxParams; ++q) m.nt.th[q] = m.th[q];
      while (newton_step<Team>(m.nt, cfg, w, rq)) VX_YIELD(m, 6);
      for (int q = 0; q < kMaxParams; ++q) m.th[q] = m.nt.th[q];
      m.v = m.nt.v, m.err = m.nt.err, m.chi2 = m.nt.chi2_out;
    }
  }
  if (!(m.v == m.v)) {
    out->status = kPipeFitFailed;
    VX_MACHINE_EXIT(m);
  }
  for (int q = 0; q < kMaxParams; ++q) sh->best.theta[q] = m.th[q];
  sh->best.chi2 = m.chi2;
  sh->best.np = 1;
  sh->best.cov[0] = m.err * m.err;
  sh->best.hess_ok = 1;
  sh->best.niter = 0;
  sh->best.status = kLMConverged;
  m.st.pc = 0;
  m.st.have_eval = cfg.clip_sigma > 0 && out->n_clipped == 0;  // as fit_step: the clip's at m.th
  while (stats_step<Team>(m.st, d, sh, out, rq)) VX_YIELD(m, 7);
  m.sg.pc = 0;
  for (int q = 0; q < kMaxParams; ++q) m.sg.theta[q] = m.th[q];
  while (seg_step<Team>(m.sg, d, cfg, w, out, rq)) VX_YIELD(m, 8);
  finish_result(d, w, out);
  VX_MACHINE_END(m)
}

// ---- The driver: a request served by the team ----------------------------------------------

// Outlier clipping of arm a before the re-fit (kReqClip; the machine asks for it after a full
// evaluation without the Jacobian at the same theta, and only when that evaluation succeeded):
// every used pixel of the arm whose residual from the model (w->cont[a]'s continuum times T) has
// |flux - model| sqrt(ivar) > clip_sigma gets ivar 0 in sc.ivar; the count into *n. A spectrum's
// arms write disjoint pixels and counts, so the staged engine runs them on as many teams at once
// (kernels/engine.hpp engine_clip_arm); the machine sums the counts (clip_total). The team by
// value, as the GPU calls it out of line.
template <class Team>
VX_HD VX_NOINLINE void clip_arm(Team team, const FitData& d, int cont_deg, double clip_sigma,
                                const PipelineScratch& sc, const EvalWork* w, int a, double* n) {
  const int i0 = d.arm_start[a];
  const double* ca = w->cont[a];
  team.reduce_sum(d.arm_start[a + 1] - i0, 1, n, [&](int ii, auto acc) {
    const int i = i0 + ii;
    const double model = continuum_at_pixel<Team>(d, i, cont_deg, ca) * sc.T[i];
    const double z = (d.flux[i] - model) * sqrt((double)sc.ivar[i]);
    if (sc.ivar[i] > 0 && fabs(z) > clip_sigma) {
      sc.ivar[i] = 0.0f;
      acc[0] += 1.0;
    }
  });
  team.sync();
}

// One stage of an evaluation request (kReqEval): stage 0 the template at the pixels
// (evaluate_template), stage 1 the continuum and chi^2 (evaluate_continuum; writes rq->ok). Served
// in turn they are evaluate, the same calls in the same order; the batched engine serves every
// spectrum's stage 0 before any stage 1 (kernels/engine.hpp). A segment request evaluates
// segment_view(d, rq->seg) into its slice of T and dT.
template <class Team>
VX_HD VX_NOINLINE void serve_eval_stage(const Team& team, int stage, FitRequest* rq,
                                        const EmulatorView& em, const GridView& g,
                                        const FitData& d, const PipelineConfig& cfg,
                                        const PipelineScratch& sc, PipelineShared* sh) {
  EvalWork* w = &sh->w;
  const bool seg = rq->seg >= 0;
  FitData sd;
  if (seg) sd = segment_view(d, rq->seg);
  const int off = seg ? d.seg_start[rq->seg] : 0;
  double* T = sc.T + off;
  double* dT = sc.dT + off;
  const bool jac = rq->jac != 0;
  if (seg || rq->vel_only) {
    if (stage == 0) {
      evaluate_template<true>(team, &em, g, seg ? sd : d, rq->theta, jac, w, T, dT);
    } else {
      const int ok = evaluate_continuum<true>(team, &em, seg ? sd : d, cfg.cont_deg, jac, w, T, dT);
      team.single([&] { rq->ok = ok; });
    }
  } else {
    const EmulatorView* e = rq->no_emu ? nullptr : &em;
    if (stage == 0) {
      evaluate_template<false>(team, e, g, d, rq->theta, jac, w, T, dT);
    } else {
      const int ok = evaluate_continuum<false>(team, e, d, cfg.cont_deg, jac, w, T, dT);
      team.single([&] { rq->ok = ok; });
    }
  }
  team.sync();
}

// Serve a kReqVGrid request: the velocity-only chi^2 (no Jacobian, the whole spectrum, the labels
// of the last kReqEmu) at v = theta[0] + k rq->v for each point k0 <= k < k0 + n_k, in order, into
// sh->vgrid_chi2[k - k0]; NaN where v leaves the fit's box (not evaluated) or the evaluation
// fails. Each point is the evaluation a kReqEval velocity-only request would serve.
template <class Team>
VX_HD VX_NOINLINE void serve_vgrid(const Team& team, const FitRequest* rq, const EmulatorView& em,
                                   const GridView& g, const FitData& d, const PipelineConfig& cfg,
                                   const PipelineScratch& sc, PipelineShared* sh) {
  EvalWork* w = &sh->w;
  for (int i = 0; i < rq->n_k; ++i) {
    double th[kMaxParams];
    for (int q = 0; q < kMaxParams; ++q) th[q] = rq->theta[q];
    th[0] = rq->theta[0] + (rq->k0 + i) * rq->v;  // one product, as the grid point's x
    double c = NAN;
    if (!(th[0] < cfg.lm.lo[0] || th[0] > cfg.lm.hi[0])) {
      const int ok = evaluate<true>(team, &em, g, d, cfg.cont_deg, th, false, w, sc.T, sc.dT);
      if (ok && w->chi2 < INFINITY) c = w->chi2;
    }
    team.single([&] { sh->vgrid_chi2[i] = c; });
    team.sync();
  }
}

// Template j's CCF over rq's lags (kReqCcf: lags rq.lag0 + o rq.lag_step, o < rq.n_lags) into
// ccf[rq.n_lags] (acc: 8 n_lags doubles of scratch; w: its reduction buffer), the CCF inputs of
// kReqCcfPrep in sc. With peak (a request over n_k > 0 templates): the first highest lag into
// peak[j] and peak_lag[j]. The staged engine serves a round's coarse CCFs per template, each with
// its own acc, ccf and w (kernels/engine.hpp TemplateItems). The team by value, as the GPU calls
// it out of line: by reference the kernel would keep its team in a stack frame.
template <class Team>
VX_HD VX_NOINLINE void ccf_template(Team team, const GridView& g, const FitData& d,
                                    const float* const* tmpl, int j, const FitRequest& rq,
                                    const PipelineScratch& sc, EvalWork* w, double* acc,
                                    double* ccf, double* peak, int* peak_lag) {
  cross_correlate(team, g, d, tmpl, j, rq.lag0, rq.n_lags, rq.lag_step, sc.t0, sc.frac, sc.fn,
                  sc.wts, w, acc, ccf);
  if (!peak) return;
  team.single([&] {
    double p = -INFINITY;
    int ob = 0;
    for (int o = 0; o < rq.n_lags; ++o)
      if (ccf[o] > p) {
        p = ccf[o];
        ob = o;
      }
    peak[j] = p;
    peak_lag[j] = ob;
  });
  team.sync();
}

// One coarse template's chi^2 at velocity v_kms (the chi^2 grid, kReqGrid): template j's values
// at the pixels into T[n_pix] (arms with a matrix: their full grid's values into d.Tf first), then
// each arm's continuum profiled in one pass, chi^2 = f'Wf - q.a (profile_continuum_simd without
// the Jacobian: Chebyshev moments where 2 deg + 4 <= kMaxGramRow, about 2 deg + nc + 1 sums per
// pixel). Every team takes this form, the single-lane teams too: their two-pass Legendre profile
// (profile_continuum_lanes) summed (deg + 1)(deg + 2) / 2 + deg + 1 products per pixel and
// passed the pixels twice for a chi^2 that ranks the grid only. t0, frac: the stencils of
// kReqGridPrep (teams with SIMD forms only). Writes *chi2 = w->chi2 and *ok = w->ok once; w's
// continuum and reduction scratch are overwritten. The staged engine serves the templates of a
// round's grid requests in parallel, each with its own T, d.Tf and w (kernels/engine.hpp
// TemplateItems).
template <class Team>
VX_HD VX_NOINLINE void grid_template_chi2(Team team, const GridView& g, const FitData& d,
                                          const float* const* tmpl, int j, double v_kms,
                                          int cont_deg, const int* t0, const double* frac,
                                          double* T, EvalWork* w, double* chi2, int* ok) {
  if (Team::kVec > 1)
    fixed_template_stencils(team, g, d, tmpl, j, t0, frac, T);
  else
    fixed_template_at_pixels(team, g, d, tmpl, j, v_kms, T);
  profile_continuum_simd(team, d, cont_deg, 1, false, T, nullptr, w);
  team.single([&] {
    *chi2 = w->chi2;
    *ok = w->ok;
  });
  team.sync();
}

// Serve one request of kind Kind (rq->kind == Kind) with the team (every worker calls it; rq->ok
// is written once): the same functions the fit always ran, with the same arguments. One
// instance per kind, so that the batched engine's kernel for a kind holds that kind's code only.
template <int Kind, class Team>
VX_HD VX_INLINE void serve_kind(const Team& team, FitRequest* rq, const EmulatorView& em,
                                const GridView& g, const FitData& d,
                                const float* const* ccf_tmpl, const PipelineConfig& cfg,
                                const PipelineScratch& sc, PipelineShared* sh,
                                PipelineResult* out) {
  EvalWork* w = &sh->w;
  if constexpr (Kind == kReqFold) {
    fold_rows(team, d);
  } else if constexpr (Kind == kReqCcfPrep) {
    pseudo_normalise(team, d, cfg.ccf_cont_deg, 4, w, sc.fn, sc.wts);
    pixel_positions(team, g, d, sc.t0, sc.frac);
  } else if constexpr (Kind == kReqCcf) {
    const int n = rq->n_k > 0 ? rq->n_k : 1;
    for (int i = 0; i < n; ++i)
      ccf_template(team, g, d, ccf_tmpl, rq->j + i, *rq, sc, w, sc.acc, sc.ccf,
                   rq->n_k > 0 ? sh->ccf_peak : nullptr, sh->ccf_peak_lag);
  } else if constexpr (Kind == kReqGridPrep) {
    // The CPU computes the stencils once for all templates (sc.t0 and sc.frac are free after
    // the CCF; an arm with a resolution matrix keeps its full grid's in d.dTf, free until the
    // LM).
    if (Team::kVec > 1) grid_stencils_at(team, g, d, rq->v, sc.t0, sc.frac);
  } else if constexpr (Kind == kReqGrid) {
    for (int j = rq->j; j < rq->j + rq->n_k; ++j)
      grid_template_chi2(team, g, d, ccf_tmpl, j, rq->v, cfg.cont_deg, sc.t0, sc.frac, sc.T, w,
                         &sh->grid_raw[j], &sh->grid_ok[j]);
  } else if constexpr (Kind == kReqEmu) {
    emulator_coeffs_into(team, em, rq->theta + 1, w);
  } else if constexpr (Kind == kReqEval) {
    serve_eval_stage(team, 0, rq, em, g, d, cfg, sc, sh);
    serve_eval_stage(team, 1, rq, em, g, d, cfg, sc, sh);
  } else if constexpr (Kind == kReqClip) {
    for (int a = 0; a < d.n_arms; ++a)
      clip_arm(team, d, cfg.cont_deg, cfg.clip_sigma, sc, w, a, &sh->clip_n[a]);
  } else if constexpr (Kind == kReqVGrid) {
    serve_vgrid(team, rq, em, g, d, cfg, sc, sh);
  } else if constexpr (Kind == kReqArmPixels) {
    for (int a = 0; a < d.n_arms; ++a) {
      team.reduce_sum(d.arm_start[a + 1] - d.arm_start[a], 1, w->red, [&](int ii, auto acc) {
        if (sc.ivar[d.arm_start[a] + ii] > 0) acc[0] += 1.0;
      });
      team.single([&] { out->npix_arm[a] = (int)w->red[0]; });
      team.sync();
    }
  }
}

// Serve one request of a spectrum's machine, whatever its kind (serve_kind<rq->kind>).
template <class Team>
VX_HD VX_NOINLINE void serve_request(const Team& team, FitRequest* rq, const EmulatorView& em,
                                     const GridView& g, const FitData& d,
                                     const float* const* ccf_tmpl, const PipelineConfig& cfg,
                                     const PipelineScratch& sc, PipelineShared* sh,
                                     PipelineResult* out) {
#define VX_SERVE_CASE(K) \
  case K:                \
    serve_kind<K>(team, rq, em, g, d, ccf_tmpl, cfg, sc, sh, out); \
    break;
  switch (rq->kind) {
    VX_SERVE_CASE(kReqFold)
    VX_SERVE_CASE(kReqCcfPrep)
    VX_SERVE_CASE(kReqCcf)
    VX_SERVE_CASE(kReqGridPrep)
    VX_SERVE_CASE(kReqGrid)
    VX_SERVE_CASE(kReqEmu)
    VX_SERVE_CASE(kReqEval)
    VX_SERVE_CASE(kReqClip)
    VX_SERVE_CASE(kReqArmPixels)
    VX_SERVE_CASE(kReqVGrid)
    default:
      break;
  }
#undef VX_SERVE_CASE
}

// Fit one spectrum: fit_step's machine driven to the end, each request served by the team.
// `d.ivar` must point to sc.ivar (the pipeline zeroes clipped pixels there). ccf_tmpl[a] = coarse
// templates of arm a ([n_ccf][n_tpix]); ccf_labels[n_ccf][L] their labels.
template <class Team>
VX_HD void fit_one(const Team& team, const EmulatorView& em, const GridView& g, const FitData& d,
                   const float* const* ccf_tmpl, int n_ccf, const double* ccf_labels,
                   const PipelineConfig& cfg, const PipelineScratch& sc, PipelineShared* sh,
                   PipelineResult* out) {
  team.single([&] { sh->fm.pc = 0; });
  team.sync();
  for (;;) {
    team.single([&] {
      sh->more = fit_step<Team>(sh->fm, em.n_label, g, d, n_ccf, ccf_labels, cfg, sc, sh, out,
                                &sh->rq);
    });
    team.sync();
    if (!sh->more) break;
    serve_request(team, &sh->rq, em, g, d, ccf_tmpl, cfg, sc, sh, out);
    team.sync();  // every worker is done with sh->rq before the next step rewrites it
  }
}

// Pass 2 of a star's joint fit over its epochs (docs/epochs.md): one epoch's velocity with the
// labels (and VSINI) held at the star's joint values theta[1..]: Gauss-Newton from theta[0]
// (the epoch's own VRAD), one re-fit after clipping |resid|/sigma > clip_sigma, then the
// statistics fit_one reports (per-arm chi^2 and pixels, continuum-only chi^2, segment
// velocities). out->best has np = 1: cov[0] is VRAD's variance; the labels carry no error here.
// VRAD_SKEW/KURT and the VSINI limit are not measured (NaN). `d.ivar` must point to sc.ivar.
template <class Team>
VX_HD void fit_velocity_held(const Team& team, const EmulatorView& em, const GridView& g,
                             const FitData& d, const PipelineConfig& cfg, const double* theta,
                             const PipelineScratch& sc, PipelineShared* sh, PipelineResult* out) {
  team.single([&] { sh->hm.pc = 0; });
  team.sync();
  for (;;) {
    team.single([&] {
      sh->more = held_step<Team>(sh->hm, em.n_label, d, cfg, theta, sc, sh, out, &sh->rq);
    });
    team.sync();
    if (!sh->more) break;
    serve_request(team, &sh->rq, em, g, d, nullptr, cfg, sc, sh, out);
    team.sync();  // every worker is done with sh->rq before the next step rewrites it
  }
}

}  // namespace velox::kern
