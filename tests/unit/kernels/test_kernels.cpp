// Unit tests of the __host__ __device__ kernels, run through the CPU (serial) team.
#include <catch2/catch.hpp>
#include <cmath>
#include <random>
#include <vector>

#include "backend/cpu/isa/simd_forms.hpp"
#include "kernels/convolve.hpp"
#include "kernels/emulator_eval.hpp"
#include "kernels/fit_eval.hpp"
#include "kernels/linalg.hpp"
#include "kernels/lm.hpp"
#include "kernels/physics.hpp"
#include "kernels/rows_stage.hpp"

using namespace velox::kern;

TEST_CASE("cholesky solves a symmetric positive definite system", "[kernels]") {
  double a[9] = {4, 2, 0.6, 2, 5, 1, 0.6, 1, 3};
  const double a0[9] = {4, 2, 0.6, 2, 5, 1, 0.6, 1, 3};
  double x_true[3] = {1.0, -2.0, 0.5}, b[3];
  for (int i = 0; i < 3; ++i)
    b[i] = a0[i * 3] * x_true[0] + a0[i * 3 + 1] * x_true[1] + a0[i * 3 + 2] * x_true[2];
  REQUIRE(cholesky(a, 3));
  cholesky_solve(a, 3, b);
  for (int i = 0; i < 3; ++i) CHECK(b[i] == Approx(x_true[i]).epsilon(1e-12));
  double inv[9];
  cholesky_inverse(a, 3, inv);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) {
      double s = 0;
      for (int k = 0; k < 3; ++k) s += a0[i * 3 + k] * inv[k * 3 + j];
      CHECK(s == Approx(i == j ? 1.0 : 0.0).margin(1e-12));
    }
}

TEST_CASE("cholesky rejects a singular matrix", "[kernels]") {
  double a[4] = {1, 1, 1, 1};
  CHECK_FALSE(cholesky(a, 2));
}

TEST_CASE("cubic weights reproduce quadratics and have exact derivatives", "[kernels]") {
  for (double f : {0.0, 0.13, 0.5, 0.77, 0.999}) {
    double w[4], dw[4];
    cubic_weights(f, w, dw);
    double s = 0, q = 0, dq = 0;
    for (int j = 0; j < 4; ++j) {
      const double x = j - 1.0;
      s += w[j];
      q += w[j] * (x * x - 3 * x + 2);
      dq += dw[j] * (x * x - 3 * x + 2);
    }
    CHECK(s == Approx(1.0).epsilon(1e-14));
    CHECK(q == Approx(f * f - 3 * f + 2).epsilon(1e-12));  // Keys a=-0.5 is exact to 2nd order
    CHECK(dq == Approx(2 * f - 3).epsilon(1e-12));
  }
}

TEST_CASE("doppler factor is relativistic and invertible", "[kernels]") {
  for (double v : {-500.0, -30.0, 0.0, 12.5, 900.0}) {
    const double b = v / kSpeedOfLight_kms;
    CHECK(std::exp(ln_doppler(v)) == Approx(std::sqrt((1 + b) / (1 - b))).epsilon(1e-14));
    CHECK(velocity_from_ln_doppler(ln_doppler(v)) == Approx(v).margin(1e-9));
    const double h = 1e-3;
    CHECK(dln_doppler_dv(v) ==
          Approx((ln_doppler(v + h) - ln_doppler(v - h)) / (2 * h)).epsilon(1e-7));
  }
}

TEST_CASE("legendre polynomials match closed forms", "[kernels]") {
  double p[5];
  for (double x : {-1.0, -0.3, 0.0, 0.8, 1.0}) {
    legendre(x, 4, p);
    CHECK(p[2] == Approx(0.5 * (3 * x * x - 1)).margin(1e-14));
    CHECK(p[3] == Approx(0.5 * (5 * x * x * x - 3 * x)).margin(1e-14));
    CHECK(p[4] == Approx((35 * std::pow(x, 4) - 30 * x * x + 3) / 8).margin(1e-14));
  }
}

TEST_CASE("chebyshev polynomials match closed forms, one point and 8 at once", "[kernels]") {
  double p[5], pv[5 * 8], xs[8];
  for (int v = 0; v < 8; ++v) xs[v] = -1.0 + 2.0 * v / 7.0;
  chebyshev_v<8>(xs, 4, pv);
  for (int v = 0; v < 8; ++v) {
    const double x = xs[v];
    chebyshev(x, 4, p);
    CHECK(p[0] == 1.0);
    CHECK(p[1] == x);
    CHECK(p[2] == Approx(2 * x * x - 1).margin(1e-14));
    CHECK(p[3] == Approx(4 * x * x * x - 3 * x).margin(1e-14));
    CHECK(p[4] == Approx(8 * std::pow(x, 4) - 8 * x * x + 1).margin(1e-14));
    for (int n = 0; n <= 4; ++n) CHECK(pv[n * 8 + v] == p[n]);  // the same recursion
    // T_n(cos t) = cos(n t): the identity behind G_jk = (mu_{j+k} + mu_{|j-k|}) / 2.
    const double t = std::acos(x);
    for (int n = 0; n <= 4; ++n) CHECK(p[n] == Approx(std::cos(n * t)).margin(1e-13));
  }
}

#if defined(VX_VEC8)
TEST_CASE("exp_v8 agrees with libm's exp to 2 ulp on the emulator's range", "[kernels]") {
  // The CPU emulator's GP kernel values exp(-d2/2), d2 <= 60 (emulator_coeffs_team): x in
  // [-30, 0]. Cody-Waite reduction and a 13th-order Taylor series: measured 1 ulp (2.2e-16)
  // at most; 4.5e-16 (2 ulp) is the bound, a wrong coefficient would be off by > 1e-10.
  double worst = 0.0;
  int n = 0;
  for (double x0 = -30.0; x0 <= 0.0; x0 += 0.0371) {
    VxVec8 v;
    for (int p = 0; p < 8; ++p) v[p] = std::min(0.0, x0 + p * 0.00463);
    VxVec8 e = v;
    exp_v8(e);
    for (int p = 0; p < 8; ++p, ++n) {
      const double ref = std::exp(v[p]);
      worst = std::max(worst, std::fabs(e[p] - ref) / ref);
    }
  }
  INFO(n << " points, worst relative error " << worst);
  CHECK(worst < 4.5e-16);
  VxVec8 z = {};
  exp_v8(z);
  for (int p = 0; p < 8; ++p) CHECK(z[p] == 1.0);
}
#endif

TEST_CASE("hsum_n gives each of up to 8 float vectors' lane sums at once", "[kernels]") {
  // hsum_n folds the vectors pairwise (shuffles and adds); every output must be its own
  // vector's sum (a wrong shuffle index would mix vectors: errors of order 1), to float
  // rounding: kVecF terms of size <= 1, 4 additions deep, below 1e-6.
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  VxVecF v[8];
  for (auto& x : v)
    for (int p = 0; p < kVecF; ++p) x[p] = u(rng);
  auto check = [&](auto nc) {
    constexpr int N = decltype(nc)::value;
    double out[N];
    cpu::hsum_n<N>(v, out);
    for (int q = 0; q < N; ++q) {
      double ref = 0.0;
      for (int p = 0; p < kVecF; ++p) ref += v[q][p];
      CHECK(out[q] == Approx(ref).margin(1e-6));
    }
  };
  check(IntC<1>{});
  check(IntC<2>{});
  check(IntC<3>{});
  check(IntC<4>{});
  // 5 and 8 vectors (the pixel sums' count with 3 and 6 labels) where they fit a vector's lanes
  // (kVecF = 4 with SSE2, this file's baseline build; 16 in the AVX-512 kernel).
  check(IntC<(kVecF >= 8 ? 5 : 3)>{});
  check(IntC<(kVecF >= 8 ? 8 : 4)>{});
}

TEST_CASE("gaussian convolution keeps a flat spectrum flat and adds variance", "[kernels]") {
  const int n = 401;
  std::vector<float> flat(n, 2.0f), out(n), delta(n, 0.0f), dout(n);
  delta[200] = 1.0f;
  std::vector<double> sigma(n, 3.0);
  gaussian_convolve_column(flat.data(), out.data(), n, 1, sigma.data());
  for (int t = 0; t < n; ++t) CHECK(out[t] == Approx(2.0f).epsilon(1e-6));
  gaussian_convolve_column(delta.data(), dout.data(), n, 1, sigma.data());
  double s0 = 0, s2 = 0;
  for (int t = 0; t < n; ++t) {
    s0 += dout[t];
    s2 += dout[t] * (t - 200.0) * (t - 200.0);
  }
  CHECK(s0 == Approx(1.0).epsilon(1e-4));
  CHECK(std::sqrt(s2 / s0) == Approx(3.0).epsilon(1e-3));  // truncation at 4 sigma: <1e-3
}

TEST_CASE("rotation profile is normalised", "[kernels]") {
  const double vsini = 50.0;
  double s = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    const double dv = -vsini + (i + 0.5) * 2 * vsini / n;
    s += rotation_profile(dv, vsini, 0.6) * 2 * vsini / n;
  }
  CHECK(s == Approx(1.0).epsilon(1e-4));
}

TEST_CASE("joined_basin: inside an earlier minimum's quadratic basin, by its covariance",
          "[kernels][lm]") {
  // Attractor at theta_a with a correlated 2 x 2 covariance: the test is the chi^2 rise
  // d^T cov^-1 d, not a per-parameter box.
  LMState a{};
  a.np = 2;
  a.hess_ok = 1;
  a.status = kLMConverged;
  a.chi2 = 100.0;
  a.theta[0] = 10.0;
  a.theta[1] = 1.0;
  const double s0 = 2.0, s1 = 0.5, rho = 0.9;  // sigmas and correlation
  a.cov[0] = s0 * s0;
  a.cov[1] = a.cov[2] = rho * s0 * s1;
  a.cov[3] = s1 * s1;
  // d^T cov^-1 d for d = (u s0, v s1) is (u^2 - 2 rho u v + v^2) / (1 - rho^2).
  auto rise = [&](double u, double v) {
    return (u * u - 2 * rho * u * v + v * v) / (1 - rho * rho);
  };
  auto at = [&](double u, double v, double chi2, double tol) {
    const double th[2] = {a.theta[0] + u * s0, a.theta[1] + v * s1};
    return joined_basin(a, th, chi2, 2, tol);
  };
  CHECK(rise(2, 2) < 25.0);  // along the valley: 2 sigma in each, inside
  CHECK(at(2, 2, 101.0, 25.0));
  CHECK(rise(2, -2) > 25.0);  // across it: the same box distance, far outside
  CHECK_FALSE(at(2, -2, 101.0, 25.0));
  CHECK(at(2, -2, 101.0, rise(2, -2) * 1.01));  // the threshold is the chi^2 rise
  CHECK_FALSE(at(2, -2, 101.0, rise(2, -2) * 0.99));
  CHECK_FALSE(at(0.1, 0.1, 99.0, 25.0));  // lower chi^2 than the attractor: never joined
  CHECK_FALSE(at(0.1, 0.1, 101.0, 0.0));  // join_dchi2 = 0: off
  a.hess_ok = 0;
  CHECK_FALSE(at(0.1, 0.1, 101.0, 25.0));  // no usable covariance
  a.hess_ok = 1;
  CHECK_FALSE(joined_basin(a, a.theta, 101.0, 3, 25.0));  // another parameter set (VSINI fitted)
}

// The staged engine plans a rotated evaluation's rows with rotation_half before the coefficient
// stage computes the kernel (kernels/rows_stage.hpp): its M must be rotation_weights' M for every
// VSINI, or the pixel stage would read rows outside its group's span. VSINI from 0 to 600 km/s in
// 0.01 km/s steps (the half-bin edges at s = m + 1/2 fall between steps many times over) at the
// desi and MILES grids' spacings, the kernel's cap, and NaN and negative values.
TEST_CASE("rotation_half gives rotation_weights' half-width for every VSINI",
          "[kernels][engine]") {
  double w[2 * kMaxRotHalf + 1], dw[2 * kMaxRotHalf + 1];
  int n_rotated = 0, n_capped = 0;
  for (const double dlnlam : {1.0e-4, 2.4e-5, 3.3e-5}) {
    for (int i = -100; i <= 60000; ++i) {
      const double v = i * 0.01;
      const int m = rotation_weights(v, 0.6, dlnlam, kMaxRotHalf, w, dw);
      REQUIRE(rotation_half(v, dlnlam, kMaxRotHalf) == m);
      n_rotated += m > 0;
      n_capped += m == kMaxRotHalf;
    }
    CHECK(rotation_half(NAN, dlnlam, kMaxRotHalf) == 0);
  }
  CHECK(n_rotated > 1000);  // the sweep crossed into the rotated kernels
  CHECK(n_capped > 0);      // and reached the cap
}
