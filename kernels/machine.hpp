// The fit as a state machine (issue 51; docs/design.md "The fit as a state machine"): every
// stage with model evaluations (kernels/lm.hpp lm_step, kernels/fit_pipeline.hpp fit_step,
// held_step, newton_step) is a resumable function of its state struct that returns true with a
// FitRequest (the team work it needs next: an evaluation, a CCF, a chi^2-grid template, ...) and
// false when it is done. A driver serves each request with a team and steps again: fit_one and
// fit_velocity_held drive one spectrum (the CPU backend, the GPU warp); a batched executor steps
// many spectra and serves their requests grouped by kind (kernels/batch_exec.hpp). One control
// flow for every backend: the steps are the only copy of the fit's control logic.
//
// The steps are protothreads (Dunkels et al. 2006, "Protothreads: simplifying event-driven
// programming of memory-constrained embedded systems"): a switch on the state's resume point
// `pc`, with VX_YIELD(m, n) returning and `case n:` resuming. Everything that lives across a
// yield is a member of the state struct; locals live in blocks that close before the next yield
// (a jump into the scope of an initialised local is ill-formed, and the compiler says so).
// A step runs on one worker of a team (team.single), or one thread per spectrum on a device.
#pragma once
#include "kernels/fit_eval.hpp"

namespace velox::kern {

// What a machine asks its driver for (FitRequest::kind).
enum FitRequestKind : int {
  kReqNone = 0,   // nothing: the machine is done
  kReqFold,       // fold_rows(d): the resolution-matrix rows into the scratch
  kReqCcfPrep,    // pseudo_normalise + pixel_positions (the CCF's inputs)
  kReqCcf,        // cross_correlate(template j, lags lag0 + k lag_step, k < n_lags) -> sc.ccf;
                  // n_k > 0: templates j .. j + n_k - 1, each one's peak into
                  // PipelineShared::ccf_peak, ccf_peak_lag
  kReqGridPrep,   // the chi^2 grid's stencils at velocity v (teams with SIMD forms only)
  kReqGrid,       // coarse templates j .. j + n_k - 1 at velocity v, each continuum profiled:
                  // their w->chi2 and w->ok into PipelineShared::grid_raw, grid_ok
  kReqEmu,        // emulator_coeffs_into(theta + 1): the labels of the velocity-only evaluations
  kReqEval,       // evaluate(theta) -> ok, w (chi2, grad, hess, continuum), T, dT
  kReqClip,       // clip_arm per arm (the model of the kReqEval before it) -> sc.ivar,
                  // PipelineShared::clip_n
  kReqArmPixels,  // out->npix_arm[a] = used pixels (ivar > 0) of every arm
  kReqVGrid,      // velocity-only chi^2 at theta[0] + k v, k0 <= k < k0 + n_k -> vgrid_chi2
  kNumReqKinds
};

struct FitRequest {
  int kind = kReqNone;
  int j = 0, lag0 = 0, n_lags = 0, lag_step = 1;  // kReqCcf (j), kReqGrid (first j)
  double v = 0.0;                                 // kReqGridPrep, kReqGrid: km/s
  double theta[kMaxParams] = {};  // kReqEval, kReqEmu, kReqClip: [v, labels, VSINI]
  int jac = 0;       // kReqEval: with the gradient and Hessian
  int vel_only = 0;  // kReqEval: velocity-only (labels of the last kReqEmu; evaluate<true>)
  int no_emu = 0;    // kReqEval: the continuum-only model (T = 1)
  int seg = -1;      // kReqEval: segment_view(d, seg) and its slice of T, dT; -1: all of d
  int ok = 0;        // kReqEval: evaluate's result, written by the driver
  int k0 = 0, n_k = 0;  // kReqVGrid: the grid's points k0 .. k0 + n_k - 1 (v: their step, km/s);
                        // kReqGrid, kReqCcf: n_k templates from j (kReqCcf: 0, template j alone)
};

// Points of a kReqVGrid request at most (PipelineShared::vgrid_chi2): the moments grid's 13
// velocities (vrad_moments_half 6) in one request; a wider grid takes several.
constexpr int kVGridPoints = 16;

}  // namespace velox::kern

// Protothread markers; `m` is the state struct (member `pc`), `n` a resume point unique in the
// step function (> 0).
#define VX_MACHINE_BEGIN(m) \
  switch ((m).pc) {         \
    case 0:
#define VX_YIELD(m, n) \
  do {                 \
    (m).pc = (n);      \
    return true;       \
    case (n):;         \
  } while (0)
#define VX_MACHINE_END(m) \
  }                       \
  (m).pc = -1;            \
  return false;
// Finish from inside the body.
#define VX_MACHINE_EXIT(m) \
  do {                     \
    (m).pc = -1;           \
    return false;          \
  } while (0)
