// Resolution-matrix convention (desispec.resolution, offsets +5..-5, column-aligned storage) with
// an ASYMMETRIC matrix: a symmetric one would hide a transposition bug.
#include <malloc.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <vector>

#include "backend/backend.hpp"
#include "fit/fitter.hpp"
#include "fit/resolution.hpp"
#include "io/readers.hpp"
#include "kernels/fit_eval.hpp"
#include "test_util.hpp"
#include "thin_library.hpp"

using namespace velox;

namespace {
// observed[i] = 0.7 model[i] + 0.3 model[i+1]: in dia storage res[d * n + m] = A[m - off_d, m]
// with off_d = 5 - d, so A[i, i] sits at d = 5 and A[i, i+1] (= A[m-1, m]) at d = 4.
void asymmetric(int n, std::vector<double>* wave, std::vector<float>* res) {
  wave->resize(n);
  res->assign(11 * n, 0.0f);
  for (int m = 0; m < n; ++m) {
    (*wave)[m] = 5000.0 + 0.8 * m;
    (*res)[5 * n + m] = 0.7f;
    if (m >= 1) (*res)[4 * n + m] = 0.3f;
  }
}
double apply_to_ramp(const std::vector<float>& rows, int i, int n) {
  std::vector<double> ramp(n);
  for (int j = 0; j < n; ++j) ramp[j] = j;
  std::vector<int> full_idx(n);
  for (int j = 0; j < n; ++j) full_idx[j] = j;
  // The fold's rows ([n][11]) diagonal-major, as prepare_spectrum packs them (FitData::rmat).
  std::vector<float> dia(rows.size());
  for (int j = 0; j < n; ++j)
    for (int k = 0; k < 11; ++k) dia[static_cast<size_t>(k) * n + j] = rows[j * 11 + k];
  kern::FitData d;
  d.n_full[0] = n;
  d.ndiag[0] = 11;
  d.rmat[0] = dia.data();
  d.full_idx = full_idx.data();
  return kern::apply_rmat(d, 0, i, ramp.data(), 1, 0);
}
}  // namespace

TEST_CASE("resolution rows keep the matrix's centroid: an asymmetric row shifts lines redward",
          "[resolution]") {
  const int n = 50;
  std::vector<double> wave;
  std::vector<float> res, rows;
  std::vector<char> ok;
  asymmetric(n, &wave, &res);
  // Sharp templates (FWHM 0): the row (variance 0.21 px^2) becomes a Gaussian at +0.3 px.
  fold_resolution_rows(wave, res, 11, 0.0, &rows, &ok);
  REQUIRE(ok[20]);
  // A ramp samples the centroid: 20 + 0.3 (a transposed matrix would give 19.7). The sampled
  // Gaussian (sigma 0.46 px) reproduces the centroid to ~1e-3 px.
  CHECK(apply_to_ramp(rows, 20, n) == Approx(20.3).margin(0.01));
  // Templates broader than the row (2.5 A = 3.1 px FWHM): only the centroid shift remains, by
  // linear interpolation, exact on a ramp.
  fold_resolution_rows(wave, res, 11, 2.5, &rows, &ok);
  CHECK(apply_to_ramp(rows, 20, n) == Approx(20.3).margin(1e-6));
}

TEST_CASE("a one-diagonal resolution matrix folds to its own weights", "[resolution]") {
  // ndiag 1 (a malformed or trivial matrix): each row is the pixel's weight (it once wrote
  // row[-1]).
  const int n = 20;
  std::vector<double> wave(n);
  std::vector<float> res(n, 0.9f), rows;
  std::vector<char> ok;
  for (int m = 0; m < n; ++m) wave[m] = 5000.0 + 0.8 * m;
  fold_resolution_rows(wave, res, 1, 2.5, &rows, &ok);
  REQUIRE(rows.size() == static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    CHECK(ok[i]);
    CHECK(rows[i] == Approx(0.9f));
  }
}

TEST_CASE("all-zero or non-finite resolution rows mark their pixels unusable", "[resolution]") {
  const int n = 30;
  std::vector<double> wave;
  std::vector<float> res, rows;
  std::vector<char> ok;
  asymmetric(n, &wave, &res);
  for (int d = 0; d < 11; ++d) res[d * n + 10] = 0.0f;  // column 10 zero: rows 9 and 10 lose it
  for (int d = 0; d < 11; ++d) res[d * n + 20] = 0.0f;
  for (int d = 0; d < 11; ++d) res[d * n + 21] = 0.0f;  // row 20 uses columns 20, 21: all zero
  res[5 * n + 25] = NAN;
  fold_resolution_rows(wave, res, 11, 0.0, &rows, &ok);
  CHECK(ok[5]);
  CHECK_FALSE(ok[20]);
  CHECK_FALSE(ok[25]);
}

TEST_CASE("matrix rows of an arm's edge pixels keep their whole weight (padded model grid)",
          "[resolution][fit]") {
  const auto& lib = test::thin_library();
  FitConfig cfg;
  ArmModelCache cache(lib);
  const FitContext ctx{lib, cache, cfg, "desi"};
  // A DESI-like arm inside MILES (4200-4440 A, 0.8 A pixels) with a symmetric 11-diagonal
  // Gaussian resolution matrix (sigma 1 px): every row sums to 1, its tails reach 5 pixels out.
  const int n = 300, nd = 11;
  Spectrum s;
  ArmData a;
  a.name = "B";
  a.ndiag = nd;
  a.resolution.assign(static_cast<size_t>(nd) * n, 0.0f);
  for (int m = 0; m < n; ++m) {
    a.wave_vac_A.push_back(4200.0 + 0.8 * m);
    a.flux.push_back(1.0f);
    a.ivar.push_back(100.0f);
    a.mask.push_back(0);
    double norm = 0;
    for (int d = 0; d < nd; ++d) norm += std::exp(-0.5 * (d - 5) * (d - 5));
    for (int d = 0; d < nd; ++d)
      a.resolution[d * n + m] = static_cast<float>(std::exp(-0.5 * (d - 5) * (d - 5)) / norm);
  }
  s.arms.push_back(a);
  const auto p = prepare_spectrum(s, ctx);
  REQUIRE(p.ready);
  REQUIRE(p.packed.full_lnlam.size() == 1);
  // The model's grid extends nd/2 pixels beyond each end, at the arm's own spacing.
  const auto& full = p.packed.full_lnlam[0];
  REQUIRE(full.size() == static_cast<size_t>(n + nd - 1));
  CHECK(full[5] == Approx(std::log(4200.0)).epsilon(1e-14));
  CHECK(full[1] - full[0] == Approx(std::log(4200.8 / 4200.0)).epsilon(1e-9));
  // A constant model through the rows: edge pixels get the interior's value (before the padding,
  // the first pixel lost the half of its row that lies beyond the arm).
  const std::vector<double> one(full.size(), 1.0);
  std::vector<float> rm;
  kern::FitData d = folded_view(p.packed, &rm);
  const int first = 0, last = static_cast<int>(p.packed.flux.size()) - 1, mid = last / 2;
  const double interior = kern::apply_rmat(d, 0, mid, one.data(), 1, 0);
  CHECK(kern::apply_rmat(d, 0, first, one.data(), 1, 0) == Approx(interior).epsilon(1e-6));
  CHECK(kern::apply_rmat(d, 0, last, one.data(), 1, 0) == Approx(interior).epsilon(1e-6));
}

TEST_CASE("only the rows and the model grid of used pixels are folded and evaluated",
          "[resolution][fit]") {
  // fold_resolution_rows with `want` (every third row of the arm's second quarter): the wanted
  // rows bit for bit as folded without it, the others left zero; row_ok as without it from the
  // first to the last wanted row, 0 before and beyond (the matrix is not read there; no edge row
  // is wanted, so none borrows); any_resolution_row_ok answers for those rows.
  const auto file = read_spectra(test::data("spectra/desi_lamost/coadd-lamost-dr8.fits"));
  REQUIRE(!file.spectra.empty());
  const auto& arm = file.spectra[0].arms.at(2);  // z: LAMOST's data end near 9100 A
  REQUIRE(arm.ndiag > 0);
  const int n = static_cast<int>(arm.size()), nd = arm.ndiag;
  std::vector<float> all_rows, some_rows;
  std::vector<char> all_ok, some_ok, want(n, 0);
  for (int i = n / 4; i < n / 2; i += 3) want[i] = 1;
  int first_wanted = n, last_wanted = 0;
  for (int i = 0; i < n; ++i)
    if (want[i]) first_wanted = std::min(first_wanted, i), last_wanted = i;
  fold_resolution_rows(arm.wave_vac_A.data(), n, arm.resolution.data(), nd, 2.5, &all_rows,
                       &all_ok);
  fold_resolution_rows(arm.wave_vac_A.data(), n, arm.resolution.data(), nd, 2.5, &some_rows,
                       &some_ok, nullptr, want.data());
  int n_before_ok = 0, n_beyond_ok = 0;
  for (int i = 0; i < n; ++i) {
    if (i >= first_wanted && i <= last_wanted) {
      REQUIRE(some_ok[i] == all_ok[i]);
    } else {
      REQUIRE(some_ok[i] == 0);
      (i < first_wanted ? n_before_ok : n_beyond_ok) += all_ok[i];
    }
  }
  REQUIRE(n_before_ok > 100);
  REQUIRE(n_beyond_ok > 100);
  std::vector<char> beyond(n);
  for (int i = last_wanted + 1; i < n; ++i) beyond[i] = 1;
  CHECK(any_resolution_row_ok(arm.resolution.data(), n, nd, beyond.data()));
  // Rows 100-199 with every weight zeroed (the matrix's columns 95-204): none usable, and row 50
  // among the candidates is.
  std::vector<float> holed(arm.resolution.begin(), arm.resolution.end());
  for (int d = 0; d < nd; ++d)
    for (int j = 100 - nd / 2; j < 200 + nd / 2; ++j) holed[static_cast<size_t>(d) * n + j] = 0.0f;
  std::vector<char> hole(n, 0);
  for (int i = 100; i < 200; ++i) hole[i] = 1;
  CHECK_FALSE(any_resolution_row_ok(holed.data(), n, nd, hole.data()));
  hole[50] = 1;
  CHECK(any_resolution_row_ok(holed.data(), n, nd, hole.data()));
  int n_zero_checked = 0;
  for (int i = 0; i < n; ++i)
    for (int k = 0; k < nd; ++k) {
      const float r = some_rows[static_cast<size_t>(i) * nd + k];
      if (want[i]) {
        REQUIRE(r == all_rows[static_cast<size_t>(i) * nd + k]);
      } else {
        REQUIRE(r == 0.0f);
        n_zero_checked += all_rows[static_cast<size_t>(i) * nd + k] != 0.0f;
      }
    }
  CHECK(n_zero_checked > 1000);  // unwanted rows that a full fold does fill

  // prepare_spectrum: the model's full grid spans the used pixels plus nd/2 on each side, not the
  // whole arm: an arm whose first 40 and last 100 pixels have ivar 0 (as LAMOST's z arm beyond
  // its data) gets a grid of the 160 used pixels + nd - 1, starting nd/2 pixels before the first.
  const auto& lib = test::thin_library();
  FitConfig cfg;
  ArmModelCache cache(lib);
  const FitContext ctx{lib, cache, cfg, "desi"};
  const int m = 300;
  Spectrum s;
  ArmData a;
  a.name = "B";
  a.ndiag = 11;
  a.resolution.assign(static_cast<size_t>(11) * m, 1.0f / 11);
  for (int j = 0; j < m; ++j) {
    a.wave_vac_A.push_back(4200.0 + 0.8 * j);
    a.flux.push_back(1.0f);
    a.ivar.push_back(j < 40 || j >= m - 100 ? 0.0f : 100.0f);
    a.mask.push_back(0);
  }
  s.arms.push_back(a);
  const auto p = prepare_spectrum(s, ctx);
  REQUIRE(p.ready);
  REQUIRE(p.packed.full_lnlam.size() == 1);
  const auto& full = p.packed.full_lnlam[0];
  CHECK(full.size() == static_cast<size_t>(160 + 10));
  CHECK(full[0] == Approx(std::log(4200.0 + 0.8 * 35)).epsilon(1e-14));
  CHECK(p.packed.full_idx.front() == 5);
  CHECK(p.packed.full_idx.back() == 5 + 159);
  CHECK(folded_rows(p.packed, 0).size() == full.size() * 11);
  CHECK(p.packed.n_rm_total() == full.size() * 11);  // the fit's scratch for the rows
  CHECK(p.packed.fold.size() == 3 * p.packed.flux.size());
}

TEST_CASE("folded rows of real DESI matrices equal the direct Gaussian of their moments",
          "[resolution]") {
  // Oracle: the row's moments, then the centre whose sampled Gaussian (one exp() per tap) has the
  // row's centroid, found by bisection to 1e-12 px (the sampled centroid increases with the
  // centre: its derivative is the weights' variance over sigma^2), not by the fold's steps. The
  // fold's rows must match within 1e-5 of the row's sum: its FP32 rows stop within 2e-6 px of
  // the centroid, which moves a weight by at most ~1.2e-6 of the sum for sigma >= 0.5 px (the
  // FP32 rows' range), and their recurrence rounds at ~1e-6; the FP64 rows stop within 1e-7 px.
  // The template FWHM is varied so that every kind of row occurs: FP32 rows with the plain
  // step, wide rows (FP32, Newton step) and narrow ones down to sigma 0.3 px (FP64, Newton step;
  // below sigma^2 0.125 px^2 the plain step diverged for centroids near a half pixel).
  const auto file = read_spectra(test::data("spectra/desi_lamost/coadd-lamost-dr8.fits"));
  REQUIRE(file.spectra.size() >= 8);
  const double to_sigma = 1.0 / std::sqrt(8.0 * std::log(2.0));
  size_t n_rows = 0, n_gauss = 0, n_narrow = 0, n_wide = 0;
  double worst = 0;
  for (size_t s = 0; s < 8; ++s)
    for (const auto& arm : file.spectra[s].arms) {
      if (arm.ndiag == 0) continue;
      const int n = static_cast<int>(arm.size()), nd = arm.ndiag, half = nd / 2;
      // FWHM 0.4-2.9 A along the arm, a different phase per spectrum
      std::vector<double> fwhm_pp(n);
      for (int i = 0; i < n; ++i) fwhm_pp[i] = 1.65 + 1.25 * std::sin(0.01 * i + s);
      std::vector<float> rows;
      std::vector<char> ok;
      fold_resolution_rows(arm.wave_vac_A.data(), n, arm.resolution.data(), nd, 0.0, &rows, &ok,
                           fwhm_pp.data());
      for (int i = half; i < n - half; ++i) {  // complete rows (edge rows borrow a neighbour's)
        double s0 = 0, s1 = 0, s2 = 0;
        for (int k = 0; k < nd; ++k) {
          const double r = arm.resolution[static_cast<size_t>(nd - 1 - k) * n + i + k - half];
          s0 += r, s1 += r * (k - half), s2 += r * (k - half) * (k - half);
        }
        if (!ok[i]) continue;
        ++n_rows;
        const double mu = s1 / s0, dlam = (arm.wave_vac_A[i + 1] - arm.wave_vac_A[i - 1]) / 2;
        const double sig_t = fwhm_pp[i] * to_sigma / dlam;
        const double var = s2 / s0 - mu * mu - sig_t * sig_t;
        if (!(var > 0.09) || std::fabs(mu) > half) continue;
        ++n_gauss;
        n_narrow += var < 0.25;
        n_wide += var > 3.0;
        double w[kMaxResolutionDiagonals], norm = 0;
        auto centroid = [&](double c) {
          norm = 0;
          double m1 = 0;
          for (int k = 0; k < nd; ++k) {
            w[k] = std::exp(-0.5 * std::pow((k - half - c) / std::sqrt(var), 2));
            norm += w[k], m1 += w[k] * (k - half);
          }
          return m1 / norm;
        };
        double lo = -half, hi = half;
        for (int it = 0; it < 60 && hi - lo > 1e-12; ++it) {
          const double c = 0.5 * (lo + hi);
          (centroid(c) < mu ? lo : hi) = c;
        }
        centroid(0.5 * (lo + hi));
        for (int k = 0; k < nd; ++k)
          worst = std::max(
              worst, std::fabs(rows[static_cast<size_t>(i) * nd + k] - s0 * w[k] / norm) / s0);
      }
    }
  INFO(n_rows << " rows, " << n_gauss << " Gaussian rows, " << n_narrow << " narrow, " << n_wide
              << " wide");
  REQUIRE(n_gauss > 1000);  // the test must exercise the Gaussian branch on real rows
  REQUIRE(n_narrow > 100);
  REQUIRE(n_wide > 100);
  CHECK(worst < 1e-5);
}

TEST_CASE(
    "the two-phase fold writes each row alone or in batches, row- or diagonal-major, bit "
    "for bit",
    "[resolution]") {
  // ResolutionFold::write_rows steps the centroid iteration of 8 rows together: a row's floats
  // must not depend on its batch-mates (written one row per call: the same bits), nor on the
  // layout (prepare_spectrum writes diagonal-major into its grid, the row-major fold
  // fold_resolution_rows). A template FWHM rising 0.5 -> 6 A along the arm gives both Gaussian
  // and sub-pixel (linear) rows, and every third pixel between n/8 and 7n/8 (not a multiple of
  // 8) crosses batch boundaries at every offset.
  const auto file = read_spectra(test::data("spectra/desi_lamost/coadd-lamost-dr8.fits"));
  REQUIRE(!file.spectra.empty());
  const auto& arm = file.spectra[0].arms.at(0);
  REQUIRE(arm.ndiag > 0);
  const long n = static_cast<long>(arm.size());
  const int nd = arm.ndiag;
  std::vector<char> want(n, 0);
  for (long i = n / 8; i < 7 * n / 8; i += 3) want[i] = 1;
  want[7 * n / 8 + 1] = 1;  // the count is then not a multiple of 8 (required below)
  ResolutionFold fold;
  fold.set(arm.resolution.data(), n, nd, want.data());
  std::vector<size_t> rows;
  std::vector<double> fwhm;
  for (long i = 0; i < n; ++i)
    if (want[i] && fold.ok(i)) {
      rows.push_back(i);
      fwhm.push_back(0.5 + 5.5 * static_cast<double>(i) / n);
    }
  REQUIRE(rows.size() > 500);
  REQUIRE(rows.size() % 8 != 0);
  const long j_lo = static_cast<long>(rows.front()) - 3;  // a grid starting before the first row
  const long n_grid = static_cast<long>(rows.back()) - j_lo + 5;
  std::vector<float> dia(static_cast<size_t>(n_grid) * nd, 0.0f), one(n * nd, 0.0f);
  fold.write_rows(rows.data(), rows.size(), arm.wave_vac_A.data(), fwhm.data(), 0.0, dia.data(), 1,
                  n_grid, j_lo);
  for (size_t r = 0; r < rows.size(); ++r)
    fold.write_rows(&rows[r], 1, arm.wave_vac_A.data(), &fwhm[r], 0.0, one.data(), nd, 1, 0);
  // The old entry point (row-major, per-pixel FWHM, the same wanted rows).
  std::vector<double> fwhm_pp(n, 0.0);
  for (size_t r = 0; r < rows.size(); ++r) fwhm_pp[rows[r]] = fwhm[r];
  std::vector<float> major;
  std::vector<char> ok;
  fold_resolution_rows(arm.wave_vac_A.data(), n, arm.resolution.data(), nd, 0.0, &major, &ok,
                       fwhm_pp.data(), want.data());
  size_t n_gauss = 0, n_linear = 0, n_diff = 0;
  for (size_t r = 0; r < rows.size(); ++r) {
    const size_t i = rows[r];
    int nonzero = 0;
    for (int k = 0; k < nd; ++k) {
      const float a = dia[static_cast<size_t>(k) * n_grid + (i - j_lo)];
      n_diff += std::memcmp(&a, &one[i * nd + k], sizeof a) != 0;
      n_diff += std::memcmp(&a, &major[i * nd + k], sizeof a) != 0;
      nonzero += a != 0.0f;
    }
    (nonzero > 2 ? n_gauss : n_linear) += 1;
  }
  INFO(n_gauss << " Gaussian rows, " << n_linear << " linear rows");
  CHECK(n_diff == 0);
  CHECK(n_gauss > 100);
  CHECK(n_linear > 100);
  // Nothing is written outside the listed rows' entries.
  size_t n_written = 0;
  for (const float v : dia) n_written += v != 0.0f;
  size_t n_expected = 0;
  for (const size_t i : rows)
    for (int k = 0; k < nd; ++k) n_expected += one[i * nd + k] != 0.0f;
  CHECK(n_written == n_expected);
}

TEST_CASE("the model variance uses the running median of the flux over +-15 used pixels",
          "[resolution][fit]") {
  // prepare_spectrum keeps the window sorted by replacing the pixel that leaves with the one that
  // enters. Oracle: a sorted copy of each window (element m/2, the upper median) and
  // 1/(1/ivar + (sigma_m F)^2). Tolerance 1e-6 relative: the fit's form divides once (ivar /
  // (1 + ivar s^2)), and both end as floats (6e-8). Real LAMOST spectra: noisy flux, so the
  // window's order changes at every step, and masked pixels leave gaps in the used pixels.
  const auto& lib = test::thin_library();
  REQUIRE(!lib.model_sigma.empty());
  ArmModelCache cache(lib);
  FitConfig cfg;
  REQUIRE(cfg.model_variance);
  const FitContext ctx{lib, cache, cfg, "lamost-dr8"};
  size_t n_pix = 0, n_lowered = 0;
  double worst = 0;
  for (const char* name :
       {"spec-55859-F5902_sp03-232.fits.gz", "spec-55859-F5902_sp05-234.fits.gz"}) {
    const auto file = read_spectra(test::data(std::string("spectra/lamost_dr8/fits/") + name));
    REQUIRE(!file.spectra.empty());
    const Spectrum& spec = file.spectra[0];
    const PreparedSpectrum p = prepare_spectrum(spec, ctx);
    REQUIRE(p.ready);
    const Packed& all = p.packed;
    for (int a = 0; a < all.n_arms; ++a) {
      const ArmView arm = spec.arms.at(all.input_arm[a]).view();
      const long i0 = all.arm_start[a], i1 = all.arm_start[a + 1];
      for (long i = i0; i < i1; ++i) {
        std::vector<float> win(all.flux.begin() + std::max(i0, i - 15),
                               all.flux.begin() + std::min(i1, i + 16));
        std::sort(win.begin(), win.end());
        const double F = std::fabs(win[win.size() / 2]);
        const double sm =
            cfg.model_variance_scale * lib.model_sigma_at(arm.wave_vac_A[all.input_pixel[i]]) * F;
        const double iv = arm.ivar[all.input_pixel[i]];
        const double want = 1.0 / (1.0 / iv + sm * sm);
        worst = std::max(worst, std::fabs(all.ivar[i] - want) / want);
        ++n_pix;
        n_lowered += want < 0.99 * iv;
      }
    }
  }
  INFO(n_pix << " pixels, " << n_lowered << " with ivar lowered by more than 1%");
  REQUIRE(n_pix > 5000);
  REQUIRE(n_lowered > 100);  // the model variance must matter on these spectra
  CHECK(worst < 1e-6);
}

TEST_CASE("a per-arm velocity zero point moves that half's wavelengths and VRAD_R, not VRAD_B",
          "[fit][realdata]") {
  // A real LAMOST DR8 star (one arm, split at 5800 A): with fit.arm_zero_point_kms R = 30 km/s
  // the red half's ln lambda drop by ln(1 + 30/c) and the blue half's stay; fitted, VRAD_R moves
  // by about -30 km/s (the labels move a little, so within 3 km/s) and VRAD_B by much less.
  const auto& lib = test::thin_library();
  auto sf = read_spectra(test::data("spectra/lamost_dr8/fits/spec-55859-F5902_sp03-232.fits.gz"));
  REQUIRE(!sf.spectra.empty());
  const std::string fmt = format_name(sf.format);
  FitConfig off, on;
  off.arm_zero_point_kms.clear();
  on.arm_zero_point_kms = {{fmt, {{"R", 30.0}}}};
  ArmModelCache c_off(lib), c_on(lib);
  const FitContext x_off{lib, c_off, off, fmt}, x_on{lib, c_on, on, fmt};
  const auto p_off = prepare_spectrum(sf.spectra[0], x_off);
  const auto p_on = prepare_spectrum(sf.spectra[0], x_on);
  REQUIRE(p_off.packed.lnlam.size() == p_on.packed.lnlam.size());
  const double split = off.arm_split_A.at(fmt), d = std::log1p(30.0 / kern::kSpeedOfLight_kms);
  int n_red = 0;
  for (size_t i = 0; i < p_on.packed.lnlam.size(); ++i) {
    const bool red = sf.spectra[0].arms[0].wave_vac_A[p_on.packed.input_pixel[i]] >= split;
    n_red += red;
    REQUIRE(p_off.packed.lnlam[i] - p_on.packed.lnlam[i] == Approx(red ? d : 0.0).margin(1e-12));
    REQUIRE(p_on.packed.xleg[i] == p_off.packed.xleg[i]);  // the continuum's x does not move
  }
  CHECK(n_red > 500);
  const auto r_off = fit_spectrum(sf.spectra[0], x_off);
  const auto r_on = fit_spectrum(sf.spectra[0], x_on);
  REQUIRE(r_off.SUCCESS);
  CHECK(r_on.VRAD_R - r_off.VRAD_R == Approx(-30.0).margin(3.0));
  CHECK(std::fabs(r_on.VRAD_B - r_off.VRAD_B) < 5.0);
}

TEST_CASE("apply_rmat_rows equals apply_rmat pixel by pixel, bit for bit, for 1 to 8 columns",
          "[resolution]") {
  // The CPU teams apply the rows of a block of used pixels at once (independent accumulators);
  // each pixel's sums must stay apply_rmat's (the GPU lanes' form), component by component. Used
  // pixels with gaps (masked pixels), rows complete in the interior and cut at both ends of the
  // full grid, a tail shorter than a block. This file is compiled for the baseline ISA (no FMA),
  // so the order of the sums is checked bit for bit; the AVX2/AVX-512 kernels may fuse the
  // one-column block's multiply-adds differently (last bits, kernels/fit_eval.hpp).
  const int n = 97, nd = 11;
  std::vector<float> rows(static_cast<size_t>(n) * nd);
  for (size_t k = 0; k < rows.size(); ++k) rows[k] = static_cast<float>(std::sin(0.37 * k) + 1.1);
  std::vector<int> full_idx;
  for (int j = 0; j < n; ++j)
    if (j % 13 != 7) full_idx.push_back(j);  // includes j < 5 and j > n - 6: cut rows
  const int n_used = static_cast<int>(full_idx.size());
  kern::FitData d;
  d.n_full[0] = n;
  d.ndiag[0] = nd;
  d.rmat[0] = rows.data();
  d.full_idx = full_idx.data();
  for (int np = 1; np <= 8; ++np) {
    std::vector<double> v(static_cast<size_t>(n) * np);
    for (size_t k = 0; k < v.size(); ++k) v[k] = std::cos(0.11 * k) * (1.0 + 1e-3 * k);
    std::vector<double> ref(static_cast<size_t>(n_used) * np), got(ref.size(), -1.0);
    for (int i = 0; i < n_used; ++i)
      for (int q = 0; q < np; ++q) ref[i * np + q] = kern::apply_rmat(d, 0, i, v.data(), np, q);
    // From the second used pixel: blocks that do not start at 0
    kern::apply_rmat_rows(d, 0, 0, 1, v.data(), np, got.data());
    kern::apply_rmat_rows(d, 0, 1, n_used, v.data(), np, got.data());
    CAPTURE(np);
    CHECK(std::memcmp(ref.data(), got.data(), ref.size() * sizeof(double)) == 0);
  }
}

TEST_CASE("write_rows writes every tap of each listed row and no other row", "[resolution]") {
  // The fit writes only the used pixels' columns of its row scratch (kernels/fold.hpp) and
  // reads them alone, so each row form must write all ndiag taps of its row. The matrix is
  // stored by columns (res[d * n + c], row i's tap o from column i + o at d = half - o), so
  // regions of columns make rows of each form: Gaussians (sigma 1.5 px, template FWHM 0), rows
  // narrower than a pixel (all weight on the central tap: linear interpolation, which wrote 2
  // taps), and rows with negative weights whose centroid lies beyond the taps (+half: 1.0, 0:
  // -1.2, -half: 0.55; centroid 1.29 half). 11 diagonals take the fold's unrolled form, 7 its
  // general one, 1 the one-diagonal rows. The output starts as NaN: a tap not written stays NaN.
  for (const int nd : {11, 7, 1}) {
    const int n = 80, half = nd / 2;
    std::vector<double> wave(n);
    std::vector<float> res(static_cast<size_t>(nd) * n, 0.0f);
    for (int c = 0; c < n; ++c) {
      wave[c] = 5000.0 + 0.8 * c;
      for (int d = 0; d < nd; ++d) {
        const double o = half - d;
        float w = static_cast<float>(std::exp(-0.5 * o * o / 2.25));  // Gaussian rows
        if (c >= 10 && c < 31) w = d == half ? 1.0f : 0.0f;           // spikes
        if (nd > 1 && c >= 45 && c < 61)
          w = d == 0 ? 1.0f : d == half ? -1.2f : d == nd - 1 ? 0.55f : 0.0f;
        res[d * n + c] = w;
      }
    }
    ResolutionFold fold;
    fold.set_span(res.data(), n, nd, 6, 70);
    std::vector<size_t> rows;
    for (size_t i = 6; i <= 70; ++i)
      if (fold.ok(i) && i != 20 && i != 52) rows.push_back(i);  // rows 20 and 52 are not listed
    INFO(nd << " diagonals");
    REQUIRE(rows.size() > 50);
    std::vector<float> out(static_cast<size_t>(nd) * n, NAN);  // diagonal-major, offset 0
    fold.write_rows(rows.data(), rows.size(), wave.data(), nullptr, 0.0, out.data(), 1, n, 0);
    for (int j = 0; j < n; ++j) {
      const bool listed = std::find(rows.begin(), rows.end(), static_cast<size_t>(j)) != rows.end();
      int written = 0;
      for (int k = 0; k < nd; ++k) written += std::isfinite(out[static_cast<size_t>(k) * n + j]);
      INFO("row " << j);
      CHECK(written == (listed ? nd : 0));
    }
    // A spike row holds its weight on the central tap alone; a centroid row keeps its sum.
    CHECK(out[static_cast<size_t>(half) * n + 18] == Approx(1.0f));
    if (nd == 1) continue;
    CHECK(out[static_cast<size_t>(half - 1) * n + 18] == 0.0f);
    double sum54 = 0;
    for (int k = 0; k < nd; ++k) sum54 += out[static_cast<size_t>(k) * n + 54];
    CHECK(sum54 == Approx(0.35).epsilon(1e-5));
  }
}

TEST_CASE("the rows built from fold parameters fill exactly the used pixels' columns",
          "[resolution][fit]") {
  // The host hands the fit three fold parameters per used pixel (Packed::fold) and the fit
  // writes each pixel's row into its column of the arm's grid (full_idx; kernels/fold.hpp),
  // leaving the other columns alone. On real DESI-layout fibres (masked pixels inside the arms),
  // folded_rows (the rows as the CPU fit builds them, on a zeroed grid) has every entry finite, a
  // column of an unused pixel all zero (a row written to the wrong column shows there), and a
  // used pixel's column its folded row (sum ~1: DESI rows are normalised, tolerance for the
  // rows the fold borrows at the edges and float rounding).
  const auto& lib = test::thin_library();
  FitConfig cfg;
  ArmModelCache cache(lib);
  const FitContext ctx{lib, cache, cfg, "desi"};
  const auto file = read_spectra(test::data("spectra/desi_lamost/coadd-lamost-dr8.fits"));
  int n_gaps = 0, n_arms = 0;
  for (size_t s = 0; s < std::min<size_t>(file.spectra.size(), 8); ++s) {
    const auto p = prepare_spectrum(file.spectra[s], ctx);
    if (!p.ready) continue;
    const Packed& pk = p.packed;
    for (int a = 0; a < pk.n_arms; ++a) {
      if (pk.full_lnlam[a].empty()) continue;
      ++n_arms;
      const size_t ng = pk.full_lnlam[a].size(), nd = static_cast<size_t>(pk.ndiag[a]);
      const std::vector<float> rows = folded_rows(pk, a);  // as the fit builds them
      REQUIRE(rows.size() == ng * nd);
      std::vector<char> used(ng, 0);
      for (int i = pk.arm_start[a]; i < pk.arm_start[a + 1]; ++i) used[pk.full_idx[i]] = 1;
      for (size_t jj = 0; jj < ng; ++jj) {
        double sum = 0;
        bool finite = true, zero = true;
        for (size_t k = 0; k < nd; ++k) {
          const float w = rows[k * ng + jj];
          finite = finite && std::isfinite(w);
          zero = zero && w == 0.0f;
          sum += w;
        }
        INFO("fibre " << s << " arm " << a << " grid pixel " << jj);
        REQUIRE(finite);
        if (used[jj]) {
          CHECK(sum == Approx(1.0).margin(0.05));
        } else {
          CHECK(zero);
          n_gaps += jj >= nd / 2 && jj + nd / 2 < ng;  // an unused pixel inside the arm's span
        }
      }
    }
  }
  CHECK(n_arms >= 8);
  CHECK(n_gaps > 0);  // the fibres have unused pixels between used ones: the gaps were tested
}

TEST_CASE("folded Gaussian rows keep their centroid for every width and centre", "[resolution]") {
  // Synthetic rows: sampled Gaussians with centroids from -3 to 3 px and sigma^2 from 0.1 to
  // 6 px^2, through every path of the fold (FP32 plain steps, FP32 Newton steps for wide rows,
  // FP64 Newton steps for narrow rows and centroids beyond 2 px; templates infinitely sharp, so
  // each row's Gaussian has the row's own variance). Property: the folded row's centroid equals
  // the input row's within 5e-6 px (FP32 rows stop within 2e-6 px; the stored floats round at
  // ~6e-8 of a weight, <= 5 px from the centre) and its sum equals the row's within 1e-6.
  const int n = 600, nd = 11, half = nd / 2;
  std::vector<double> wave(n);
  for (int j = 0; j < n; ++j) wave[j] = 4000.0 + 0.8 * j;
  std::vector<float> res(static_cast<size_t>(nd) * n, 0.0f);
  std::vector<double> mu_in(n), var_in(n);
  for (int i = 0; i < n; ++i) {
    const double u = ((i * 7) % 53) / 52.0;  // every third row narrow: sigma^2 0.1-0.3 px^2
    const double mu = -3.0 + 6.0 * (i % 61) / 60.0, var = i % 3 ? 0.1 + 5.9 * u : 0.1 + 0.2 * u;
    double w[nd], s = 0;
    for (int k = 0; k < nd; ++k)
      s += w[k] = std::exp(-0.5 * (k - half - mu) * (k - half - mu) / var);
    for (int k = 0; k < nd; ++k) {
      const long j = i + k - half;  // row i's weight of model[j]
      if (j >= 0 && j < n)
        res[static_cast<size_t>(nd - 1 - k) * n + j] = static_cast<float>(w[k] / s);
    }
    mu_in[i] = mu, var_in[i] = var;
  }
  std::vector<float> rows;
  std::vector<char> ok;
  fold_resolution_rows(wave.data(), n, res.data(), nd, 0.0, &rows, &ok);
  size_t n_checked = 0, n_narrow = 0, n_wide = 0, n_far = 0;
  double worst_c = 0, worst_s = 0;
  for (int i = half; i < n - half; ++i) {
    REQUIRE(ok[i]);
    double s0 = 0, s1 = 0, s2 = 0, f0 = 0, f1 = 0;
    for (int k = 0; k < nd; ++k) {
      const double r = res[static_cast<size_t>(nd - 1 - k) * n + i + k - half];
      s0 += r, s1 += r * (k - half), s2 += r * (k - half) * (k - half);
      const double q = rows[static_cast<size_t>(i) * nd + k];
      f0 += q, f1 += q * (k - half);
    }
    const double m = s1 / s0, var = s2 / s0 - m * m;
    if (!(var > 0.09)) continue;  // narrower than the fold's Gaussians: linear rows
    ++n_checked;
    n_narrow += var < 0.25;
    n_wide += var > 3.0;
    n_far += std::fabs(m) > 2.0;
    worst_c = std::max(worst_c, std::fabs(f1 / f0 - m));
    worst_s = std::max(worst_s, std::fabs(f0 - s0) / s0);
  }
  INFO(n_checked << " rows: " << n_narrow << " narrow, " << n_wide << " wide, " << n_far
                 << " centred beyond 2 px; worst centroid " << worst_c << " px, sum " << worst_s);
  REQUIRE(n_narrow > 20);
  REQUIRE(n_wide > 100);
  REQUIRE(n_far > 50);
  CHECK(worst_c < 5e-6);
  CHECK(worst_s < 1e-6);
}
