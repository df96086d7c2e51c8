// The host preparation's inner loops (resolution-matrix fold, running median) at the active
// instruction-set level (fit/cpu_isa.hpp): fit/isa/prep_slot.hpp. Every level gives the same
// results, bit for bit.
#pragma once
#include "fit/cpu_isa.hpp"
#include "fit/isa/prep_slot.hpp"

namespace velox {

// The kernels of active_isa(); baseline where the level's choice fails (a bad VELOX_ISA is
// reported by the fit's own call of active_isa()).
const prep::Kernels& prep_kernels();
// The kernels of one level (tests); ConfigError when it is not supported.
const prep::Kernels& prep_kernels(CpuIsa isa);

}  // namespace velox
