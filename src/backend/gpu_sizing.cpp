#include <algorithm>
#include <cmath>

#include "backend/gpu.hpp"

namespace velox {

size_t gpu_bytes_per_spectrum(size_t n_pix, int n_params, int n_ccf_lags) {
  const size_t per_pixel = 2 * sizeof(double)      // lnlam, xleg
                           + 2 * sizeof(float)     // flux, ivar
                           + sizeof(double) * (1 + n_params)  // T, dT
                           + 3 * sizeof(double)    // fn, wts, frac
                           + sizeof(int);          // t0
  const size_t lags = static_cast<size_t>(std::max(n_ccf_lags, 7));
  return n_pix * per_pixel + 9 * lags * sizeof(double) + sizeof(kern::PipelineResult) + 256;
}

size_t gpu_batch_size(size_t free_bytes, double safety, size_t bytes_per_spectrum,
                      size_t max_batch) {
  if (bytes_per_spectrum == 0) return 0;
  const double usable = std::max(0.0, static_cast<double>(free_bytes) * safety);
  const size_t n = static_cast<size_t>(std::floor(usable / static_cast<double>(bytes_per_spectrum)));
  return std::min(n, max_batch);
}

}  // namespace velox
