// The arm model's host-side forms against the kernels they stand for.
#include <catch2/catch.hpp>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/convolve.hpp"
#include "model/arm_model.hpp"

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
