// Run-time choice of the instruction set of the CPU code compiled per level (docs/performance.md
// "Instruction sets"): the CPU kernel (backend/cpu/isa.hpp) and the host preparation's inner loops
// (fit/prep_kernels.hpp) are compiled three times (cmake/cpu_isa.cmake): baseline x86-64 (SSE2),
// x86-64-v3 (AVX2 + FMA) and x86-64-v4 (AVX-512 F/BW/CD/DQ/VL); non-x86 builds have baseline
// only. By default the best level the CPU supports is used; the environment variable
// VELOX_ISA=baseline|avx2|avx512 or `velox fit|bench --isa` forces a lower one.
#pragma once
#include <string>
#include <vector>

namespace velox {

enum class CpuIsa : int { kBaseline = 0, kAvx2 = 1, kAvx512 = 2 };

const char* isa_name(CpuIsa isa);  // "baseline", "avx2", "avx512"
// Parse a level name; throws ConfigError naming the valid ones.
CpuIsa parse_isa(const std::string& name);
// True when this build has the level's code and this CPU (and its OS) can run it.
bool isa_supported(CpuIsa isa);
std::vector<CpuIsa> supported_isas();  // lowest first
CpuIsa best_isa();                     // the highest supported level

// The level the CPU kernel and the host preparation run with. On first use: VELOX_ISA if set
// (ConfigError when it names no level, or one this CPU or build lacks), else best_isa().
CpuIsa active_isa();
// Force `isa` for every later fit of this process; ConfigError when it is not supported.
// Not meant to be called while a fit runs (a batch reads the choice once, at its start).
void set_active_isa(CpuIsa isa);

// "avx512 (supported: baseline avx2 avx512)", for --version and the bench. Never throws (a bad
// VELOX_ISA is reported in the text).
std::string isa_summary();

}  // namespace velox
