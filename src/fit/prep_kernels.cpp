#include "fit/prep_kernels.hpp"

#include "common/error.hpp"
#include "fit/cpu_isa.hpp"

namespace velox {

namespace {

const prep::Kernels& kernels_of(CpuIsa isa) {
  switch (isa) {
#ifdef VELOX_HAVE_ISA_AVX512
    case CpuIsa::kAvx512:
      return prep_isa::avx512::kernels();
#endif
#ifdef VELOX_HAVE_ISA_AVX2
    case CpuIsa::kAvx2:
      return prep_isa::avx2::kernels();
#endif
    default:
      return prep_isa::baseline::kernels();
  }
}

}  // namespace

const prep::Kernels& prep_kernels(CpuIsa isa) {
  if (!isa_supported(isa))
    throw ConfigError(std::string("instruction set ") + isa_name(isa) + " is not supported here");
  return kernels_of(isa);
}

const prep::Kernels& prep_kernels() {
  try {
    return kernels_of(active_isa());  // active_isa() is always a supported level
  } catch (const ConfigError&) {
    return prep_isa::baseline::kernels();
  }
}

}  // namespace velox
