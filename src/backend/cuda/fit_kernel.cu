// The CUDA fit kernel: kern::fit_one (kernels/fit_pipeline.hpp, the source the CPU backend runs)
// with one warp per spectrum. Persistent warps take spectra from a device counter. No physics
// here: this file only maps warps to spectra and launches.
#include <stdexcept>
#include <string>

#include "backend/cuda/fit_kernel.hpp"
#include "kernels/team_cuda.hpp"

namespace velox {

namespace {

constexpr int kThreadsPerBlock = kFitWarpsPerBlock * kern::kWarpLanes;
// VELOX_FIT_BLOCKS_PER_SM resident blocks of 128 threads per SM: 4 (16 warps, 25% occupancy)
// lets ptxas use 128 registers per thread (65536 / 512). Measured on an H100 (docs/gpu.md): 4 is
// 5% faster than 6 (80 registers, more spills). cuda.ptxas_budget checks the stack and spills.
#ifndef VELOX_FIT_BLOCKS_PER_SM
#define VELOX_FIT_BLOCKS_PER_SM 4
#endif
constexpr int kMinBlocksPerSM = VELOX_FIT_BLOCKS_PER_SM;

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw std::runtime_error(std::string("CUDA: ") + what + ": " + cudaGetErrorString(e));
}

__global__ void __launch_bounds__(kThreadsPerBlock, kMinBlocksPerSM)
    fit_batch_kernel(kern::BatchView b, int* next_spectrum) {
  // Per warp: the spectrum's FitData and the slot's scratch views, written by lane 0 (as
  // per-lane locals they would cost every lane ~400 bytes of stack). Raw storage: __shared__
  // objects cannot be constructed.
  __shared__ alignas(kern::FitData) unsigned char d_raw[kFitWarpsPerBlock][sizeof(kern::FitData)];
  __shared__ alignas(kern::PipelineScratch) unsigned char
      sc_raw[kFitWarpsPerBlock][sizeof(kern::PipelineScratch)];
  __shared__ const float* tmpl[kFitWarpsPerBlock][kern::kMaxArms];
  __shared__ int spectrum[kFitWarpsPerBlock];
  // reduce_gram's staging tiles (32 design rows per warp).
  __shared__ double tile[kFitWarpsPerBlock][kern::kWarpLanes * kern::kGramStride];
  const int warp = threadIdx.x / kern::kWarpLanes;
  const kern::WarpTeam team{static_cast<int>(threadIdx.x % kern::kWarpLanes), tile[warp]};
  const int slot = blockIdx.x * kFitWarpsPerBlock + warp;
  if (slot >= b.n_slots) return;  // the whole warp leaves
  kern::FitData& d = *reinterpret_cast<kern::FitData*>(d_raw[warp]);
  kern::PipelineScratch& sc = *reinterpret_cast<kern::PipelineScratch*>(sc_raw[warp]);
  for (;;) {
    if (team.lane == 0) spectrum[warp] = atomicAdd(next_spectrum, 1);
    __syncwarp();
    const int s = spectrum[warp];
    if (s >= b.n_spec) return;
    if (team.lane == 0) kern::batch_views(b, s, slot, &d, &sc, tmpl[warp]);
    __syncwarp();
    kern::fit_one(team, b.em, b.grid, d, tmpl[warp], b.n_ccf, b.ccf_labels, b.cfg, sc,
                  &b.shared[slot], &b.results[s]);
    __syncwarp();  // every lane has read spectrum[warp], d and sc before lane 0 rewrites them
  }
}

}  // namespace

int fit_kernel_slots(int device) {
  cudaDeviceProp prop;
  check(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
  int blocks_per_sm = 0;
  check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks_per_sm, fit_batch_kernel,
                                                      kThreadsPerBlock, 0),
        "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
  if (blocks_per_sm < 1) blocks_per_sm = 1;
  return blocks_per_sm * prop.multiProcessorCount * kFitWarpsPerBlock;
}

void launch_fit_batch(const kern::BatchView& b, int* d_counter, cudaStream_t stream) {
  if (b.n_spec <= 0) return;
  check(cudaMemsetAsync(d_counter, 0, sizeof(int), stream), "cudaMemsetAsync");
  int n_slots = b.n_slots;
  // No more warps than spectra.
  if (n_slots > b.n_spec) n_slots = b.n_spec;
  kern::BatchView v = b;
  v.n_slots = n_slots;
  const unsigned blocks = static_cast<unsigned>((n_slots + kFitWarpsPerBlock - 1) / kFitWarpsPerBlock);
  fit_batch_kernel<<<blocks, kThreadsPerBlock, 0, stream>>>(v, d_counter);
  check(cudaGetLastError(), "fit_batch_kernel launch");
}

}  // namespace velox
