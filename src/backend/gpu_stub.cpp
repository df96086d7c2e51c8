// Built when the CUDA backend is not (no nvcc, or -DVELOX_CUDA=OFF).
#ifndef VELOX_HAVE_CUDA
#include <stdexcept>

#include "backend/gpu.hpp"

namespace velox {

GpuInfo query_gpus() {
  GpuInfo g;
  g.message = "velox was built without the CUDA backend (no nvcc at configure time)";
  return g;
}

std::unique_ptr<Backend> make_cuda_backend(const TemplateLibrary&, const kern::PipelineConfig&, int,
                                           size_t, ThreadPool*) {
  throw std::runtime_error("velox was built without the CUDA backend");
}

}  // namespace velox
#endif
