// VRAD from the arms (combine_arm_velocities, fit.arm_rv_t_dof): Gaussian weights with two arms or
// t_dof = 0, Student-t factors capped at 1 with three or more.
#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include "fit/fitter.hpp"

using velox::ArmMean;
using velox::ArmVelocity;
using velox::combine_arm_velocities;

namespace {

// The Gaussian weighted mean and its error, written out.
ArmMean gaussian(const std::vector<ArmVelocity>& a) {
  double sw = 0.0, swv = 0.0;
  for (const auto& x : a) {
    sw += 1.0 / x.var;
    swv += x.v / x.var;
  }
  ArmMean m;
  m.ok = true;
  m.vrad = swv / sw;
  m.err = 1.0 / std::sqrt(sw);
  return m;
}

}  // namespace

TEST_CASE("arm velocities: Gaussian weights with two arms, with t_dof 0, and when all agree",
          "[arm_rv]") {
  // Two arms 8 sigma apart: neither can be told to be the outlier, so the Student-t factors are
  // not applied whatever t_dof is.
  const std::vector<ArmVelocity> two = {{0.0, 1.0}, {80.0, 100.0}};
  const ArmMean g2 = gaussian(two), m2 = combine_arm_velocities(two, 4.0);
  CHECK(m2.ok);
  CHECK(m2.iterations == 0);
  CHECK(m2.vrad == g2.vrad);
  CHECK(m2.err == g2.err);
  // Three arms, one far off, t_dof = 0: the Gaussian mean.
  const std::vector<ArmVelocity> three = {{0.0, 1.0}, {0.5, 1.0}, {60.0, 100.0}};
  const ArmMean g3 = gaussian(three), m0 = combine_arm_velocities(three, 0.0);
  CHECK(m0.vrad == g3.vrad);
  CHECK(m0.err == g3.err);
  // Three arms within 1 sigma of their mean: every factor is capped at 1, the Gaussian mean and
  // error to rounding (the mean's fixed point is reached in one pass).
  const std::vector<ArmVelocity> agree = {{-1.0, 4.0}, {0.5, 1.0}, {2.0, 9.0}};
  const ArmMean ga = gaussian(agree), ma = combine_arm_velocities(agree, 4.0);
  CHECK(ma.vrad == Approx(ga.vrad).margin(1e-12));
  CHECK(ma.err == Approx(ga.err).epsilon(1e-12));
}

TEST_CASE("arm velocities: a third arm 6 sigma off is down-weighted, and the error grows",
          "[arm_rv]") {
  // B and R agree (mean 0.25); Z reads +60 +- 10 (a calibration outlier, as the LAMOST DR10 z
  // arms). Gaussian weights pull VRAD to 0.547 (Z's weight 0.01 of 2.01); with nu = 4 Z's factor
  // is about 5 / (4 + 5.95^2) = 0.13, so VRAD moves by 0.04 instead of 0.30.
  const std::vector<ArmVelocity> a = {{0.0, 1.0}, {0.5, 1.0}, {60.0, 100.0}};
  const ArmMean g = gaussian(a), m = combine_arm_velocities(a, 4.0);
  REQUIRE(m.ok);
  CHECK(m.iterations > 1);
  const double inliers = 0.25;
  CHECK(std::fabs(m.vrad - inliers) < 0.2 * std::fabs(g.vrad - inliers));
  CHECK(m.err > g.err);
  // The result is the reweighting's fixed point: the mean of the factors it implies.
  double sw = 0.0, swv = 0.0;
  for (const auto& x : a) {
    const double r = x.v - m.vrad;
    const double u = std::min(1.0, 5.0 / (4.0 + r * r / x.var));
    sw += u / x.var;
    swv += u * x.v / x.var;
  }
  CHECK(m.vrad == Approx(swv / sw).margin(1e-8));
  CHECK(m.err == Approx(1.0 / std::sqrt(sw)).epsilon(1e-8));
  // A smaller nu trusts the outlier less.
  CHECK(std::fabs(combine_arm_velocities(a, 1.0).vrad - inliers) < std::fabs(m.vrad - inliers));
}

TEST_CASE("arm velocities: arms without a finite velocity or a positive variance are skipped",
          "[arm_rv]") {
  CHECK_FALSE(combine_arm_velocities({}, 4.0).ok);
  CHECK_FALSE(combine_arm_velocities({{NAN, 1.0}, {1.0, 0.0}, {2.0, -1.0}}, 4.0).ok);
  // One usable arm among three: its own velocity and error, no reweighting.
  const ArmMean m = combine_arm_velocities({{NAN, 1.0}, {3.0, 4.0}, {5.0, INFINITY}}, 4.0);
  REQUIRE(m.ok);
  CHECK(m.vrad == 3.0);
  CHECK(m.err == 2.0);
  CHECK(m.iterations == 0);
}
