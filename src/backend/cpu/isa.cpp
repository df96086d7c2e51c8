#include "backend/cpu/isa.hpp"

#include "backend/cpu/isa/fit_slot.hpp"

namespace velox {

namespace {

// The entries of each level, null where this build has none (cmake/cpu_isa.cmake defines
// VELOX_HAVE_ISA_AVX2 / _AVX512 on x86-64 with a compiler that knows the -march levels).
struct LevelEntries {
  CpuFitKernel fit = nullptr;
  CpuFixedTaps fixed_taps = nullptr;
};
#define VELOX_ISA_ENTRIES(level) \
  LevelEntries { &cpu_isa::level::fit_spectrum, &cpu_isa::level::fixed_taps }

LevelEntries entries_of(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kBaseline:
      return VELOX_ISA_ENTRIES(baseline);
    case CpuIsa::kAvx2:
#ifdef VELOX_HAVE_ISA_AVX2
      return VELOX_ISA_ENTRIES(avx2);
#else
      return {};
#endif
    case CpuIsa::kAvx512:
#ifdef VELOX_HAVE_ISA_AVX512
      return VELOX_ISA_ENTRIES(avx512);
#else
      return {};
#endif
  }
  return {};
}

}  // namespace

CpuFitKernel cpu_fit_kernel() { return entries_of(active_isa()).fit; }

CpuFixedTaps cpu_fixed_taps(CpuIsa isa) { return entries_of(isa).fixed_taps; }

}  // namespace velox
