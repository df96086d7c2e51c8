// The GPU's decomposition of a spectrum's fit over the 32 lanes of a warp, tested on the CPU:
// kern::LaneTeam emulates WarpTeam (pixel-to-lane assignment, per-lane partial sums, the xor
// butterfly of the shuffle reduction, the staging tile of reduce_gram) and must give the serial
// team's answers: bitwise where the summation order is the same by design (reduce_gram,
// reduce_grid), to round-off where it is not (reduce_sum), and the same fits on real spectra.
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <random>
#include <vector>

#include "emulator/build.hpp"
#include "fit/fitter.hpp"
#include "io/readers.hpp"
#include "kernels/fit_pipeline.hpp"
#include "kernels/team.hpp"
#include "test_util.hpp"

using namespace velox;

namespace {

std::vector<double> random_values(int n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> g(0.0, 1.0);
  std::vector<double> v(n);
  for (auto& x : v) x = g(rng);
  return v;
}

// kern::fit_one with any team on one prepared spectrum (the scratch a backend would give it).
template <class Team>
kern::PipelineResult fit_with(const Team& team, const PreparedSpectrum& p, const FitContext& ctx,
                              std::vector<float>* ivar) {
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
  *ivar = all.ivar;
  std::vector<double> Tf(all.n_full_total()), dTf(all.n_full_total() * np);
  const kern::PipelineScratch sc{T.data(),  dT.data(),    fn.data(),  wts.data(), frac.data(),
                                 t0.data(), ivar->data(), ccf.data(), acc.data(), emu.data()};
  kern::FitData d = all.view(Tf.data(), dTf.data());
  std::vector<double> Tg(static_cast<size_t>(lib.n_tpix) * np);  // the rotated model's scratch
  d.Tg = Tg.data();
  d.ivar = ivar->data();
  const float* tmpl[kern::kMaxArms] = {};
  for (int a = 0; a < all.n_arms; ++a) tmpl[a] = all.models[a]->ccf_templates.data();
  auto shared = std::make_unique<kern::PipelineShared>();
  kern::PipelineResult res;
  kern::fit_one(team, em, grid, d, tmpl, all.models[0]->n_ccf, lib.ccf_labels.data(), pc, sc,
                shared.get(), &res);
  return res;
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
  BuildConfig bc;
  bc.n_components = 30;
  const auto lib = build_library(read_templates(test::data("templates/miles/miles_thin")), bc);
  FitConfig cfg;  // resolution matrices on (the DESI default)
  ArmModelCache cache(lib);
  struct Input {
    std::string path, format;
  };
  const std::vector<Input> inputs = {{"spectra/lamost_dr10_pylasp/fits", "lamost-dr10"},
                                     {"spectra/desi_lamost/coadd-lamost-dr10.fits", "desi"}};
  int n_fit = 0, n_matrix = 0, n_seg_checked = 0;
  for (const auto& in : inputs) {
    std::vector<std::string> paths;
    if (std::filesystem::is_directory(test::data(in.path))) {
      for (const auto& e : std::filesystem::directory_iterator(test::data(in.path)))
        paths.push_back(e.path().string());
      std::sort(paths.begin(), paths.end());
      paths.resize(std::min<size_t>(paths.size(), 8));  // CI time: 8 of the 25 are enough
    } else {
      paths.push_back(test::data(in.path));
    }
    const FitContext ctx{lib, cache, cfg, in.format};
    for (const auto& path : paths) {
      const auto file = read_spectra(path);
      int in_file = 0;
      for (const auto& spec : file.spectra) {
        const auto p = prepare_spectrum(spec, ctx);
        if (!p.ready || in_file >= 8) continue;
        ++in_file;
        ++n_fit;
        n_matrix += p.packed.n_full_total() > 0;
        std::vector<float> iv_s, iv_l;
        const auto s = fit_with(kern::SerialTeam{}, p, ctx, &iv_s);
        const auto l = fit_with(kern::LaneTeam{}, p, ctx, &iv_l);
        INFO(path << " row " << spec.row_in_file);
        INFO("serial theta " << s.best.theta[0] << " " << s.best.theta[1] << " " << s.best.theta[2]
                             << " " << s.best.theta[3] << " " << s.best.theta[4] << " np "
                             << s.best.np << "; lane " << l.best.theta[0] << " " << l.best.theta[1]
                             << " " << l.best.theta[2] << " " << l.best.theta[3] << " "
                             << l.best.theta[4] << " np " << l.best.np);
        REQUIRE(s.status == l.status);
        if (s.status != kern::kPipeOk) continue;
        // Only the small reduce_sum sums (CCF mean and norm, clip counts) are added in another
        // order: chi^2 agrees to round-off, the parameters to far below their errors
        // (1e-6 sigma; LM stops at the same iteration from the same start).
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
        REQUIRE(p.packed.n_seg == (in.format == "desi" ? p.packed.n_arms : 2));
        for (int k = 0; k < p.packed.n_seg; ++k) {
          REQUIRE(std::isfinite(s.v_seg[k]));
          CHECK(std::fabs(l.v_seg[k] - s.v_seg[k]) < 1e-6 * s.v_seg_err[k]);
        }
        ++n_seg_checked;
      }
    }
  }
  CHECK(n_fit >= 12);
  CHECK(n_matrix >= 4);  // the DESI-layout stars went through the resolution-matrix path
  CHECK(n_seg_checked >= 12);
}
