// GPU backend interface (host-only types; the CUDA code is in backend/cuda/*.cu and is built only
// when nvcc is found, see cmake/cuda.cmake). Without CUDA the stubs in gpu_stub.cpp report that.
#pragma once
#include <cstddef>
#include <memory>
#include <string>

#include "backend/backend.hpp"
#include "kernels/batch.hpp"

namespace velox {

struct GpuInfo {
  bool compiled = false;  // built with the CUDA backend
  int device_count = 0;   // cudaGetDeviceCount (0 on error)
  std::string message;    // why there is no device ("no CUDA-capable device (error 35)", ...)
};
GpuInfo query_gpus();

// The persistent GPU engine of one rank on CUDA device `device` (docs/gpu.md): the library is
// uploaded once, device and pinned host buffers are allocated once and grown when a batch needs
// more, and two buffer sets on two streams overlap one batch's copies and kernel with the host's
// packing of the next. Batches with fewer than `min_batch` spectra, or that want best-fit models,
// are unsupported (the engine sends them to the CPU backend). Throws std::runtime_error
// ("CUDA: <call>: <reason>") on CUDA errors, here and in submit/collect. `pool` (may be null:
// one thread) packs the batches (HostBatch) in submit; it must outlive the backend.
std::unique_ptr<Backend> make_cuda_backend(const TemplateLibrary& lib,
                                           const kern::PipelineConfig& pc, int device,
                                           size_t min_batch, ThreadPool* pool = nullptr);

// ---- Batch sizing (gpu_sizing.cpp, unit-tested) --------------------------------------------

// Device bytes one spectrum takes in a batch: its packed inputs (lnlam, xleg, flux, ivar,
// full_idx per used pixel; full_lnlam per full-grid pixel; three fold parameters per pixel for
// n_fold pixels, the spectrum's n_pix when it has a matrix arm), its BatchSpectrum and its
// PipelineResult. The scratch is per slot, not per spectrum (the folded rows too).
size_t gpu_bytes_per_spectrum(size_t n_pix, size_t n_full = 0, size_t n_fold = 0);

// Device bytes of one slot's scratch for the sizes of kernels/batch.hpp (T, dT[np], fn, wts,
// frac, t0 per slot pixel; Tf, dTf[np] per full-grid pixel; ccf, acc; emulator scratch; Tg[np]
// per template-grid row of the rotated model (slot_grid, 0 without VSINI); slot_rm floats of
// folded resolution rows; slot_vrows doubles of kept rows (arms x template-grid rows); the
// PipelineShared).
size_t gpu_bytes_per_slot(long long slot_pix, long long slot_full, int np, int n_out, long long emu,
                          long long slot_grid = 0, long long slot_rm = 0, long long slot_vrows = 0);

// Spectra per batch with `n_sets` buffer sets in flight: floor((free_bytes * safety -
// fixed_bytes) / (n_sets * bytes_per_spectrum)), at most max_batch; 0 when not even one fits.
// fixed_bytes: what does not grow with the batch (all sets' slot scratch, the library).
size_t gpu_batch_size(size_t free_bytes, double safety, size_t fixed_bytes,
                      size_t bytes_per_spectrum, int n_sets, size_t max_batch);

// The batch a GPU with `n_slots` resident warps wants: `waves` spectra per slot (so every SM is
// filled several times and the tail of a batch is short), at least min_batch, at most max_batch.
size_t gpu_target_batch(int n_slots, int waves, size_t min_batch, size_t max_batch);

}  // namespace velox
