// TEMPORARY stand-in for src/backend/cuda/fit_kernel.cu (the warp-per-spectrum kernel, written on
// the main branch), so that the engine branch links and the GPU engine can be exercised. It runs
// kernels/fit_pipeline.hpp with the block team, one persistent block per slot, spectra taken
// from the device counter. To be deleted when fit_kernel.cu is merged.
#include <stdexcept>
#include <string>

#include "backend/cuda/fit_kernel.hpp"
#include "kernels/team_cuda.hpp"

namespace velox {

namespace {

constexpr int kStubThreads = 128;

void stub_check(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw std::runtime_error(std::string("CUDA: ") + what + ": " + cudaGetErrorString(e));
}

__global__ void __launch_bounds__(kStubThreads, 4) fit_batch_kernel(kern::BatchView b, int* next) {
  __shared__ alignas(kern::FitData) unsigned char d_raw[sizeof(kern::FitData)];
  __shared__ kern::PipelineScratch sc;
  __shared__ const float* tmpl[kern::kMaxArms];
  __shared__ int s;
  kern::FitData& d = *reinterpret_cast<kern::FitData*>(d_raw);
  const int slot = blockIdx.x;
  for (;;) {
    if (threadIdx.x == 0) {
      s = atomicAdd(next, 1);
      if (s < b.n_spec) kern::batch_views(b, s, slot, &d, &sc, tmpl);
    }
    __syncthreads();
    if (s >= b.n_spec) return;
    kern::fit_one(kern::BlockTeam{}, b.em, b.grid, d, tmpl, b.n_ccf, b.ccf_labels, b.cfg, sc,
                  b.shared + slot, &b.results[s]);
    __syncthreads();
  }
}

}  // namespace

int fit_kernel_slots(int device) {
  int sms = 0, per_sm = 0;
  stub_check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device),
             "cudaDeviceGetAttribute");
  stub_check(
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fit_batch_kernel, kStubThreads, 0),
      "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
  return sms * (per_sm > 0 ? per_sm : 1);
}

void launch_fit_batch(const kern::BatchView& b, int* d_counter, cudaStream_t stream) {
  stub_check(cudaMemsetAsync(d_counter, 0, sizeof(int), stream), "cudaMemsetAsync");
  fit_batch_kernel<<<b.n_slots, kStubThreads, 0, stream>>>(b, d_counter);
  stub_check(cudaGetLastError(), "fit_batch_kernel launch");
}

}  // namespace velox
