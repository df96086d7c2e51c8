// HostBatch: prepared spectra packed into the flat arrays of kernels/batch.hpp (host memory).
// The CPU backend fits from it in place; the CUDA backend copies the same arrays to the device
// and swaps the pointers (src/backend/cuda/gpu_engine.cu). No physics here.
#pragma once
#include <algorithm>
#include <cstddef>
#include <functional>
#include <memory>
#include <vector>

#include "common/thread_pool.hpp"
#include "common/uninit_vector.hpp"
#include "emulator/library.hpp"
#include "fit/fitter.hpp"
#include "kernels/batch.hpp"

namespace velox {

// Per-slot scratch sizes of a batch (see kernels/batch.hpp).
struct SlotSizes {
  long long slot_pix = 0;   // >= the largest n_pix
  long long slot_full = 0;  // >= the largest sum over a spectrum's arms of n_full
  int np = 0;               // 1 + L
  int n_out = 0;            // max(ccf_lags, 7)
  long long emu = 0;        // emulator_scratch_size(em)
  long long slot_grid = 0;  // template-grid rows of the rotated model's scratch (0: no VSINI)
  long long slot_rm = 0;    // >= the largest sum over a spectrum's arms of n_full * ndiag
  // Kept rows of the single-lane teams (kern::BatchView::Tv): >= arms x template-grid rows of
  // every spectrum, 0: none (the CPU backend; HostBatch::sizes_kept_rows for the lane team).
  long long slot_vrows = 0;
  // Every size at least o's.
  bool covers(const SlotSizes& o) const {
    return o.slot_pix <= slot_pix && o.slot_full <= slot_full && o.np <= np && o.n_out <= n_out &&
           o.emu <= emu && o.slot_grid <= slot_grid && o.slot_rm <= slot_rm &&
           o.slot_vrows <= slot_vrows;
  }
  // Each size the larger of this one and o's.
  void widen(const SlotSizes& o) {
    slot_pix = std::max(slot_pix, o.slot_pix);
    slot_full = std::max(slot_full, o.slot_full);
    np = std::max(np, o.np);
    n_out = std::max(n_out, o.n_out);
    emu = std::max(emu, o.emu);
    slot_grid = std::max(slot_grid, o.slot_grid);
    slot_rm = std::max(slot_rm, o.slot_rm);
    slot_vrows = std::max(slot_vrows, o.slot_vrows);
  }
};
// The per-slot element counts of each scratch array (kern::slot_counts, the one table).
inline kern::SlotCounts slot_counts(const SlotSizes& s) {
  return kern::slot_counts(s.slot_pix, s.slot_full, s.np, s.n_out, s.emu, s.slot_grid, s.slot_rm,
                           s.slot_vrows);
}

// Host scratch for n_slots slots of the given sizes.
struct SlotScratch {
  std::vector<double> T, dT, fn, wts, frac, Tf, dTf, Tg, Tr, ccf, acc, emu, Tv;
  std::vector<float> rm;
  std::vector<int> t0;
  std::unique_ptr<kern::PipelineShared[]> shared;
  int n_slots = 0;
  SlotSizes sizes;
  // Grow (never shrink) to n_slots slots of `s`; keeps the allocation when it is large enough.
  void ensure(int n_slots, const SlotSizes& s);
};

// Whether any of specs has a matrix arm (Packed::fold): then the batch carries fold parameters
// for every spectrum's pixels (zeros for the others).
inline bool any_fold(const std::vector<const Packed*>& specs) {
  return std::any_of(specs.begin(), specs.end(), [](const Packed* p) { return !p->fold.empty(); });
}

class HostBatch {
 public:
  // Pack `specs` (the Packed of ready spectra, PreparedSpectrum::ready) for library `lib` with
  // pipeline config `pc`. Copies the pixels; the arm models (basis, ccf_templates) are
  // referenced, not copied, and must outlive the batch. `copied(s)` (may be empty) runs once
  // spectrum s is copied: the caller may then free its arrays (Packed::release_fit_arrays).
  // With `pool` the copies run on its threads (one thread packs about 14 000 DESI spectra/s:
  // alone it would take most of a thread at a device's 10 000/s), `copied` for several s at
  // once. Throws std::invalid_argument, before anything is copied, for an empty list, a spectrum
  // without arms or pixels, a matrix arm without fold parameters, or arms whose models disagree
  // on the number of CCF templates.
  HostBatch(const std::vector<const Packed*>& specs, const TemplateLibrary& lib,
            const kern::PipelineConfig& pc, const std::function<void(size_t)>& copied = {},
            ThreadPool* pool = nullptr);

  int n_spec() const { return static_cast<int>(spec.size()); }
  const SlotSizes& sizes() const { return sizes_; }
  // sizes() with the single-lane teams' kept rows (SlotSizes::slot_vrows): what the GPU's
  // engine allocates, and the lane team's tests.
  SlotSizes sizes_kept_rows() const;

  // A host BatchView of these arrays with the slots of `scratch` (ensure()d to this batch's
  // sizes by the caller). `results` and `ivar` are written by the fit.
  kern::BatchView view(SlotScratch& scratch);

  // Spectrum s's working ivar after the fit ([n_pix], clipped pixels 0).
  std::vector<float> ivar_of(int s) const;

  // The flat arrays (kernels/batch.hpp documents shapes and units).
  std::vector<kern::BatchSpectrum> spec;
  // (UninitVector: sized, then written in full by the copies.)
  UninitVector<double> lnlam, xleg, full_lnlam;
  UninitVector<double> fold;  // empty: no spectrum with a matrix arm
  UninitVector<float> flux, ivar;
  UninitVector<int> full_idx;
  std::vector<kern::PipelineResult> results;
  // The model table: distinct ArmModels in order of first use, and their arrays.
  std::vector<const ArmModel*> models;
  std::vector<const float*> basis, basis_t, ccf_tmpl;
  // The CPU's de-interleaved coarse CCF templates, one per model (ArmModel::ccf_phases: built
  // once per model and geometry, not per batch), and their layout.
  kern::CcfPhases ccf_ph_geom;
  std::vector<const float*> ccf_ph;
  int n_ccf = 0;
  kern::EmulatorView em;
  kern::GridView grid;
  kern::PipelineConfig cfg;
  const double* ccf_labels = nullptr;

 private:
  SlotSizes sizes_;
};

}  // namespace velox
