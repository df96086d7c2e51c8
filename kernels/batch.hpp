// A batch of prepared spectra in flat arrays: the one layout every backend fits from. The host
// packs it once (src/backend/batch.cpp); the CPU backend reads it in place, the CUDA backend
// copies the same arrays to the device. batch_views() is the one place where a spectrum's FitData
// and a worker's PipelineScratch are assembled, for every backend.
//
// Two kinds of storage:
//  - per spectrum (index s < n_spec): the packed pixels (lnlam, xleg, flux, ivar, full_idx, and
//    for DESI arms the fold parameters of each pixel's resolution row), the full-grid ln(lambda)
//    of DESI arms, and the result;
//  - per slot (index slot < n_slots): a worker's scratch, reused spectrum after spectrum. A slot
//    is a CPU thread or a GPU warp. Sizes: slot_pix >= the largest n_pix in the batch,
//    slot_full >= the largest sum of n_full over a spectrum's arms, slot_rm >= the largest sum
//    of n_full * ndiag (the rows the fit folds, kernels/fold.hpp).
#pragma once
#include <cstddef>

#include "kernels/fit_pipeline.hpp"

namespace velox::kern {

// One spectrum's offsets into the batch arrays.
struct BatchSpectrum {
  int n_pix = 0;
  int n_arms = 0;
  int arm_start[kMaxArms + 1] = {};
  long long pix_off = 0;      // first used pixel in lnlam / xleg / flux / ivar / full_idx
  long long full_off = 0;     // first full-grid pixel in full_lnlam (arms in order)
  int n_full[kMaxArms] = {};  // 0: the arm has no resolution matrix (Gaussian LSF in the basis)
  int ndiag[kMaxArms] = {};
  int model[kMaxArms] = {};  // index of the arm's model in BatchView::basis / ccf_tmpl
  int n_seg = 0;             // velocity segments (FitData::seg_*)
  int seg_start[kMaxSeg + 1] = {};
  int seg_arm[kMaxSeg] = {};
  int fit_vsini = 0;  // FitData::fit_vsini
  // Pass 2 of a joint fit over epochs (fit_velocity_held): nonzero = fit VRAD alone with the
  // labels and VSINI held at held_theta[1..], starting from held_theta[0] km/s.
  int held = 0;
  double held_theta[kMaxParams] = {};
};

// The per-slot scratch, one table: elements per slot of each scratch array for a batch's slot
// sizes. The host batch (backend/batch.cpp), the CUDA engine's buffers (gpu_engine.cu) and the GPU
// sizing (gpu_sizing.cpp) allocate by it, and batch_views strides by it.
struct SlotCounts {
  long long T, dT, fn, wts, frac, t0;  // per slot pixel (dT: x np)
  long long Tf, dTf;                   // per full-grid pixel (dTf: x np)
  long long rm;                        // the folded rows (floats: sum of n_full x ndiag)
  long long Tg;                        // rotated model's grid rows x np (the CPU's Tr alike)
  long long ccf, acc, emu;             // CCF lags, 8 accumulators per lag, emulator scratch
  long long Tv;                        // kept rows (FitData::Tv): arms x template-grid rows
};
VX_HD VX_INLINE SlotCounts slot_counts(long long slot_pix, long long slot_full, int np, int n_out,
                                       long long emu, long long slot_grid, long long slot_rm,
                                       long long slot_vrows = 0) {
  SlotCounts c;
  c.T = c.fn = c.wts = c.frac = c.t0 = slot_pix;
  c.dT = slot_pix * np;
  c.Tf = slot_full;
  c.dTf = slot_full * np;
  c.rm = slot_rm;
  c.Tg = slot_grid * np;
  c.ccf = n_out;
  c.acc = 8LL * n_out;
  c.emu = emu;
  c.Tv = slot_vrows;
  return c;
}

// f(array, per_slot_count) for each per-slot scratch array of `s` (host code: the host batch's
// vectors, the CUDA engine's device arrays, both named as SlotCounts' fields), so that the
// allocations follow this one table. The CPU's Tr is not in it (sized as Tg by the host batch).
template <class S, class F>
void for_each_slot_array(S& s, const SlotCounts& c, F&& f) {
  f(s.T, c.T);
  f(s.dT, c.dT);
  f(s.fn, c.fn);
  f(s.wts, c.wts);
  f(s.frac, c.frac);
  f(s.t0, c.t0);
  f(s.Tf, c.Tf);
  f(s.dTf, c.dTf);
  f(s.rm, c.rm);
  f(s.Tg, c.Tg);
  f(s.ccf, c.ccf);
  f(s.acc, c.acc);
  f(s.emu, c.emu);
  f(s.Tv, c.Tv);
}

// The host's SIMD form of the resolution rows (prep::Kernels::expand_rows): rows of fold
// parameters p[count][3], row r written to out[col[r] * row_step + k * k_step], k < ndiag.
typedef void (*HostFoldRows)(const double* p, size_t count, int ndiag, const int* col, float* out,
                             ptrdiff_t row_step, ptrdiff_t k_step);

struct BatchView {
  EmulatorView em;
  GridView grid;
  PipelineConfig cfg;
  int n_ccf = 0;                           // coarse CCF templates per model
  const double* ccf_labels = nullptr;      // [n_ccf][L]
  int np = 0;                              // n_fit_params(L, 1) = 2 + L (VSINI column)
  int n_out = 0;                           // max(ccf_lags(cfg, grid), 7)
  const float* const* basis = nullptr;     // [n_models] -> [n_tpix][K+1]
  const float* const* basis_t = nullptr;   // CPU only: [n_models] -> [K+1][n_tpix] (or nullptr)
  const float* const* ccf_ph = nullptr;    // CPU only: [n_models] -> de-interleaved CCF templates
  CcfPhases ccf_ph_geom;                   // their layout (kernels/ccf.hpp CcfPhases)
  const float* const* ccf_tmpl = nullptr;  // [n_models] -> [n_ccf][n_tpix]
  // Per spectrum.
  int n_spec = 0;
  const BatchSpectrum* spec = nullptr;  // [n_spec]
  const double* lnlam = nullptr;        // [n_pix_total] ln(vacuum wavelength / A)
  const double* xleg = nullptr;         // [n_pix_total]
  const float* flux = nullptr;          // [n_pix_total]
  float* ivar = nullptr;                // [n_pix_total] in: ivar; out: ivar after clipping
  const int* full_idx = nullptr;        // [n_pix_total] index in the arm's full grid (-1: none)
  const double* full_lnlam = nullptr;   // [n_full_total]
  // [n_pix_total][3] each pixel's fold parameters (FitData::fold; zeros for pixels of arms
  // without a matrix); null: no spectrum of the batch has a matrix arm.
  const double* fold = nullptr;
  // CPU only: the host's SIMD form of the rows (prep::Kernels::expand_rows, the same arithmetic
  // as kernels/fold.hpp's fold_row); nullptr on the GPU.
  HostFoldRows host_fold = nullptr;
  PipelineResult* results = nullptr;    // [n_spec]
  // Per slot.
  int n_slots = 0;
  long long slot_pix = 0, slot_full = 0, slot_rm = 0;
  double* T = nullptr;               // [n_slots][slot_pix]
  double* dT = nullptr;              // [n_slots][slot_pix][np]
  double* fn = nullptr;              // [n_slots][slot_pix]
  double* wts = nullptr;             // [n_slots][slot_pix]
  double* frac = nullptr;            // [n_slots][slot_pix]
  int* t0 = nullptr;                 // [n_slots][slot_pix]
  double* Tf = nullptr;              // [n_slots][slot_full]
  double* dTf = nullptr;             // [n_slots][slot_full][np]
  float* rm = nullptr;               // [n_slots][slot_rm] the folded rows (kernels/fold.hpp)
  long long slot_grid = 0;           // template-grid rows per slot (0: no rotated model)
  double* Tg = nullptr;              // [n_slots][slot_grid][np] rotated model's grid scratch
  double* Tr = nullptr;              // CPU only: [n_slots][np][slot_grid] (CpuFitExtras::Tr)
  double* ccf = nullptr;             // [n_slots][n_out]
  double* acc = nullptr;             // [n_slots][8 * n_out]
  double* emu = nullptr;             // [n_slots][emulator_scratch_size(em)]
  long long slot_vrows = 0;          // kept rows per slot >= arms x grid.n_tpix (0: none)
  double* Tv = nullptr;              // [n_slots][slot_vrows] single-lane kept rows (FitData::Tv)
  PipelineShared* shared = nullptr;  // [n_slots]
};

// The table for a batch view's own slot sizes (its strides).
VX_HD VX_INLINE SlotCounts slot_counts(const BatchView& b) {
  return slot_counts(b.slot_pix, b.slot_full, b.np, b.n_out, emulator_scratch_size(b.em),
                     b.slot_grid, b.slot_rm, b.slot_vrows);
}

// Spectrum s's FitData, slot `slot`'s scratch and the spectrum's CCF template sets (tmpl[a]).
// d->ivar points to the batch's ivar (the pipeline clips in place).
VX_HD VX_INLINE void batch_views(const BatchView& b, int s, int slot, FitData* d,
                                 PipelineScratch* sc, const float** tmpl) {
  const BatchSpectrum& bs = b.spec[s];
  const long long o = bs.pix_off;
  d->n_pix = bs.n_pix;
  d->n_arms = bs.n_arms;
  for (int a = 0; a <= kMaxArms; ++a) d->arm_start[a] = bs.arm_start[a];
  d->n_seg = bs.n_seg;
  for (int k = 0; k <= kMaxSeg; ++k) d->seg_start[k] = bs.seg_start[k];
  for (int k = 0; k < kMaxSeg; ++k) d->seg_arm[k] = bs.seg_arm[k];
  d->fit_vsini = bs.fit_vsini;
  d->lnlam = b.lnlam + o;
  d->xleg = b.xleg + o;
  d->xleg_scale = 1.0;
  d->xleg_off = 0.0;
  d->flux = b.flux + o;
  d->ivar = b.ivar + o;
  d->full_idx = b.full_idx ? b.full_idx + o : nullptr;
  const SlotCounts c = slot_counts(b);
  const long long k = slot;
  float* rm_slot = b.rm ? b.rm + k * c.rm : nullptr;
  long long full = bs.full_off, rm = 0;
  int off = 0;
  for (int a = 0; a < kMaxArms; ++a) {
    const bool on = a < bs.n_arms;
    d->basis[a] = on ? b.basis[bs.model[a]] : nullptr;
    tmpl[a] = on ? b.ccf_tmpl[bs.model[a]] : nullptr;
    d->n_full[a] = on ? bs.n_full[a] : 0;
    d->ndiag[a] = on ? bs.ndiag[a] : 0;
    d->full_off[a] = off;
    d->full_lnlam[a] = d->n_full[a] > 0 ? b.full_lnlam + full : nullptr;
    d->rmat[a] = d->n_full[a] > 0 && rm_slot ? rm_slot + rm : nullptr;
    full += d->n_full[a];
    rm += (long long)d->n_full[a] * d->ndiag[a];
    off += d->n_full[a];
  }
  d->fold = b.fold && off > 0 ? b.fold + 3 * o : nullptr;
  d->rmat_w = d->fold ? rm_slot : nullptr;
  d->Tf = b.Tf ? b.Tf + k * c.Tf : nullptr;
  d->dTf = b.dTf ? b.dTf + k * c.dTf : nullptr;
  d->Tg = b.Tg && b.slot_grid > 0 ? b.Tg + k * c.Tg : nullptr;
  const bool tv = b.Tv && (long long)bs.n_arms * b.grid.n_tpix <= b.slot_vrows;
  d->Tv = tv ? b.Tv + k * c.Tv : nullptr;
  d->tv_stride = b.grid.n_tpix;
  d->tv_keep = b.shared[slot].kept;
  d->tv_arm0 = 0;
  sc->T = b.T + k * c.T;
  sc->dT = b.dT + k * c.dT;
  sc->fn = b.fn + k * c.fn;
  sc->wts = b.wts + k * c.wts;
  sc->frac = b.frac + k * c.frac;
  sc->t0 = b.t0 + k * c.t0;
  sc->ivar = b.ivar + o;
  sc->ccf = b.ccf + k * c.ccf;
  sc->acc = b.acc + k * c.acc;
  sc->emu = b.emu + k * c.emu;
}

}  // namespace velox::kern
