// Initial velocity by cross-correlation in ln(lambda) against a coarse set of templates that are
// already at the arm's resolution (Tonry & Davis 1979, direct sums rather than FFTs: a few
// hundred lags over a few thousand pixels is cheaper than padding to 2^k and transforming, and it
// is the same code on the GPU; see docs/design.md).
// Observed flux is first divided by a robust pseudo-continuum (Legendre, iteratively clipped)
// so that both sides are "normalised flux - mean" with weights ivar * continuum^2.
#pragma once
#include <cmath>

#include "kernels/fit_eval.hpp"

namespace velox::kern {

// Pseudo-continuum normalisation of each arm: fn[i] = flux/cont - 1, wts[i] = ivar * cont^2
// (0 where cont <= 0). Upper-envelope clipping: pixels more than 1.5 sigma below (absorption) or
// 4 sigma above (cosmics) the current fit are dropped from the next iteration.
template <class Team>
VX_HD void pseudo_normalise(const Team& team, const FitData& d, int deg, int n_iter,
                            EvalWork* w, double* fn, double* wts) {
  const int nc = deg + 1;
  team.for_each(d.n_pix, [&](int i) { wts[i] = 1.0; });  // 1 = used in the continuum fit
  team.sync();
  for (int a = 0; a < d.n_arms; ++a) {
    const int i0 = d.arm_start[a], n = d.arm_start[a + 1] - i0;
    for (int it = 0; it < n_iter; ++it) {
      team.reduce_sum(n, nc * nc + nc, w->red, [&](int ii, double* acc) {
        const int i = i0 + ii;
        if (wts[i] == 0.0) return;
        double p[kMaxCont];
        legendre(d.xleg[i], deg, p);
        for (int j = 0; j < nc; ++j) {
          for (int k = j; k < nc; ++k) acc[j * nc + k] += d.ivar[i] * p[j] * p[k];
          acc[nc * nc + j] += d.ivar[i] * p[j] * d.flux[i];
        }
      });
      team.single([&] {
        double* gm = w->gchol[a];
        for (int j = 0; j < nc; ++j)
          for (int k = j; k < nc; ++k) gm[j * nc + k] = gm[k * nc + j] = w->red[j * nc + k];
        for (int j = 0; j < nc; ++j) w->cont[a][j] = w->red[nc * nc + j];
        if (cholesky(gm, nc))
          cholesky_solve(gm, nc, w->cont[a]);
        else
          for (int j = 0; j < nc; ++j) w->cont[a][j] = (j == 0) ? 1.0 : 0.0;
      });
      team.sync();
      const bool last = (it == n_iter - 1);
      team.for_each(n, [&](int ii) {
        const int i = i0 + ii;
        double p[kMaxCont];
        legendre(d.xleg[i], deg, p);
        double c = 0.0;
        for (int j = 0; j < nc; ++j) c += w->cont[a][j] * p[j];
        if (!last) {
          const double z = (d.flux[i] - c) * sqrt((double)d.ivar[i]);
          wts[i] = (z < -1.5 || z > 4.0) ? 0.0 : 1.0;
        } else if (c > 0.0) {
          fn[i] = d.flux[i] / c - 1.0;
          wts[i] = d.ivar[i] * c * c;
        } else {
          fn[i] = 0.0;
          wts[i] = 0.0;
        }
      });
      team.sync();
    }
  }
}

// Normalised cross-correlation of fn (weights wts) with n_tmpl templates tmpl[a][j][n_tpix]
// (per arm, template grid, normalised flux) at integer template-pixel lags
// lag_o = lag_lo + o * lag_step, o = 0 .. n_out-1: ccf[j][o] (Pearson correlation, -1..1).
// A lag of L pixels is ln D = L * dlnlam. Templates j0 .. j0+n_tmpl-1 of each arm's set.
template <class Team>
VX_HD void cross_correlate(const Team& team, const GridView& g, const FitData& d,
                           const float* const* tmpl, int j0, int n_tmpl, int lag_lo, int n_out,
                           int lag_step, const double* fn, const double* wts, EvalWork* w,
                           double* ccf) {
  // Observed side normalisation.
  team.reduce_sum(d.n_pix, 2, w->red, [&](int i, double* acc) {
    acc[0] += wts[i] * fn[i];
    acc[1] += wts[i];
  });
  const double fmean = w->red[1] > 0 ? w->red[0] / w->red[1] : 0.0;
  team.reduce_sum(d.n_pix, 1, w->red, [&](int i, double* acc) {
    const double x = fn[i] - fmean;
    acc[0] += wts[i] * x * x;
  });
  const double fnorm = sqrt(w->red[0]);
  for (int jj = 0; jj < n_tmpl; ++jj) {
    const int j = j0 + jj;
    for (int o = 0; o < n_out; ++o) {
      const int lag = lag_lo + o * lag_step;
      // Sums of w, w*t, w*t^2 and w*(f - fmean)*t at this lag.
      team.reduce_sum(d.n_pix, 4, w->red, [&](int i, double* acc) {
        if (wts[i] == 0.0) return;
        int a = 0;
        while (a + 1 < d.n_arms && i >= d.arm_start[a + 1]) ++a;
        const float* t = tmpl[a] + (size_t)j * g.n_tpix;
        const double u = (d.lnlam[i] - g.lnlam0) / g.dlnlam - lag;
        const int t0 = (int)floor(u);
        const double f = u - t0;
        if (t0 < 0 || t0 + 1 >= g.n_tpix) return;
        const double tv = (1.0 - f) * t[t0] + f * t[t0 + 1];
        acc[0] += wts[i];
        acc[1] += wts[i] * tv;
        acc[2] += wts[i] * tv * tv;
        acc[3] += wts[i] * (fn[i] - fmean) * tv;
      });
      team.single([&] {
        const double W = w->red[0], st = w->red[1], stt = w->red[2], sft = w->red[3];
        const double var_t = (W > 0) ? stt - st * st / W : 0.0;
        ccf[jj * n_out + o] = (var_t > 0 && fnorm > 0) ? sft / sqrt(var_t) / fnorm : 0.0;
      });
      team.sync();
    }
  }
}

}  // namespace velox::kern
