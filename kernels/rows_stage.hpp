// The staged engine's template evaluation (issue 51; docs/gpu.md "Template rows as one GEMM"):
// a round's full evaluations (kReqEval at new labels: the LM's Jacobian and chi^2 evaluations),
// served in stages over all of them at once instead of one team per request summing the basis:
//  1. plan (one thread per request, after engine_step listed it): each arm of the request takes a
//     column block in its arm model's group (the batch's basis table, BatchSpectrum::model) and
//     widens the group's span of template-grid rows [g_lo, g_hi] to the rows its points need;
//  2. layout (host): each group's offsets in the round's coefficient and row buffers
//     (rows_layout);
//  3. coefficients: the emulator's row weights at each request's labels (one team per request),
//     its phase-2 sums for all of the round's requests as one product (the device calls cuBLAS;
//     the host executor sums in emulator_coeffs_team's order, emulator_gemm_host), then per
//     request c and dc (emulator_finish), the rotation kernel, and the columns
//     [c, dc_0 .. dc_{L-1}] into the group's coefficient matrix (K1 x N, column-major);
//  4. rows (one GEMM per group): R = B[g_lo .. g_hi] C, the template rows and their label
//     derivatives for every request of the group at once (span x N, column-major). The device
//     calls cuBLAS (FP64 basis copy, DGEMM); the host executor sums each element with row_dot<4>,
//     the single-lane teams' row products;
//  5. pixels (one team per request): each point's 2M + 4 rows of R convolved with the cubic
//     stencil and the rotation kernel (rotated_pixel, M = 0 without rotation), then the
//     resolution matrix; T, dT as template_at_pixels writes them;
//  6. continuum, per (request, arm) (one team each: profile_arm_lanes, the two passes and the
//     solve of profile_continuum_lanes for one arm, into the item's own sums), then per request
//     (one worker each) chi^2, gradient and profiled Hessian from its arms' sums in arm order
//     (rows_continuum_finish): profile_continuum_lanes' results bit for bit, with a request's
//     arms on as many teams at once and no team running a request's arms in turn.
// The model is the one template_at_pixels computes, summed in another order without rotation
// (rows first, then the stencil: the CPU's convolved-row order); with rotation the host
// executor's sums are bitwise the single-lane teams' (the same row products and taps).
#pragma once
#include <climits>

#include "kernels/batch.hpp"

namespace velox::kern {

// The out-of-line stage functions below take the team by value: a team passed by reference to a
// function the GPU calls (VX_NOINLINE) lives in the kernel's stack frame (16 B for a WarpTeam).

// The rotation kernel at request rq's VSINI into w (rot, drot, rot_half), as template_at_pixels
// computes it at the start of an evaluation: the row requests' coefficient stage (rows_coef), the
// other evaluations' and the moments grid's preparation. One worker.
VX_HD VX_INLINE void request_rotation(const FitRequest& rq, int n_label, const GridView& g,
                                      EvalWork* w) {
  w->rot_half = rotation_weights(rq.theta[vsini_index(n_label)], w->limb_eps, g.dlnlam, kMaxRotHalf,
                                 w->rot, w->drot);
}

// Whether the staged engine serves a request through the row stages: a full evaluation with the
// emulator (velocity-only, segment and continuum-only evaluations take their template stage per
// (request, arm), eval_template_arm, and stage 6; kernels/engine.hpp engine_evals_all).
VX_HD VX_INLINE bool rows_request(const FitRequest& rq) {
  return rq.kind == kReqEval && rq.seg < 0 && !rq.vel_only && !rq.no_emu;
}

// Template columns per request and arm: the value and its L label derivatives.
VX_HD VX_INLINE int rows_ncol(int n_label) { return 1 + n_label; }

// rotation_weights' half-width M alone (the same operations, so the same M): the plan needs the
// rows a rotated evaluation touches before the coefficient stage computes the kernel.
VX_HD VX_INLINE int rotation_half(double vsini_kms, double dlnlam, int max_half) {
  const double c_kms = 299792.458;
  const double ds_dv = 1.0 / (c_kms * dlnlam);
  double s = vsini_kms * ds_dv;
  if (!(s >= 0.5)) return 0;
  if (s > max_half + 0.5) s = max_half + 0.5;
  return (int)ceil(s - 0.5);
}

// A round's row stages: the plan, the layout and the buffers (device memory on the GPU; the
// host executor's vectors). Sizes: n_slots requests at most, each with kMaxArms column blocks of
// ncol columns; coef holds sum_g g_count[g] ncol K1 doubles, out sum_g g_count[g] ncol
// (g_hi[g] - g_lo[g] + 1) (rows_buffer_bound gives an upper bound).
struct RowsRound {
  int n_groups = 0;             // arm models of the batch (BatchView::basis entries)
  int K1 = 0;                   // basis components (EmulatorView::n_comp)
  int ncol = 0;                 // rows_ncol(L)
  int count = 0;                // row requests this round
  int* list = nullptr;          // [n_slots] their slots
  int* g_count = nullptr;       // [n_groups] column blocks taken this round
  int* g_lo = nullptr;          // [n_groups] first grid row any of them needs (INT_MAX: none)
  int* g_hi = nullptr;          // [n_groups] last (-1: none)
  long long* g_coef = nullptr;  // [n_groups] the group's block in coef (doubles)
  long long* g_out = nullptr;   // [n_groups] the group's block in out (doubles)
  int* col = nullptr;           // [n_slots][kMaxArms] an arm's column block in its group
  double* coef = nullptr;       // per group: K1 x (g_count ncol), column-major
  double* out = nullptr;        // per group: span x (g_count ncol), column-major
  long long coef_cap = 0, out_cap = 0;  // doubles allocated
  // The emulator's phase 2 (kernels/emulator_eval.hpp) as one product over the round's requests:
  // rows emu_ld x (P + N) and sums emu_ld x (K1 - 1), column-major with leading dimension emu_ld
  // >= n_slots (1 + L), request idx's block at rows idx (1 + L) .. (idx + 1)(1 + L) - 1.
  // nullptr: each request's coefficients by emulator_coeffs_into, one team each.
  long long emu_ld = 0;
  double* emu_rows = nullptr;
  double* emu_sums = nullptr;
  // The continuum stage's items (request idx, arm a) = idx kMaxArms + a: each arm's sums
  // (kArmRed doubles) and whether its continuum solved, [n_slots kMaxArms] each.
  double* arm_red = nullptr;
  int* arm_ok = nullptr;
};

// Doubles and ints of the continuum stage's item buffers (RowsRound::arm_red, arm_ok).
VX_HD VX_INLINE long long rows_arm_items(int n_slots) { return (long long)n_slots * kMaxArms; }

// Doubles of the emulator product's rows and sums for n_slots requests (RowsRound::emu_*).
VX_HD VX_INLINE long long rows_emu_ld(int n_slots, int n_label) {
  return (long long)n_slots * (1 + n_label);
}

// Upper bounds of coef and out (doubles) for n_slots slots of at most n_arms arms on a grid of
// n_tpix rows.
inline void rows_buffer_bound(int n_slots, int n_arms, int n_tpix, int ncol, int K1,
                              long long* coef, long long* out) {
  *coef = (long long)n_slots * n_arms * ncol * K1;
  *out = (long long)n_slots * n_arms * ncol * n_tpix;
}

// Round start: no requests, empty groups.
VX_HD VX_INLINE void rows_reset_group(RowsRound* r, int g) {
  r->g_count[g] = 0;
  r->g_lo[g] = INT_MAX;
  r->g_hi[g] = -1;
}

VX_HD VX_INLINE void rows_atomic_min(int* p, int v) {
#ifdef __CUDA_ARCH__
  atomicMin(p, v);
#else
  if (v < *p) *p = v;
#endif
}
VX_HD VX_INLINE void rows_atomic_max(int* p, int v) {
#ifdef __CUDA_ARCH__
  atomicMax(p, v);
#else
  if (v > *p) *p = v;
#endif
}
// The engine's atomic add (its step, the row plan): the old value. The host executor steps its
// slots one at a time.
VX_HD VX_INLINE int engine_fetch_add(int* p, int v) {
#ifdef __CUDA_ARCH__
  return atomicAdd(p, v);
#else
  const int old = *p;
  *p += v;
  return old;
#endif
}

// Stage 1, for the round's row request of slot `slot` (listed by engine_step): a column block per
// arm of its spectrum s and the rows the arm's points (its used pixels, or its full grid with a
// matrix) need at theta's velocity and VSINI (rotated_row_span with rotation_half). Reads the
// batch's arrays directly (no FitData: the plan kernel keeps no stack frame).
VX_HD VX_INLINE void rows_plan(RowsRound* r, const BatchView& b, int slot, int s,
                               const FitRequest& rq) {
  const BatchSpectrum& bs = b.spec[s];
  const GridView& g = b.grid;
  const int M = rotation_half(rq.theta[vsini_index(b.em.n_label)], g.dlnlam, kMaxRotHalf);
  const double lnd = ln_doppler(rq.theta[0]);
  long long full = bs.full_off;
  for (int a = 0; a < bs.n_arms; ++a) {
    const int grp = bs.model[a];
    r->col[slot * kMaxArms + a] = engine_fetch_add(&r->g_count[grp], 1);
    const bool rm = bs.n_full[a] > 0;
    const int n = rm ? bs.n_full[a] : bs.arm_start[a + 1] - bs.arm_start[a];
    const double* ll = rm ? b.full_lnlam + full : b.lnlam + bs.pix_off + bs.arm_start[a];
    full += bs.n_full[a];
    if (n <= 0) continue;
    int lo_t, hi_t, r0, r1;
    rotated_row_span(g, ll, n, lnd, M, &lo_t, &hi_t, &r0, &r1);
    rows_atomic_min(&r->g_lo[grp], r0);
    rows_atomic_max(&r->g_hi[grp], r1);
  }
}

// Stage 2 (host): each group's blocks, groups in order; *n_coef, *n_out: the doubles they take.
inline void rows_layout(RowsRound* r, long long* n_coef, long long* n_out) {
  long long c = 0, o = 0;
  for (int g = 0; g < r->n_groups; ++g) {
    r->g_coef[g] = c;
    r->g_out[g] = o;
    const long long ncols = (long long)r->g_count[g] * r->ncol;
    c += ncols * r->K1;
    if (r->g_hi[g] >= r->g_lo[g]) o += ncols * (r->g_hi[g] - r->g_lo[g] + 1);
  }
  *n_coef = c;
  *n_out = o;
}

// Whether request idx's emulator coefficients go through the round's product (RowsRound::emu_*;
// a slot without emulator scratch takes emulator_coeffs_into's serial form).
VX_HD VX_INLINE bool rows_emu_product(const RowsRound* r, const EvalWork* w) {
  return r->emu_rows != nullptr && w->emu != nullptr;
}

// Stage 3a (with the emulator product): request idx's row weights at its labels into its block
// of the round's emulator rows (emulator_rows).
template <class Team>
VX_HD VX_NOINLINE void rows_emu_rows(Team team, const RowsRound* r, int idx, const FitRequest* rq,
                                     const EmulatorView& em, const EvalWork* w) {
  if (!rows_emu_product(r, w)) return;
  double x[kMaxLabels];
  emulator_scaled(em, rq->theta + 1, x);
  emulator_rows(team, em, x, r->emu_rows + (long long)idx * (1 + em.n_label), r->emu_ld, 1);
}

// After the emulator product: product request idx's coefficients c, dc into w (c_gen bumped), as
// emulator_coeffs_into gives them: emulator_finish on its sums, or emulator_coeffs_into itself
// (host only) for a slot without emulator scratch. The row requests' coefficient stage
// (rows_coef) and the staged engine's emulator requests (kReqEmu, kernels/engine.hpp
// engine_serve_emu) both.
template <class Team>
VX_HD VX_INLINE void rows_emu_coef(const Team& team, const RowsRound* r, int idx,
                                   const FitRequest* rq, const EmulatorView& em, EvalWork* w) {
  if (rows_emu_product(r, w)) {  // emulator_coeffs_into's result from the round's product
    emulator_finish(team, em, r->emu_sums + (long long)idx * (1 + em.n_label), r->emu_ld, 1, w->c,
                    w->dc);
    team.single([&] { ++w->c_gen; });
    team.sync();
  } else {
#if !defined(__CUDA_ARCH__)
    emulator_coeffs_into(team, em, rq->theta + 1, w);
#else
    // Never on the device: StagedEngine always sets the product's buffers and every slot has
    // emulator scratch (gpu_engine.cu). Left out, so that the kernels keep no stack frame
    // (emulator_coeffs_team's sums take 704 B).
    (void)rq;
    __trap();
#endif
  }
}

// Stage 3b, after the emulator product: request idx's coefficients (from its sums, or
// emulator_coeffs_into), rotation kernel and coefficient columns. rq->theta holds
// [v, labels, VSINI]; bs the spectrum. Counts the evaluation as evaluate_template does.
template <class Team>
VX_HD VX_NOINLINE void rows_coef(Team team, const RowsRound* r, int idx, int slot,
                                 const BatchSpectrum& bs, const FitRequest* rq,
                                 const EmulatorView& em, const GridView& g, EvalWork* w) {
  const int L = em.n_label, K1 = r->K1, nc = r->ncol;
  team.single([&] { ++w->n_eval[rq->jac ? 1 : 0]; });
  rows_emu_coef(team, r, idx, rq, em, w);
  team.single([&] { request_rotation(*rq, L, g, w); });
  for (int a = 0; a < bs.n_arms; ++a) {
    const int grp = bs.model[a];
    double* cb = r->coef + r->g_coef[grp] + (long long)r->col[slot * kMaxArms + a] * nc * K1;
    team.for_each(nc * K1, [&](int i) {
      const int q = i / K1, k = i - q * K1;
      cb[i] = q == 0 ? w->c[k] : w->dc[(q - 1) * K1 + k];
    });
  }
  team.sync();
}

// Stage 4 on the host: group grp's rows, each element with row_dot<4> (the single-lane teams'
// row products: FP64 sums of the FP32 basis in 4 partial sums).
inline void rows_gemm_host(const RowsRound* r, int grp, const float* B) {
  const int lo = r->g_lo[grp], span = r->g_hi[grp] - lo + 1, K1 = r->K1;
  if (span <= 0) return;
  const long long N = (long long)r->g_count[grp] * r->ncol;
  const double* C = r->coef + r->g_coef[grp];
  double* R = r->out + r->g_out[grp];
  for (long long n = 0; n < N; ++n)
    for (int x = 0; x < span; ++x)
      R[n * span + x] = row_dot<4>(C + n * K1, B + (size_t)(lo + x) * K1, K1);
}

// Stage 5: request rq's template and Jacobian at the points from the group rows (after
// rows_coef set w's kernel), then the resolution matrix: T, dT as template_at_pixels<false>.
template <class Team>
VX_HD VX_INLINE void rows_pixels(Team team, const RowsRound* r, int slot, const BatchSpectrum& bs,
                                 const FitRequest* rq, int n_label, const GridView& g,
                                 const FitData& d, const EvalWork* w, double* T, double* dT) {
  const int L = n_label, nc = r->ncol;
  const bool need_jac = rq->jac != 0, jac_vsini = w->fit_vsini != 0;
  const int np = n_fit_params(L, w->fit_vsini);
  const int M = w->rot_half;
  const double lnd = ln_doppler(rq->theta[0]);
  const double du_dv = -dln_doppler_dv(rq->theta[0]) / g.dlnlam;
  for (int a = 0; a < d.n_arms; ++a) {
    const int grp = bs.model[a];
    const int lo = r->g_lo[grp];
    const long long span = r->g_hi[grp] - lo + 1;
    const double* R = r->out + r->g_out[grp] + (long long)r->col[slot * kMaxArms + a] * nc * span;
    const bool rm = d.n_full[a] > 0;
    const int i0 = d.arm_start[a];
    const int n_eval = rm ? d.n_full[a] : d.arm_start[a + 1] - i0;
    const double* ll = rm ? d.full_lnlam[a] : d.lnlam + i0;
    double* t_out = rm ? d.Tf + d.full_off[a] : T + i0;
    double* dt_out = rm ? d.dTf + (size_t)d.full_off[a] * np : dT + (size_t)i0 * np;
    team.for_each(n_eval, [&](int j) {
      rotated_pixel<false, true>(g, w, ll[j], lnd, du_dv, M, L, need_jac, jac_vsini, &t_out[j],
                                 &dt_out[j * np], [&](int row, double* bc, double* bdc) {
                                   const double* x = R + (row - lo);
                                   *bc = x[0];
                                   if (need_jac) {
                                     VX_UNROLL
                                     for (int l = 0; l < kMaxLabels; ++l)
                                       if (l < L) bdc[l] = x[(1 + l) * span];
                                   }
                                 });
    });
    if (!rm) continue;
    team.sync();
    apply_rmat_lanes(team, d, a, t_out, dt_out, np, need_jac, T, dT);
  }
  team.sync();
}

// The round's other evaluations (kReqEval requests that are not row requests: velocity-only,
// per-arm velocity segments, continuum-only), served per (request, arm) in the staged engine
// (kernels/engine.hpp engine_eval_arm), before their continuum (stage 6).
// Whether request rq takes the kept rows (rq.seg >= 0 or rq.vel_only; the labels of the last
// emulator request) rather than the continuum-only model (T = 1, dT = 0).
VX_HD VX_INLINE bool eval_request_vonly(const FitRequest& rq) { return rq.seg >= 0 || rq.vel_only; }

// Prepare an other evaluation before its arms (engine_eval_prep, one worker): the rotation kernel
// at rq's VSINI into w (request_rotation), which template_at_pixels computes at the start of every
// evaluation and which each arm's team reads. The same operations, so the same kernel.
VX_HD VX_INLINE void eval_request_prep(const FitRequest& rq, int n_label, const GridView& g,
                                       EvalWork* w) {
  if (eval_request_vonly(rq)) request_rotation(rq, n_label, g, w);
}

// Item k of an other evaluation's template stage (one team per (request, arm); k < the request's
// eval_request_arms): arm k's pixels, or a segment's pixels (k = 0: segment rq.seg of arm
// d.seg_arm[rq.seg], its arm's full grid when the arm has a resolution matrix), into T and, with
// rq.jac, dT (np = 1) at the pixels' own indices: bit for bit what template_at_pixels writes for
// those pixels (VOnly with the kept rows, d.Tv set; or T = 1 for a continuum-only request,
// rq.no_emu). The rotation kernel is in w (eval_request_prep). Tg: this arm's own [n_tpix] scratch
// for the rows before rotation (M > 0), so that a request's arms run at once; nullptr when the
// batch has no rotated model (then M = 0 and it is not read). d.Tv must be set (the kept rows).
// Arm 0 counts the evaluation, as evaluate_template does (continuum-only: not counted).
template <class Team>
VX_HD VX_INLINE void eval_template_arm(Team team, const EmulatorView& em, const GridView& g,
                                       const FitData& d, const FitRequest& rq, int k, EvalWork* w,
                                       double* Tg, double* T, double* dT) {
  const bool jac = rq.jac != 0, seg = rq.seg >= 0;
  const int a = seg ? d.seg_arm[rq.seg] : k;
  const int i0 = seg ? d.seg_start[rq.seg] : d.arm_start[a];
  const int i1 = seg ? d.seg_start[rq.seg + 1] : d.arm_start[a + 1];
  if (!eval_request_vonly(rq)) {  // the continuum-only model
    team.for_each(i1 - i0, [&](int ii) {
      T[i0 + ii] = 1.0;
      if (jac) dT[i0 + ii] = 0.0;
    });
    team.sync();
    return;
  }
  if (k == 0) team.single([&] { ++w->n_eval[2]; });
  const int L = em.n_label;
  const double lnd = ln_doppler(rq.theta[0]);
  const double du_dv = -dln_doppler_dv(rq.theta[0]) / g.dlnlam;
  const bool rm = d.n_full[a] > 0;
  const int n_eval = rm ? d.n_full[a] : i1 - i0;
  const double* ll = rm ? d.full_lnlam[a] : d.lnlam + i0;
  double* t_out = rm ? d.Tf + d.full_off[a] : T + i0;
  double* dt_out = rm ? d.dTf + d.full_off[a] : dT + i0;
  kept_rows_pixels<true>(team, g, d, a, w, d.basis[a], em.n_comp, rq.theta[vsini_index(L)], ll,
                         n_eval, lnd, du_dv, jac, t_out, dt_out, Tg);
  if (rm) {
    team.sync();
    team.for_each(i1 - i0, [&](int ii) {
      const int i = i0 + ii;
      T[i] = apply_rmat(d, a, i, t_out, 1, 0);
      if (jac) dT[i] = apply_rmat(d, a, i, dt_out, 1, 0);
    });
  }
  team.sync();
}

// The moments grid's velocities (kReqVGrid: up to kVGridPoints velocity-only chi^2 at the best
// fit's labels and VSINI, no Jacobian; serve_vgrid serves them in turn on one team) in the staged
// engine, in three steps: prepare (one worker per request: the rotation kernel, the evaluations
// counted), the kept rows per (request, arm) over the span every point in the box needs, then one
// team per (request, point): each arm's 4 taps from the rows (and the resolution matrix) into the
// point's own T, the continuum profiled (profile_continuum_lanes) into the point's own workspace,
// chi^2 into the slot's vgrid_chi2. Bit for bit serve_vgrid's values: a row's value does not
// depend on the span it was computed over, and each point runs the taps and the profile of
// evaluate<true>. The slot's EvalWork keeps its last evaluation's profile (serve_vgrid leaves the
// last point's): the machine reads only vgrid_chi2 and the counts after the grid.

// Point i's velocity (serve_vgrid's theta[0]: one product, as the grid point's x) and whether it
// lies in the fit's box (outside: not evaluated, NaN).
VX_HD VX_INLINE double vgrid_velocity(const FitRequest& rq, int i) {
  return rq.theta[0] + (rq.k0 + i) * rq.v;
}
VX_HD VX_INLINE bool vgrid_in_box(const PipelineConfig& cfg, double v) {
  return !(v < cfg.lm.lo[0] || v > cfg.lm.hi[0]);
}

// Step 1 (one worker): the rotation kernel at rq's VSINI into w, and w's velocity-only
// evaluations counted once per point in the box, as serve_vgrid's evaluate<true> counts them.
VX_HD VX_INLINE void vgrid_prep(const FitRequest& rq, int n_label, const GridView& g,
                                const PipelineConfig& cfg, EvalWork* w) {
  request_rotation(rq, n_label, g, w);
  for (int i = 0; i < rq.n_k; ++i) w->n_eval[2] += vgrid_in_box(cfg, vgrid_velocity(rq, i));
}

// Step 2 (a team per (request, arm a)): arm a's kept rows made to cover the rows of every point in
// the box (the span at the lowest and at the highest velocity: a stencil's first tap falls as
// ln D grows), as kept_rows_pixels would over the points in turn. Tg: the arm's own scratch
// (eval_arm_tg).
template <class Team>
VX_HD VX_INLINE void vgrid_rows_arm(Team team, const EmulatorView& em, const GridView& g,
                                    const FitData& d, const PipelineConfig& cfg,
                                    const FitRequest& rq, int a, const EvalWork* w, double* Tg) {
  double vlo = INFINITY, vhi = -INFINITY;
  for (int i = 0; i < rq.n_k; ++i) {
    const double v = vgrid_velocity(rq, i);
    if (!vgrid_in_box(cfg, v)) continue;
    vlo = v < vlo ? v : vlo;
    vhi = v > vhi ? v : vhi;
  }
  if (!(vlo <= vhi)) return;  // no point in the box
  const ArmPoints p = arm_points(d, a);
  int lo_t, hi_t, r0, r1, r0b, r1b;
  rotated_row_span(g, p.ll, p.n_eval, ln_doppler(vhi), 0, &lo_t, &hi_t, &r0, &r1);
  rotated_row_span(g, p.ll, p.n_eval, ln_doppler(vlo), 0, &lo_t, &hi_t, &r0b, &r1b);
  kept_rows_cover<true>(team, g, d, a, w, d.basis[a], em.n_comp, rq.theta[vsini_index(em.n_label)],
                        r0 < r0b ? r0 : r0b, r1 > r1b ? r1 : r1b, Tg);
}

// Step 3 (a team per (request, point i < rq.n_k)): point i's chi^2 into *chi2 (NaN outside the
// box or when the continuum fails), with the point's own T (d.n_pix; d.Tf: the point's own full
// grid) and workspace w (its profile's scratch).
template <class Team>
VX_HD VX_INLINE void vgrid_point(Team team, const GridView& g, const FitData& d,
                                 const PipelineConfig& cfg, const FitRequest& rq, int i, double* T,
                                 EvalWork* w, double* chi2) {
  const double v = vgrid_velocity(rq, i);
  if (!vgrid_in_box(cfg, v)) {
    team.single([&] { *chi2 = NAN; });
    team.sync();
    return;
  }
  const double lnd = ln_doppler(v);
  for (int a = 0; a < d.n_arms; ++a) {
    const ArmPoints p = arm_points(d, a);
    double* t_out = p.rm ? d.Tf + d.full_off[a] : T + p.i0;
    kept_rows_taps(team, g, d.Tv + (size_t)(d.tv_arm0 + a) * d.tv_stride, p.ll, p.n_eval, lnd, 0.0,
                   false, t_out, nullptr);
    if (!p.rm) continue;
    team.sync();
    team.for_each(d.arm_start[a + 1] - p.i0,
                  [&](int ii) { T[p.i0 + ii] = apply_rmat(d, a, p.i0 + ii, t_out, 1, 0); });
  }
  team.sync();
  profile_continuum_lanes(team, d, cfg.cont_deg, 1, false, T, nullptr, w);
  team.single([&] { *chi2 = w->ok && w->chi2 < INFINITY ? w->chi2 : NAN; });
  team.sync();
}

// Stage 6a: arm a of request idx's continuum (item idx kMaxArms + a; arms past d's return at
// once): profile_arm_lanes with np fitted parameters on the T and dT of its template stage into
// the item's red and ok. d: the request's view (the spectrum, or a segment's). The lane form:
// the staged engine runs single-lane teams (the warp and its host emulation, Team::kVec == 1),
// whose evaluate profiles the continuum this way. The row requests (after stage 5) and the
// round's other evaluations (after their template stage) use the items in turn.
template <class Team>
VX_HD VX_INLINE void rows_continuum_arm(const Team& team, const RowsRound* r, int item,
                                        const FitRequest& rq, int np, int cont_deg,
                                        const FitData& d, const double* T, const double* dT,
                                        EvalWork* w) {
  static_assert(Team::kVec == 1, "the staged engine's continuum is the single-lane form");
  const int a = item % kMaxArms;
  if (a >= d.n_arms) return;
  profile_arm_lanes(team, d, a, cont_deg, np, rq.jac != 0, T, dT, w,
                    r->arm_red + (long long)item * kArmRed, r->arm_ok + item);
}

// Stage 6b, one worker per request, after every arm of stage 6a: request idx's chi^2, per-arm
// chi^2, gradient and profiled Hessian (np parameters) in w from its n_arms arms' sums in arm
// order, stopping at the first arm whose continuum did not solve (w->ok = 0), as
// profile_continuum_lanes; then rq->ok. w->red is the Schur complement's scratch.
VX_HD VX_INLINE void rows_continuum_finish(const RowsRound* r, int idx, int n_arms, int np,
                                           int cont_deg, FitRequest* rq, EvalWork* w) {
  profile_reset(w, np);
  for (int a = 0; a < n_arms; ++a) {
    const long long item = (long long)idx * kMaxArms + a;
    if (!r->arm_ok[item]) {
      w->ok = 0;
      break;
    }
    profile_pass2_add(w, a, cont_deg + 1, np, rq->jac != 0, r->arm_red + item * kArmRed, w->red);
  }
  rq->ok = w->ok;
}

}  // namespace velox::kern
