// Quality bits. RVS_WARN (int64) holds warnings: a row with RVS_WARN == 0 is clean. SUCCESS is
// false when any bit of kReject is set: "a star, fitted, trustworthy at the reported errors".
// FIT_INFO (int64) holds expected, informational conditions that are not warnings.
// Bits 0-2 mirror rvspecfit's RVS_WARN meanings (DESI MWS data model); the rest are velox's.
// Documented bit by bit, with the recommended cuts, in docs/data-model.md.
#pragma once
#include <cstdint>

namespace velox::warn {

enum : int64_t {
  kChisqNotBetter = 1LL << 0,   // chi^2 of the stellar model not better than continuum-only by
                                //   more than fit.chisq_improvement_min   [reject]
  kRvEdge = 1LL << 1,           // VRAD within 5 km/s of the velocity search range   [reject]
  kRvErrLarge = 1LL << 2,       // VRAD_ERR above fit.rv_err_max (km/s)   [reject]
  kLabelEdge = 1LL << 3,        // a label pinned at the edge of the library's coverage [reject]
  kVsiniLarge = 1LL << 4,       // VSINI above fit.vsini_max_ok (only when VSINI is fitted)
  kNoPixels = 1LL << 5,         // too few usable pixels (masked, ivar<=0, non-finite, or
                                //   outside the template coverage)   [reject]
  kHessianSingular = 1LL << 6,  // Hessian not invertible: no uncertainties   [reject]
  kNotConverged = 1LL << 7,     // Levenberg-Marquardt hit its iteration limit
  kBadInput = 1LL << 8,         // the reader rejected this target (e.g. NaN wavelengths) [reject]
  // bit 9 (ARM_EXCLUDED) moved to FIT_INFO bit 0 and is no longer set in RVS_WARN.
  kNotFitted = 1LL << 10,      // not a stellar target (e.g. DESI OBJTYPE SKY): not fitted [reject]
  kFitFailed = 1LL << 11,      // numerical failure of the fit (singular continuum system) [reject]
  kModelMismatch = 1LL << 12,  // residuals beyond the noise above fit.mismatch_max of the flux
                               //   (a chi^2/dof far above the star population's)   [reject]
  kNotStar = 1LL << 13,        // the best redrock class is not a normal star (SPECTYPE QSO, or
                               //   SUBTYPE WD / CV)   [reject]
  kArmRvDisagree = 1LL << 14,  // the per-arm velocities VRAD_B/R/Z disagree beyond their errors
};

// Conditions under which the row is not a trustworthy stellar measurement: SUCCESS = false.
constexpr int64_t kReject = kChisqNotBetter | kRvEdge | kRvErrLarge | kLabelEdge | kNoPixels |
                            kHessianSingular | kBadInput | kNotFitted | kFitFailed |
                            kModelMismatch | kNotStar;
// Rows that were never fitted or whose fit broke down (no values at all).
constexpr int64_t kFatal = kNoPixels | kHessianSingular | kBadInput | kNotFitted | kFitFailed;

// The bits' names, in bit order (docs/data-model.md). Every catalog carries them as the /catalog
// attribute RVS_WARN_BITS ("0:CHISQ_NOT_BETTER,1:RV_EDGE,..."), which `velox info` and
// scripts/plot_fit.py decode with.
inline constexpr const char* kBitNames[] = {
    "CHISQ_NOT_BETTER", "RV_EDGE",          "RV_ERR_LARGE",   "LABEL_EDGE", "VSINI_LARGE",
    "NO_PIXELS",        "HESSIAN_SINGULAR", "NOT_CONVERGED",  "BAD_INPUT",  "RETIRED_9",
    "NOT_FITTED",       "FIT_FAILED",       "MODEL_MISMATCH", "NOT_STAR",   "ARM_RV_DISAGREE"};
inline constexpr int kNumBits = sizeof(kBitNames) / sizeof(kBitNames[0]);

}  // namespace velox::warn

namespace velox::info {

enum : int64_t {
  kArmExcluded = 1LL << 0,       // an arm with data was left out (outside the templates, e.g. the
                                 //   DESI Z arm with MILES, or too few usable pixels)
  kClipped = 1LL << 1,           // pixels were clipped as outliers and the fit re-run
  kArmSplit = 1LL << 2,          // a one-arm spectrum was split into blue/red halves for VRAD_B/R
  kNoClassification = 1LL << 3,  // the template library has no redrock classes: SPECTYPE empty
  kVsiniUpperLimit = 1LL << 4,   // rotation not detected: VSINI_UPPER holds the upper limit
  kVsiniUnresolved = 1LL << 5,   // the arms' resolving power (with the templates') is below
                                 //   fit.vsini_min_R: VSINI not fitted, NaN
  kRvVariable = 1LL << 6,        // --epochs: VRAD_LOGP_CONST < fit.rv_variable_logp (a velocity
                                 //   that varies between epochs: binary, pulsator)
  kVradFromArms = 1LL << 7,      // VRAD is the weighted mean of the per-arm velocities with the
                                 //   format's arm scatter (fit.arm_rv_scatter_kms), not the joint
                                 //   fit's
};

// The bits' names, in bit order: the /catalog attribute FIT_INFO_BITS ("0:ARM_EXCLUDED,...").
inline constexpr const char* kBitNames[] = {
    "ARM_EXCLUDED",      "CLIPPED",          "ARM_SPLIT",   "NO_CLASSIFICATION",
    "VSINI_UPPER_LIMIT", "VSINI_UNRESOLVED", "RV_VARIABLE", "VRAD_FROM_ARMS"};
inline constexpr int kNumBits = sizeof(kBitNames) / sizeof(kBitNames[0]);

}  // namespace velox::info
