#include "emulator/build.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <numeric>
#include <thread>

#include "common/error.hpp"
#include "common/median.hpp"
#include "common/thread_pool.hpp"
#include "kernels/linalg.hpp"
#include "kernels/physics.hpp"

namespace velox {

using Eigen::MatrixXd;
using Eigen::VectorXd;

std::vector<double> resample(const std::vector<double>& wave_in, const std::vector<double>& flux_in,
                             const std::vector<double>& wave_out) {
  const size_t n = wave_in.size();
  std::vector<double> out(wave_out.size(), NAN);
  if (n < 4) return out;
  const double step = (wave_in.back() - wave_in.front()) / (n - 1);
  bool uniform = true;
  for (size_t i = 1; i < n && uniform; ++i)
    uniform = std::fabs(wave_in[i] - wave_in[i - 1] - step) < 1e-6 * step;
  for (size_t j = 0; j < wave_out.size(); ++j) {
    const double w = wave_out[j];
    if (w < wave_in.front() || w > wave_in.back()) continue;
    if (uniform) {
      const double u = (w - wave_in.front()) / step;
      long t0 = static_cast<long>(std::floor(u));
      t0 = std::clamp<long>(t0, 1, static_cast<long>(n) - 3);
      double wt[4], dwt[4];
      kern::cubic_weights(u - t0, wt, dwt);
      out[j] = wt[0] * flux_in[t0 - 1] + wt[1] * flux_in[t0] + wt[2] * flux_in[t0 + 1] +
               wt[3] * flux_in[t0 + 2];
    } else {
      const size_t hi = std::upper_bound(wave_in.begin(), wave_in.end(), w) - wave_in.begin();
      const size_t i1 = std::min(std::max<size_t>(hi, 1), n - 1), i0 = i1 - 1;
      const double f = (w - wave_in[i0]) / (wave_in[i1] - wave_in[i0]);
      out[j] = (1 - f) * flux_in[i0] + f * flux_in[i1];
    }
  }
  return out;
}

std::vector<double> envelope_continuum(const std::vector<double>& flux, int degree, int n_iter) {
  const size_t n = flux.size();
  const int nc = degree + 1;
  std::vector<char> use(n, 1);
  std::vector<double> cont(n, 1.0), p(nc);
  for (int it = 0; it < n_iter; ++it) {
    MatrixXd g = MatrixXd::Zero(nc, nc);
    VectorXd q = VectorXd::Zero(nc);
    for (size_t i = 0; i < n; ++i) {
      if (!use[i]) continue;
      kern::legendre(2.0 * i / (n - 1) - 1.0, degree, p.data());
      for (int a = 0; a < nc; ++a) {
        q[a] += p[a] * flux[i];
        for (int b = 0; b < nc; ++b) g(a, b) += p[a] * p[b];
      }
    }
    VectorXd c = g.ldlt().solve(q);
    double ss = 0;
    size_t m = 0;
    for (size_t i = 0; i < n; ++i) {
      kern::legendre(2.0 * i / (n - 1) - 1.0, degree, p.data());
      double v = 0;
      for (int a = 0; a < nc; ++a) v += c[a] * p[a];
      cont[i] = v;
      if (use[i]) {
        ss += (flux[i] - v) * (flux[i] - v);
        ++m;
      }
    }
    const double sig = std::sqrt(ss / std::max<size_t>(m, 1));
    // Keep points near or above the fit: absorption lines fall out, the envelope remains.
    for (size_t i = 0; i < n; ++i) use[i] = (flux[i] - cont[i]) > -0.5 * sig;
  }
  return cont;
}

namespace {

// Leave-one-out squared error summed over components and stars for GP hyper-parameters.
struct GpFit {
  double loo = INFINITY;
  MatrixXd alpha;  // [N][K]
  MatrixXd loo_err;  // [N][K]
};

// `in_objective[r]` = 0 leaves star r out of the LOO sum that chooses the hyper-parameters
// (curated templates: their sparse neighbourhoods would pull the length scales of the whole
// label space); every star still enters the GP itself.
GpFit gp_fit(const MatrixXd& X, const MatrixXd& R, const std::vector<double>& len, double nugget,
             const std::vector<char>& in_objective) {
  const long N = X.rows(), L = X.cols();
  MatrixXd Kmat(N, N);
  for (long i = 0; i < N; ++i)
    for (long j = 0; j <= i; ++j) {
      double d2 = 0;
      for (long l = 0; l < L; ++l) {
        const double d = (X(i, l) - X(j, l)) / len[l];
        d2 += d * d;
      }
      Kmat(i, j) = Kmat(j, i) = std::exp(-0.5 * d2);
    }
  Kmat.diagonal().array() += nugget;
  Eigen::LLT<MatrixXd> llt(Kmat);
  GpFit out;
  if (llt.info() != Eigen::Success) return out;
  MatrixXd Kinv = llt.solve(MatrixXd::Identity(N, N));
  out.alpha = Kinv * R;
  out.loo_err = out.alpha.array().colwise() / Kinv.diagonal().array();
  out.loo = 0.0;
  for (long r = 0; r < N; ++r)
    if (in_objective[r]) out.loo += out.loo_err.row(r).squaredNorm();
  return out;
}

std::vector<size_t> farthest_points(const MatrixXd& X, int n) {
  const long N = X.rows();
  std::vector<size_t> pick;
  if (N == 0) return pick;
  // Start from the star nearest the centre of the scaled label space (roughly solar).
  long start = 0;
  X.rowwise().squaredNorm().minCoeff(&start);
  pick.push_back(start);
  std::vector<double> dmin(N, INFINITY);
  while (static_cast<int>(pick.size()) < std::min<long>(n, N)) {
    const auto last = X.row(pick.back());
    long best = -1;
    double bestd = -1;
    for (long i = 0; i < N; ++i) {
      dmin[i] = std::min(dmin[i], (X.row(i) - last).squaredNorm());
      if (dmin[i] > bestd) {
        bestd = dmin[i];
        best = i;
      }
    }
    pick.push_back(best);
  }
  return pick;
}

}  // namespace

bool usable_template(const TemplateSpectrum& s, const BuildConfig& cfg) {
  return std::isfinite(s.teff_K) && std::isfinite(s.logg) && std::isfinite(s.feh) &&
         s.teff_K >= cfg.teff_min && s.teff_K <= cfg.teff_max;
}

TemplateLibrary build_library(const TemplateSet& set, const BuildConfig& cfg) {
  // 1. Which templates: labelled, finite, inside the Teff range, not excluded.
  std::vector<size_t> use;
  for (size_t i = 0; i < set.spectra.size(); ++i) {
    const auto& s = set.spectra[i];
    if (std::find(cfg.exclude.begin(), cfg.exclude.end(), i) != cfg.exclude.end()) continue;
    if (std::find(cfg.exclude_names.begin(), cfg.exclude_names.end(), s.name) !=
        cfg.exclude_names.end())
      continue;
    if (usable_template(s, cfg)) use.push_back(i);
  }
  if (use.size() < 20)
    throw ConfigError(fmt::format("templates: only {} usable templates (need >= 20)", use.size()));
  // 2. Common wavelength range and ln-lambda grid (vacuum).
  double lo = cfg.wave_min_A, hi = cfg.wave_max_A;
  if (lo <= 0) {
    lo = 0;
    for (size_t i : use) lo = std::max(lo, set.spectra[i].wave_vac_A.front());
  }
  if (hi <= 0) {
    hi = INFINITY;
    for (size_t i : use) hi = std::min(hi, set.spectra[i].wave_vac_A.back());
  }
  TemplateLibrary lib;
  lib.dlnlam = cfg.dlnlam;
  lib.lnlam0 = std::log(lo) + 2 * cfg.dlnlam;  // margin for the interpolation stencil
  lib.n_tpix = static_cast<int>(std::floor((std::log(hi) - 2 * cfg.dlnlam - lib.lnlam0) / cfg.dlnlam)) + 1;
  std::vector<double> grid(lib.n_tpix);
  for (int t = 0; t < lib.n_tpix; ++t) grid[t] = std::exp(lib.lnlam0 + t * lib.dlnlam);
  lib.fwhm_A = set.fwhm_A;
  if (!set.lsf_wave_A.empty()) {  // a line spread varying with wavelength (Kesseli, joined)
    lib.fwhm_A = NAN;
    lib.lsf_fwhm_A.resize(lib.n_tpix);
    for (int t = 0; t < lib.n_tpix; ++t) lib.lsf_fwhm_A[t] = static_cast<float>(set.fwhm_at(grid[t]));
  }
  lib.resolution_R = std::isfinite(set.resolution_R) ? set.resolution_R
                                                     : (cfg.template_R > 0 ? cfg.template_R : NAN);
  const int L = set.has_alpha ? 4 : 3;
  lib.n_label = L;
  lib.label_names = {"LOG10_TEFF", "LOGG", "FEH"};
  if (L == 4) lib.label_names.push_back("ALPHAFE");
  lib.n_poly = kern::n_poly_terms(L);
  spdlog::info("templates: {} of {} templates in {:.0f}-{:.0f} K, grid {} px {:.1f}-{:.1f} A (vacuum)",
               use.size(), set.spectra.size(), cfg.teff_min, cfg.teff_max, lib.n_tpix, grid.front(),
               grid.back());
  // 3. Resample and normalise.
  std::vector<std::vector<double>> flux;
  std::vector<size_t> kept;
  for (size_t i : use) {
    const auto& s = set.spectra[i];
    auto f = resample(s.wave_vac_A, s.flux, grid);
    bool ok = true;
    for (double v : f) ok = ok && std::isfinite(v);
    if (!ok) continue;
    auto c = envelope_continuum(f, cfg.norm_degree, 6);
    for (int t = 0; t < lib.n_tpix && ok; ++t) {
      ok = c[t] > 0;
      f[t] /= c[t];
    }
    if (!ok) continue;
    flux.push_back(std::move(f));
    kept.push_back(i);
  }
  // 4. Labels, scaled.
  const int n_threads =
      cfg.threads > 0 ? cfg.threads : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  ThreadPool pool(std::min(n_threads, 9));  // at most one grid's trials at a time
  auto build_once = [&](const std::vector<size_t>& rows) {
    const long N = rows.size(), T = lib.n_tpix;
    MatrixXd lab(N, L);
    for (long r = 0; r < N; ++r) {
      const auto& s = set.spectra[kept[rows[r]]];
      lab(r, 0) = std::log10(s.teff_K);
      lab(r, 1) = s.logg;
      lab(r, 2) = s.feh;
      if (L == 4) lab(r, 3) = std::isfinite(s.alphafe) ? s.alphafe : 0.0;
    }
    VectorXd shift = lab.colwise().mean();
    VectorXd scale = ((lab.rowwise() - shift.transpose()).array().square().colwise().sum() / N).sqrt();
    for (int l = 0; l < L; ++l) scale[l] = scale[l] > 0 ? scale[l] : 1.0;
    MatrixXd X = (lab.rowwise() - shift.transpose()).array().rowwise() / scale.transpose().array();
    // 5. PCA through the N x N Gram matrix.
    MatrixXd Y(N, T);
    for (long r = 0; r < N; ++r)
      for (long t = 0; t < T; ++t) Y(r, t) = flux[rows[r]][t];
    VectorXd mean = Y.colwise().mean();
    Y.rowwise() -= mean.transpose();
    MatrixXd gram = Y * Y.transpose();
    Eigen::SelfAdjointEigenSolver<MatrixXd> es(gram);
    const int K = std::min<int>(cfg.n_components, static_cast<int>(N) - 1);
    MatrixXd B(K, T);  // orthonormal rows
    for (int k = 0; k < K; ++k) {
      const long col = N - 1 - k;
      B.row(k) = (es.eigenvectors().col(col).transpose() * Y) / std::sqrt(std::max(es.eigenvalues()[col], 1e-300));
    }
    MatrixXd Z = Y * B.transpose();  // [N][K]
    VectorXd trunc2 = (Y.rowwise().squaredNorm() - Z.rowwise().squaredNorm()).cwiseMax(0.0);
    // 6. Quadratic mean + GP residual model for the coefficients.
    const int P = lib.n_poly;
    MatrixXd Phi(N, P);
    std::vector<double> phi(P), dphi(L * P);
    for (long r = 0; r < N; ++r) {
      std::vector<double> xr(L);
      for (int l = 0; l < L; ++l) xr[l] = X(r, l);
      kern::poly_terms(xr.data(), L, phi.data(), dphi.data());
      for (int p = 0; p < P; ++p) Phi(r, p) = phi[p];
    }
    MatrixXd beta = Phi.colPivHouseholderQr().solve(Z);
    MatrixXd R = Z - Phi * beta;
    std::vector<double> len(L, 0.4);
    len[0] = 0.25;
    double nugget = 1e-2;
    std::vector<char> in_obj(N, 1);
    for (long r = 0; r < N; ++r) in_obj[r] = !set.spectra[kept[rows[r]]].curated;
    if (std::find(in_obj.begin(), in_obj.end(), 1) == in_obj.end()) in_obj.assign(N, 1);
    GpFit best = gp_fit(X, R, len, nugget, in_obj);
    const std::vector<double> grid_len = {0.08, 0.12, 0.18, 0.25, 0.35, 0.5, 0.7, 1.0, 1.5};
    const std::vector<double> grid_nug = {1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 1e-1};
    // Coordinate search: one label's length scale (or the nugget) at a time over its grid. A
    // coordinate's trials do not depend on one another, so they run side by side and are then
    // taken in grid order, the first strictly better one winning at each step: the same choice,
    // bit for bit, as trying them one after the other.
    auto try_grid = [&](const std::vector<double>& grid, int l) {
      std::vector<GpFit> g(grid.size());
      pool.for_each(grid.size(), [&](size_t i, int) {
        auto trial = len;
        double nug = nugget;
        (l < 0 ? nug : trial[l]) = grid[i];
        g[i] = gp_fit(X, R, trial, nug, in_obj);
      });
      for (size_t i = 0; i < grid.size(); ++i)
        if (g[i].loo < best.loo) {
          best = std::move(g[i]);
          (l < 0 ? nugget : len[l]) = grid[i];
        }
    };
    for (int round = 0; round < 2; ++round) {
      for (int l = 0; l < L; ++l) try_grid(grid_len, l);
      try_grid(grid_nug, -1);
    }
    // Per-star LOO rms of normalised flux (truncation + coefficient error; basis orthonormal).
    std::vector<double> loo(N);
    for (long r = 0; r < N; ++r)
      loo[r] = std::sqrt((trunc2[r] + best.loo_err.row(r).squaredNorm()) / T);
    // Fill the library.
    lib.n_train = N;
    lib.n_comp = K + 1;
    lib.basis.assign(static_cast<size_t>(T) * (K + 1), 0.0f);
    for (long t = 0; t < T; ++t) {
      lib.basis[t * (K + 1)] = static_cast<float>(mean[t]);
      for (int k = 0; k < K; ++k) lib.basis[t * (K + 1) + 1 + k] = static_cast<float>(B(k, t));
    }
    lib.train_x.assign(N * L, 0);
    lib.train_labels.assign(N * L, 0);
    lib.train_names.clear();
    for (long r = 0; r < N; ++r) {
      for (int l = 0; l < L; ++l) {
        lib.train_x[r * L + l] = X(r, l);
        lib.train_labels[r * L + l] = lab(r, l);
      }
      lib.train_names.push_back(set.spectra[kept[rows[r]]].name);
    }
    lib.alpha.assign(N * (K + 1), 0);
    for (long r = 0; r < N; ++r)
      for (int k = 0; k < K; ++k) lib.alpha[r * (K + 1) + 1 + k] = best.alpha(r, k);
    lib.poly_coef.assign(P * (K + 1), 0);
    for (int p = 0; p < P; ++p)
      for (int k = 0; k < K; ++k) lib.poly_coef[p * (K + 1) + 1 + k] = beta(p, k);
    lib.length_scale = len;
    lib.shift.assign(shift.data(), shift.data() + L);
    lib.scale.assign(scale.data(), scale.data() + L);
    lib.label_min.assign(L, INFINITY);
    lib.label_max.assign(L, -INFINITY);
    for (long r = 0; r < N; ++r)
      for (int l = 0; l < L; ++l) {
        lib.label_min[l] = std::min(lib.label_min[l], lab(r, l));
        lib.label_max[l] = std::max(lib.label_max[l], lab(r, l));
      }
    lib.loo_rms = loo;
    // The emulator's error per template pixel: each star's leave-one-out residual
    // Y - (Z - loo_err) B (its coefficients predicted without it, plus the truncation), robust
    // sigma over the stars at each pixel, then the rms over +-300 km/s (the fit uses it at the
    // observed wavelength, before the velocity is known).
    {
      const MatrixXd E = Y - (Z - best.loo_err) * B;
      std::vector<double> sig(T), col(N);
      for (long t = 0; t < T; ++t) {
        for (long r = 0; r < N; ++r) col[r] = std::fabs(E(r, t));
        sig[t] = 1.4826 * median_upper(col);
      }
      const long h = std::max<long>(1, std::lround(300.0 / kern::kSpeedOfLight_kms / lib.dlnlam));
      lib.model_sigma.assign(T, 0.0f);
      double s2 = 0;
      long lo_t = 0, hi_t = -1;
      for (long t = 0; t < T; ++t) {
        while (hi_t < std::min(T - 1, t + h)) ++hi_t, s2 += sig[hi_t] * sig[hi_t];
        while (lo_t < t - h) s2 -= sig[lo_t] * sig[lo_t], ++lo_t;
        lib.model_sigma[t] = static_cast<float>(std::sqrt(std::max(0.0, s2 / (hi_t - lo_t + 1))));
      }
    }
    lib.attrs["build.gp_length_scale"] = fmt::format("{}", fmt::join(len, ","));
    lib.attrs["build.gp_nugget"] = fmt::format("{}", nugget);
    lib.ccf_labels.clear();
    for (size_t r : farthest_points(X, cfg.n_ccf_templates))
      for (int l = 0; l < L; ++l) lib.ccf_labels.push_back(lab(r, l));
    return loo;
  };
  std::vector<size_t> rows(kept.size());
  std::iota(rows.begin(), rows.end(), 0);
  auto loo = build_once(rows);
  const double med = median_upper(loo);
  std::vector<size_t> good;
  std::vector<std::string> dropped;
  for (size_t r = 0; r < rows.size(); ++r) {
    if (loo[r] <= std::max(cfg.outlier_loo_factor * med, cfg.outlier_loo_floor) ||
        set.spectra[kept[rows[r]]].curated)
      good.push_back(rows[r]);
    else
      dropped.push_back(set.spectra[kept[rows[r]]].name);
  }
  if (!dropped.empty()) {
    spdlog::info("templates: dropping {} outliers (LOO rms > max({} x median {:.4f}, {})): {}",
                 dropped.size(), cfg.outlier_loo_factor, med, cfg.outlier_loo_floor, fmt::join(dropped, " "));
    loo = build_once(good);
  }
  std::vector<double> sorted = loo;
  std::sort(sorted.begin(), sorted.end());
  auto pct = [&](double q) { return sorted[static_cast<size_t>(q * (sorted.size() - 1))]; };
  lib.attrs["validation.loo_rms_median"] = fmt::format("{:.5f}", pct(0.5));
  lib.attrs["validation.loo_rms_p16"] = fmt::format("{:.5f}", pct(0.16));
  lib.attrs["validation.loo_rms_p84"] = fmt::format("{:.5f}", pct(0.84));
  lib.attrs["validation.loo_rms_p95"] = fmt::format("{:.5f}", pct(0.95));
  lib.attrs["validation.method"] =
      "analytic GP leave-one-out; rms of continuum-normalised flux incl. PCA truncation";
  lib.attrs["validation.dropped_outliers"] = fmt::format("{}", fmt::join(dropped, ","));
  lib.attrs["build.dlnlam"] = fmt::format("{}", cfg.dlnlam);
  lib.attrs["build.n_components"] = fmt::format("{}", cfg.n_components);
  lib.attrs["build.norm_degree"] = fmt::format("{}", cfg.norm_degree);
  lib.attrs["build.teff_range"] = fmt::format("{},{}", cfg.teff_min, cfg.teff_max);
  lib.attrs["build.n_input"] = fmt::format("{}", set.spectra.size());
  lib.attrs["build.template_kind"] = set.kind;
  if (!set.frame.empty()) lib.attrs["build.template_frame"] = set.frame;
  lib.attrs["build.template_medium"] = set.medium + (set.medium == "air" ? " (converted to vacuum)" : "");
  spdlog::info("templates: {} stars, K={} components, GP length {} nugget {}, LOO rms median {} (p84 {})",
               lib.n_train, lib.n_comp - 1, lib.attrs["build.gp_length_scale"],
               lib.attrs["build.gp_nugget"], lib.attrs["validation.loo_rms_median"],
               lib.attrs["validation.loo_rms_p84"]);
  return lib;
}

}  // namespace velox
