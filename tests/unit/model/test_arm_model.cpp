// The arm model's host-side forms against the kernels they stand for.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "emulator/library.hpp"
#include "kernels/convolve.hpp"
#include "kernels/emulator_eval.hpp"
#include "model/arm_model.hpp"
#include "thin_library.hpp"

TEST_CASE("convolve_columns equals gaussian_convolve_column bit for bit in every column",
          "[kernels][model]") {
  // make_arm_model's form (weights once per pixel for all columns) against the kernel's one
  // column at a time: widths from 0 (copied) through sub-threshold (< 0.05: copied) to 6 pixels,
  // with kernels cut at both ends of the array.
  const int n = 500, ncol = 7;
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> uf(-1.0f, 2.0f);
  std::uniform_real_distribution<double> us(0.0, 6.0);
  std::vector<float> in(static_cast<size_t>(n) * ncol), out(in.size()), ref(in.size());
  for (auto& x : in) x = uf(rng);
  std::vector<double> sigma(n);
  for (int t = 0; t < n; ++t) sigma[t] = t % 50 == 0 ? 0.0 : t % 37 == 0 ? 0.04 : us(rng);
  velox::convolve_columns(in.data(), out.data(), n, ncol, sigma.data());
  for (int c = 0; c < ncol; ++c)
    velox::kern::gaussian_convolve_column(in.data() + c, ref.data() + c, n, ncol, sigma.data());
  CHECK(std::memcmp(out.data(), ref.data(), out.size() * sizeof(float)) == 0);
}

TEST_CASE("evaluate_many equals the emulator's sum per template, bit for bit", "[model]") {
  // make_arm_model's CCF templates come from evaluate_many (the templates interleaved so that
  // they vectorise); each must equal the plain per-template sum sum_k c_k basis[t][k] in k
  // order, with the library's own basis and with a convolved one.
  const auto& lib = velox::test::thin_library();
  const int L = lib.n_label, K1 = lib.n_comp, T = lib.n_tpix;
  const int n = static_cast<int>(lib.ccf_labels.size()) / L;
  REQUIRE(n >= 2);
  std::vector<float> conv(lib.basis.size());
  std::vector<double> sigma(T, 1.7);
  velox::convolve_columns(lib.basis.data(), conv.data(), T, K1, sigma.data());
  for (const float* basis : {lib.basis.data(), static_cast<const float*>(conv.data())}) {
    const auto many = lib.evaluate_many(lib.ccf_labels.data(), n, basis);
    REQUIRE(many.size() == static_cast<size_t>(n) * T);
    std::vector<double> c(K1), dc(static_cast<size_t>(L) * K1);
    int differ = 0;
    for (int j = 0; j < n; ++j) {
      velox::kern::emulator_coeffs(lib.view(), lib.ccf_labels.data() + j * L, c.data(), dc.data());
      for (int t = 0; t < T; ++t) {
        double s = 0.0;
        for (int k = 0; k < K1; ++k) s += c[k] * basis[static_cast<size_t>(t) * K1 + k];
        differ += static_cast<float>(s) != many[static_cast<size_t>(j) * T + t];
      }
    }
    CHECK(differ == 0);
    // evaluate() (one template: the single-template blocks) equals its row of evaluate_many
    for (int j : {0, n - 1}) {
      const auto one = lib.evaluate(lib.ccf_labels.data() + j * L, basis);
      CHECK(std::memcmp(one.data(), many.data() + static_cast<size_t>(j) * T,
                        one.size() * sizeof(float)) == 0);
    }
  }
}

TEST_CASE("model_sigma_at_ln picks lround's template pixel, ties included, for many pixels",
          "[model]") {
  // The lookup rounds without a libm call (common/rounding.hpp nearest_index): it must pick the
  // pixel std::lround picks, clamped to the grid, at exact half-pixel positions (ties away from
  // zero), just below and above them, and beyond both ends of the grid; the per-grid form
  // prepare_spectrum uses (model_sigma at nearest_pixel_ln where ln > -inf, else 0) must give the
  // same.
  const auto& lib = velox::test::thin_library();
  REQUIRE(!lib.model_sigma.empty());
  std::vector<double> ln;
  for (int t = -3; t < lib.n_tpix + 3; t += 7)
    for (const double f : {0.0, 0.25, 0.5, 0.75}) {
      const double x = lib.lnlam0 + (t + f) * lib.dlnlam;
      ln.push_back(x);
      ln.push_back(std::nextafter(x, 0.0));
      ln.push_back(std::nextafter(x, 100.0));
    }
  ln.push_back(-INFINITY);
  ln.push_back(lib.lnlam0 + 1e6 * lib.dlnlam);
  std::vector<double> many(ln.size());
  for (size_t k = 0; k < ln.size(); ++k)
    many[k] = ln[k] > -INFINITY ? lib.model_sigma[static_cast<size_t>(
                                      lib.nearest_pixel_ln(ln[k], lib.model_sigma.size()))]
                                : 0.0;
  const long last = static_cast<long>(lib.model_sigma.size()) - 1;
  int differ = 0, differ_lround = 0, distinct = 0;
  for (size_t k = 0; k < ln.size(); ++k) {
    differ += many[k] != lib.model_sigma_at_ln(ln[k]);
    const double ref = std::isfinite(ln[k])
                           ? lib.model_sigma[static_cast<size_t>(std::clamp(
                                 std::lround((ln[k] - lib.lnlam0) / lib.dlnlam), 0L, last))]
                           : 0.0;  // the lookup's guard
    differ_lround += lib.model_sigma_at_ln(ln[k]) != ref;
    distinct += k > 0 && many[k] != many[k - 1];
  }
  CHECK(differ == 0);
  CHECK(differ_lround == 0);
  CHECK(distinct > 1000);  // the lookups must land on many different pixels
}

TEST_CASE("effective_resolution reads a Gaussian line spread cut off by the band at its own R",
          "[model]") {
  // Rows of a Gaussian of resolving power R on a DESI-like linear grid of 0.8 A pixels, cut to
  // 11 diagonals and normalised, as desispec stores them (res[d * n + j], offsets +5 .. -5).
  // R 1800 (LAMOST's line spread on DESI pixels, spectra/desi_lamost) in the z arm: sigma 2.2-2.9
  // px, of which the band keeps 70-80% of the second moment: read as that moment, R came out
  // as 1980 (the VSINI floor 9% too low). R 1800 in the b arm (sigma 1.0-1.4 px: barely cut),
  // DESI-like R 4000 in the z arm (sigma 1.0-1.3 px) and a narrow R 5000 in the b arm (sigma
  // 0.4-0.6 px, where 11 taps sample it coarsely). Tolerance 0.5%: the median row's table
  // inversion is exact to 1e-4, the rest is the resolving power's change over the 7-pixel
  // sampling of the rows.
  struct Case {
    double lo, hi, R;
  };
  for (const Case c : {Case{7520, 9824, 1800}, Case{3600, 5930, 1800}, Case{7520, 9824, 4000},
                       Case{3600, 5930, 5000}}) {
    const int ndiag = 11, half = 5;
    std::vector<double> wave;
    for (double w = c.lo; w <= c.hi; w += 0.8) wave.push_back(w);
    const size_t n = wave.size();
    std::vector<float> res(ndiag * n, 0.0f);
    for (size_t j = 0; j < n; ++j) {
      const double sigma_px = wave[j] / c.R / (2.0 * std::sqrt(2.0 * std::log(2.0))) / 0.8;
      double w[ndiag], sum = 0;
      for (int d = 0; d < ndiag; ++d) {
        const double o = half - d;
        w[d] = std::exp(-0.5 * o * o / (sigma_px * sigma_px));
        sum += w[d];
      }
      for (int d = 0; d < ndiag; ++d) res[d * n + j] = static_cast<float>(w[d] / sum);
    }
    const double R = velox::effective_resolution(wave.data(), n, res.data(), ndiag);
    INFO(c.lo << "-" << c.hi << " A at R " << c.R << ": read " << R);
    CHECK(std::fabs(R / c.R - 1.0) < 0.005);
  }
}
