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
// The end of one pseudo_normalise iteration on arm a (both forms): solve G c = q (G in
// w->gchol[a], q[deg + 1]; a flat continuum if G is singular), then per pixel either the next
// iteration's use flag in wts (0 for pixels 1.5 sigma below or 4 sigma above the fit) or, after
// the last iteration, fn = flux / continuum - 1 and wts = ivar continuum^2. Cheb: the
// continuum's basis is Chebyshev's (the CPU's form), else Legendre's.
template <bool Cheb, class Team>
VX_HD void pseudo_step(const Team& team, const FitData& d, int a, int deg, const double* q,
                       bool last, EvalWork* w, double* fn, double* wts) {
  const int nc = deg + 1, i0 = d.arm_start[a];
  team.single([&] {
    double* gm = w->gchol[a];
    for (int j = 0; j < nc; ++j) w->cont[a][j] = q[j];
    if (cholesky(gm, nc))
      cholesky_solve(gm, nc, w->cont[a]);
    else
      for (int j = 0; j < nc; ++j) w->cont[a][j] = (j == 0) ? 1.0 : 0.0;
  });
  team.sync();
  team.for_each(d.arm_start[a + 1] - i0, [&](int ii) {
    const int i = i0 + ii;
    const double c = continuum_at<Cheb>(d.xleg[i], deg, w->cont[a]);
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

template <class Team>
VX_HD void pseudo_normalise_simd(const Team& team, const FitData& d, int deg, int n_iter,
                                 EvalWork* w, double* fn, double* wts);

template <class Team>
VX_HD void pseudo_normalise(const Team& team, const FitData& d, int deg, int n_iter, EvalWork* w,
                            double* fn, double* wts) {
  const int nc = deg + 1;
  if constexpr (Team::kVec > 1) {
    if (2 * deg + 3 <= kMaxGramRow) {
      pseudo_normalise_simd(team, d, deg, n_iter, w, fn, wts);
      return;
    }
  }
  team.for_each(d.n_pix, [&](int i) { wts[i] = 1.0; });  // 1 = used in the continuum fit
  team.sync();
  for (int a = 0; a < d.n_arms; ++a) {
    const int i0 = d.arm_start[a], n = d.arm_start[a + 1] - i0;
    for (int it = 0; it < n_iter; ++it) {
      const int ntri = nc * (nc + 1) / 2;
      team.reduce_gram(
          n, nc + 1, ntri + nc, w->red,
          [&](int ii, double* z) {
            const int i = i0 + ii;
            if (wts[i] == 0.0) return;
            const double s = sqrt((double)d.ivar[i]);
            legendre_scaled(d.xleg[i], deg, s, z);  // z[j] = s P_j, without an array
            z[nc] = s * d.flux[i];
          },
          [&](int t, int* ca, int* cb) { normal_pair(t, nc, ca, cb); });
      team.single([&] {
        double* gm = w->gchol[a];
        for (int j = 0; j < nc; ++j)
          for (int k = j; k < nc; ++k)
            gm[j * nc + k] = gm[k * nc + j] = w->red[tri_index(j, k, nc)];
      });
      pseudo_step<false>(team, d, a, deg, w->red + ntri, it == n_iter - 1, w, fn, wts);
    }
  }
}

// pseudo_normalise for teams with kVec > 1 (the CPU): the same clipped fits in the Chebyshev
// basis (the same polynomials, kernels/physics.hpp chebyshev), G from the 2 deg + 1 moments
// mu_l = sum ivar C_l of the used pixels (G_jk = (mu_{j+k} + mu_{|j-k|}) / 2, as in
// profile_continuum_simd), kVec pixels per step; no square roots.
template <class Team>
VX_HD void pseudo_normalise_simd(const Team& team, const FitData& d, int deg, int n_iter,
                                 EvalWork* w, double* fn, double* wts) {
  constexpr int V = Team::kVec;
  const int nc = deg + 1, nmom = 2 * deg + 1;
  team.for_each(d.n_pix, [&](int i) { wts[i] = 1.0; });  // 1 = used in the continuum fit
  team.sync();
  for (int a = 0; a < d.n_arms; ++a) {
    const int i0 = d.arm_start[a], n = d.arm_start[a + 1] - i0;
    for (int it = 0; it < n_iter; ++it) {
      // Rows [C_0 .. C_{2 deg} | ivar | ivar f] (0 for clipped pixels and lanes past the end).
      team.reduce_gram_v(
          n, nmom + 2, nmom + nc, w->red,
          [&](int ii0, int cnt, double* Z) {
            double x[V];
            for (int p = 0; p < V; ++p) x[p] = d.xleg[i0 + ii0 + (p < cnt ? p : 0)];
            chebyshev_v<V>(x, nmom - 1, Z);
            for (int p = 0; p < V; ++p) {
              const int i = i0 + ii0 + (p < cnt ? p : 0);
              const double u = p < cnt && wts[i] != 0.0 ? (double)d.ivar[i] : 0.0;
              Z[nmom * V + p] = u;
              Z[(nmom + 1) * V + p] = u * d.flux[i];
            }
          },
          [&](int t, int* ca, int* cb) {
            *ca = t < nmom ? t : t - nmom;
            *cb = t < nmom ? nmom : nmom + 1;
          });
      team.single([&] {
        double* gm = w->gchol[a];
        for (int j = 0; j < nc; ++j)
          for (int k = j; k < nc; ++k)
            gm[j * nc + k] = gm[k * nc + j] = 0.5 * (w->red[j + k] + w->red[k - j]);
      });
      pseudo_step<true>(team, d, a, deg, w->red + nmom, it == n_iter - 1, w, fn, wts);
    }
  }
}

// A matrix arm's used pixels from its full grid's values t_out: T[i] for i in arm a's pixels.
// CPU teams: blocks of pixels (apply_rmat_rows); the GPU: one lane per pixel (apply_rmat).
template <class Team>
VX_HD void rows_to_pixels(const Team& team, const FitData& d, int a, const double* t_out,
                          double* T) {
  const int i0 = d.arm_start[a];
  if constexpr (Team::kVec > 1)
    apply_rmat_rows(d, a, i0, d.arm_start[a + 1], t_out, 1, T);
  else
    team.for_each(d.arm_start[a + 1] - i0,
                  [&](int ii) { T[i0 + ii] = apply_rmat(d, a, i0 + ii, t_out, 1, 0); });
}

// The chi^2 grid's template positions at velocity v_kms, computed once for all the grid's
// templates (fixed_template_stencils; the CPU teams): every used pixel's cubic stencil,
// t0[i] (grid_stencil's first interior tap) and frac[i]; for an arm with a resolution matrix,
// every point of its full grid instead, in the arm's 2 n_full doubles from d.dTf + 2 full_off:
// the fractions first, then the taps t0 (as doubles), each contiguous so that the CPU loads them
// as vectors (dTf, 1 + L >= 2 doubles per full-grid point, is free until the LM's first
// evaluation).
template <class Team>
VX_HD void grid_stencils_at(const Team& team, const GridView& g, const FitData& d, double v_kms,
                            int* t0, double* frac) {
  const double lnd = ln_doppler(v_kms);
  for (int a = 0; a < d.n_arms; ++a) {
    if (d.n_full[a] > 0) {
      const double* ll = d.full_lnlam[a];
      double* st = d.dTf + 2 * (size_t)d.full_off[a];
      const int nf = d.n_full[a];
      team.for_each(nf, [&](int jf) {
        int k;
        double f;
        grid_stencil(g, ll[jf], lnd, &k, &f);
        st[jf] = f;
        st[nf + jf] = k;
      });
    } else {
      const int i0 = d.arm_start[a];
      team.for_each(d.arm_start[a + 1] - i0, [&](int ii) {
        grid_stencil(g, d.lnlam[i0 + ii], lnd, &t0[i0 + ii], &frac[i0 + ii]);
      });
    }
  }
  team.sync();
}

// The template t at n stencils (frac[i], k[i]): out[i] = taps4 of cubic_weights(frac[i]) at
// t + k[i] - 1 (K: int, or a tap held as a double). The CPU's SIMD team takes kVecD stencils
// per step (SimdTeam::fixed_taps, the same arithmetic lane by lane).
template <class Team, class K>
VX_HD void fixed_taps(const Team& team, const float* t, int n, const double* frac, const K* k,
                      double* out) {
  if constexpr (host_simd<Team>()) {
    team.fixed_taps(t, n, frac, k, out);
  } else {
    team.for_each(n, [&](int i) { out[i] = fixed_tap(t, (int)k[i], frac[i]); });
  }
}

// fixed_template_at_pixels from the stencils of grid_stencils_at: the same values (an arm with
// a matrix: its full grid's values, then its used pixels' rows, apply_rmat_rows).
template <class Team>
VX_HD void fixed_template_stencils(const Team& team, const GridView& g, const FitData& d,
                                   const float* const* tmpl, int j, const int* t0,
                                   const double* frac, double* T) {
  for (int a = 0; a < d.n_arms; ++a) {
    const float* t = tmpl[a] + (size_t)j * g.n_tpix;
    const int i0 = d.arm_start[a];
    if (d.n_full[a] > 0) {
      const int nf = d.n_full[a];
      const double* st = d.dTf + 2 * (size_t)d.full_off[a];
      double* t_out = d.Tf + d.full_off[a];
      fixed_taps(team, t, nf, st, st + nf, t_out);
      team.sync();
      rows_to_pixels(team, d, a, t_out, T);
      continue;
    }
    fixed_taps(team, t, d.arm_start[a + 1] - i0, frac + i0, t0 + i0, T + i0);
  }
  team.sync();
}

// Template-grid position of every pixel at zero velocity: t0[i] (integer, -1 if the pixel is
// excluded) and frac[i], so that a lag of L template pixels reads t[t0 - L] .. t[t0 - L + 1].
template <class Team>
VX_HD void pixel_positions(const Team& team, const GridView& g, const FitData& d, int* t0,
                           double* frac) {
  team.for_each(d.n_pix, [&](int i) {
    const double u = (d.lnlam[i] - g.lnlam0) / g.dlnlam;
    const double fl = floor(u);
    t0[i] = (int)fl;
    frac[i] = u - fl;
  });
  team.sync();
}

// The coarse CCF templates de-interleaved by the lag step s, so that the CPU's lag loop reads
// them with unit stride (ccf_sums_phased, src/backend/cpu/isa/simd_forms.hpp): template j's
// phase r (0 <= r < s) holds t[m s + r] for m = 0 .. mlen - 1 (mlen = ceil(n_tpix / s)) in
// reverse order, between `pad` zeros on each side:
//   ph[(j * s + r) * len + pad + mlen - 1 - m] = t[m s + r],   len = mlen + 2 pad.
// pad = n_out + kCcfPassLags + 16 keeps every vector load of a used pixel inside the array: a
// pass over the pixels reads kCcfPassLags consecutive lags from the first valid one's address.
constexpr int kMaxCcfStep = 64;   // the phased form's largest lag step
constexpr int kCcfPassLags = 32;  // the most lags ccf_sums_phased reads in one pass
struct CcfPhases {
  int n_tmpl = 0, step = 0, mlen = 0, pad = 0, len = 0;
};
VX_HD VX_INLINE CcfPhases ccf_phases(int n_tmpl, int step, int n_tpix, int n_out) {
  CcfPhases c;
  c.n_tmpl = n_tmpl;
  c.step = step;
  c.mlen = (n_tpix + step - 1) / step;
  c.pad = n_out + kCcfPassLags + 16;
  c.len = c.mlen + 2 * c.pad;
  return c;
}

// Fill ph[n_tmpl * step * len] from tmpl[n_ccf][n_tpix] (host).
VX_INLINE void fill_ccf_phases(const CcfPhases& c, const float* tmpl, int n_tpix, float* ph) {
  for (long long q = 0; q < (long long)c.n_tmpl * c.step * c.len; ++q) ph[q] = 0.0f;
  for (int j = 0; j < c.n_tmpl; ++j)
    for (int r = 0; r < c.step; ++r)
      for (int m = 0; m * c.step + r < n_tpix; ++m)
        ph[((long long)j * c.step + r) * c.len + c.pad + c.mlen - 1 - m] =
            tmpl[(long long)j * n_tpix + m * c.step + r];
}

// Normalised cross-correlation (Pearson, -1..1) of fn (weights wts) with template j of each
// arm's set tmpl[a] (template grid, normalised flux) at integer template-pixel lags
// lag_o = lag_lo + o * lag_step, o = 0 .. n_out-1, written to ccf[o]. A lag of L pixels is
// ln D = L * dlnlam. acc is scratch of 8 * n_out doubles (shared memory on the GPU).
// team.reduce_grid: pixels outside / lags inside on the CPU (contiguous template reads), one
// thread per lag on the GPU (no atomics).
template <class Team>
VX_HD void cross_correlate(const Team& team, const GridView& g, const FitData& d,
                           const float* const* tmpl, int j, int lag_lo, int n_out, int lag_step,
                           const int* t0, const double* frac, const double* fn, const double* wts,
                           EvalWork* w, double* acc, double* ccf) {
  team.reduce_sum(d.n_pix, 2, w->red, [&](int i, auto a) {
    a[0] += wts[i] * fn[i];
    a[1] += wts[i];
  });
  const double fmean = w->red[1] > 0 ? w->red[0] / w->red[1] : 0.0;
  team.reduce_sum(d.n_pix, 1, w->red, [&](int i, auto a) {
    const double x = fn[i] - fmean;
    a[0] += wts[i] * x * x;
  });
  const double fnorm = sqrt(w->red[0]);
  for (int a = 0; a < d.n_arms; ++a) {
    const float* t = tmpl[a] + (size_t)j * g.n_tpix;
    const int i0 = d.arm_start[a];
    // Per lag: sums of w, w*t, w*t^2 and w*(f - fmean)*t (accumulated over arms).
    double* part = a == 0 ? acc : acc + 4 * n_out;
    // Branch-free (a pixel out of the template's range adds zeros), so that the CPU's loop over
    // the lags vectorizes.
    const int n_tpix = g.n_tpix;
    if constexpr (host_simd<Team>()) {
      // The CPU's form from the de-interleaved templates (CcfPhases), where d carries them.
      if (team.ccf_sums(g, d, a, j, lag_lo, n_out, lag_step, t0, frac, fn, wts, fmean, part)) {
        if (a > 0)
          for (int q = 0; q < 4 * n_out; ++q) acc[q] += part[q];
        continue;
      }
    }
    team.reduce_grid(d.arm_start[a + 1] - i0, n_out, 4, part, [=](int ii, int o, auto s) {
      const int i = i0 + ii;
      const int k = t0[i] - (lag_lo + o * lag_step);
      const bool in = k >= 0 && k + 1 < n_tpix;
      const int kc = in ? k : 0;
      const double wv = wts[i], wi = in ? wv : 0.0;
      const double t0v = t[kc], t1v = t[kc + 1];
      const double tv = t0v + frac[i] * (t1v - t0v);
      s[0] += wi;
      s[1] += wi * tv;
      s[2] += wi * tv * tv;
      s[3] += wi * (fn[i] - fmean) * tv;
    });
    if (a > 0) {
      team.single([&] {
        for (int q = 0; q < 4 * n_out; ++q) acc[q] += part[q];
      });
      team.sync();
    }
  }
  team.for_each(n_out, [&](int o) {
    const double W = acc[4 * o], st = acc[4 * o + 1], stt = acc[4 * o + 2], sft = acc[4 * o + 3];
    const double var_t = (W > 0) ? stt - st * st / W : 0.0;
    ccf[o] = (var_t > 0 && fnorm > 0) ? sft / sqrt(var_t) / fnorm : 0.0;
  });
  team.sync();
}

// Template value at every pixel for a FIXED template j of each arm's set at velocity v (Keys
// cubic interpolation, no derivatives): the cheap model of the chi^2 grid.
template <class Team>
VX_HD void fixed_template_at_pixels(const Team& team, const GridView& g, const FitData& d,
                                    const float* const* tmpl, int j, double v_kms, double* T) {
  const double lnd = ln_doppler(v_kms);
  auto value_at = [&](const float* t, double lnlam) {
    int k;
    double f;
    grid_stencil(g, lnlam, lnd, &k, &f);
    return fixed_tap(t, k, f);
  };
  for (int a = 0; a < d.n_arms; ++a) {
    const float* t = tmpl[a] + (size_t)j * g.n_tpix;
    const bool rm = d.n_full[a] > 0;
    const int i0 = d.arm_start[a];
    const int n_eval = rm ? d.n_full[a] : d.arm_start[a + 1] - i0;
    const double* ll = rm ? d.full_lnlam[a] : d.lnlam + i0;
    double* t_out = rm ? d.Tf + d.full_off[a] : T + i0;
    team.for_each(n_eval, [&](int jf) { t_out[jf] = value_at(t, ll[jf]); });
    if (!rm) continue;
    team.sync();
    rows_to_pixels(team, d, a, t_out, T);
  }
  team.sync();
}

}  // namespace velox::kern
