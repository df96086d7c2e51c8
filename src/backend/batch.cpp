#include "backend/batch.hpp"

#include <algorithm>
#include <stdexcept>

#include "fit/prep_kernels.hpp"

namespace velox {

void SlotScratch::ensure(int n, const SlotSizes& s) {
  if (n <= n_slots && sizes.covers(s)) return;
  n_slots = std::max(n, n_slots);
  sizes.widen(s);
  const size_t ns = static_cast<size_t>(n_slots);
  kern::SlotCounts c = slot_counts(sizes);
  c.emu = std::max<long long>(c.emu, 1);
  auto count = [ns](long long per_slot) { return ns * static_cast<size_t>(per_slot); };
  kern::for_each_slot_array(*this, c,
                            [&](auto& v, long long per_slot) { v.assign(count(per_slot), 0); });
  Tr.assign(count(c.Tg), 0.0);
  shared = std::make_unique<kern::PipelineShared[]>(ns);
}

HostBatch::HostBatch(const std::vector<const Packed*>& specs, const TemplateLibrary& lib,
                     const kern::PipelineConfig& pc, const std::function<void(size_t)>& copied,
                     ThreadPool* pool)
    : em(lib.view()), grid(lib.grid()), cfg(pc), ccf_labels(lib.ccf_labels.data()) {
  if (specs.empty()) throw std::invalid_argument("HostBatch: no spectra");
  const bool with_fold = any_fold(specs);
  spec.resize(specs.size());
  results.resize(specs.size());
  sizes_.np = kern::n_fit_params(lib.n_label, 1);
  sizes_.n_out = std::max(kern::ccf_lags(pc, grid), 7);
  sizes_.emu = kern::emulator_scratch_size(em);
  // Pass 1, in order: each spectrum's offsets and the model table (models in order of first
  // use), every check before anything is copied.
  long long n_pix = 0, n_full = 0;
  for (size_t s = 0; s < specs.size(); ++s) {
    const Packed& pk = *specs[s];
    if (pk.n_arms < 1 || pk.flux.empty())
      throw std::invalid_argument("HostBatch: spectrum is not ready for fitting (no arm)");
    // Pass 2 places every array by flux's length.
    const size_t n = pk.flux.size();
    if (pk.lnlam.size() != n || pk.xleg.size() != n || pk.ivar.size() != n ||
        pk.full_idx.size() != n || (!pk.fold.empty() && pk.fold.size() != 3 * n))
      throw std::invalid_argument("HostBatch: a spectrum's pixel arrays differ in length");
    kern::BatchSpectrum& bs = spec[s];
    bs.n_pix = static_cast<int>(n);
    bs.n_arms = pk.n_arms;
    for (int a = 0; a <= kern::kMaxArms; ++a) bs.arm_start[a] = pk.arm_start[a];
    bs.n_seg = pk.n_seg;
    bs.fit_vsini = pk.fit_vsini;
    bs.held = pk.held ? 1 : 0;
    for (int q = 0; q < kern::kMaxParams; ++q) bs.held_theta[q] = pk.held_theta[q];
    if (pk.fit_vsini && pc.fit_vsini) sizes_.slot_grid = grid.n_tpix;
    for (int k = 0; k <= kern::kMaxSeg; ++k) bs.seg_start[k] = pk.seg_start[k];
    for (int k = 0; k < kern::kMaxSeg; ++k) bs.seg_arm[k] = pk.seg_arm[k];
    bs.pix_off = n_pix;
    bs.full_off = n_full;
    long long full = 0, rm = 0;
    for (int a = 0; a < pk.n_arms; ++a) {
      const ArmModel* m = pk.models[a].get();
      auto it = std::find(models.begin(), models.end(), m);
      if (it == models.end()) {
        if (!models.empty() && m->n_ccf != n_ccf)
          throw std::invalid_argument("HostBatch: arm models differ in their CCF template count");
        n_ccf = m->n_ccf;
        models.push_back(m);
        basis.push_back(m->basis.data());
        basis_t.push_back(m->basis_t.empty() ? nullptr : m->basis_t.data());
        ccf_tmpl.push_back(m->ccf_templates.data());
        // Lag step and lag count of the coarse CCF (kern::fit_one), its first n_use templates.
        const int n_out = kern::ccf_lags(pc, grid);
        ccf_ph_geom = kern::ccf_phases(std::max(0, std::min(pc.n_ccf_use, m->n_ccf)),
                                       std::max(1, pc.lag_step), grid.n_tpix, n_out);
        ccf_ph.push_back(m->ccf_phases(ccf_ph_geom.n_tmpl, ccf_ph_geom.step, n_out));
        it = models.end() - 1;
      }
      bs.model[a] = static_cast<int>(it - models.begin());
      if (a < static_cast<int>(pk.full_lnlam.size()) && !pk.full_lnlam[a].empty()) {
        bs.n_full[a] = static_cast<int>(pk.full_lnlam[a].size());
        bs.ndiag[a] = pk.ndiag[a];
        full += bs.n_full[a];
        rm += static_cast<long long>(bs.n_full[a]) * bs.ndiag[a];
      }
    }
    // A matrix arm's rows are built by the fit from the fold parameters: without them it would
    // read its slot's scratch as rows.
    if (full > 0 && pk.fold.empty())
      throw std::invalid_argument("HostBatch: a matrix arm without its fold parameters");
    n_pix += bs.n_pix;
    n_full += full;
    sizes_.slot_rm = std::max(sizes_.slot_rm, rm);
    sizes_.slot_pix = std::max<long long>(sizes_.slot_pix, bs.n_pix);
    sizes_.slot_full = std::max(sizes_.slot_full, full);
  }
  // Pass 2: the copies, each spectrum at its offsets (in parallel on `pool`; the arrays are
  // written in full, so they are not zeroed first).
  const auto np = static_cast<size_t>(n_pix);
  lnlam.resize(np);
  xleg.resize(np);
  flux.resize(np);
  ivar.resize(np);
  full_idx.resize(np);
  full_lnlam.resize(static_cast<size_t>(n_full));
  if (with_fold) fold.resize(3 * np);
  auto copy = [&](size_t s) {
    const Packed& pk = *specs[s];
    const kern::BatchSpectrum& bs = spec[s];
    const auto o = static_cast<size_t>(bs.pix_off);
    std::copy(pk.lnlam.begin(), pk.lnlam.end(), lnlam.begin() + o);
    std::copy(pk.xleg.begin(), pk.xleg.end(), xleg.begin() + o);
    std::copy(pk.flux.begin(), pk.flux.end(), flux.begin() + o);
    std::copy(pk.ivar.begin(), pk.ivar.end(), ivar.begin() + o);
    std::copy(pk.full_idx.begin(), pk.full_idx.end(), full_idx.begin() + o);
    auto f = full_lnlam.begin() + bs.full_off;
    for (int a = 0; a < pk.n_arms; ++a)
      if (bs.n_full[a] > 0) f = std::copy(pk.full_lnlam[a].begin(), pk.full_lnlam[a].end(), f);
    if (with_fold) {
      if (pk.fold.empty())
        std::fill(fold.begin() + 3 * o, fold.begin() + 3 * (o + bs.n_pix), 0.0);
      else
        std::copy(pk.fold.begin(), pk.fold.end(), fold.begin() + 3 * o);
    }
    if (copied) copied(s);
  };
  if (pool && specs.size() > 1)
    pool->for_each(specs.size(), [&](size_t s, int) { copy(s); });
  else
    for (size_t s = 0; s < specs.size(); ++s) copy(s);
}

kern::BatchView HostBatch::view(SlotScratch& sc) {
  kern::BatchView b;
  b.em = em;
  b.grid = grid;
  b.cfg = cfg;
  b.n_ccf = n_ccf;
  b.ccf_labels = ccf_labels;
  b.np = sizes_.np;
  b.n_out = sizes_.n_out;
  b.basis = basis.data();
  b.basis_t = basis_t.data();
  b.ccf_ph = ccf_ph.data();
  b.ccf_ph_geom = ccf_ph_geom;
  b.ccf_tmpl = ccf_tmpl.data();
  b.n_spec = n_spec();
  b.spec = spec.data();
  b.lnlam = lnlam.data();
  b.xleg = xleg.data();
  b.flux = flux.data();
  b.ivar = ivar.data();
  b.full_idx = full_idx.data();
  b.full_lnlam = full_lnlam.data();
  b.fold = fold.empty() ? nullptr : fold.data();
  b.host_fold = prep_kernels().expand_rows;
  b.results = results.data();
  // The scratch may be larger than this batch needs: its own strides count.
  b.n_slots = sc.n_slots;
  b.slot_pix = sc.sizes.slot_pix;
  b.slot_full = sc.sizes.slot_full;
  b.slot_rm = sc.sizes.slot_rm;
  b.rm = sc.rm.empty() ? nullptr : sc.rm.data();
  b.T = sc.T.data();
  b.dT = sc.dT.data();
  b.fn = sc.fn.data();
  b.wts = sc.wts.data();
  b.frac = sc.frac.data();
  b.t0 = sc.t0.data();
  b.Tf = sc.Tf.data();
  b.dTf = sc.dTf.data();
  b.slot_grid = sc.sizes.slot_grid;
  b.Tg = sc.Tg.empty() ? nullptr : sc.Tg.data();
  b.Tr = sc.Tr.empty() ? nullptr : sc.Tr.data();
  b.ccf = sc.ccf.data();
  b.acc = sc.acc.data();
  b.emu = sc.emu.data();
  b.slot_vrows = sc.sizes.slot_vrows;
  b.Tv = sc.Tv.empty() ? nullptr : sc.Tv.data();
  b.shared = sc.shared.get();
  return b;
}

SlotSizes HostBatch::sizes_kept_rows() const {
  SlotSizes s = sizes_;
  int arms = 0;
  for (const auto& bs : spec) arms = std::max(arms, bs.n_arms);
  s.slot_vrows = static_cast<long long>(arms) * grid.n_tpix;
  return s;
}

std::vector<float> HostBatch::ivar_of(int s) const {
  const auto& bs = spec[s];
  return std::vector<float>(ivar.begin() + bs.pix_off, ivar.begin() + bs.pix_off + bs.n_pix);
}

}  // namespace velox
