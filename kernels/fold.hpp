// The resolution-matrix fold's last step in the fit: each used pixel's matrix row rebuilt from
// its three fold parameters (FitData::fold: the row's centroid [px from the central tap], the
// variance [px^2] of the Gaussian that remains once the template's line spread is removed, and
// the row's sum; fit/resolution.hpp derives them from the DESI matrix on the host). The rows are
// written into the worker's scratch (FitData::rmat_w, kernels/batch.hpp's per-slot `rm`), where
// FitData::rmat points, so that the host hands the fit 24 bytes per pixel instead of ndiag
// floats per full-grid pixel, and the rows are read from a worker's own cache.
//
// fold_row is the team-generic form (the GPU's lanes, LaneTeam, SerialTeam): one row per worker
// and call, the same operations as the host's SIMD form (src/fit/isa/prep_slot.cpp, expand_rows,
// lane by lane), which the CPU backend runs instead (kHostSimd teams: SimdTeam::fold_arm). The
// two agree to the last bit up to fused multiply-adds (tests/unit/kernels/test_fold.cpp).
#pragma once
#include "kernels/fit_eval.hpp"
#include "kernels/fold_row.hpp"

namespace velox::kern {

// Every matrix arm's rows of d's used pixels into d.rmat_w (arms in order, each [ndiag][n_full]
// diagonal-major, where d.rmat[a] points); nothing without fold parameters (d.fold null: d.rmat
// holds the rows already). Columns of grid pixels that are not used are not written: the fit
// reads only the used pixels' columns (apply_rmat). Ends with team.sync() when it writes rows
// (the early return is taken by the whole team: it depends on d alone). The team by value, as
// the GPU calls it out of line: by reference its kernel keeps the team in a stack frame.
template <class Team>
VX_HD VX_NOINLINE void fold_rows(Team team, const FitData& d) {
  if (!d.fold || !d.rmat_w) return;
  for (int a = 0; a < d.n_arms; ++a) {
    const int n = d.n_full[a], nd = d.ndiag[a];
    if (n <= 0) continue;
    float* out = d.rmat_w + (d.rmat[a] - d.rmat_w);  // where the views put the arm's rows
    const int i0 = d.arm_start[a], i1 = d.arm_start[a + 1];
    if constexpr (host_simd<Team>()) {
      if (team.fold_arm(d, i0, i1, nd, n, out)) continue;
    }
    team.for_each(i1 - i0, [&](int k) {
      const int i = i0 + k;
      fold_row(d.fold + 3 * (long long)i, nd, out + d.full_idx[i], n);
    });
  }
  team.sync();
}

}  // namespace velox::kern
