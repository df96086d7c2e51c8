// The staged engine's per-(request, arm) template stage of the other evaluations
// (eval_request_prep, eval_template_arm) and its moments grid per point (vgrid_prep,
// vgrid_rows_arm, vgrid_point: kernels/rows_stage.hpp) against the per-request serve they replace
// (serve_eval_stage's template stage: evaluate_template<true> on the spectrum or a segment view,
// evaluate_template<false> without the emulator; serve_vgrid), bit for bit with the lane team:
// T, dT, the evaluation counts, the rotation kernel's width and every grid point's chi^2. On
// synthetic spectra, so that every branch is hit in a few hundred requests: 3 arms (the middle
// one with a resolution matrix), 4 segments over two arms, VSINI 0, 12 and 35 km/s (the rows
// rotated with M = 0, 2 and 6), with and without the Jacobian, new coefficients every 50
// requests (the kept rows recomputed), arms and points served in reverse order (the device runs
// them in any order), grid points outside the fit's box, grids wider than the kept rows' padding.
// The engine tests (test_engine.cpp) run the same stages on the real spectra within the fit_one
// bar. From a review's check.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "kernels/engine.hpp"
#include "kernels/team.hpp"

using namespace velox::kern;

namespace {
struct State {
  std::vector<double> T, dT, Tf, dTf, Tg, Tv;
  std::unique_ptr<PipelineShared> sh{new PipelineShared()};
};
}  // namespace

TEST_CASE(
    "the staged engine's per-arm evaluations and moments-grid points are the per-request "
    "serve's bit for bit",
    "[kernels][engine]") {
  std::mt19937_64 rng(7);
  std::normal_distribution<double> nd;
  std::uniform_real_distribution<double> ud(0.0, 1.0);
  GridView g;
  g.n_tpix = 3000;
  g.lnlam0 = std::log(4000.0);
  g.dlnlam = 2e-5;
  const int K1 = 7, L = 3;
  EmulatorView em;
  em.n_comp = K1;
  em.n_label = L;
  const int n_arms = 3;
  const int npix[3] = {300, 300, 280};
  const int nfull1 = 320, ndiag = 7;
  std::vector<double> lnlam, xleg, flnl(nfull1);
  std::vector<float> flux, ivar, rmat((size_t)ndiag * nfull1);
  std::vector<int> full_idx;
  FitData d;
  d.n_arms = n_arms;
  int off = 0;
  for (int a = 0; a < n_arms; ++a) {
    d.arm_start[a] = off;
    for (int i = 0; i < npix[a]; ++i) {
      double ll;
      if (a == 0)
        ll = g.lnlam0 + (300 + 1.3 * i) * g.dlnlam;
      else if (a == 1)
        ll = 0;  // set below
      else
        ll = g.lnlam0 + (2000 + 1.7 * i) * g.dlnlam;
      lnlam.push_back(ll);
      xleg.push_back(-1.0 + 2.0 * i / (npix[a] - 1));
      flux.push_back((float)(1.0 + 0.1 * nd(rng)));
      ivar.push_back((float)(50.0 + 10 * ud(rng)));
      full_idx.push_back(a == 1 ? 8 + i : 0);
    }
    off += npix[a];
  }
  d.arm_start[n_arms] = off;
  d.n_pix = off;
  for (int j = 0; j < nfull1; ++j) flnl[j] = g.lnlam0 + (1100 + 1.5 * j) * g.dlnlam;
  for (int i = 0; i < npix[1]; ++i) lnlam[d.arm_start[1] + i] = flnl[8 + i];
  for (auto& r : rmat) r = (float)(0.1 + ud(rng));
  std::vector<std::vector<float>> basis(n_arms, std::vector<float>((size_t)g.n_tpix * K1));
  for (auto& b : basis)
    for (auto& x : b) x = (float)nd(rng);
  d.lnlam = lnlam.data();
  d.xleg = xleg.data();
  d.flux = flux.data();
  d.ivar = ivar.data();
  d.full_idx = full_idx.data();
  int foff = 0;
  for (int a = 0; a < n_arms; ++a) {
    d.basis[a] = basis[a].data();
    d.n_full[a] = a == 1 ? nfull1 : 0;
    d.ndiag[a] = a == 1 ? ndiag : 0;
    d.full_off[a] = foff;
    d.full_lnlam[a] = a == 1 ? flnl.data() : nullptr;
    d.rmat[a] = a == 1 ? rmat.data() : nullptr;
    foff += d.n_full[a];
  }
  d.n_seg = 4;
  const int ss[5] = {0, 150, 300, 460, 600};  // segments in arms 0 and 1
  for (int k = 0; k <= 4; ++k) d.seg_start[k] = ss[k];
  d.seg_arm[0] = 0, d.seg_arm[1] = 0, d.seg_arm[2] = 1, d.seg_arm[3] = 1;
  d.tv_stride = g.n_tpix;
  PipelineConfig cfg;
  cfg.cont_deg = 4;
  cfg.lm.lo[0] = -500;
  cfg.lm.hi[0] = 27.0;  // some grid points out of the box

  auto make = [&](State& s) {
    s.T.assign(d.n_pix, -7.0);
    s.dT.assign(d.n_pix * 4, -7.0);
    s.Tf.assign(foff + 1, 0.0);
    s.dTf.assign((foff + 1) * 4, 0.0);
    s.Tg.assign((size_t)g.n_tpix * 4, 0.0);
    s.Tv.assign((size_t)g.n_tpix * n_arms, 0.0);
    for (auto& k : s.sh->kept) k.basis = nullptr;
    EvalWork& w = s.sh->w;
    w.emu = nullptr;
    w.limb_eps = 0.6;
    w.c_gen = 1;
    w.n_eval[0] = w.n_eval[1] = w.n_eval[2] = 0;
  };
  State A, B;
  make(A);
  make(B);
  std::vector<double> c(K1);
  for (auto& x : c) x = nd(rng);
  for (int k = 0; k < K1; ++k) A.sh->w.c[k] = B.sh->w.c[k] = c[k];
  auto view = [&](State& s) {
    FitData v = d;
    v.Tf = s.Tf.data();
    v.dTf = s.dTf.data();
    v.Tg = s.Tg.data();
    v.Tv = s.Tv.data();
    v.tv_keep = s.sh->kept;
    return v;
  };
  const LaneTeam team{};
  long bad = 0, n_req = 0, n_rot = 0, n_nan = 0, n_fin = 0;
  auto cmp = [&](const char* what, const double* a, const double* b, int n) {
    if (std::memcmp(a, b, n * sizeof(double))) {
      ++bad;
      int i = 0;
      while (a[i] == b[i]) ++i;
      std::fprintf(stderr, "MISMATCH %s at %d: %.17g vs %.17g\n", what, i, a[i], b[i]);
    }
  };
  const double vsinis[3] = {0.0, 35.0, 12.0};
  for (int it = 0; it < 300; ++it) {
    FitRequest rq;
    rq.kind = kReqEval;
    rq.theta[0] = -40.0 + 80.0 * ud(rng);
    for (int l = 0; l < L; ++l) rq.theta[1 + l] = nd(rng);
    rq.theta[vsini_index(L)] = vsinis[(it / 20) % 3];
    rq.jac = it % 3 != 0;
    const int kind = it % 7;
    // kinds 0, 1: velocity-only; 2: continuum-only; 3-6: segments 0, 1, 2, 3
    rq.seg = kind >= 3 ? kind - 3 : -1;
    rq.vel_only = rq.seg < 0 && kind != 2;
    rq.no_emu = kind == 2;
    if (it % 50 == 49) {  // new coefficients
      for (int k = 0; k < K1; ++k) A.sh->w.c[k] = B.sh->w.c[k] = nd(rng);
      ++A.sh->w.c_gen, ++B.sh->w.c_gen;
    }
    // Reference: serve_eval_stage's stage 0.
    {
      FitData dv = view(A);
      FitData sd;
      const bool seg = rq.seg >= 0;
      if (seg) sd = segment_view(dv, rq.seg);
      const int o = seg ? dv.seg_start[rq.seg] : 0;
      if (seg || rq.vel_only)
        evaluate_template<true>(team, &em, g, seg ? sd : dv, rq.theta, rq.jac, &A.sh->w,
                                A.T.data() + o, A.dT.data() + o);
      else
        evaluate_template<false>(team, (const EmulatorView*)nullptr, g, dv, rq.theta, rq.jac,
                                 &A.sh->w, A.T.data() + o, A.dT.data() + o);
    }
    // New: prep + per arm, arms in reverse order (any order must do).
    {
      FitData dv = view(B);
      eval_request_prep(rq, L, g, &B.sh->w);
      const int arms = rq.seg >= 0 ? 1 : n_arms;
      for (int k = arms - 1; k >= 0; --k)
        eval_template_arm(team, em, g, dv, rq, k, &B.sh->w, eval_arm_tg(dv.Tg, g, k), B.T.data(),
                          B.dT.data());
    }
    const int i0 = rq.seg >= 0 ? d.seg_start[rq.seg] : 0;
    const int i1 = rq.seg >= 0 ? d.seg_start[rq.seg + 1] : d.n_pix;
    char buf[96];
    std::snprintf(buf, sizeof buf, "T it %d kind %d seg %d jac %d", it, kind, rq.seg, rq.jac);
    cmp(buf, A.T.data() + i0, B.T.data() + i0, i1 - i0);
    if (rq.jac) {
      std::snprintf(buf, sizeof buf, "dT it %d kind %d", it, kind);
      cmp(buf, A.dT.data() + i0, B.dT.data() + i0, i1 - i0);
    }
    if (std::memcmp(A.sh->w.n_eval, B.sh->w.n_eval, sizeof A.sh->w.n_eval)) {
      ++bad;
      std::fprintf(stderr, "n_eval differ at %d\n", it);
    }
    if (A.sh->w.rot_half != B.sh->w.rot_half) {
      ++bad;
      std::fprintf(stderr, "rot_half differ %d\n", it);
    }
    ++n_req;
    n_rot += A.sh->w.rot_half > 0;
    // Every 10th: a moments grid.
    if (it % 10 == 5) {
      FitRequest vq;
      vq.kind = kReqVGrid;
      for (int q = 0; q < kMaxParams; ++q) vq.theta[q] = rq.theta[q];
      // Steps of a few km/s (the moments grid's: inside the kept rows' padding) and of 80-120
      // km/s (in-box points up to 500 km/s apart, 83 grid rows, past the 64 rows of padding: the
      // joint span, and the per-request serve recomputing rows point by point).
      vq.v = it % 20 == 5 ? 1.7 + ud(rng) : 80.0 + 40.0 * ud(rng);
      vq.k0 = -6 + (it % 3);
      vq.n_k = 13 - (it % 3);
      std::vector<double> Ts(d.n_pix), dTs(d.n_pix);
      PipelineScratch sc{};
      sc.T = A.T.data();
      sc.dT = A.dT.data();
      FitData dv = view(A);
      serve_vgrid(team, &vq, em, g, dv, cfg, sc, A.sh.get());
      FitData dB = view(B);
      vgrid_prep(vq, L, g, cfg, &B.sh->w);
      for (int a = n_arms - 1; a >= 0; --a)
        vgrid_rows_arm(team, em, g, dB, cfg, vq, a, &B.sh->w, eval_arm_tg(dB.Tg, g, a));
      for (int i = vq.n_k - 1; i >= 0; --i) {
        std::vector<double> item(d.n_pix + foff + 1, -3.0);
        EvalWork iw{};
        FitData di = dB;
        di.Tf = item.data() + d.n_pix;
        vgrid_point(team, g, di, cfg, vq, i, item.data(), &iw, &B.sh->vgrid_chi2[i]);
      }
      for (int i = 0; i < vq.n_k; ++i)
        if (std::memcmp(&A.sh->vgrid_chi2[i], &B.sh->vgrid_chi2[i], sizeof(double))) {
          ++bad;
          std::fprintf(stderr, "vgrid it %d point %d: %.17g vs %.17g\n", it, i, A.sh->vgrid_chi2[i],
                       B.sh->vgrid_chi2[i]);
        }
      if (std::memcmp(A.sh->w.n_eval, B.sh->w.n_eval, sizeof A.sh->w.n_eval)) {
        ++bad;
        std::fprintf(stderr, "vgrid n_eval differ at %d: %d %d\n", it, A.sh->w.n_eval[2],
                     B.sh->w.n_eval[2]);
      }
      for (int i = 0; i < vq.n_k; ++i) {
        n_nan += std::isnan(A.sh->vgrid_chi2[i]);
        n_fin += std::isfinite(A.sh->vgrid_chi2[i]);
      }
    }
  }
  INFO(n_req << " requests, " << n_rot << " rotated, moments-grid points: " << n_fin
             << " evaluated, " << n_nan << " outside the box");
  CHECK(bad == 0);
  CHECK(n_req == 300);
  CHECK(n_rot > 50);  // the rotated rows (M > 0) were served
  CHECK(n_nan > 0);   // and grid points outside the box
  CHECK(n_fin > 100);
}
