#include "fit/cpu_isa.hpp"

#include <atomic>
#include <cstdlib>
#include <mutex>

#include "common/error.hpp"

namespace velox {

namespace {

constexpr CpuIsa kAll[] = {CpuIsa::kBaseline, CpuIsa::kAvx2, CpuIsa::kAvx512};

// Whether this build has the level's code (cmake/cpu_isa.cmake defines VELOX_HAVE_ISA_AVX2 /
// _AVX512 on x86-64 with a compiler that knows the -march levels).
bool compiled(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kBaseline:
      return true;
    case CpuIsa::kAvx2:
#ifdef VELOX_HAVE_ISA_AVX2
      return true;
#else
      return false;
#endif
    case CpuIsa::kAvx512:
#ifdef VELOX_HAVE_ISA_AVX512
      return true;
#else
      return false;
#endif
  }
  return false;
}

// Does the CPU have every feature the level's -march implies? __builtin_cpu_supports also
// checks that the OS saves the wide registers (XCR0), so an AVX-512 CPU under an OS without
// AVX-512 state support is reported without it.
bool cpu_has(CpuIsa isa) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  switch (isa) {
    case CpuIsa::kBaseline:
      return true;
    case CpuIsa::kAvx2:  // x86-64-v3
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
             __builtin_cpu_supports("bmi") && __builtin_cpu_supports("bmi2") &&
             __builtin_cpu_supports("popcnt");
    case CpuIsa::kAvx512:  // x86-64-v4
      return cpu_has(CpuIsa::kAvx2) && __builtin_cpu_supports("avx512f") &&
             __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512cd") &&
             __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
  }
  return false;
#else
  return isa == CpuIsa::kBaseline;
#endif
}

std::atomic<int> g_active{-1};  // -1: not chosen yet
std::once_flag g_env_once;

std::string supported_list() {
  std::string s;
  for (CpuIsa i : supported_isas()) s += (s.empty() ? "" : " ") + std::string(isa_name(i));
  return s;
}

void require_supported(CpuIsa isa, const char* where) {
  if (isa_supported(isa)) return;
  throw ConfigError(std::string(where) + ": instruction set " + isa_name(isa) + " is " +
                    (compiled(isa) ? "not supported by this CPU" : "not compiled into this build") +
                    " (supported here: " + supported_list() + ")");
}

}  // namespace

const char* isa_name(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kBaseline:
      return "baseline";
    case CpuIsa::kAvx2:
      return "avx2";
    case CpuIsa::kAvx512:
      return "avx512";
  }
  return "?";
}

CpuIsa parse_isa(const std::string& name) {
  for (CpuIsa i : kAll)
    if (name == isa_name(i)) return i;
  throw ConfigError("unknown instruction set '" + name + "' (baseline, avx2 or avx512)");
}

bool isa_supported(CpuIsa isa) { return compiled(isa) && cpu_has(isa); }

std::vector<CpuIsa> supported_isas() {
  std::vector<CpuIsa> v;
  for (CpuIsa i : kAll)
    if (isa_supported(i)) v.push_back(i);
  return v;
}

CpuIsa best_isa() { return supported_isas().back(); }

CpuIsa active_isa() {
  std::call_once(g_env_once, [] {
    if (g_active.load() >= 0) return;  // set_active_isa came first
    CpuIsa isa = best_isa();
    if (const char* env = std::getenv("VELOX_ISA"); env && *env) {
      try {
        isa = parse_isa(env);
      } catch (const ConfigError& e) {
        throw ConfigError(std::string("VELOX_ISA: ") + e.what());
      }
      require_supported(isa, "VELOX_ISA");
    }
    g_active.store(static_cast<int>(isa));
  });
  return static_cast<CpuIsa>(g_active.load());
}

void set_active_isa(CpuIsa isa) {
  require_supported(isa, "--isa");
  g_active.store(static_cast<int>(isa));
}

std::string isa_summary() {
  std::string active;
  try {
    active = isa_name(active_isa());
  } catch (const ConfigError& e) {
    active = std::string("none: ") + e.what();
  }
  return active + " (supported: " + supported_list() + ")";
}

}  // namespace velox
