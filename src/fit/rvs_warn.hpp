// RVS_WARN quality bits (catalog column RVS_WARN, int64). Documented in docs/data-model.md.
// Bits 0-2 mirror rvspecfit's RVS_WARN meanings (DESI MWS data model); the rest are velox's.
#pragma once
#include <cstdint>

namespace velox::warn {

enum : int64_t {
  kChisqNotBetter = 1LL << 0,   // chi^2 of the stellar model not better than continuum-only by
                                //   more than fit.chisq_improvement_min
  kRvEdge = 1LL << 1,           // VRAD within 5 km/s of the velocity search range
  kRvErrLarge = 1LL << 2,       // VRAD_ERR above fit.rv_err_max (km/s)
  kLabelEdge = 1LL << 3,        // a label at the edge of the template library's coverage
  kVsiniLarge = 1LL << 4,       // VSINI above fit.vsini_max_ok (only when VSINI is fitted)
  kNoPixels = 1LL << 5,         // too few usable pixels (masked, ivar<=0, non-finite, or
                                //   outside the template coverage)   [fatal]
  kHessianSingular = 1LL << 6,  // Hessian not invertible: no uncertainties   [fatal]
  kNotConverged = 1LL << 7,     // Levenberg-Marquardt hit its iteration limit
  kBadInput = 1LL << 8,         // the reader rejected this target (e.g. NaN wavelengths) [fatal]
  kArmExcluded = 1LL << 9,      // an arm with data was excluded (outside templates / too few px)
  kNotFitted = 1LL << 10,       // not a stellar target (e.g. DESI OBJTYPE SKY): not fitted [fatal]
  kFitFailed = 1LL << 11,       // numerical failure of the fit (singular continuum system) [fatal]
};

constexpr int64_t kFatal = kNoPixels | kHessianSingular | kBadInput | kNotFitted | kFitFailed;

// The bits' names, in bit order (docs/data-model.md). Every catalog carries them as the /catalog
// attribute RVS_WARN_BITS ("0:CHISQ_NOT_BETTER,1:RV_EDGE,..."), which `velox info` and
// scripts/plot_fit.py decode with.
inline constexpr const char* kBitNames[] = {"CHISQ_NOT_BETTER", "RV_EDGE",       "RV_ERR_LARGE",
                                            "LABEL_EDGE",       "VSINI_LARGE",   "NO_PIXELS",
                                            "HESSIAN_SINGULAR", "NOT_CONVERGED", "BAD_INPUT",
                                            "ARM_EXCLUDED",     "NOT_FITTED",    "FIT_FAILED"};
inline constexpr int kNumBits = sizeof(kBitNames) / sizeof(kBitNames[0]);

}  // namespace velox::warn
