// One evaluation of the forward model and its chi^2 for ONE spectrum, with the per-arm
// multiplicative Legendre continuum profiled out (variable projection, Golub & Pereyra 2003):
//   model_i = P_a(x_i) * T(u_i(v); labels),   P_a = sum_j a_aj Leg_j(x_i)  for pixel i in arm a,
//   u_i(v) = (ln lambda_obs,i - ln D(v) - lnlam0) / dlnlam   (template grid coordinate).
// For fixed (v, labels) the continuum a is the weighted least-squares solution. The gradient of
// the profiled chi^2 is J^T W r (A^T W r = 0 at the optimum a) and its Gauss-Newton Hessian is the
// Schur complement H = J^T W J - C^T G^-1 C, with A_ij = Leg_j T_i, G = A^T W A, C = A^T W J.
// Its inverse is the covariance of (v, labels[, vsini]) marginalised over the continuum.
// Parameters theta = [VRAD km/s, label_0 .. label_{L-1}, VSINI km/s] (src/fit/params.hpp is the
// table): VSINI sits at index 1 + L and is fitted (a Jacobian column) only when w->fit_vsini;
// otherwise it is held at theta[1 + L]. Rotation: T(u) is replaced by its convolution with the
// Gray rotation kernel on the template grid (convolve.hpp rotation_weights). Both the rotation
// and the arm's Gaussian LSF (folded into the basis) are convolutions in ln lambda, so applying
// the rotation to the LSF-convolved basis equals applying it before the LSF; with a resolution
// matrix it is applied on the template grid before the matrix. Pixels are the good ones only.
#pragma once
#include <cmath>

#include "kernels/convolve.hpp"
#include "kernels/emulator_eval.hpp"
#include "kernels/hd.hpp"
#include "kernels/linalg.hpp"
#include "kernels/physics.hpp"
#include "kernels/team.hpp"

namespace velox::kern {

constexpr int kMaxArms = 4;
constexpr int kMaxSeg = kMaxArms;  // velocity segments (per-arm VRAD): one per arm, or B/R halves
constexpr int kMaxCont = 16;       // continuum coefficients per arm (degree <= 15)
constexpr int kMaxParams = 2 + kMaxLabels;  // VRAD, labels, VSINI
constexpr int kMaxRotHalf = 40;            // rotation kernel half-width, template pixels
constexpr int kMaxRotTaps = 2 * kMaxRotHalf + 1;

// Index of VSINI in theta for L labels, and the number of fitted parameters.
VX_HD VX_INLINE int vsini_index(int n_label) { return 1 + n_label; }
VX_HD VX_INLINE int n_fit_params(int n_label, int fit_vsini) { return 1 + n_label + (fit_vsini ? 1 : 0); }

// The template grid: uniform in ln(lambda_vac / A).
struct GridView {
  int n_tpix = 0;
  double lnlam0 = 0.0;
  double dlnlam = 0.0;
};

// One spectrum's usable pixels, arms contiguous: arm a owns [arm_start[a], arm_start[a+1]).
struct FitData {
  int n_pix = 0;
  int n_arms = 0;
  int arm_start[kMaxArms + 1] = {};
  const double* lnlam = nullptr;  // [n_pix] ln(vacuum observed wavelength / A)
  const double* xleg = nullptr;   // [n_pix] Legendre coordinate in [-1, 1] within the arm
  // The continuum's Legendre argument is xleg * xleg_scale + xleg_off (1 and 0 except in a
  // segment_view, which maps the segment's own range onto [-1, 1] to keep G well conditioned).
  double xleg_scale = 1.0, xleg_off = 0.0;
  const float* flux = nullptr;        // [n_pix]
  const float* ivar = nullptr;        // [n_pix], all > 0
  const float* basis[kMaxArms] = {};  // per arm: basis at the arm's resolution, [n_tpix][K+1]
  // Optional resolution-matrix forward model per arm (DESI): the model is evaluated on the arm's
  // full pixel grid (full_lnlam[a][n_full[a]]) and the used pixel i gets
  //   model_i = sum_k rmat[a][j * ndiag + k] * model_full[j + k - ndiag/2],  j = full_idx[i].
  // rmat rows are the instrument's resolution-matrix rows with the template LSF folded in
  // (src/fit/resolution.cpp). n_full[a] == 0: the arm has no matrix (Gaussian LSF in the basis).
  int n_full[kMaxArms] = {};
  int ndiag[kMaxArms] = {};
  int full_off[kMaxArms] = {};  // offset of the arm in the full-grid scratch
  const double* full_lnlam[kMaxArms] = {};
  const float* rmat[kMaxArms] = {};
  const int* full_idx = nullptr;  // [n_pix] index of each used pixel in its arm's grid
  double* Tf = nullptr;           // scratch [sum n_full] template on the full grids
  double* dTf = nullptr;          // scratch [sum n_full][np]
  // Scratch [n_tpix][np] for the rotated model: the template (and its label derivatives) on the
  // grid rows an arm spans, computed once per evaluation. nullptr: per-pixel sums instead.
  double* Tg = nullptr;
  // Velocity segments (per-arm VRAD with the labels fixed): segment s owns the used pixels
  // [seg_start[s], seg_start[s+1]), all inside arm seg_arm[s]. n_seg == 0: none.
  int n_seg = 0;
  int seg_start[kMaxSeg + 1] = {};
  int seg_arm[kMaxSeg] = {};
  // 1: the instrument resolves rotation here, VSINI is fitted (with PipelineConfig::fit_vsini).
  int fit_vsini = 0;
};

// The pixels of segment s as a one-arm FitData (pointers into d; the continuum is profiled over
// the segment alone). Scratch arrays indexed by pixel must be offset by seg_start[s] too.
VX_HD VX_INLINE FitData segment_view(const FitData& d, int s) {
  const int a = d.seg_arm[s], i0 = d.seg_start[s];
  FitData v;
  v.n_pix = d.seg_start[s + 1] - i0;
  v.n_arms = 1;
  v.arm_start[0] = 0;
  v.arm_start[1] = v.n_pix;
  v.lnlam = d.lnlam + i0;
  v.xleg = d.xleg + i0;
  // Pixels are in wavelength order within an arm: map [xleg[i0], xleg[i1-1]] onto [-1, 1].
  const double x0 = d.xleg[i0], x1 = d.xleg[i0 + v.n_pix - 1];
  v.xleg_scale = x1 > x0 ? 2.0 / (x1 - x0) : 1.0;
  v.xleg_off = x1 > x0 ? -(x1 + x0) / (x1 - x0) : 0.0;
  v.flux = d.flux + i0;
  v.ivar = d.ivar + i0;
  v.basis[0] = d.basis[a];
  v.n_full[0] = d.n_full[a];
  v.ndiag[0] = d.ndiag[a];
  v.full_off[0] = d.full_off[a];
  v.full_lnlam[0] = d.full_lnlam[a];
  v.rmat[0] = d.rmat[a];
  v.full_idx = d.full_idx ? d.full_idx + i0 : nullptr;
  v.Tf = d.Tf;
  v.dTf = d.dTf;
  v.Tg = d.Tg;
  v.fit_vsini = d.fit_vsini;
  return v;
}

// Apply an arm's resolution matrix rows to full-grid values v[n_full][stride] (component c) for
// used pixel i.
VX_HD VX_INLINE double apply_rmat(const FitData& d, int a, int i, const double* v, int stride,
                                  int c) {
  const int nd = d.ndiag[a], half = nd / 2, j = d.full_idx[i], n = d.n_full[a];
  const float* row = d.rmat[a] + (size_t)j * nd;
  double s = 0.0;
  for (int k = 0; k < nd; ++k) {
    const int jj = j + k - half;
    if (jj >= 0 && jj < n) s += row[k] * v[(size_t)jj * stride + c];
  }
  return s;
}

// Per-spectrum shared workspace (one per spectrum; lives in shared memory on the GPU).
struct EvalWork {
  double c[kMaxComp];
  double dc[kMaxLabels * kMaxComp];
  double gchol[kMaxArms][kMaxCont * kMaxCont];  // Cholesky factor of G per arm
  double cont[kMaxArms][kMaxCont];              // profiled continuum coefficients per arm
  double red[kMaxCont * kMaxCont + kMaxCont];   // reduction buffer
  double* emu;  // emulator scratch (emulator_scratch_size doubles); nullptr: serial coefficients
  // The model's rotation: fit_vsini = 1 adds the VSINI Jacobian column; limb_eps is the linear
  // limb-darkening coefficient of the Gray profile. rot/drot: the kernel at the last evaluation's
  // VSINI (rot_half = M taps each side, 0 = identity) and its derivative per km/s.
  int fit_vsini = 0;
  double limb_eps = 0.6;
  int rot_half = 0;
  double rot[kMaxRotTaps];
  double drot[kMaxRotTaps];
  double chi2;
  double chi2_arm[kMaxArms];  // chi^2 per arm
  double grad[kMaxParams];
  double hess[kMaxParams * kMaxParams];
  int ok;
  int n_eval[3];  // evaluate() calls of the stellar model: [0] chi^2 only, [1] with the Jacobian,
                  // [2] velocity-only (VOnly) with its Jacobian column; counted for `velox bench`
};

// Cubic-interpolation stencil of an observed pixel on the template grid at ln D = lnd: the taps
// are t0-1 .. t0+2 with fraction f. Pixels are pre-masked to the template coverage; the clamp only
// guards memory.
VX_HD VX_INLINE void grid_stencil(const GridView& g, double lnlam, double lnd, int* t0, double* f) {
  const double u = (lnlam - lnd - g.lnlam0) / g.dlnlam;
  int k = (int)floor(u);
  double fr = u - k;
  if (k < 1) {
    k = 1;
    fr = 0.0;
  }
  if (k > g.n_tpix - 3) {
    k = g.n_tpix - 3;
    fr = 1.0;
  }
  *t0 = k;
  *f = fr;
}

// Index of (j, k), j <= k < n, in a packed upper triangle (row by row): the continuum normal
// matrices are reduced packed, nc (nc + 1) / 2 slots instead of nc^2.
VX_HD VX_INLINE int tri_index(int j, int k, int n) { return j * n - j * (j - 1) / 2 + (k - j); }

// Columns of slot t of "normal equations" reduced with team.reduce_gram over rows [x_0..x_{n-1},
// y]: t < n(n+1)/2 is x_j x_k (j <= k, packed as tri_index), then n slots x_j y.
VX_HD VX_INLINE void normal_pair(int t, int n, int* a, int* b) {
  const int ntri = n * (n + 1) / 2;
  if (t >= ntri) {
    *a = t - ntri;
    *b = n;
    return;
  }
  int j = 0;
  while (t >= n - j) {
    t -= n - j;
    ++j;
  }
  *a = j;
  *b = j + t;
}

// The emulator's PCA coefficients and their label derivatives at `labels` into w->c, w->dc.
template <class Team>
VX_HD void emulator_coeffs_into(const Team& team, const EmulatorView& em, const double* labels,
                                EvalWork* w) {
  if (w->emu) {
    emulator_coeffs_team(team, em, labels, w->emu, w->c, w->dc);
  } else {
    team.single([&] { emulator_coeffs(em, labels, w->c, w->dc); });
    team.sync();
  }
}

// Template value and derivatives at every pixel: T[n_pix], dT[n_pix][np] with
// np = n_fit_params(L, w->fit_vsini): dT[.][0] = dT/dv, dT[.][1+l] = dT/dlabel_l and, when VSINI
// is fitted, dT[.][1+L] = dT/dvsini. With em == nullptr, T = 1 (continuum-only model).
// VOnly: the velocity column alone (np = 1), for fits of v with the labels fixed: the emulator
// coefficients are not recomputed, w->c must hold those of theta's labels (emulator_coeffs_into).
template <bool VOnly = false, class Team>
VX_HD void template_at_pixels(const Team& team, const EmulatorView* em, const GridView& g,
                              const FitData& d, const double* theta, bool need_jac, EvalWork* w,
                              double* T, double* dT) {
  const int np = em && !VOnly ? n_fit_params(em->n_label, w->fit_vsini) : 1;
  if (!em) {
    team.for_each(d.n_pix, [&](int i) {
      T[i] = 1.0;
      if (need_jac) dT[i * np] = 0.0;
    });
    team.sync();
    return;
  }
  if (!VOnly) emulator_coeffs_into(team, *em, theta + 1, w);
  const int K1 = em->n_comp, L = em->n_label;
  const bool jac_vsini = !VOnly && w->fit_vsini;
  team.single([&] {
    w->rot_half = rotation_weights(theta[vsini_index(L)], w->limb_eps, g.dlnlam, kMaxRotHalf,
                                   w->rot, w->drot);
  });
  team.sync();
  const int M = w->rot_half;
  const double lnd = ln_doppler(theta[0]);
  const double du_dv = -dln_doppler_dv(theta[0]) / g.dlnlam;
  // Template (and derivatives) at one ln(lambda): t and dt[np].
  auto model_at = [&](const float* B, double lnlam, double* t_out, double* dt_out) {
    int t0;
    double f;
    grid_stencil(g, lnlam, lnd, &t0, &f);
    double wt[4], dwt[4];
    cubic_weights(f, wt, dwt);
    const float* b0 = B + (size_t)(t0 - 1) * K1;
    // One pass over the components: no per-thread arrays (registers only on the GPU).
    double t = 0.0, dtu = 0.0, dl[kMaxLabels] = {0.0, 0.0, 0.0, 0.0};
    for (int k = 0; k < K1; ++k) {
      const double bk =
          wt[0] * b0[k] + wt[1] * b0[K1 + k] + wt[2] * b0[2 * K1 + k] + wt[3] * b0[3 * K1 + k];
      t += w->c[k] * bk;
      if (need_jac) {
        const double dbk = dwt[0] * b0[k] + dwt[1] * b0[K1 + k] + dwt[2] * b0[2 * K1 + k] +
                           dwt[3] * b0[3 * K1 + k];
        dtu += w->c[k] * dbk;
        if (!VOnly)
          for (int l = 0; l < L; ++l) dl[l] += w->dc[l * K1 + k] * bk;
      }
    }
    *t_out = t;
    if (need_jac) {
      dt_out[0] = dtu * du_dv;
      if (!VOnly)
        for (int l = 0; l < L; ++l) dt_out[1 + l] = dl[l];
      if (jac_vsini) dt_out[1 + L] = 0.0;  // the identity kernel does not change with vsini
    }
  };
  // The same with the rotation kernel: the cubic stencil convolved with the M-tap kernel spans
  // the 2M + 4 grid rows t0 - 1 - M .. t0 + 2 + M (clamped at the grid's ends). fetch(row, &bc,
  // bdc) gives a row's template B_r.c and label derivatives B_r.dc_l, which are weighted by the
  // combined weights sum_tap wt[tap] rot[r - tap] (value), dwt (velocity) and drot (vsini).
  auto model_at_rot = [&](double lnlam, double* t_out, double* dt_out, auto fetch) {
    int t0;
    double f;
    grid_stencil(g, lnlam, lnd, &t0, &f);
    double wt[4], dwt[4];
    cubic_weights(f, wt, dwt);
    double t = 0.0, dtu = 0.0, dvs = 0.0, dl[kMaxLabels] = {0.0, 0.0, 0.0, 0.0};
    const int R = 2 * M + 4;
    for (int r = 0; r < R; ++r) {
      double cw = 0.0, cdw = 0.0, cvw = 0.0;
      for (int tap = 0; tap < 4; ++tap) {
        const int m = r - tap;  // kernel index (0 .. 2M)
        if (m < 0 || m > 2 * M) continue;
        cw += wt[tap] * w->rot[m];
        cdw += dwt[tap] * w->rot[m];
        cvw += wt[tap] * w->drot[m];
      }
      int row = t0 - 1 - M + r;
      row = row < 0 ? 0 : (row > g.n_tpix - 1 ? g.n_tpix - 1 : row);
      double bc, bdc[kMaxLabels];
      fetch(row, &bc, bdc);
      t += cw * bc;
      if (need_jac) {
        dtu += cdw * bc;
        dvs += cvw * bc;
        if (!VOnly)
          for (int l = 0; l < L; ++l) dl[l] += cw * bdc[l];
      }
    }
    *t_out = t;
    if (need_jac) {
      dt_out[0] = dtu * du_dv;
      if (!VOnly)
        for (int l = 0; l < L; ++l) dt_out[1 + l] = dl[l];
      if (jac_vsini) dt_out[1 + L] = dvs;
    }
  };
  const bool label_jac = need_jac && !VOnly;
  // A row's products from the basis directly (per pixel) ...
  // Four partial sums per product (components k = 4j + p go to sum p, added pairwise at the
  // end): independent FMA chains instead of one chain as long as K1, in a fixed order that every
  // team and backend reproduces.
  auto row_products = [&](const float* B, int row, double* bc, double* bdc) {
    const float* br = B + (size_t)row * K1;
    double c0[4] = {0.0, 0.0, 0.0, 0.0};
    const int K4 = K1 & ~3;
    for (int k = 0; k < K4; k += 4)
      for (int p = 0; p < 4; ++p) c0[p] += w->c[k + p] * br[k + p];
    for (int k = K4; k < K1; ++k) c0[k - K4] += w->c[k] * br[k];
    *bc = (c0[0] + c0[1]) + (c0[2] + c0[3]);
    if (!label_jac) return;
    for (int l = 0; l < L; ++l) {
      const double* dc = w->dc + l * K1;
      double s4[4] = {0.0, 0.0, 0.0, 0.0};
      for (int k = 0; k < K4; k += 4)
        for (int p = 0; p < 4; ++p) s4[p] += dc[k + p] * br[k + p];
      for (int k = K4; k < K1; ++k) s4[k - K4] += dc[k] * br[k];
      bdc[l] = (s4[0] + s4[1]) + (s4[2] + s4[3]);
    }
  };
  for (int a = 0; a < d.n_arms; ++a) {
    // Without a matrix the model is evaluated at the used pixels directly; with one, on the
    // arm's full grid first (one instantiation of the heavy loop either way).
    const bool rm = d.n_full[a] > 0;
    const int i0 = d.arm_start[a];
    const int n_eval = rm ? d.n_full[a] : d.arm_start[a + 1] - i0;
    const double* ll = rm ? d.full_lnlam[a] : d.lnlam + i0;
    double* t_out = rm ? d.Tf + d.full_off[a] : T + i0;
    double* dt_out = rm ? d.dTf + (size_t)d.full_off[a] * np : dT + (size_t)i0 * np;
    const float* B = d.basis[a];
    if (M == 0) {
      team.for_each(n_eval, [&](int j) { model_at(B, ll[j], &t_out[j], &dt_out[j * np]); });
    } else if (d.Tg) {
      // ... or once per grid row the arm spans, into d.Tg (each row serves the 2M + 4 stencils
      // that touch it: fewer products when pixels are closer than 2M + 4 rows).
      int ta, tb;
      double fa;
      grid_stencil(g, ll[0], lnd, &ta, &fa);
      grid_stencil(g, ll[n_eval - 1], lnd, &tb, &fa);
      const int lo_t = ta < tb ? ta : tb, hi_t = ta < tb ? tb : ta;
      const int r0 = lo_t - 1 - M > 0 ? lo_t - 1 - M : 0;
      const int r1 = hi_t + 2 + M < g.n_tpix - 1 ? hi_t + 2 + M : g.n_tpix - 1;
      double* Tg = d.Tg;
      team.for_each(r1 - r0 + 1, [&](int rr) {
        const int row = r0 + rr;
        double bdc[kMaxLabels];
        row_products(B, row, &Tg[(size_t)row * np], bdc);
        if (label_jac)
          for (int l = 0; l < L; ++l) Tg[(size_t)row * np + 1 + l] = bdc[l];
      });
      team.sync();
      team.for_each(n_eval, [&](int j) {
        model_at_rot(ll[j], &t_out[j], &dt_out[j * np], [&](int row, double* bc, double* bdc) {
          *bc = Tg[(size_t)row * np];
          if (label_jac)
            for (int l = 0; l < L; ++l) bdc[l] = Tg[(size_t)row * np + 1 + l];
        });
      });
      team.sync();  // Tg is reused by the next arm
    } else {
      team.for_each(n_eval, [&](int j) {
        model_at_rot(ll[j], &t_out[j], &dt_out[j * np],
                     [&](int row, double* bc, double* bdc) { row_products(B, row, bc, bdc); });
      });
    }
    if (!rm) continue;
    team.sync();
    team.for_each(d.arm_start[a + 1] - i0, [&](int ii) {
      const int i = i0 + ii;
      T[i] = apply_rmat(d, a, i, t_out, 1, 0);
      if (need_jac)
        for (int q = 0; q < np; ++q) dT[i * np + q] = apply_rmat(d, a, i, dt_out, np, q);
    });
  }
  team.sync();
}

// Profile the continuum and build chi^2 (and, with need_jac, the profiled gradient and Hessian)
// from T/dT. Sets w->ok = 0 if a continuum normal matrix is singular.
template <class Team>
VX_HD void profile_continuum(const Team& team, const FitData& d, int cont_deg, int np,
                             bool need_jac, const double* T, const double* dT, EvalWork* w) {
  const int nc = cont_deg + 1;
  team.single([&] {
    w->chi2 = 0.0;
    w->ok = 1;
    for (int p = 0; p < np; ++p) w->grad[p] = 0.0;
    for (int p = 0; p < np * np; ++p) w->hess[p] = 0.0;
  });
  team.sync();
  for (int a = 0; a < d.n_arms; ++a) {
    const int i0 = d.arm_start[a], n = d.arm_start[a + 1] - i0;
    // Pass 1: G = A^T W A (packed upper triangle), q = A^T W f, from the weighted design rows
    // sqrt(ivar) [T P_0 .. T P_deg | f].
    const int ntri = nc * (nc + 1) / 2;
    team.reduce_gram(
        n, nc + 1, ntri + nc, w->red,
        [&](int ii, double* z) {
          const int i = i0 + ii;
          double p[kMaxCont];
          legendre(d.xleg[i] * d.xleg_scale + d.xleg_off, cont_deg, p);
          const double s = sqrt((double)d.ivar[i]), st = s * T[i];
          for (int j = 0; j < nc; ++j) z[j] = st * p[j];
          z[nc] = s * d.flux[i];
        },
        [&](int t, int* ca, int* cb) { normal_pair(t, nc, ca, cb); });
    team.single([&] {
      double* gm = w->gchol[a];
      for (int j = 0; j < nc; ++j)
        for (int k = j; k < nc; ++k) gm[j * nc + k] = gm[k * nc + j] = w->red[tri_index(j, k, nc)];
      if (!cholesky(gm, nc)) {
        w->ok = 0;
        return;
      }
      for (int j = 0; j < nc; ++j) w->cont[a][j] = w->red[ntri + j];
      cholesky_solve(gm, nc, w->cont[a]);
    });
    team.sync();
    if (!w->ok) return;
    // Pass 2: chi^2, J^T W J (packed upper triangle), J^T W r and C = A^T W J with J = P * dT,
    // from the weighted rows sqrt(ivar) [T P_0 .. T P_deg | J_0 .. J_{np-1} | r].
    // Layout of w->red: [1] chi^2, [ptri] J^T W J, [np] J^T W r, [nc*np] C (C_jq at j*np + q).
    const int ptri = np * (np + 1) / 2;
    const int m = 1 + (need_jac ? ptri + np + nc * np : 0);
    const int cr = nc + np;  // column of r
    team.reduce_gram(
        n, nc + np + 1, m, w->red,
        [&](int ii, double* z) {
          const int i = i0 + ii;
          double p[kMaxCont];
          legendre(d.xleg[i] * d.xleg_scale + d.xleg_off, cont_deg, p);
          double cont = 0.0;
          for (int j = 0; j < nc; ++j) cont += w->cont[a][j] * p[j];
          const double s = sqrt((double)d.ivar[i]);
          z[cr] = s * (d.flux[i] - cont * T[i]);
          if (!need_jac) return;
          const double st = s * T[i], sc = s * cont;
          for (int j = 0; j < nc; ++j) z[j] = st * p[j];
          for (int q = 0; q < np; ++q) z[nc + q] = sc * dT[i * np + q];
        },
        [&](int t, int* ca, int* cb) {
          if (t == 0) {
            *ca = *cb = cr;
          } else if (t <= ptri + np) {
            normal_pair(t - 1, np, ca, cb);  // J_q J_s, then J_q r (column np -> cr)
            *ca += nc;
            *cb += nc;
          } else {
            const int u = t - 1 - ptri - np;
            *ca = u / np;
            *cb = nc + u % np;
          }
        });
    team.single([&] {
      w->chi2 += w->red[0];
      w->chi2_arm[a] = w->red[0];
      if (!need_jac) return;
      const double* jtj = w->red + 1;
      const double* jtr = jtj + ptri;
      const double* cm = jtr + np;
      for (int q = 0; q < np; ++q) {
        w->grad[q] += jtr[q];
        for (int s = q; s < np; ++s) {
          const double v = jtj[tri_index(q, s, np)];
          w->hess[q * np + s] += v;
          if (s != q) w->hess[s * np + q] += v;
        }
      }
      // Schur complement: H -= C^T G^-1 C, column by column.
      double col[kMaxCont];
      for (int s = 0; s < np; ++s) {
        for (int j = 0; j < nc; ++j) col[j] = cm[j * np + s];
        cholesky_solve(w->gchol[a], nc, col);
        for (int q = 0; q < np; ++q) {
          double v = 0.0;
          for (int j = 0; j < nc; ++j) v += cm[j * np + q] * col[j];
          w->hess[q * np + s] -= v;
        }
      }
    });
    team.sync();
  }
}

// Model flux (continuum x template) at every pixel after an evaluation: model[n_pix].
template <class Team>
VX_HD void model_at_pixels(const Team& team, const FitData& d, int cont_deg, const double* T,
                           const EvalWork* w, double* model) {
  for (int a = 0; a < d.n_arms; ++a) {
    const int i0 = d.arm_start[a];
    team.for_each(d.arm_start[a + 1] - i0, [&](int ii) {
      const int i = i0 + ii;
      double p[kMaxCont];
      legendre(d.xleg[i] * d.xleg_scale + d.xleg_off, cont_deg, p);
      double cont = 0.0;
      for (int j = 0; j <= cont_deg; ++j) cont += w->cont[a][j] * p[j];
      model[i] = cont * T[i];
    });
  }
  team.sync();
}

}  // namespace velox::kern
