#include <catch2/catch.hpp>

#include "backend/gpu.hpp"

using namespace velox;

TEST_CASE("GPU batch size is (free x safety - fixed) / (sets x bytes per spectrum)",
          "[gpu][sizing]") {
  // 80 GB free, 0.8 safety, no fixed part, one set, 200 kB per spectrum -> 320000, capped.
  CHECK(gpu_batch_size(80'000'000'000ull, 0.8, 0, 200'000, 1, 65536) == 65536);
  // 1 GB free: 0.8e9 / 2e5 = 4000 exactly; two sets halve it; a fixed 0.4 GB halves it again.
  CHECK(gpu_batch_size(1'000'000'000ull, 0.8, 0, 200'000, 1, 65536) == 4000);
  CHECK(gpu_batch_size(1'000'000'000ull, 0.8, 0, 200'000, 2, 65536) == 2000);
  CHECK(gpu_batch_size(1'000'000'000ull, 0.8, 400'000'000ull, 200'000, 2, 65536) == 1000);
  // Not even one spectrum fits, or the fixed part alone does not.
  CHECK(gpu_batch_size(100'000, 0.8, 0, 200'000, 1, 65536) == 0);
  CHECK(gpu_batch_size(1'000'000'000ull, 0.8, 900'000'000ull, 200, 2, 65536) == 0);
  CHECK(gpu_batch_size(1'000'000, 0.8, 0, 0, 1, 65536) == 0);
}

TEST_CASE("GPU bytes per spectrum are the packed inputs only, linear in pixels", "[gpu][sizing]") {
  const size_t a = gpu_bytes_per_spectrum(3000);
  const size_t b = gpu_bytes_per_spectrum(6000);
  const size_t z = gpu_bytes_per_spectrum(0);
  CHECK(b - a == a - z);      // linear in the number of pixels
  CHECK(a - z == 3000 * 28);  // lnlam, xleg (8 B), flux, ivar, full_idx (4 B)
  // Resolution matrices: 8 B per full-grid pixel and three 8-byte fold parameters per pixel (the
  // rows themselves are built in the slot's scratch, kernels/fold.hpp).
  CHECK(gpu_bytes_per_spectrum(3000, 1000, 3000) - a == 1000 * 8 + 3000 * 24);
  // A LAMOST-size spectrum (3000 px) needs < 100 kB: 80 GB x 0.8 holds > 6 x 10^5 of them.
  CHECK(a < 100'000);
}

TEST_CASE("GPU slot scratch grows with slot pixels and parameters", "[gpu][sizing]") {
  const size_t a = gpu_bytes_per_slot(3000, 0, 4, 135, 1000);
  CHECK(gpu_bytes_per_slot(3000, 0, 5, 135, 1000) - a == 3000 * sizeof(double));  // dT column
  CHECK(gpu_bytes_per_slot(6000, 0, 4, 135, 1000) - a == 3000 * (8 * 8 + 4));
  CHECK(gpu_bytes_per_slot(3000, 100, 4, 135, 1000) - a == 100 * 8 * 5);  // Tf, dTf
  CHECK(gpu_bytes_per_slot(3000, 0, 4, 135, 1001) - a == 8);              // emulator
  CHECK(gpu_bytes_per_slot(3000, 0, 4, 135, 1000, 0, 11000) - a == 11000 * 4);  // folded rows
}

TEST_CASE("GPU target batch fills every slot several times within the limits", "[gpu][sizing]") {
  CHECK(gpu_target_batch(2112, 16, 2048, 65536) == 2112 * 16);
  CHECK(gpu_target_batch(10, 16, 2048, 65536) == 2048);     // at least the minimum batch
  CHECK(gpu_target_batch(8000, 16, 2048, 65536) == 65536);  // at most the maximum
}

#ifdef VELOX_HAVE_CUDA
#include "backend/cuda/cublas_rt.hpp"
// The staged engine's cuBLAS is loaded at run time (dlopen, not linked): a CUDA build's toolkit
// has it, and the four functions BlasHandle calls resolve under the names it asks for. Needs no
// device (the handle itself does).
TEST_CASE("the staged engine's cuBLAS loads at run time with the functions it calls",
          "[gpu][cublas]") {
  CHECK(cublas_load_error() == "");
}
#endif
