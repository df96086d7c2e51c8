// The batched engine's control over a batch (issue 51; docs/gpu.md "The batched engine"): the
// fits of a batch's spectra advance together in rounds, over a fixed set of slots. Each round:
//  1. step (engine_step, one thread per slot on the device): the slot's machine (fit_step or
//     held_step, kernels/fit_pipeline.hpp) runs to its next request; a finished fit's slot takes
//     the batch's next spectrum at once (refill) and steps it. The slot's id is appended to its
//     request kind's list (compaction by kind).
//  2. serve (engine_serve, one team per request): every list in kind order, an evaluation in
//     two passes (its template stage for every slot in the list, then its continuum stage).
// The rounds end when no slot has a request left. Every spectrum's fit is the fit fit_one gives
// it, bit for bit with the same team: the same steps and the same served functions on its own
// slot's scratch, only interleaved with other spectra's (tests/unit/kernels/test_engine.cpp).
// The device runs the same functions as kernels (src/backend/cuda/engine_kernel.cu); the host
// executor here (engine_run) runs them in order, as the CI's check of the schedule.
#pragma once
#include <stdexcept>

#include "kernels/batch.hpp"
#include "kernels/rows_stage.hpp"

namespace velox::kern {

// Slot states besides a spectrum index.
constexpr int kSlotFree = -1;     // takes the batch's next spectrum at its next step
constexpr int kSlotDrained = -2;  // the batch has no spectrum left for it

// The staged engine's per-template items: a round's chi^2 grids (kReqGrid: every coarse template
// at the CCF velocity, its continuum profiled) and coarse CCFs (kReqCcf over n_k templates: each
// template's lags) served per item, one item = (request, template), instead of one team per
// request looping over its templates. Each item has its own buffers (the grid: template values,
// matrix-arm full grid; the CCF: its lag sums and CCF) and workspace, so that one spectrum's
// templates run on as many teams at once; each writes its own template's entry of the slot's
// grid_raw/grid_ok or ccf_peak/ccf_peak_lag, with the function the per-request serve calls
// (grid_template_chi2, ccf_template): the same results bit for bit. A CCF request over one
// template (n_k = 0, the fine lags) is one item on the slot's own scratch, as served per request.
// Rounds with more items than `cap` are served in chunks of cap items. cap = 0: every request is
// served per request (engine_serve), as in the kinds engine.
struct TemplateItems {
  int cap = 0;               // items the buffers hold
  long long t_stride = 0;    // doubles per item: template_items_stride
  double* T = nullptr;       // [cap][t_stride]
  EvalWork* work = nullptr;  // [cap] each item's continuum or reduction workspace
};

// The control block of one batch's run (device memory on the GPU).
struct EngineCtl {
  BatchView b;                    // the batch; b.n_slots slots
  int next_spectrum = 0;          // the next spectrum a free slot takes
  int rounds = 0;                 // rounds run (the device's count; the host's is EngineStats)
  int n_active = 0;               // slots with a request this round
  int count[kNumReqKinds] = {};   // requests of each kind this round
  int* list = nullptr;            // [kNumReqKinds][b.n_slots] the slots of each kind's requests
  int* slot_spec = nullptr;       // [b.n_slots] a spectrum index, kSlotFree or kSlotDrained
  // The staged engine (kernels/rows_stage.hpp): full evaluations go to rows->list and are served
  // by the row stages; nullptr: every evaluation is served by engine_serve<kReqEval>.
  RowsRound* rows = nullptr;
  TemplateItems items;  // the staged engine's grid and CCF per (request, template); cap 0: none
};

// Passes a request kind is served in: an evaluation's template and continuum stages, one pass
// for every other kind.
VX_HD VX_INLINE int engine_stages(int kind) { return kind == kReqEval ? 2 : 1; }

// Step slot `slot` to its next request and enqueue it (round part 1); a slot whose fit ends
// takes the next spectrum. The result of a finished fit is in b.results[its spectrum].
template <class Team>
VX_HD VX_NOINLINE void engine_step(EngineCtl* ctl, int slot) {
  const BatchView& b = ctl->b;
  int s = ctl->slot_spec[slot];
  PipelineShared* sh = &b.shared[slot];
  while (s != kSlotDrained) {
    if (s == kSlotFree) {
      s = engine_fetch_add(&ctl->next_spectrum, 1);
      if (s >= b.n_spec) {
        s = kSlotDrained;
        break;
      }
      sh->fm.pc = 0;
      sh->hm.pc = 0;
    }
    FitData d;
    PipelineScratch sc;
    const float* tmpl[kMaxArms];
    batch_views(b, s, slot, &d, &sc, tmpl);
    const BatchSpectrum& bs = b.spec[s];
    const bool more =
        bs.held ? held_step<Team>(sh->hm, b.em.n_label, d, b.cfg, bs.held_theta, sc, sh,
                                  &b.results[s], &sh->rq)
                : fit_step<Team>(sh->fm, b.em.n_label, b.grid, d, b.n_ccf, b.ccf_labels, b.cfg,
                                 sc, sh, &b.results[s], &sh->rq);
    if (more && ctl->rows && rows_request(sh->rq)) {  // the row stages (rows_stage.hpp)
      ctl->rows->list[engine_fetch_add(&ctl->rows->count, 1)] = slot;
      engine_fetch_add(&ctl->n_active, 1);
      break;
    }
    if (more) {
      const int k = sh->rq.kind;
      ctl->list[k * b.n_slots + engine_fetch_add(&ctl->count[k], 1)] = slot;
      engine_fetch_add(&ctl->n_active, 1);
      break;
    }
    s = kSlotFree;
  }
  ctl->slot_spec[slot] = s;
}

// Serve request `idx` of kind Kind this round, pass `stage` (< engine_stages(Kind)), with the
// team (round part 2). d, sc, tmpl: the team's view storage (shared memory of a warp on the
// device), filled here by one worker.
template <int Kind, class Team>
VX_HD VX_INLINE void engine_serve(const Team& team, const EngineCtl* ctl, int stage, int idx,
                                  FitData* d, PipelineScratch* sc, const float** tmpl) {
  const BatchView& b = ctl->b;
  const int slot = ctl->list[Kind * b.n_slots + idx];
  const int s = ctl->slot_spec[slot];
  team.single([&] { batch_views(b, s, slot, d, sc, tmpl); });
  team.sync();
  PipelineShared* sh = &b.shared[slot];
  if constexpr (Kind == kReqEval)
    serve_eval_stage(team, stage, &sh->rq, b.em, b.grid, *d, b.cfg, *sc, sh);
  else
    serve_kind<Kind>(team, &sh->rq, b.em, b.grid, *d, tmpl, b.cfg, *sc, sh, &b.results[s]);
  team.sync();  // every worker is done with the views before they are rewritten
}

// Doubles per item of TemplateItems for slots of slot_pix pixels and slot_full full-grid points
// and CCFs of n_out lags: a grid item's T (slot_pix) and full grid (slot_full), at least a CCF
// item's lag sums and CCF (9 n_out).
VX_HD VX_INLINE long long template_items_stride(long long slot_pix, long long slot_full,
                                                int n_out) {
  const long long grid = slot_pix + slot_full, ccf = 9LL * n_out;
  return grid > ccf ? grid : ccf;
}
VX_HD VX_INLINE long long template_items_stride(const BatchView& b) {
  return template_items_stride(b.slot_pix, b.slot_full, b.n_out);
}

// Templates per request of kind Kind (kReqGrid or kReqCcf) in TemplateItems: the sizes fit_step
// asks for (grid_templates, ccf_templates_used).
template <int Kind>
VX_HD VX_INLINE int template_items_per_request(const BatchView& b) {
  return Kind == kReqGrid ? grid_templates(b.n_ccf) : ccf_templates_used(b.cfg, b.n_ccf);
}

// Items of kind Kind this round: every template of every request of the kind.
template <int Kind>
VX_HD VX_INLINE int template_items_count(const EngineCtl* ctl) {
  return ctl->count[Kind] * template_items_per_request<Kind>(ctl->b);
}

// Serve item first + idx of this round's kind Kind (TemplateItems): request (first + idx) / P of
// the kind's list (P = template_items_per_request), its template rq.j + (first + idx) mod P, with
// the item's buffers (idx < ctl->items.cap). d, sc, tmpl: as engine_serve.
template <int Kind, class Team>
VX_HD VX_INLINE void engine_serve_item(const Team& team, const EngineCtl* ctl, int first, int idx,
                                       FitData* d, PipelineScratch* sc, const float** tmpl) {
  const BatchView& b = ctl->b;
  const int per = template_items_per_request<Kind>(b);
  const int item = first + idx, r = item / per, t = item - r * per;
  const int slot = ctl->list[Kind * b.n_slots + r];
  PipelineShared* sh = &b.shared[slot];
  const FitRequest& rq = sh->rq;
  // The whole team leaves past the request's templates (a one-template CCF: item 0 only).
  if (t >= (rq.n_k > 0 ? rq.n_k : 1)) return;
  double* T = ctl->items.T + (long long)idx * ctl->items.t_stride;
  EvalWork* w = ctl->items.work + idx;
  team.single([&] {
    batch_views(b, ctl->slot_spec[slot], slot, d, sc, tmpl);
    if (Kind == kReqGrid) d->Tf = T + b.slot_pix;  // the item's own full grid for matrix arms
  });
  team.sync();
  const int j = rq.j + t;
  if constexpr (Kind == kReqGrid) {
    grid_template_chi2(team, b.grid, *d, tmpl, j, rq.v, b.cfg.cont_deg, sc->t0, sc->frac, T, w,
                       &sh->grid_raw[j], &sh->grid_ok[j]);
  } else if (rq.n_k > 0) {
    ccf_template(team, b.grid, *d, tmpl, j, rq, *sc, w, T, T + 8 * b.n_out, sh->ccf_peak,
                 sh->ccf_peak_lag);
  } else {  // the fine lags into the slot's sc.ccf, as the per-request serve
    ccf_template(team, b.grid, *d, tmpl, j, rq, *sc, &sh->w, sc->acc, sc->ccf, nullptr, nullptr);
  }
}

// Plan row request idx of this round (rows_plan: its column blocks and rows).
VX_HD VX_INLINE void engine_plan_rows(const EngineCtl* ctl, int idx) {
  const int slot = ctl->rows->list[idx];
  rows_plan(ctl->rows, ctl->b, slot, ctl->slot_spec[slot], ctl->b.shared[slot].rq);
}

// Whether the round's emulator requests (kReqEmu: the labels of the velocity-only evaluations
// that follow) join the row requests' emulator product: the staged engine with the product's
// buffers. Their rows come after the row requests' (product index rows->count + e).
VX_HD VX_INLINE bool engine_emu_product(const EngineCtl* ctl) {
  return ctl->rows && ctl->rows->emu_rows;
}

// Emulator request e of this round in the product, stage 0 (its row weights, rows_emu_rows) or 1
// (after the product: c and dc from its sums, rows_emu_coef), with the team: emulator_coeffs_into
// bit for bit on the host (emulator_gemm_host's sums).
template <class Team>
VX_HD VX_INLINE void engine_serve_emu(const Team& team, const EngineCtl* ctl, int stage, int e) {
  const BatchView& b = ctl->b;
  const RowsRound* r = ctl->rows;
  PipelineShared* sh = &b.shared[ctl->list[kReqEmu * b.n_slots + e]];
  if (stage == 0)
    rows_emu_rows(team, r, r->count + e, &sh->rq, b.em, &sh->w);
  else
    rows_emu_coef(team, r, r->count + e, &sh->rq, b.em, &sh->w);
}

// Prepare other evaluation idx of this round (kReqEval's list in the staged engine: the rotation
// kernel its arms' teams read, eval_request_prep). One worker, with the round's plan.
VX_HD VX_INLINE void engine_eval_prep(const EngineCtl* ctl, int idx) {
  PipelineShared* sh = &ctl->b.shared[ctl->list[kReqEval * ctl->b.n_slots + idx]];
  eval_request_prep(sh->rq, ctl->b.em.n_label, ctl->b.grid, &sh->w);
}

// Serve row request idx of this round, stage -1 (the emulator's row weights, with the round's
// emulator product), 0 (coefficients) or 1 (pixels from the group rows), with the team
// (kernels/rows_stage.hpp). The emulator product runs between stages -1 and 0 and the groups'
// rows between stages 0 and 1 (emulator_gemm_host and rows_gemm_host, or cuBLAS on the device).
// The continuum follows per (request, arm) (engine_cont_arm), then per request
// (engine_cont_finish). d, sc, tmpl: as engine_serve.
template <class Team>
VX_HD VX_INLINE void engine_serve_rows(const Team& team, const EngineCtl* ctl, int stage, int idx,
                                       FitData* d, PipelineScratch* sc, const float** tmpl) {
  const BatchView& b = ctl->b;
  const RowsRound* r = ctl->rows;
  const int slot = r->list[idx];
  const int s = ctl->slot_spec[slot];
  PipelineShared* sh = &b.shared[slot];
  const BatchSpectrum& bs = b.spec[s];
  if (stage < 0) {  // the emulator's row weights, before the round's emulator product
    rows_emu_rows(team, r, idx, &sh->rq, b.em, &sh->w);
    return;
  }
  if (stage == 0) {
    rows_coef(team, r, idx, slot, bs, &sh->rq, b.em, b.grid, &sh->w);
    return;
  }
  team.single([&] { batch_views(b, s, slot, d, sc, tmpl); });
  team.sync();
  rows_pixels(team, r, slot, bs, &sh->rq, b.em.n_label, b.grid, *d, &sh->w, sc->T, sc->dT);
  team.sync();  // every worker is done with the views before they are rewritten
}

// The continuum stage's requests: the row requests (Rows) or the round's other evaluations
// (kReqEval's list: velocity-only, segment and continuum-only evaluations).
template <bool Rows>
VX_HD VX_INLINE int engine_cont_slot(const EngineCtl* ctl, int idx) {
  return Rows ? ctl->rows->list[idx] : ctl->list[kReqEval * ctl->b.n_slots + idx];
}

// Parameters of an evaluation's profile, as serve_eval_stage's evaluate_continuum takes them:
// the labels, velocity and VSINI for a full evaluation, the velocity alone otherwise.
VX_HD VX_INLINE int eval_request_np(const FitRequest& rq, int n_label, const EvalWork* w) {
  return rq.seg >= 0 || rq.vel_only || rq.no_emu ? 1 : n_fit_params(n_label, w->fit_vsini);
}

// Arms of an evaluation's profile: a segment's one, else the spectrum's.
VX_HD VX_INLINE int eval_request_arms(const FitRequest& rq, const BatchSpectrum& bs) {
  return rq.seg >= 0 ? 1 : bs.n_arms;
}

// The rotated rows' scratch of arm item k of a slot whose rows start at Tg (d.Tg: slot_counts'
// Tg doubles, n_tpix per arm, eval_arm_scratch_fits), so that a request's arms run at once.
VX_HD VX_INLINE double* eval_arm_tg(double* Tg, const GridView& g, int k) {
  return Tg ? Tg + (long long)k * g.n_tpix : nullptr;
}

// Whether every slot's Tg holds an n_tpix part per arm of the batch's spectra (or the batch has
// no rotated model: Tg unset), and every slot keeps rows for every arm (FitData::Tv, which the
// staged engine's velocity-only stages read). The GPU's sizing gives both (CudaBackend::
// slot_sizes: the kept rows of the batch's most arms; np, Tg's parts, widened to those arms
// when the batch has a rotated model); the host executor and StagedEngine::run check them, for
// spectra of at most `arms` arms (the device's run passes the batch's most: b.spec is device
// memory there), or of the batch's spectra.
inline bool eval_arm_scratch_fits(const BatchView& b, int arms) {
  const bool tg = !b.Tg || b.slot_grid <= 0 || slot_counts(b).Tg >= (long long)arms * b.grid.n_tpix;
  return tg && b.Tv && b.slot_vrows >= (long long)arms * b.grid.n_tpix;
}
inline bool eval_arm_scratch_fits(const BatchView& b) {
  int arms = 0;
  for (int s = 0; s < b.n_spec; ++s) arms = b.spec[s].n_arms > arms ? b.spec[s].n_arms : arms;
  return eval_arm_scratch_fits(b, arms);
}

// Item `item` of this round's requests of kind Kind served per (request, arm): request item /
// kMaxArms of the kind's list, arm k = item mod kMaxArms; past the request's arms (n_arms(rq,
// spectrum)) the whole team leaves. serve(sh, k) runs with the team's views set (d, sc, tmpl: as
// engine_serve).
template <int Kind, class Team, class Arms, class Serve>
VX_HD VX_INLINE void engine_arm_item(const Team& team, const EngineCtl* ctl, int item, FitData* d,
                                     PipelineScratch* sc, const float** tmpl, Arms&& n_arms,
                                     Serve&& serve) {
  const BatchView& b = ctl->b;
  const int slot = ctl->list[Kind * b.n_slots + item / kMaxArms];
  const int s = ctl->slot_spec[slot];
  PipelineShared* sh = &b.shared[slot];
  const int k = item % kMaxArms;
  if (k >= n_arms(sh->rq, b.spec[s])) return;
  team.single([&] { batch_views(b, s, slot, d, sc, tmpl); });
  team.sync();
  serve(sh, k);
  team.sync();  // every worker is done with the views before they are rewritten
}

// engine_arm_item's arm count for kinds served on every arm of the spectrum.
struct SpectrumArms {
  VX_HD int operator()(const FitRequest&, const BatchSpectrum& bs) const { return bs.n_arms; }
};

// Template item `item` of this round's other evaluations (eval_template_arm), with the team: the
// template stage of velocity-only, segment and continuum-only evaluations, a request's arms on as
// many teams at once.
template <class Team>
VX_HD VX_INLINE void engine_eval_arm(const Team& team, const EngineCtl* ctl, int item, FitData* d,
                                     PipelineScratch* sc, const float** tmpl) {
  const BatchView& b = ctl->b;
  engine_arm_item<kReqEval>(
      team, ctl, item, d, sc, tmpl,
      [](const FitRequest& rq, const BatchSpectrum& bs) { return eval_request_arms(rq, bs); },
      [&](PipelineShared* sh, int k) {
        eval_template_arm(team, b.em, b.grid, *d, sh->rq, k, &sh->w, eval_arm_tg(d->Tg, b.grid, k),
                          sc->T, sc->dT);
      });
}

// Clip item `item` of this round (request item / kMaxArms, arm item mod kMaxArms: clip_arm on the
// model of the request's evaluation), with the team: a request's arms on as many teams at once.
template <class Team>
VX_HD VX_INLINE void engine_clip_arm(const Team& team, const EngineCtl* ctl, int item, FitData* d,
                                     PipelineScratch* sc, const float** tmpl) {
  const BatchView& b = ctl->b;
  engine_arm_item<kReqClip>(
      team, ctl, item, d, sc, tmpl, SpectrumArms{}, [&](PipelineShared* sh, int a) {
        clip_arm(team, *d, b.cfg.cont_deg, b.cfg.clip_sigma, *sc, &sh->w, a, &sh->clip_n[a]);
      });
}

// The moments grid's requests of a round in the staged engine (kReqVGrid with TemplateItems:
// rows_stage.hpp vgrid_prep, vgrid_rows_arm, vgrid_point). Request idx's preparation (one worker,
// with the round's plan).
VX_HD VX_INLINE void engine_vgrid_prep(const EngineCtl* ctl, int idx) {
  PipelineShared* sh = &ctl->b.shared[ctl->list[kReqVGrid * ctl->b.n_slots + idx]];
  vgrid_prep(sh->rq, ctl->b.em.n_label, ctl->b.grid, ctl->b.cfg, &sh->w);
}

// Rows item `item` (request item / kMaxArms, arm item mod kMaxArms: vgrid_rows_arm) with the
// team.
template <class Team>
VX_HD VX_INLINE void engine_vgrid_rows(const Team& team, const EngineCtl* ctl, int item, FitData* d,
                                       PipelineScratch* sc, const float** tmpl) {
  const BatchView& b = ctl->b;
  engine_arm_item<kReqVGrid>(
      team, ctl, item, d, sc, tmpl, SpectrumArms{}, [&](PipelineShared* sh, int a) {
        vgrid_rows_arm(team, b.em, b.grid, *d, b.cfg, sh->rq, a, &sh->w,
                       eval_arm_tg(d->Tg, b.grid, a));
      });
}

// Points per request in the items (the request's n_k of them are served; the others return).
constexpr int kVGridItems = kVGridPoints;

// Point item first + idx of the round (request (first + idx) / kVGridItems, its point (first +
// idx) mod kVGridItems) with the item's buffers (idx < ctl->items.cap: its T and full grid, its
// workspace), with the team.
template <class Team>
VX_HD VX_INLINE void engine_vgrid_item(const Team& team, const EngineCtl* ctl, int first, int idx,
                                       FitData* d, PipelineScratch* sc, const float** tmpl) {
  const BatchView& b = ctl->b;
  const int item = first + idx, r = item / kVGridItems, i = item - r * kVGridItems;
  const int slot = ctl->list[kReqVGrid * b.n_slots + r];
  PipelineShared* sh = &b.shared[slot];
  if (i >= sh->rq.n_k) return;  // the whole team leaves
  double* T = ctl->items.T + (long long)idx * ctl->items.t_stride;
  team.single([&] {
    batch_views(b, ctl->slot_spec[slot], slot, d, sc, tmpl);
    d->Tf = T + b.slot_pix;  // the point's own full grid for matrix arms
  });
  team.sync();
  vgrid_point(team, b.grid, *d, b.cfg, sh->rq, i, T, ctl->items.work + idx, &sh->vgrid_chi2[i]);
  team.sync();  // every worker is done with the views before they are rewritten
}

// Continuum item `item` of this round's row requests (Rows) or other evaluations (request item /
// kMaxArms, arm item mod kMaxArms; rows_continuum_arm on the request's view: a segment request's
// segment_view), with the team, after the request's template stage. d, sc, tmpl: as
// engine_serve.
template <bool Rows, class Team>
VX_HD VX_INLINE void engine_cont_arm(const Team& team, const EngineCtl* ctl, int item, FitData* d,
                                     PipelineScratch* sc, const float** tmpl) {
  const BatchView& b = ctl->b;
  const int slot = engine_cont_slot<Rows>(ctl, item / kMaxArms);
  const int s = ctl->slot_spec[slot];
  PipelineShared* sh = &b.shared[slot];
  const FitRequest& rq = sh->rq;
  if (item % kMaxArms >= eval_request_arms(rq, b.spec[s])) return;  // the whole team leaves
  team.single([&] { batch_views(b, s, slot, d, sc, tmpl); });
  team.sync();
  // A segment's pixels start at seg_start in T and dT (serve_eval_stage's offset). Row requests
  // are never segments (rows_request).
  const int off = !Rows && rq.seg >= 0 ? d->seg_start[rq.seg] : 0;
  if (!Rows && rq.seg >= 0) {
    team.sync();  // every worker has read the spectrum's view
    team.single([&] { *d = segment_view(*d, rq.seg); });
    team.sync();
  }
  rows_continuum_arm(team, ctl->rows, item, rq, eval_request_np(rq, b.em.n_label, &sh->w),
                     b.cfg.cont_deg, *d, sc->T + off, sc->dT + off, &sh->w);
  team.sync();  // every worker is done with the views before they are rewritten
}

// Request idx's chi^2 from its arms' sums (rows_continuum_finish), after engine_cont_arm: one
// worker.
template <bool Rows>
VX_HD VX_INLINE void engine_cont_finish(const EngineCtl* ctl, int idx) {
  const BatchView& b = ctl->b;
  const int slot = engine_cont_slot<Rows>(ctl, idx);
  PipelineShared* sh = &b.shared[slot];
  const FitRequest& rq = sh->rq;
  rows_continuum_finish(ctl->rows, idx, eval_request_arms(rq, b.spec[ctl->slot_spec[slot]]),
                        eval_request_np(rq, b.em.n_label, &sh->w), b.cfg.cont_deg, &sh->rq, &sh->w);
}

// Per-run counts of the host executor: rounds, requests served per kind, the widest round.
struct EngineStats {
  long rounds = 0;
  long served[kNumReqKinds] = {};
  long served_rows = 0;  // full evaluations served by the row stages (staged engine)
  long gemms = 0;        // the row stages' group GEMMs
  long emu_gemms = 0;  // and their emulator products (one per round with row or emulator requests)
  long emu_in_product = 0;        // emulator requests (kReqEmu) served through the product
  long items[kNumReqKinds] = {};  // templates served as items (TemplateItems), per kind
  long item_chunks = 0;           // and the passes they took
  long cont_evals = 0;            // other evaluations with the continuum per arm (staged engine)
  long cont_segs = 0;             // of which segment evaluations (per-arm velocities)
  long eval_items = 0;            // and their template stage's (request, arm) items served
  long clip_items = 0;            // clipping's (request, arm) items served (staged engine)
  int widest_round = 0;
  bool finished = true;  // every machine ended within max_rounds
};

// ctl's lists and counters set for a new batch (ctl->b set, list and slot_spec allocated).
VX_HD VX_INLINE void engine_begin_slot(EngineCtl* ctl, int slot) {
  ctl->slot_spec[slot] = kSlotFree;
}

template <int Kind, class Team>
void engine_serve_all(const Team& team, EngineCtl* ctl, EngineStats* st) {
  FitData d;
  PipelineScratch sc;
  const float* tmpl[kMaxArms];
  for (int stage = 0; stage < engine_stages(Kind); ++stage)
    for (int i = 0; i < ctl->count[Kind]; ++i) engine_serve<Kind>(team, ctl, stage, i, &d, &sc, tmpl);
  st->served[Kind] += ctl->count[Kind];
}

// The round's evaluations other than the row requests, in the staged engine (ctl->rows set):
// every (request, arm)'s template stage (engine_eval_arm), then the continuum per (request, arm)
// and per request, as the row requests'. Without the row stages, engine_serve_all.
// Throws std::length_error when a slot lacks Tg's part or kept rows per arm (a sizing bug).
template <class Team>
void engine_evals_all(const Team& team, EngineCtl* ctl, EngineStats* st) {
  if (!ctl->rows) {
    engine_serve_all<kReqEval>(team, ctl, st);
    return;
  }
  if (!eval_arm_scratch_fits(ctl->b)) throw std::length_error("engine_evals_all: scratch per arm");
  FitData d;
  PipelineScratch sc;
  const float* tmpl[kMaxArms];
  const int n = ctl->count[kReqEval];
  for (int i = 0; i < n; ++i) engine_eval_prep(ctl, i);  // the device's plan kernel
  for (int i = 0; i < n * kMaxArms; ++i) engine_eval_arm(team, ctl, i, &d, &sc, tmpl);
  for (int i = 0; i < n * kMaxArms; ++i) engine_cont_arm<false>(team, ctl, i, &d, &sc, tmpl);
  for (int i = 0; i < n; ++i) {
    engine_cont_finish<false>(ctl, i);
    const int slot = engine_cont_slot<false>(ctl, i);
    const FitRequest& rq = ctl->b.shared[slot].rq;
    st->cont_segs += rq.seg >= 0;
    st->eval_items += eval_request_arms(rq, ctl->b.spec[ctl->slot_spec[slot]]);
  }
  st->served[kReqEval] += n;
  st->cont_evals += n;
}

// The round's clipping requests on the host: per (request, arm) in the staged engine (ctl->rows
// set: engine_clip_arm), else per request.
template <class Team>
void engine_clip_all(const Team& team, EngineCtl* ctl, EngineStats* st) {
  if (!ctl->rows) {
    engine_serve_all<kReqClip>(team, ctl, st);
    return;
  }
  FitData d;
  PipelineScratch sc;
  const float* tmpl[kMaxArms];
  const int n = ctl->count[kReqClip];
  for (int i = 0; i < n * kMaxArms; ++i) engine_clip_arm(team, ctl, i, &d, &sc, tmpl);
  for (int i = 0; i < n; ++i)
    st->clip_items += ctl->b.spec[ctl->slot_spec[ctl->list[kReqClip * ctl->b.n_slots + i]]].n_arms;
  st->served[kReqClip] += n;
}

// Items 0 .. n_items - 1 of a round on the host in the device's chunks of ctl->items.cap (the
// item buffers): serve(first, i) for each item first + i of a chunk; the chunks counted.
template <class Serve>
void engine_item_chunks(const EngineCtl* ctl, int n_items, EngineStats* st, Serve&& serve) {
  const int cap = ctl->items.cap;
  for (int first = 0; first < n_items; first += cap) {
    const int n = n_items - first < cap ? n_items - first : cap;
    for (int i = 0; i < n; ++i) serve(first, i);
    ++st->item_chunks;
  }
}

// The round's moments-grid requests on the host: in the staged engine with TemplateItems, in the
// device's steps (every request's preparation, every (request, arm)'s rows, the points in chunks
// of the items' cap); else per request (serve_vgrid).
// Throws std::length_error when a slot lacks Tg's part or kept rows per arm (a sizing bug).
template <class Team>
void engine_vgrid_all(const Team& team, EngineCtl* ctl, EngineStats* st) {
  if (!ctl->rows || ctl->items.cap <= 0) {
    engine_serve_all<kReqVGrid>(team, ctl, st);
    return;
  }
  if (!eval_arm_scratch_fits(ctl->b)) throw std::length_error("engine_vgrid_all: scratch per arm");
  FitData d;
  PipelineScratch sc;
  const float* tmpl[kMaxArms];
  const int n = ctl->count[kReqVGrid];
  for (int i = 0; i < n; ++i) engine_vgrid_prep(ctl, i);  // the device's plan kernel
  for (int i = 0; i < n * kMaxArms; ++i) engine_vgrid_rows(team, ctl, i, &d, &sc, tmpl);
  engine_item_chunks(ctl, n * kVGridItems, st, [&](int first, int i) {
    engine_vgrid_item(team, ctl, first, i, &d, &sc, tmpl);
  });
  for (int i = 0; i < n; ++i)
    st->items[kReqVGrid] += ctl->b.shared[ctl->list[kReqVGrid * ctl->b.n_slots + i]].rq.n_k;
  st->served[kReqVGrid] += n;
}

// Kind Kind's requests of a round on the host, per item (TemplateItems), in the device's chunks.
template <int Kind, class Team>
void engine_items_all(const Team& team, EngineCtl* ctl, EngineStats* st) {
  const int n_items = template_items_count<Kind>(ctl);
  FitData d;
  PipelineScratch sc;
  const float* tmpl[kMaxArms];
  engine_item_chunks(ctl, n_items, st, [&](int first, int i) {
    engine_serve_item<Kind>(team, ctl, first, i, &d, &sc, tmpl);
  });
  st->served[Kind] += ctl->count[Kind];
  st->items[Kind] += n_items;
}

// A round's kReqCcf or kReqGrid requests on the host: per item with TemplateItems (the staged
// engine), else per request.
template <int Kind, class Team>
void engine_serve_templates(const Team& team, EngineCtl* ctl, EngineStats* st) {
  if (ctl->items.cap > 0)
    engine_items_all<Kind>(team, ctl, st);
  else
    engine_serve_all<Kind>(team, ctl, st);
}

// The row stages of a round on the host, in the device's order: every request's plan, the
// layout; the emulator (every row request's and every emulator request's row weights, one
// product for all of them, the emulator requests' coefficients); every row request's
// coefficients, one GEMM per group with requests, every request's pixels, every (request, arm)'s
// continuum, every request's chi^2 from its arms. Without the product (engine_emu_product false)
// the emulator requests are served per request (engine_run).
// Throws std::length_error when the round's blocks exceed the buffers (a sizing bug).
template <class Team>
void engine_rows_all(const Team& team, EngineCtl* ctl, EngineStats* st) {
  RowsRound* r = ctl->rows;
  if (!r) return;
  const int n_emu = engine_emu_product(ctl) ? ctl->count[kReqEmu] : 0;
  if (r->count == 0 && n_emu == 0) return;
  for (int i = 0; i < r->count; ++i) engine_plan_rows(ctl, i);
  long long nc = 0, no = 0;
  rows_layout(r, &nc, &no);
  if (nc > r->coef_cap || no > r->out_cap) throw std::length_error("engine_rows_all: row buffers");
  FitData d;
  PipelineScratch sc;
  const float* tmpl[kMaxArms];
  if (r->emu_rows) {  // the emulator's phase 2 for every request as one product
    for (int i = 0; i < r->count; ++i) engine_serve_rows(team, ctl, -1, i, &d, &sc, tmpl);
    for (int e = 0; e < n_emu; ++e) engine_serve_emu(team, ctl, 0, e);
    emulator_gemm_host(ctl->b.em, r->count + n_emu, r->emu_ld, r->emu_rows, r->emu_sums);
    ++st->emu_gemms;
    for (int e = 0; e < n_emu; ++e) engine_serve_emu(team, ctl, 1, e);
    st->served[kReqEmu] += n_emu;
    st->emu_in_product += n_emu;
  }
  if (r->count == 0) return;
  for (int i = 0; i < r->count; ++i) engine_serve_rows(team, ctl, 0, i, &d, &sc, tmpl);
  for (int g = 0; g < r->n_groups; ++g)
    if (r->g_count[g] > 0 && r->g_hi[g] >= r->g_lo[g]) {
      rows_gemm_host(r, g, ctl->b.basis[g]);
      ++st->gemms;
    }
  for (int i = 0; i < r->count; ++i) engine_serve_rows(team, ctl, 1, i, &d, &sc, tmpl);
  for (int i = 0; i < r->count * kMaxArms; ++i) engine_cont_arm<true>(team, ctl, i, &d, &sc, tmpl);
  for (int i = 0; i < r->count; ++i) engine_cont_finish<true>(ctl, i);
  st->served_rows += r->count;
}

// The host executor: the device's rounds in order on one team. ctl->b, ctl->list and
// ctl->slot_spec set by the caller; ctl->rows (optional) with its arrays and buffers.
template <class Team>
EngineStats engine_run(const Team& team, EngineCtl* ctl, long max_rounds = 1000000) {
  EngineStats st;
  ctl->next_spectrum = 0;
  for (int slot = 0; slot < ctl->b.n_slots; ++slot) engine_begin_slot(ctl, slot);
  for (;;) {
    ctl->n_active = 0;
    for (int k = 0; k < kNumReqKinds; ++k) ctl->count[k] = 0;
    if (ctl->rows) {
      ctl->rows->count = 0;
      for (int g = 0; g < ctl->rows->n_groups; ++g) rows_reset_group(ctl->rows, g);
    }
    for (int slot = 0; slot < ctl->b.n_slots; ++slot) engine_step<Team>(ctl, slot);
    if (ctl->n_active == 0) break;
    if (st.rounds == max_rounds) {
      st.finished = false;
      break;
    }
    ++st.rounds;
    if (ctl->n_active > st.widest_round) st.widest_round = ctl->n_active;
    engine_serve_all<kReqFold>(team, ctl, &st);
    engine_serve_all<kReqCcfPrep>(team, ctl, &st);
    engine_serve_templates<kReqCcf>(team, ctl, &st);
    engine_serve_all<kReqGridPrep>(team, ctl, &st);
    engine_serve_templates<kReqGrid>(team, ctl, &st);
    if (!engine_emu_product(ctl)) engine_serve_all<kReqEmu>(team, ctl, &st);
    engine_rows_all(team, ctl, &st);
    engine_evals_all(team, ctl, &st);
    engine_clip_all(team, ctl, &st);
    engine_serve_all<kReqArmPixels>(team, ctl, &st);
    engine_vgrid_all(team, ctl, &st);
  }
  return st;
}

}  // namespace velox::kern
