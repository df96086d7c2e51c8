// Levenberg-Marquardt refinement of theta = [VRAD, labels] for ONE spectrum, on the profiled
// chi^2 of fit_eval.hpp, with box constraints (projection onto [lo, hi]) and Marquardt's diagonal
// scaling. Every worker of the team runs the same control flow on shared scalars.
// Source: Marquardt (1963); Press et al., Numerical Recipes 3rd ed., sec. 15.5.2.
#pragma once
#include <cmath>

#include "kernels/fit_eval.hpp"

namespace velox::kern {

struct LMConfig {
  int max_iter = 60;
  double lambda0 = 1e-3;
  double dchi2_tol = 1e-2;  // converged when an accepted step improves chi^2 by less (absolute)
  double lo[kMaxParams] = {};
  double hi[kMaxParams] = {};
};

enum LMStatus : int {
  kLMConverged = 0,
  kLMMaxIter = 1,
  kLMEvalFailed = 2,  // continuum normal matrix singular at the start point
};

struct LMState {
  double theta[kMaxParams];
  double chi2;
  double cov[kMaxParams * kMaxParams];  // inverse Hessian at the optimum (NaN if singular)
  int niter;
  int status;
  int hess_ok;
};

// Evaluate chi^2 (+ gradient/Hessian) at theta into w. Returns w->ok. VOnly: the gradient and
// Hessian of v alone (1 x 1), the labels held at theta.
template <bool VOnly = false, class Team>
VX_HD int evaluate(const Team& team, const EmulatorView* em, const GridView& g, const FitData& d,
                   int cont_deg, const double* theta, bool need_jac, EvalWork* w, double* T,
                   double* dT) {
  const int np = em && !VOnly ? 1 + em->n_label : 1;
  if (em) team.single([&] { ++w->n_eval[VOnly ? 2 : (need_jac ? 1 : 0)]; });
  template_at_pixels<VOnly>(team, em, g, d, theta, need_jac, w, T, dT);
  profile_continuum(team, d, cont_deg, np, need_jac, T, dT, w);
  return w->ok;
}

// Run LM from st->theta. T[n_pix] and dT[n_pix][np] are scratch. On return st holds the best
// point, its chi^2, covariance, iteration count and status; w holds that point's continuum.
template <class Team>
VX_HD void lm_fit(const Team& team, const EmulatorView& em, const GridView& g, const FitData& d,
                  int cont_deg, const LMConfig& cfg, LMState* st, EvalWork* w, double* T,
                  double* dT) {
  const int np = 1 + em.n_label;
  // Shared scalars live in *st and *w; locals below are identical on every worker.
  double grad[kMaxParams], hess[kMaxParams * kMaxParams], trial[kMaxParams];
  st->niter = 0;
  st->hess_ok = 0;
  if (!evaluate(team, &em, g, d, cont_deg, st->theta, true, w, T, dT)) {
    st->status = kLMEvalFailed;
    st->chi2 = NAN;
    return;
  }
  double chi2 = w->chi2;
  for (int q = 0; q < np; ++q) grad[q] = w->grad[q];
  for (int q = 0; q < np * np; ++q) hess[q] = w->hess[q];
  double lambda = cfg.lambda0;
  int status = kLMMaxIter;
  int it = 0;
  bool w_at_best = true;  // w (and T, dT) describe st->theta
  for (; it < cfg.max_iter; ++it) {
    // Damped normal equations (H + lambda diag H) delta = grad.
    double a[kMaxParams * kMaxParams], delta[kMaxParams];
    for (int q = 0; q < np * np; ++q) a[q] = hess[q];
    for (int q = 0; q < np; ++q) {
      a[q * np + q] += lambda * fmax(hess[q * np + q], 1e-12);
      delta[q] = grad[q];
    }
    if (!cholesky(a, np)) {
      lambda *= 10.0;
      if (lambda > 1e12) break;
      continue;
    }
    cholesky_solve(a, np, delta);
    for (int q = 0; q < np; ++q) trial[q] = fmin(fmax(st->theta[q] + delta[q], cfg.lo[q]), cfg.hi[q]);
    const int ok = evaluate(team, &em, g, d, cont_deg, trial, true, w, T, dT);
    w_at_best = false;
    if (ok && w->chi2 <= chi2) {
      w_at_best = true;
      const double dchi2 = chi2 - w->chi2;
      team.single([&] {
        for (int q = 0; q < np; ++q) st->theta[q] = trial[q];
      });
      team.sync();
      chi2 = w->chi2;
      for (int q = 0; q < np; ++q) grad[q] = w->grad[q];
      for (int q = 0; q < np * np; ++q) hess[q] = w->hess[q];
      lambda = fmax(lambda * 0.1, 1e-9);
      if (dchi2 < cfg.dchi2_tol) {
        status = kLMConverged;
        ++it;
        break;
      }
    } else {
      lambda *= 10.0;
      if (lambda > 1e10) {
        // No downhill step even with tiny steps: at a (possibly constrained) minimum.
        status = kLMConverged;
        ++it;
        break;
      }
    }
  }
  // Leave w describing the final point (continuum) and compute the covariance there.
  if (!w_at_best) evaluate(team, &em, g, d, cont_deg, st->theta, true, w, T, dT);
  team.single([&] {
    st->chi2 = w->chi2;
    st->niter = it;
    st->status = status;
    double l[kMaxParams * kMaxParams];
    for (int q = 0; q < np * np; ++q) l[q] = w->hess[q];
    st->hess_ok = cholesky(l, np) ? 1 : 0;
    if (st->hess_ok)
      cholesky_inverse(l, np, st->cov);
    else
      for (int q = 0; q < np * np; ++q) st->cov[q] = NAN;
  });
  team.sync();
}

}  // namespace velox::kern
