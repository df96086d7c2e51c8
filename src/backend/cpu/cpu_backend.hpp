// CPU helpers shared by the engine: the job list of a chunk and the default thread count. The
// CPU backend itself (CpuBackend, fit_batch_serial) is declared in backend/backend.hpp.
#pragma once
#include "fit/fitter.hpp"

namespace velox {

// One spectrum to fit and the context (library, config, input format) it is fitted in. `arms`
// (null: spectrum->arms) are views of the pixels to fit, e.g. NumPy buffers (python/src).
struct FitJob {
  const Spectrum* spectrum;
  const FitContext* ctx;
  const std::vector<ArmView>* arms = nullptr;
};

int default_thread_count();  // cores available to this process (sched_getaffinity)

}  // namespace velox
