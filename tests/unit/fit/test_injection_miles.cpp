// Injection-recovery with the real MILES emulator (built from the 219-star miles_thin subset to
// keep the test fast): spectra drawn from the emulator with known truth at S/N 10, 30 and 100 on
// a LAMOST-like grid (R = 1800), fitted by the full pipeline (CCF, chi^2 grid, LM).
#include <catch2/catch.hpp>
#include <random>

#include "backend/backend.hpp"
#include "emulator/build.hpp"
#include "fit/fitter.hpp"
#include "inject.hpp"
#include "io/readers.hpp"
#include "test_util.hpp"
#include "thin_library.hpp"

using namespace velox;

TEST_CASE("MILES emulator injection-recovery: RV bias and pulls at S/N 10, 30, 100",
          "[fit][injection][realdata]") {
  const auto& lib = test::thin_library();
  test::InjectionSetup setup(lib);
  const auto arm = setup.cache.get(1800.0);
  std::mt19937_64 rng(2026);
  // Truths well inside the library's FGK coverage, so box constraints do not distort the pulls.
  std::uniform_real_distribution<double> uv(-300, 300), ut(4800, 6300), ug(2.0, 4.5), uf(-1.2, 0.2);
  for (double sn : {10.0, 30.0, 100.0}) {
    test::Recovery rec;
    const int n = 150;
    for (int i = 0; i < n; ++i) {
      const test::Truth tr{uv(rng), ut(rng), ug(rng), uf(rng)};
      const auto row = fit_spectrum(test::inject(lib, *arm, tr, sn, 3800, 7300, rng, i), setup.ctx);
      REQUIRE(row.SUCCESS);
      rec.add(row, tr);
    }
    const auto& dv = rec.dv;
    const double bias = test::median_of(dv);
    // Standard error of the median of n Gaussian draws: 1.2533 sigma / sqrt(n).
    const double se = 1.2533 * test::robust_sigma(dv) / std::sqrt(double(n));
    WARN("S/N " << sn << ": median dVRAD " << bias << " km/s (s.e. " << se << "), pulls v/T/g/f "
                << test::robust_sigma(rec.pv) << " " << test::robust_sigma(rec.pt) << " "
                << test::robust_sigma(rec.pg) << " " << test::robust_sigma(rec.pf));
    // The bias requirement is 0.3 km/s; allow for the statistical error of its estimate.
    CHECK(std::fabs(bias) < 0.3 + 3 * se);
    // Robust sigma of 150 unit-Gaussian pulls has s.e. ~0.07, so [0.8, 1.25] is a ~3-sigma
    // band around 1 (the acceptance band).
    for (const auto* p : rec.pulls()) {
      CHECK(test::robust_sigma(*p) > 0.8);
      CHECK(test::robust_sigma(*p) < 1.25);
    }
  }
}

TEST_CASE("MILES emulator: noise-free injection recovers VRAD to < 0.3 km/s",
          "[fit][injection][realdata]") {
  const auto& lib = test::thin_library();
  test::InjectionSetup setup(lib);
  const auto arm = setup.cache.get(1800.0);
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> uv(-500, 500), ut(4000, 7000), ug(1.5, 4.8), uf(-1.5, 0.3);
  for (int i = 0; i < 20; ++i) {
    const test::Truth tr{uv(rng), ut(rng), ug(rng), uf(rng)};
    // S/N 1e6: effectively noise-free, so the offset is the estimator's systematic bias.
    const auto row = fit_spectrum(test::inject(lib, *arm, tr, 1e6, 3800, 7300, rng, i), setup.ctx);
    REQUIRE(row.SUCCESS);
    CHECK(std::fabs(row.VRAD - tr.v_kms) < 0.3);
  }
}
