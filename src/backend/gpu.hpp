// GPU backend interface (host-only types; the CUDA code is in backend/cuda/*.cu and is built only
// when nvcc is found, see cmake/cuda.cmake). Without CUDA the stubs in gpu_stub.cpp report that.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "fit/fitter.hpp"
#include "kernels/fit_pipeline.hpp"

namespace velox {

struct GpuInfo {
  bool compiled = false;  // built with the CUDA backend
  int device_count = 0;   // cudaGetDeviceCount (0 on error)
  std::string message;    // why there is no device ("no CUDA-capable device (error 35)", ...)
};
GpuInfo query_gpus();

// Device memory one spectrum of n_pix pixels needs in a batch: packed inputs, the kernel's
// global scratch (T, dT[np], fn, wts, frac, t0, ivar, CCF accumulators) and its result.
size_t gpu_bytes_per_spectrum(size_t n_pix, int n_params, int n_ccf_lags);

// Spectra per launch: floor(free_bytes * safety / bytes_per_spectrum), at most max_batch, at
// least 1 when anything fits, 0 when not even one spectrum fits.
size_t gpu_batch_size(size_t free_bytes, double safety, size_t bytes_per_spectrum,
                      size_t max_batch);

// Run kernels/fit_pipeline.hpp for every prepared spectrum on CUDA device `device`, one thread
// block per spectrum, one launch per batch (batch size from cudaMemGetInfo). Results and the
// clipped ivar come back in input order. Throws std::runtime_error on CUDA errors.
std::vector<kern::PipelineResult> fit_prepared_on_gpu(const std::vector<PreparedSpectrum*>& specs,
                                                      std::vector<std::vector<float>>* ivar_out,
                                                      const FitContext& ctx, int device);

}  // namespace velox
