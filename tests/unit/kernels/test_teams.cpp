// The GPU's decomposition of a spectrum's fit over the 32 lanes of a warp, tested on the CPU:
// kern::LaneTeam emulates WarpTeam (pixel-to-lane assignment, per-lane partial sums, the xor
// butterfly of the shuffle reduction, the staging tile of reduce_gram) and must give the serial
// team's answers: bitwise where the summation order is the same by design (reduce_gram,
// reduce_grid), to round-off where it is not (reduce_sum), and the same fits on real spectra.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <utility>
#include <vector>

#include "backend/cpu/isa/simd_forms.hpp"
#include "emulator/build.hpp"
#include "fit/fitter.hpp"
#include "io/readers.hpp"
#include "kernels/fit_pipeline.hpp"
#include "kernels/team.hpp"
#include "test_util.hpp"
#include "thin_library.hpp"
#include "unit/kernels/real_spectra.hpp"

using namespace velox;

namespace {

// The CPU backend's team: SerialTeam with the SIMD forms (FP32 template sums, convolved rows,
// phased CCF).
using CpuTeam = kern::cpu::SimdTeam<>;

std::vector<double> random_values(int n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> g(0.0, 1.0);
  std::vector<double> v(n);
  for (auto& x : v) x = g(rng);
  return v;
}

// kern::fit_one with any team on one prepared spectrum (the scratch a backend would give it).
// kept_rows: with the single-lane teams' kept rows (FitData::Tv, as the GPU's batch_views gives
// them); *kept_used then says whether the fit's velocity-only evaluations took them.
template <class Team>
kern::PipelineResult fit_with(const Team& team, const PreparedSpectrum& p, const FitContext& ctx,
                              std::vector<float>* ivar, bool kept_rows = false,
                              bool* kept_used = nullptr) {
  const auto& lib = ctx.lib;
  const Packed& all = p.packed;
  const auto em = lib.view();
  const auto grid = lib.grid();
  const int np = kern::n_fit_params(lib.n_label, 1), n = static_cast<int>(all.flux.size());
  const kern::PipelineConfig pc = pipeline_config(ctx.cfg, lib);
  const int n_out = std::max(kern::ccf_lags(pc, grid), 7);
  std::vector<double> T(n), dT(static_cast<size_t>(n) * np), fn(n), wts(n), frac(n), ccf(n_out),
      acc(8 * static_cast<size_t>(n_out)),
      emu(static_cast<size_t>(kern::emulator_scratch_size(em)));
  std::vector<int> t0(n);
  ivar->assign(all.ivar.begin(), all.ivar.end());
  std::vector<double> Tf(all.n_full_total()), dTf(all.n_full_total() * np);
  const kern::PipelineScratch sc{T.data(),  dT.data(),    fn.data(),  wts.data(), frac.data(),
                                 t0.data(), ivar->data(), ccf.data(), acc.data(), emu.data()};
  // The matrix rows' scratch: fit_one builds the rows there with this team (kernels/fold.hpp).
  std::vector<float> rm(all.n_rm_total());
  kern::FitData d = all.view(Tf.data(), dTf.data(), rm.data());
  std::vector<double> Tg(static_cast<size_t>(lib.n_tpix) * np);  // the rotated model's scratch
  d.Tg = Tg.data();
  d.ivar = ivar->data();
  const float* tmpl[kern::kMaxArms] = {};
  for (int a = 0; a < all.n_arms; ++a) tmpl[a] = all.models[a]->ccf_templates.data();
  auto shared = std::make_unique<kern::PipelineShared>();
  std::vector<double> Tv;
  if (kept_rows) {
    Tv.resize(static_cast<size_t>(all.n_arms) * lib.n_tpix);
    d.Tv = Tv.data();
    d.tv_stride = lib.n_tpix;
    d.tv_keep = shared->kept;
  }
  kern::PipelineResult res;
  kern::fit_one(team, em, grid, d, tmpl, all.models[0]->n_ccf, lib.ccf_labels.data(), pc, sc,
                shared.get(), &res);
  if (kept_used) *kept_used = shared->kept[0].basis != nullptr;
  return res;
}

// A prepared spectrum's evaluation state, kept across calls as in one fit: FitData on its own
// scratch, one EvalWork (VSINI from theta, not fitted), and with cpu_rows the CPU backend's
// rotated-model inputs as kern::batch_views and cpu_fit_extras give them (convolved rows Tr,
// transposed basis, tr_cols).
struct EvalRig {
  std::vector<double> Tf, dTf, emu, Tg, Tr, T, dT;
  std::vector<float> ivar, rm;
  kern::CpuFitExtras extras;
  std::unique_ptr<kern::EvalWork> w = std::make_unique<kern::EvalWork>();
  kern::FitData d;
  kern::EmulatorView em;
  std::vector<double> Tv;
  kern::KeptRows keep[kern::kMaxArms] = {};
  // cpu_rows: the CPU backend's convolved rows; kept_rows: the single-lane teams' (FitData::Tv).
  EvalRig(const PreparedSpectrum& p, const TemplateLibrary& lib, bool cpu_rows,
          bool kept_rows = false) {
    const Packed& all = p.packed;
    em = lib.view();
    const int np = kern::n_fit_params(lib.n_label, 0);
    Tf.resize(all.n_full_total());
    dTf.resize(all.n_full_total() * np);
    emu.resize(static_cast<size_t>(kern::emulator_scratch_size(em)));
    ivar.assign(all.ivar.begin(), all.ivar.end());
    d = folded_view(all, &rm, Tf.data(), dTf.data());
    d.ivar = ivar.data();
    Tg.resize(static_cast<size_t>(lib.n_tpix) * np);  // the rotated model's rows
    d.Tg = Tg.data();
    if (cpu_rows) {
      Tr.resize(static_cast<size_t>(lib.n_tpix) * (np + 1));
      extras.Tr = Tr.data();
      extras.tr_cols = np + 1;
      for (int a = 0; a < all.n_arms; ++a) extras.basis_t[a] = all.models[a]->basis_t.data();
      d.cpu = &extras;
    }
    if (kept_rows) {
      Tv.resize(static_cast<size_t>(all.n_arms) * lib.n_tpix);
      d.Tv = Tv.data();
      d.tv_stride = lib.n_tpix;
      d.tv_keep = keep;
    }
    w->emu = emu.data();
    w->fit_vsini = 0;
  }
  // One evaluation with the Jacobian (VOnly: the velocity column alone, at the labels of the last
  // labels() call) at theta: chi^2 (NaN if it failed), *Tv[n_pix] and *dTv[n_pix][np].
  template <bool VOnly = false, class Team = CpuTeam>
  double eval(const Team& team, const TemplateLibrary& lib, int cont_deg, const double* theta,
              std::vector<double>* Tv, std::vector<double>* dTv) {
    const int np = VOnly ? 1 : kern::n_fit_params(lib.n_label, 0);
    Tv->assign(d.n_pix, 0.0);
    dTv->assign(static_cast<size_t>(d.n_pix) * np, 0.0);
    if (!kern::evaluate<VOnly>(team, &em, lib.grid(), d, cont_deg, theta, true, w.get(), Tv->data(),
                               dTv->data()))
      return NAN;
    return w->chi2;
  }
  // The labels (and VSINI) of theta for the velocity-only evaluations that follow.
  void labels(const double* theta) {
    kern::emulator_coeffs_into(CpuTeam{}, em, theta + 1, w.get());
  }
  // A velocity-only evaluation into T and dT (dT/dv): chi^2.
  template <class Team = CpuTeam>
  double at(const TemplateLibrary& lib, int cont_deg, const double* theta, const Team& team = {}) {
    return eval<true>(team, lib, cont_deg, theta, &T, &dT);
  }
};

// One model evaluation (kern::evaluate, with the Jacobian; VSINI from theta, not fitted) of a
// prepared spectrum at theta: T[n_pix], dT[n_pix][np], and chi^2.
template <class Team>
double evaluate_with(const Team& team, const PreparedSpectrum& p, const FitContext& ctx,
                     const double* theta, std::vector<double>* T, std::vector<double>* dT,
                     bool cpu_rows = false) {
  return EvalRig(p, ctx.lib, cpu_rows).eval(team, ctx.lib, ctx.cfg.cont_deg, theta, T, dT);
}

}  // namespace

TEST_CASE("lane team: reduce_gram and reduce_grid sum in the serial order, bit for bit",
          "[kernels][team]") {
  // n = 0, fewer than a warp, not a multiple of 32, several tiles.
  for (int n : {0, 5, 77, 130}) {
    const int R = 7;
    const auto v = random_values(n * R, 11 + n);
    auto row = [&](int i, double* z) {
      for (int c = 0; c < R; ++c) z[c] = v[i * R + c];
    };
    auto pair = [&](int t, int* a, int* b) { kern::normal_pair(t, R - 1, a, b); };
    const int m = (R - 1) * R / 2 + (R - 1);
    std::vector<double> s(m), l(m);
    kern::SerialTeam{}.reduce_gram(n, R, m, s.data(), row, pair);
    kern::LaneTeam{}.reduce_gram(n, R, m, l.data(), row, pair);
    for (int k = 0; k < m; ++k) REQUIRE(s[k] == l[k]);
    // The packed slots are the normal equations: slot tri_index(j, k) is sum_i z_j z_k.
    if (n > 0) {
      double ref = 0.0;
      for (int i = 0; i < n; ++i) ref += v[i * R + 1] * v[i * R + 4];
      CHECK(s[kern::tri_index(1, 4, R - 1)] == Approx(ref).epsilon(1e-14));
    }
    std::vector<double> gs(3 * 40), gl(3 * 40);
    auto cell = [&](int i, int o, auto acc) {
      acc[0] += v[i * R + o % R];
      acc[2] += v[i * R] * o;
    };
    kern::SerialTeam{}.reduce_grid(n, 40, 3, gs.data(), cell);
    kern::LaneTeam{}.reduce_grid(n, 40, 3, gl.data(), cell);
    for (int k = 0; k < 120; ++k) REQUIRE(gs[k] == gl[k]);
  }
}

TEST_CASE("lane team: reduce_sum combines per-lane sums like a shuffle butterfly",
          "[kernels][team]") {
  const int n = 1000;
  const auto v = random_values(n, 3);
  double s[2], l[2];
  auto f = [&](int i, double* acc) {
    acc[0] += v[i];
    acc[1] += v[i] * v[i];
  };
  kern::SerialTeam{}.reduce_sum(n, 2, s, f);
  kern::LaneTeam{}.reduce_sum(n, 2, l, f);
  // Different summation order: agreement to a few ulps of the sum of |terms| (1000 terms).
  CHECK(l[0] == Approx(s[0]).margin(1e-12 * n));
  CHECK(l[1] == Approx(s[1]).epsilon(1e-13));
  // Exactly the butterfly: lane l's partial sum over i = l, l + 32, ... combined pairwise.
  double part[32] = {};
  for (int i = 0; i < n; ++i) part[i % 32] += v[i];
  for (int off = 16; off > 0; off /= 2) {
    double nv[32];
    for (int k = 0; k < 32; ++k) nv[k] = part[k] + part[k ^ off];
    for (int k = 0; k < 32; ++k) part[k] = nv[k];
  }
  CHECK(l[0] == part[0]);
}

TEST_CASE("lane team fits real LAMOST and DESI-layout spectra like the serial team",
          "[kernels][team][real]") {
  const auto& lib = test::thin_library();
  FitConfig cfg;  // resolution matrices on (the DESI default)
  ArmModelCache cache(lib);
  int n_fit = 0, n_matrix = 0, n_seg_checked = 0, n_kept = 0;
  test::each_real_spectrum(
      lib, cache, cfg,
      [&](const PreparedSpectrum& p, const FitContext& ctx, const std::string& path, int64_t row) {
        ++n_fit;
        n_matrix += p.packed.n_full_total() > 0;
        std::vector<float> iv_s, iv_l;
        // The serial team: FP64 template sums, as the warp computes them (the CPU's FP32 form is
        // compared with it in the next test).
        // The lane team as the GPU runs it: velocity-only evaluations from kept rows (FP64 row
        // products, then 4 taps; the serial team sums the 4 stencil rows per pixel first).
        bool kept = false;
        const auto s = fit_with(kern::SerialTeam{}, p, ctx, &iv_s);
        const auto l = fit_with(kern::LaneTeam{}, p, ctx, &iv_l, true, &kept);
        n_kept += kept;
        INFO(path << " row " << row);
        INFO("serial theta " << s.best.theta[0] << " " << s.best.theta[1] << " " << s.best.theta[2]
                             << " " << s.best.theta[3] << " " << s.best.theta[4] << " np "
                             << s.best.np << "; lane " << l.best.theta[0] << " " << l.best.theta[1]
                             << " " << l.best.theta[2] << " " << l.best.theta[3] << " "
                             << l.best.theta[4] << " np " << l.best.np);
        REQUIRE(s.status == l.status);
        if (s.status != kern::kPipeOk) return;
        // Only the small reduce_sum sums (CCF mean and norm, clip counts) and the velocity-only
        // template sums (kept rows) are added in another order: chi^2 agrees to round-off, the
        // parameters to far below their errors (1e-6 sigma; LM stops at the same iteration from
        // the same start).
        CHECK(l.best.chi2 == Approx(s.best.chi2).epsilon(1e-10));
        CHECK(l.best.niter == s.best.niter);
        REQUIRE(l.best.np == s.best.np);
        const int np = s.best.np;  // VSINI included when it was fitted
        for (int q = 0; q < np; ++q) {
          const double sig = std::sqrt(s.best.cov[q * np + q]);
          // VSINI held at 0 has no variance (NaN): then the values must agree exactly.
          if (std::isfinite(sig))
            CHECK(std::fabs(l.best.theta[q] - s.best.theta[q]) < 1e-6 * sig);
          else
            CHECK(l.best.theta[q] == s.best.theta[q]);
        }
        CHECK(iv_s == iv_l);  // the same pixels clipped
        CHECK(l.v_ccf == Approx(s.v_ccf).margin(1e-9));
        // Per-arm velocities (segment_velocities, labels fixed): the same Gauss-Newton path from
        // the same theta, so they agree far below their errors too; every segment is measured.
        REQUIRE(p.packed.n_seg == (ctx.format == "desi" ? p.packed.n_arms : 2));
        for (int k = 0; k < p.packed.n_seg; ++k) {
          REQUIRE(std::isfinite(s.v_seg[k]));
          CHECK(std::fabs(l.v_seg[k] - s.v_seg[k]) < 1e-6 * s.v_seg_err[k]);
        }
        ++n_seg_checked;
      });
  CHECK(n_fit >= 12);
  CHECK(n_matrix >= 4);  // the DESI-layout stars went through the resolution-matrix path
  CHECK(n_seg_checked >= 12);
  CHECK(n_kept == n_fit);  // every fit's velocity-only evaluations took the kept rows
}

TEST_CASE("a later LM start stops inside the best start's basin: the same fits, fewer iterations",
          "[kernels][lm][real]") {
  // kern::LMConfig::join_dchi2 on real LAMOST DR8 spectra (fit.start_join_dchi2 = 25 against 0,
  // every start to convergence): the second start's run is cut short where it falls into the
  // first start's minimum, so it must (a) leave every fit where it was and (b) cost fewer LM
  // iterations in total.
  BuildConfig bc;
  bc.n_components = 30;
  const auto lib = build_library(read_templates(test::data("templates/miles/miles_thin")), bc);
  FitConfig on, off;
  off.start_join_dchi2 = 0.0;
  REQUIRE(on.start_join_dchi2 == 25.0);  // the shipped default is what is tested
  ArmModelCache cache(lib);
  const FitContext ctx_on{lib, cache, on, "lamost-dr8"}, ctx_off{lib, cache, off, "lamost-dr8"};
  std::vector<std::string> paths;
  for (const auto& e : std::filesystem::directory_iterator(test::data("spectra/lamost_dr8/fits")))
    paths.push_back(e.path().string());
  std::sort(paths.begin(), paths.end());
  paths.resize(std::min<size_t>(paths.size(), 24));  // CI time
  int n_fit = 0, it_on = 0, it_off = 0;
  for (const auto& path : paths) {
    const auto file = read_spectra(path);
    for (const auto& spec : file.spectra) {
      const auto p = prepare_spectrum(spec, ctx_on);
      if (!p.ready) continue;
      std::vector<float> iv_on, iv_off;
      const auto a = fit_with(CpuTeam{}, p, ctx_on, &iv_on);
      const auto b = fit_with(CpuTeam{}, p, ctx_off, &iv_off);
      INFO(path);
      REQUIRE(a.status == b.status);
      if (a.status != kern::kPipeOk) continue;
      ++n_fit;
      it_on += a.n_lm_iter;
      it_off += b.n_lm_iter;
      REQUIRE(a.best.np == b.best.np);
      const int np = a.best.np;
      // Where both starts end in one minimum, the runs differ by LM's stopping point alone
      // (dchi2_tol = 0.01: steps below ~0.1 sigma; 0.03 sigma at most on the 134 LAMOST stars),
      // and chi^2 by the tolerance. A start that finds a better minimum is never cut (its chi^2
      // is below the first's), so a larger difference would be a wrong join.
      CHECK(a.best.chi2 == Approx(b.best.chi2).margin(0.05));
      for (int q = 0; q < np; ++q) {
        const double sig = std::sqrt(b.best.cov[q * np + q]);
        if (std::isfinite(sig)) CHECK(std::fabs(a.best.theta[q] - b.best.theta[q]) < 0.1 * sig);
      }
    }
  }
  CHECK(n_fit >= 20);
  // Measured on the 109 DR8 spectra: second-start iterations fall by 46% (1133 -> 610 with the
  // full library), all LM iterations by ~18%; 5% fewer is the floor here.
  INFO("LM iterations: " << it_on << " with joins, " << it_off << " without");
  CHECK(it_on < 0.95 * it_off);
}

TEST_CASE("FP32 template sums give the FP64 model to float precision, and the same fits",
          "[kernels][team][real]") {
  // The CPU's team sums the unrotated template in FP32 (component_sums_f32); the GPU and
  // SerialTeam in FP64. On real LAMOST and DESI-layout spectra (the second with resolution
  // matrices, whose full-grid model goes through the same sums):
  //  - one evaluation at the same theta: T and dT/dtheta agree to float precision;
  //  - whole fits agree far below the errors.
  BuildConfig bc;
  bc.n_components = 30;
  const auto lib = build_library(read_templates(test::data("templates/miles/miles_thin")), bc);
  FitConfig cfg;
  ArmModelCache cache(lib);
  int n_fit = 0;
  double worst_t = 0.0, worst_dt = 0.0, worst_theta = 0.0, worst_rot = 0.0;
  test::each_real_spectrum(
      lib, cache, cfg,
      [&](const PreparedSpectrum& p, const FitContext& ctx, const std::string& path, int64_t row) {
        INFO(path << " row " << row);
        std::vector<float> iv32, iv64;
        const auto r32 = fit_with(CpuTeam{}, p, ctx, &iv32);
        const auto r64 = fit_with(kern::SerialTeam{}, p, ctx, &iv64);
        REQUIRE(r32.status == r64.status);
        if (r64.status != kern::kPipeOk) return;
        ++n_fit;
        // One evaluation at the FP64 fit's theta, unrotated (VSINI 0: per-pixel sums) and
        // rotated (VSINI 60 km/s: the grid rows' products).
        for (const double vsini : {0.0, 60.0}) {
          double theta[kern::kMaxParams] = {};
          for (int q = 0; q < 1 + lib.n_label; ++q) theta[q] = r64.best.theta[q];
          theta[kern::vsini_index(lib.n_label)] = vsini;
          std::vector<double> T32, dT32, T64, dT64;
          const double c32 = evaluate_with(CpuTeam{}, p, ctx, theta, &T32, &dT32);
          const double c64 = evaluate_with(kern::SerialTeam{}, p, ctx, theta, &T64, &dT64);
          const int np = 1 + lib.n_label;
          double tmax = 0.0, dmax[kern::kMaxParams] = {};
          for (size_t i = 0; i < T64.size(); ++i) {
            tmax = std::max(tmax, std::fabs(T64[i]));
            for (int q = 0; q < np; ++q) dmax[q] = std::max(dmax[q], std::fabs(dT64[i * np + q]));
          }
          for (size_t i = 0; i < T64.size(); ++i) {
            // Float rounding: c, dc and the cubic weights to 2^-24 relative, 3 products summed per
            // lane and a 16-lane tree: about 1e-7 of the template's scale. 1e-6 leaves a factor
            // of 10; a wrong component, tap or lane would be off by percents.
            worst_t = std::max(worst_t, std::fabs(T32[i] - T64[i]) / tmax);
            if (vsini > 0) worst_rot = std::max(worst_rot, std::fabs(T32[i] - T64[i]) / tmax);
            for (int q = 0; q < np; ++q)
              worst_dt =
                  std::max(worst_dt, std::fabs(dT32[i * np + q] - dT64[i * np + q]) / dmax[q]);
          }
          // chi^2 sums ~3000 pixels of (r/sigma)^2; each model value moves by 1e-7 of itself,
          // i.e. 1e-7 x S/N (< 1e-4) sigma: chi^2 by well under 0.05.
          CHECK(c32 == Approx(c64).margin(0.05));
        }
        // Whole fits: LM stops within dchi2_tol = 0.01 of the minimum on either model, so
        // the fitted values differ by that stopping point, 0.1 sigma at most on the 134 LAMOST
        // stars (docs/performance.md); 0.3 sigma is the bound.
        CHECK(r32.best.chi2 == Approx(r64.best.chi2).margin(0.05));
        for (int q = 0; q < r64.best.np; ++q) {
          const double sig = std::sqrt(r64.best.cov[q * r64.best.np + q]);
          if (!std::isfinite(sig)) continue;
          const double z = std::fabs(r32.best.theta[q] - r64.best.theta[q]) / sig;
          worst_theta = std::max(worst_theta, z);
          CHECK(z < 0.3);
        }
      });
  INFO("worst relative T " << worst_t << " (rotated " << worst_rot << "), dT " << worst_dt
                           << ", theta " << worst_theta << " sigma");
  CHECK(n_fit >= 12);
  CHECK(worst_t < 1e-6);
  // Derivatives: dT/dv is a difference of nearby rows and the label derivatives sum components
  // that partly cancel, so their rounding relative to the column scale is larger (7.8e-6
  // measured with this library).
  CHECK(worst_dt < 5e-5);
  CHECK(worst_t > 0.0);    // the FP32 path did run (FP64 would agree bitwise)
  CHECK(worst_rot > 0.0);  // and the rotated model's FP32 rows too
}

TEST_CASE("the CPU's rotated model from convolved grid rows equals the per-pixel stencils",
          "[kernels][team][real][vsini]") {
  // With CpuFitExtras::Tr and basis_t (the CPU backend's scratch), the rotated model sums the grid
  // rows from the transposed basis, convolves them with the rotation kernel once and
  // interpolates 4 rows per pixel; without them each pixel combines its 2M + 4 rows. The same
  // linear operations in another order, FP32 rows both ways: T and dT/dtheta agree to float
  // rounding (1e-6 and 5e-5 of their scales, as in the FP32 test above), at several VSINI.
  const auto& lib = test::thin_library();
  FitConfig cfg;
  ArmModelCache cache(lib);
  int n = 0;
  double worst_t = 0.0, worst_dt = 0.0;
  test::each_real_spectrum(
      lib, cache, cfg,
      [&](const PreparedSpectrum& p, const FitContext& ctx, const std::string& path, int64_t row) {
        INFO(path << " row " << row);
        ++n;
        for (const double vsini : {20.0, 60.0, 150.0}) {
          double theta[kern::kMaxParams] = {12.0, 3.76, 4.3, -0.2};
          theta[kern::vsini_index(lib.n_label)] = vsini;
          std::vector<double> Ta, dTa, Tb, dTb;
          const double ca = evaluate_with(CpuTeam{}, p, ctx, theta, &Ta, &dTa, true);
          const double cb = evaluate_with(CpuTeam{}, p, ctx, theta, &Tb, &dTb, false);
          REQUIRE(std::isfinite(ca));
          CHECK(ca == Approx(cb).margin(0.05));  // as the FP32 test: well under 0.05
          test::worst_rel_diff(Ta, dTa, Tb, dTb, 1 + lib.n_label, &worst_t, &worst_dt);
        }
      });
  INFO("worst relative T " << worst_t << ", dT " << worst_dt);
  CHECK(n >= 12);
  CHECK(worst_t < 1e-6);
  CHECK(worst_dt < 5e-5);
  CHECK(worst_t > 0.0);  // the two paths did run (the same path would agree bitwise)
}

// The velocity sweep of the kept-rows tests on one spectrum: at VSINI 0 and 40 and two sets of
// labels, velocity-only evaluations at 12, 24, -36 and 60 km/s with `rows` (kept rows) and `ref`
// (per-point stencils), then a full evaluation in between (which overwrites the scratch) and, at
// the same labels, VSINI 4 km/s higher (the same kernel half-width, other weights). chi2_ok(ca,
// cb) checks each pair of chi^2; span() gives the rows' kept span of arm 0 as {s0, s1} (and
// checks that rows were kept). Returns how many velocities found the span of the one before.
template <class Team, class Chi2Ok, class Span>
int velocity_sweep(EvalRig& rows, EvalRig& ref, const Team& team, const TemplateLibrary& lib,
                   int cont_deg, Chi2Ok&& chi2_ok, Span&& span, double* worst_t, double* worst_dt) {
  const int vs = kern::vsini_index(lib.n_label);
  int n_kept = 0;
  for (const double vsini : {0.0, 40.0}) {
    for (const double teff : {3.76, 3.70}) {
      double theta[kern::kMaxParams] = {12.0, teff, 4.3, -0.2};
      theta[vs] = vsini;
      rows.labels(theta);
      ref.labels(theta);
      std::pair<int, int> last{-1, -1};
      for (const double v : {12.0, 24.0, -36.0, 60.0}) {
        theta[0] = v;
        const double ca = rows.at(lib, cont_deg, theta, team);
        const double cb = ref.at(lib, cont_deg, theta, team);
        REQUIRE(std::isfinite(ca));
        chi2_ok(ca, cb);
        test::worst_rel_diff(rows.T, rows.dT, ref.T, ref.dT, 1, worst_t, worst_dt);
        const std::pair<int, int> now = span();
        if (last.first >= 0) n_kept += now == last;
        last = now;
      }
      std::vector<double> Tj, dTj;
      REQUIRE(std::isfinite(rows.eval(team, lib, cont_deg, theta, &Tj, &dTj)));
      REQUIRE(std::isfinite(ref.eval(team, lib, cont_deg, theta, &Tj, &dTj)));
      for (const double vs2 : {vsini, vsini > 0 ? vsini + 4.0 : vsini}) {
        theta[vs] = vs2;
        chi2_ok(rows.at(lib, cont_deg, theta, team), ref.at(lib, cont_deg, theta, team));
        test::worst_rel_diff(rows.T, rows.dT, ref.T, ref.dT, 1, worst_t, worst_dt);
      }
    }
  }
  return n_kept;
}

TEST_CASE("velocity-only evaluations reuse kept rows while the labels stay, and only then",
          "[kernels][team][real]") {
  // At one set of labels and VSINI the rows (convolved with the rotation kernel) are computed
  // once and each velocity-only evaluation interpolates them, in both forms (velocity_sweep):
  //  - the CPU's CpuFitExtras::VelocityRows, against the per-point stencils: the same model to
  //    FP32 rounding (1e-6 of T's scale, 5e-5 of dT/dv's, as the rotated test above);
  //  - the single-lane teams' FitData::Tv (the GPU's, issue 51), against the lane team's
  //    per-pixel stencils: FP64 sums of another order (rows first), within 1e-13 of T's scale
  //    and 1e-11 of dT/dv's, whose taps cancel (measured 1.3e-15 and 2.5e-14), chi^2 to 1e-10
  //    relative; every arm keeps its own rows.
  // The rows are computed once per set of labels (kept range unchanged between velocities), and
  // new labels, a new VSINI of the same kernel width, or a full evaluation in between (which
  // overwrites the scratch) are never served old rows (their models agree with the reference).
  const auto& lib = test::thin_library();
  FitConfig cfg;
  ArmModelCache cache(lib);
  int n = 0, n_multi_arm = 0, kept_cpu = 0, kept_lane = 0;
  double cpu_t = 0.0, cpu_dt = 0.0, lane_t = 0.0, lane_dt = 0.0;
  test::each_real_spectrum(
      lib, cache, cfg,
      [&](const PreparedSpectrum& p, const FitContext&, const std::string& path, int64_t row) {
        INFO(path << " row " << row);
        ++n;
        n_multi_arm += p.packed.n_arms > 1;
        EvalRig cpu_rows(p, lib, true), cpu_ref(p, lib, false);
        kept_cpu += velocity_sweep(
            cpu_rows, cpu_ref, CpuTeam{}, lib, cfg.cont_deg,
            [](double ca, double cb) { CHECK(ca == Approx(cb).margin(0.05)); },
            [&] {
              const auto& vr = cpu_rows.extras.vrows[0];
              REQUIRE(vr.basis != nullptr);
              return std::make_pair(vr.s0, vr.s1);
            },
            &cpu_t, &cpu_dt);
        EvalRig lane_rows(p, lib, false, true), lane_ref(p, lib, false);
        kept_lane += velocity_sweep(
            lane_rows, lane_ref, kern::LaneTeam{}, lib, cfg.cont_deg,
            [](double ca, double cb) { CHECK(ca == Approx(cb).epsilon(1e-10)); },
            [&] {
              for (int a = 0; a < p.packed.n_arms; ++a) REQUIRE(lane_rows.keep[a].basis != nullptr);
              return std::make_pair(lane_rows.keep[0].s0, lane_rows.keep[0].s1);
            },
            &lane_t, &lane_dt);
      });
  INFO("worst relative T, dT/dv: CPU rows " << cpu_t << ", " << cpu_dt << "; lane rows " << lane_t
                                            << ", " << lane_dt << "; rows kept " << kept_cpu << ", "
                                            << kept_lane);
  CHECK(n >= 12);
  CHECK(n_multi_arm >= 4);  // the DESI-layout stars' three arms
  CHECK(cpu_t < 1e-6);
  CHECK(cpu_dt < 5e-5);
  CHECK(lane_t < 1e-13);
  CHECK(lane_dt < 1e-11);
  CHECK(cpu_t > 0.0);  // the two forms did run
  CHECK(lane_t > 0.0);
  // 3 of every 4 velocities find the rows kept (+-64 rows = 960 km/s cover these shifts).
  CHECK(kept_cpu == 3 * 4 * n);
  CHECK(kept_lane == 3 * 4 * n);
}

TEST_CASE("the CPU's CCF from de-interleaved templates and its Chebyshev pseudo-continuum",
          "[kernels][team][real]") {
  // cross_correlate with CpuFitExtras::ccf_ph (kern::CcfPhases, lag-step phases read 8 lags per
  // vector) sums every lag over the same pixels in the same order as the direct form: the CCF
  // agrees to rounding (1e-12). pseudo_normalise on SerialTeam (Chebyshev moments) against the
  // LaneTeam form (Legendre, direct Gram): the same clipped polynomial fits, so the normalised
  // flux agrees to rounding except where a pixel sits on a clipping threshold (none allowed
  // beyond 0.1% of the pixels).
  const auto& lib = test::thin_library();
  FitConfig cfg;
  ArmModelCache cache(lib);
  const auto grid = lib.grid();
  int n = 0;
  double worst_ccf = 0.0;
  test::each_real_spectrum(
      lib, cache, cfg,
      [&](const PreparedSpectrum& p, const FitContext& ctx, const std::string& path, int64_t row) {
        INFO(path << " row " << row);
        const Packed& all = p.packed;
        const kern::PipelineConfig pc = pipeline_config(ctx.cfg, lib);
        const int np = static_cast<int>(all.flux.size()), n_out = kern::ccf_lags(pc, grid);
        std::vector<float> rm;
        kern::FitData d = folded_view(all, &rm);
        auto w = std::make_unique<kern::EvalWork>();
        std::vector<double> fn(np), wts(np), fn_l(np), wts_l(np), frac(np), acc(8 * n_out),
            ccf_a(n_out), ccf_b(n_out);
        std::vector<int> t0(np);
        kern::pseudo_normalise(kern::SerialTeam{}, d, pc.ccf_cont_deg, 4, w.get(), fn.data(),
                               wts.data());
        kern::pseudo_normalise(kern::LaneTeam{}, d, pc.ccf_cont_deg, 4, w.get(), fn_l.data(),
                               wts_l.data());
        int off = 0;
        for (int i = 0; i < np; ++i)
          off += std::fabs(fn[i] - fn_l[i]) > 1e-9 * (1.0 + std::fabs(fn_l[i])) ||
                 std::fabs(wts[i] - wts_l[i]) > 1e-9 * std::fabs(wts_l[i]);
        CHECK(off <= np / 1000);
        kern::pixel_positions(kern::SerialTeam{}, grid, d, t0.data(), frac.data());
        const float* tmpl[kern::kMaxArms] = {};
        // The tables the CPU backend uses (ArmModel::ccf_phases, kept with each arm model).
        const kern::CcfPhases c = kern::ccf_phases(std::min(pc.n_ccf_use, all.models[0]->n_ccf),
                                                   pc.lag_step, grid.n_tpix, n_out);
        const float* ph[kern::kMaxArms] = {};
        for (int a = 0; a < all.n_arms; ++a) {
          tmpl[a] = all.models[a]->ccf_templates.data();
          ph[a] = all.models[a]->ccf_phases(c.n_tmpl, c.step, n_out);
          REQUIRE(ph[a] != nullptr);
        }
        const int lag_lo = kern::ccf_lag_lo(pc, grid);
        double peak = 0.0;
        for (int j = 0; j < c.n_tmpl; ++j) {
          kern::FitData dd = d;  // direct form
          kern::cross_correlate(CpuTeam{}, grid, dd, tmpl, j, lag_lo, n_out, pc.lag_step, t0.data(),
                                frac.data(), fn.data(), wts.data(), w.get(), acc.data(),
                                ccf_b.data());
          kern::CpuFitExtras extras;
          for (int a = 0; a < all.n_arms; ++a) extras.ccf_ph[a] = ph[a];
          extras.ccf_ph_geom = c;
          dd.cpu = &extras;
          kern::cross_correlate(CpuTeam{}, grid, dd, tmpl, j, lag_lo, n_out, pc.lag_step, t0.data(),
                                frac.data(), fn.data(), wts.data(), w.get(), acc.data(),
                                ccf_a.data());
          for (int o = 0; o < n_out; ++o) {
            worst_ccf = std::max(worst_ccf, std::fabs(ccf_a[o] - ccf_b[o]));
            peak = std::max(peak, ccf_b[o]);
          }
        }
        CHECK(peak > 0.2);  // a real correlation (the best template), not zeros on both sides
        ++n;
      });
  INFO("worst CCF difference " << worst_ccf);
  CHECK(n >= 12);
  CHECK(worst_ccf < 1e-12);
}

TEST_CASE("the CPU's register-accumulator emulator sums equal the lane team's, bit for bit",
          "[kernels][team]") {
  // emulator_coeffs_team on SerialTeam takes emulator_combine_regs (accumulators in registers),
  // on LaneTeam reduce_grid (one column per lane): both sum every coefficient over the same
  // rows in the same order, so c and dc must agree exactly, at labels across the library.
  BuildConfig bc;
  bc.n_components = 30;
  const auto lib = build_library(read_templates(test::data("templates/miles/miles_thin")), bc);
  const auto em = lib.view();
  const int K1 = em.n_comp, L = em.n_label;
  std::vector<double> scratch(static_cast<size_t>(kern::emulator_scratch_size(em)));
  const double labels[][3] = {{3.76, 4.4, 0.0}, {3.60, 1.0, -2.0}, {4.10, 4.0, 0.3}};
  for (const auto& lab : labels) {
    std::vector<double> cs(K1), dcs(L * K1), cl(K1), dcl(L * K1);
    kern::emulator_coeffs_team(kern::SerialTeam{}, em, lab, scratch.data(), cs.data(), dcs.data());
    kern::emulator_coeffs_team(kern::LaneTeam{}, em, lab, scratch.data(), cl.data(), dcl.data());
    // The row weights differ by the CPU's exp_v8 (within 1 ulp of libm's exp, test_kernels):
    // the coefficients agree to ~1e-16 of their scale (1e-13 is the bound); the sums
    // themselves are the same products in the same order.
    double scale = 0.0;
    for (int k = 0; k < K1; ++k) scale = std::max(scale, std::fabs(cl[k]));
    for (int k = 0; k < K1; ++k) CHECK(std::fabs(cs[k] - cl[k]) <= 1e-13 * scale);
    for (int l = 0; l < L; ++l) {
      double sl = 0.0;
      for (int k = 0; k < K1; ++k) sl = std::max(sl, std::fabs(dcl[l * K1 + k]));
      for (int k = 0; k < K1; ++k)
        CHECK(std::fabs(dcs[l * K1 + k] - dcl[l * K1 + k]) <= 1e-13 * sl);
    }
    CHECK(cs[1] != 0.0);  // real coefficients, not an untouched buffer
  }
}

TEST_CASE(
    "the chi^2 grid's precomputed stencils give fixed_template_at_pixels' values, bit for bit",
    "[kernels][team][real]") {
  // The CPU's chi^2 grid computes every stencil once for all coarse templates (grid_stencils_at:
  // used pixels' of arms without a matrix, the full grid's of a matrix arm, kept in dTf) and
  // fixed_template_stencils then interpolates each template: the values of
  // fixed_template_at_pixels, which finds the stencil per template. Both teams' forms.
  const auto& lib = test::thin_library();
  FitConfig cfg;  // resolution matrices on (the DESI default)
  ArmModelCache cache(lib);
  int n = 0, n_matrix = 0;
  test::each_real_spectrum(
      lib, cache, cfg,
      [&](const PreparedSpectrum& p, const FitContext& ctx, const std::string& path, int64_t row) {
        INFO(path << " row " << row);
        const Packed& all = p.packed;
        const int np = kern::n_fit_params(lib.n_label, 0), npix = static_cast<int>(all.flux.size());
        std::vector<double> Tf(all.n_full_total()), dTf(all.n_full_total() * np);
        std::vector<float> rm;
        const kern::FitData d = folded_view(all, &rm, Tf.data(), dTf.data());
        const float* tmpl[kern::kMaxArms] = {};
        for (int a = 0; a < all.n_arms; ++a) {
          tmpl[a] = all.models[a]->ccf_templates.data();
          n_matrix += d.n_full[a] > 0;
        }
        std::vector<int> t0(npix);
        std::vector<double> frac(npix), Ta(npix), Tb(npix);
        for (const double v : {-212.7, 3.1, 96.4}) {
          kern::grid_stencils_at(CpuTeam{}, lib.grid(), d, v, t0.data(), frac.data());
          for (int j : {0, all.models[0]->n_ccf - 1}) {
            kern::fixed_template_stencils(CpuTeam{}, lib.grid(), d, tmpl, j, t0.data(), frac.data(),
                                          Ta.data());
            kern::fixed_template_at_pixels(CpuTeam{}, lib.grid(), d, tmpl, j, v, Tb.data());
            CHECK(std::memcmp(Ta.data(), Tb.data(), Ta.size() * sizeof(double)) == 0);
          }
        }
        ++n;
      });
  CHECK(n >= 12);
  CHECK(n_matrix >= 4);  // the DESI-layout spectra's matrix arms were among them
}
