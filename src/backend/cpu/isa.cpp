#include "backend/cpu/isa.hpp"

#include "backend/cpu/isa/fit_slot.hpp"

namespace velox {

namespace {

// The kernel of each level, null where this build has none (cmake/cpu_isa.cmake defines
// VELOX_HAVE_ISA_AVX2 / _AVX512 on x86-64 with a compiler that knows the -march levels).
CpuFitKernel kernel_of(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kBaseline:
      return &cpu_isa::baseline::fit_spectrum;
    case CpuIsa::kAvx2:
#ifdef VELOX_HAVE_ISA_AVX2
      return &cpu_isa::avx2::fit_spectrum;
#else
      return nullptr;
#endif
    case CpuIsa::kAvx512:
#ifdef VELOX_HAVE_ISA_AVX512
      return &cpu_isa::avx512::fit_spectrum;
#else
      return nullptr;
#endif
  }
  return nullptr;
}

}  // namespace

CpuFitKernel cpu_fit_kernel() { return kernel_of(active_isa()); }

}  // namespace velox
