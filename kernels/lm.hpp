// Levenberg-Marquardt refinement of theta = [VRAD, labels[, VSINI]] for ONE spectrum, on the
// profiled chi^2 of fit_eval.hpp, with box constraints (projection onto [lo, hi]) and
// Marquardt's diagonal scaling. Every worker of the team runs the same control flow on shared
// scalars. Source: Marquardt (1963); Press et al., Numerical Recipes 3rd ed., sec. 15.5.2.
#pragma once
#include <cmath>

#include "kernels/fit_eval.hpp"
#include "kernels/machine.hpp"

namespace velox::kern {

struct LMConfig {
  int max_iter = 60;
  double lambda0 = 1e-3;
  double dchi2_tol = 1e-2;  // converged when an accepted step improves chi^2 by less (absolute)
  // A run given an attractor (an earlier run's minimum) stops as kLMJoined once it is inside that
  // minimum's quadratic basin: chi^2 not below the attractor's and (theta - theta_a)^T H_a
  // (theta - theta_a) < join_dchi2 (H_a = cov_a^-1, the chi^2 rise the attractor's own quadratic
  // model predicts there). 0 = never.
  double join_dchi2 = 25.0;
  double lo[kMaxParams] = {};
  double hi[kMaxParams] = {};
};

enum LMStatus : int {
  kLMConverged = 0,
  kLMMaxIter = 1,
  kLMEvalFailed = 2,  // continuum normal matrix singular at the start point
  kLMJoined = 3,      // stopped inside another run's minimum (lm_fit's `attractor`)
};

struct LMState {
  double theta[kMaxParams];
  double chi2;
  double cov[kMaxParams * kMaxParams];  // inverse Hessian at the optimum [np][np] (NaN if singular)
  int np;                               // fitted parameters: cov's size (theta[0 .. np-1])
  int niter;
  int status;
  int hess_ok;
};

// Evaluate chi^2 (+ gradient/Hessian) at theta into w. Returns w->ok. VOnly: the gradient and
// Hessian of v alone (1 x 1), the labels held at theta.
// VX_NOINLINE: on the GPU one copy serves its ~12 call sites. Inlined everywhere, the kernel's
// code was 3.0 MB (0.85 MB out of line) and the H100 stalled on instruction fetch for 55% of its
// cycles; out of line the LAMOST rate went 1.95k -> 3.45k spectra/s (docs/gpu.md "Measured";
// scripts/check-ptxas.sh fails if it is inlined again). No effect on the CPU.
template <bool VOnly = false, class Team>
VX_HD VX_NOINLINE int evaluate(const Team& team, const EmulatorView* em, const GridView& g,
                               const FitData& d, int cont_deg, const double* theta, bool need_jac,
                               EvalWork* w, double* T, double* dT);

// evaluate's two stages, which the batched engine runs as two passes (kernels/engine.hpp): the
// template and its Jacobian at the pixels into T, dT; then the continuum profiled and chi^2 (and
// its gradient and Hessian) into w from T, dT. Every state that passes from one to the other is
// in T, dT and w. Returns w->ok. VX_NOINLINE as evaluate: one GPU copy of each stage serves
// evaluate and the engine's stage passes (scripts/check-ptxas.sh).
template <bool VOnly, class Team>
VX_HD VX_NOINLINE void evaluate_template(const Team& team, const EmulatorView* em, const GridView& g,
                                       const FitData& d, const double* theta, bool need_jac,
                                       EvalWork* w, double* T, double* dT) {
  if (em) team.single([&] { ++w->n_eval[VOnly ? 2 : (need_jac ? 1 : 0)]; });
  template_at_pixels<VOnly>(team, em, g, d, theta, need_jac, w, T, dT);
}
template <bool VOnly, class Team>
VX_HD VX_NOINLINE int evaluate_continuum(const Team& team, const EmulatorView* em, const FitData& d,
                                       int cont_deg, bool need_jac, EvalWork* w, const double* T,
                                       const double* dT) {
  const int np = em && !VOnly ? n_fit_params(em->n_label, w->fit_vsini) : 1;
  profile_continuum(team, d, cont_deg, np, need_jac, T, dT, w);
  return w->ok;
}

template <bool VOnly, class Team>
VX_HD VX_NOINLINE int evaluate(const Team& team, const EmulatorView* em, const GridView& g,
                               const FitData& d, int cont_deg, const double* theta, bool need_jac,
                               EvalWork* w, double* T, double* dT) {
  evaluate_template<VOnly>(team, em, g, d, theta, need_jac, w, T, dT);
  return evaluate_continuum<VOnly>(team, em, d, cont_deg, need_jac, w, T, dT);
}

// True when theta (at chi2) lies in the attractor's basin (LMConfig::join_dchi2): chi2 >= the
// attractor's and the chi^2 rise the attractor's covariance predicts, d^T cov^-1 d with
// d = theta - theta_a over the np fitted parameters, is below join_dchi2. False when the
// attractor's covariance is not usable (singular, NaN) or join_dchi2 <= 0.
VX_HD VX_INLINE bool joined_basin(const LMState& a, const double* theta, double chi2, int np,
                                  double join_dchi2) {
  if (!(join_dchi2 > 0.0) || a.status == kLMEvalFailed || !a.hess_ok || a.np != np || chi2 < a.chi2)
    return false;
  double l[kMaxParams * kMaxParams], x[kMaxParams], dx[kMaxParams];
  for (int q = 0; q < np * np; ++q) l[q] = a.cov[q];
  for (int q = 0; q < np; ++q) x[q] = dx[q] = theta[q] - a.theta[q];
  if (!cholesky(l, np)) return false;
  cholesky_solve(l, np, x);
  double d2 = 0.0;
  for (int q = 0; q < np; ++q) d2 += dx[q] * x[q];
  return d2 < join_dchi2;
}

// Levenberg-Marquardt from st->theta as a state machine (kernels/machine.hpp): set m.pc = 0,
// then step until it returns false; each true return asks for one evaluation with the Jacobian
// at rq->theta (kReqEval), whose result (rq->ok, and w: chi2, grad, hess, continuum) the driver
// leaves before the next step. On return st holds the best point, its chi^2, covariance,
// iteration count and status; w holds that point's evaluation. `attractor`: an earlier run's
// minimum (LMConfig::join_dchi2), or null. Team: only for the linkage of the CPU's per-ISA
// objects (src/backend/cpu/isa/fit_slot.cpp); the step uses no team.
struct LMMachine {
  int pc = 0;
  int np = 0, it = 0, status = 0, w_at_best = 0;
  double chi2 = 0.0, lambda = 0.0;
  double grad[kMaxParams], hess[kMaxParams * kMaxParams], trial[kMaxParams];
};

VX_HD VX_INLINE void request_eval(FitRequest* rq, const double* theta, int jac) {
  rq->kind = kReqEval;
  for (int q = 0; q < kMaxParams; ++q) rq->theta[q] = theta[q];
  rq->jac = jac;
  rq->vel_only = 0;
  rq->no_emu = 0;
  rq->seg = -1;
}

template <class Team>
VX_HD VX_NOINLINE bool lm_step(LMMachine& m, const LMConfig& cfg, int n_label, LMState* st,
                               const LMState* attractor, EvalWork* w, FitRequest* rq) {
  VX_MACHINE_BEGIN(m)
  m.np = n_fit_params(n_label, w->fit_vsini);
  st->niter = 0;
  st->hess_ok = 0;
  st->np = m.np;
  request_eval(rq, st->theta, 1);
  VX_YIELD(m, 1);
  if (!rq->ok) {
    st->status = kLMEvalFailed;
    st->chi2 = NAN;
    VX_MACHINE_EXIT(m);
  }
  m.chi2 = w->chi2;
  for (int q = 0; q < m.np; ++q) m.grad[q] = w->grad[q];
  for (int q = 0; q < m.np * m.np; ++q) m.hess[q] = w->hess[q];
  m.lambda = cfg.lambda0;
  m.status = kLMMaxIter;
  m.w_at_best = 1;  // w (and T, dT) describe st->theta
  for (m.it = 0; m.it < cfg.max_iter; ++m.it) {
    {
      const int np = m.np;
      const double* hess = m.hess;
      // Damped normal equations (H + lambda diag H) delta = grad.
      double a[kMaxParams * kMaxParams], delta[kMaxParams];
      // Parameters held this step: those the model does not depend on here (zero Hessian row:
      // VSINI below half a template pixel), and those at a bound that the step would push
      // further out (active set: solving for them and then clipping would tilt the other
      // parameters' step and stall LM at a point that is not the constrained minimum). Bit q of
      // `held`.
      int held = 0;
      for (int q = 0; q < np; ++q)
        if (!(hess[q * np + q] > 0.0)) held |= 1 << q;
      bool solved = false;
      for (int pass = 0; pass <= np; ++pass) {
        for (int q = 0; q < np * np; ++q) a[q] = hess[q];
        for (int q = 0; q < np; ++q) {
          a[q * np + q] += m.lambda * fmax(hess[q * np + q], 1e-12);
          delta[q] = m.grad[q];
        }
        for (int q = 0; q < np; ++q)
          if (held & (1 << q)) {
            for (int s = 0; s < np; ++s) a[q * np + s] = a[s * np + q] = 0.0;
            a[q * np + q] = 1.0;
            delta[q] = 0.0;
          }
        if (!cholesky(a, np)) break;
        cholesky_solve(a, np, delta);
        solved = true;
        int more = 0;
        for (int q = 0; q < np; ++q) {
          const double t = st->theta[q] + delta[q];
          if (!(held & (1 << q)) && ((t < cfg.lo[q] && st->theta[q] <= cfg.lo[q]) ||
                                     (t > cfg.hi[q] && st->theta[q] >= cfg.hi[q])))
            more |= 1 << q;
        }
        if (!more) break;
        held |= more;
        solved = false;
      }
      if (!solved) {
        m.lambda *= 10.0;
        if (m.lambda > 1e12) break;
        continue;
      }
      // Converged without another evaluation when the Gauss-Newton model predicts that the
      // step would lower chi^2 by less than a tenth of the tolerance: g.d for the (nearly)
      // undamped step H d = g, so the step is below sqrt(0.2 dchi2_tol) = 0.045 sigma. Only for
      // nearly undamped steps (a large lambda shrinks the step, not the distance to the
      // minimum).
      if (m.lambda <= cfg.lambda0) {
        double pred = 0.0;
        for (int q = 0; q < np; ++q) pred += delta[q] * m.grad[q];
        if (pred < 0.1 * cfg.dchi2_tol) {
          m.status = kLMConverged;
          break;
        }
      }
      // Parameters beyond np (VSINI when it is not fitted) keep their values.
      for (int q = 0; q < kMaxParams; ++q)
        m.trial[q] =
            q < np ? fmin(fmax(st->theta[q] + delta[q], cfg.lo[q]), cfg.hi[q]) : st->theta[q];
    }
    request_eval(rq, m.trial, 1);
    VX_YIELD(m, 2);
    m.w_at_best = 0;
    if (rq->ok && w->chi2 <= m.chi2) {
      m.w_at_best = 1;
      const double dchi2 = m.chi2 - w->chi2;
      for (int q = 0; q < m.np; ++q) st->theta[q] = m.trial[q];
      m.chi2 = w->chi2;
      for (int q = 0; q < m.np; ++q) m.grad[q] = w->grad[q];
      for (int q = 0; q < m.np * m.np; ++q) m.hess[q] = w->hess[q];
      m.lambda = fmax(m.lambda * 0.1, 1e-9);
      if (dchi2 < cfg.dchi2_tol) {
        m.status = kLMConverged;
        ++m.it;
        break;
      }
      if (attractor && joined_basin(*attractor, st->theta, m.chi2, m.np, cfg.join_dchi2)) {
        m.status = kLMJoined;
        ++m.it;
        break;
      }
    } else {
      m.lambda *= 10.0;
      if (m.lambda > 1e10) {
        // No downhill step even with tiny steps: at a (possibly constrained) minimum.
        m.status = kLMConverged;
        ++m.it;
        break;
      }
    }
  }
  // Leave w describing the final point (continuum) and compute the covariance there.
  if (!m.w_at_best) {
    request_eval(rq, st->theta, 1);
    VX_YIELD(m, 3);
  }
  {
    const int np = m.np;
    st->chi2 = w->chi2;
    st->niter = m.it;
    st->np = np;
    st->status = m.status;
    // A parameter the data do not constrain at all (a zero Hessian row: VSINI below half a
    // template pixel, where the kernel is the identity) is left out of the inversion and gets
    // a NaN variance; the others are marginalised over the rest as usual.
    // (The inverse is written [nu][nu] into st->cov, then spread out to [np][np] from the last
    // element down: a target index a*np + b is never below its source pos[a]*nu + pos[b], so
    // no second array.)
    int use[kMaxParams], pos[kMaxParams], nu = 0;
    for (int q = 0; q < np; ++q) {
      pos[q] = -1;
      if (q != vsini_index(n_label) || w->hess[q * np + q] > 0.0) {
        pos[q] = nu;
        use[nu++] = q;
      }
    }
    double* l = m.hess;  // the loop's copy of the Hessian is done with: reuse it
    for (int a = 0; a < nu; ++a)
      for (int b = 0; b < nu; ++b) l[a * nu + b] = w->hess[use[a] * np + use[b]];
    st->hess_ok = cholesky(l, nu) ? 1 : 0;
    if (st->hess_ok) {
      cholesky_inverse(l, nu, st->cov);
      for (int a = np - 1; a >= 0; --a)
        for (int b = np - 1; b >= 0; --b)
          st->cov[a * np + b] = pos[a] >= 0 && pos[b] >= 0 ? st->cov[pos[a] * nu + pos[b]] : NAN;
    } else {
      for (int q = 0; q < np * np; ++q) st->cov[q] = NAN;
    }
  }
  VX_MACHINE_END(m)
}

}  // namespace velox::kern
