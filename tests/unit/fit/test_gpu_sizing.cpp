#include <catch2/catch.hpp>

#include "backend/gpu.hpp"

using namespace velox;

TEST_CASE("GPU batch size is free memory x safety / bytes per spectrum", "[gpu][sizing]") {
  // 80 GB free, 0.8 safety, 200 kB per spectrum -> 320000 spectra, capped at 65536.
  CHECK(gpu_batch_size(80'000'000'000ull, 0.8, 200'000, 65536) == 65536);
  // 1 GB free: 0.8e9 / 2e5 = 4000 exactly.
  CHECK(gpu_batch_size(1'000'000'000ull, 0.8, 200'000, 65536) == 4000);
  // Not even one spectrum fits.
  CHECK(gpu_batch_size(100'000, 0.8, 200'000, 65536) == 0);
  CHECK(gpu_batch_size(1'000'000, 0.8, 0, 65536) == 0);
}

TEST_CASE("GPU bytes per spectrum grow with pixels and parameters", "[gpu][sizing]") {
  const size_t a = gpu_bytes_per_spectrum(3000, 4, 135);
  const size_t b = gpu_bytes_per_spectrum(6000, 4, 135);
  const size_t c = gpu_bytes_per_spectrum(3000, 5, 135);
  const size_t z = gpu_bytes_per_spectrum(0, 4, 135);
  CHECK(b > a);
  CHECK(b - a == a - z);                  // linear in the number of pixels
  CHECK(c - a == 3000 * sizeof(double));  // one more parameter = one more dT column
  // A LAMOST-size spectrum (3000 px) needs < 300 kB: 80 GB x 0.8 holds > 2 x 10^5 of them.
  CHECK(a < 300'000);
}
