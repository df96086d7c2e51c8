// The host preparation's inner loops, compiled once per instruction-set level into its own
// namespace velox::prep_isa::<level> (cmake/cpu_isa.cmake, prep_slot.cpp), like the CPU kernel
// (backend/cpu/isa/fit_slot.hpp). Only the dispatcher (fit/prep_kernels.cpp) names these;
// everyone else calls prep_kernels() (fit/prep_kernels.hpp), which gives the same results at
// every level, bit for bit (the objects are compiled with -ffp-contract=off).
#pragma once
#include <cstddef>

namespace velox::prep {

// A resolution matrix's row moments (fit/resolution.hpp, ResolutionFold): m0/m1/m2[i] = sum,
// sum o, sum o^2 of row i's weights over the offsets o = k - ndiag/2 (the rows write_rows is
// given, and those their edge rows borrow).
struct FoldMoments {
  const double *m0, *m1, *m2;
  long n;  // the arm's pixels
  int ndiag;
};

struct Kernels {
  // Adds the moments of rows [row_lo, row_hi) of res[ndiag * n] (desispec layout) to m0/m1/m2
  // (zeroed by the caller), one contiguous pass per diagonal.
  void (*moments)(const float* res, long n, int ndiag, long row_lo, long row_hi, double* m0,
                  double* m1, double* m2);
  // ResolutionFold::write_rows (fit/resolution.hpp) on the moments `fm`.
  void (*write_rows)(const FoldMoments& fm, const size_t* rows, size_t count, const double* wave_A,
                     const double* fwhm_pp, double fwhm_fixed, float* out, ptrdiff_t row_step,
                     ptrdiff_t k_step, long offset);
  // The model variance of prepare_spectrum (FitConfig::model_variance): with F_k the running
  // median of flux[] over +-15 of the n used pixels, ivar[k] <- ivar / (1 + ivar (scale
  // sigma_k F_k)^2), sigma[n] the emulator's relative sigma at each pixel. flux finite.
  void (*model_ivar)(const float* flux, const double* sigma, double scale, size_t n, float* ivar);
  // prepare_spectrum's pixel classes: use[j] = range[j] (0, 1 or 2: fit_range_of) where flux[j]
  // and ivar[j] are finite, ivar[j] > 0 and mask[j] == 0 (mask null: no mask), else 0; returns
  // the count of use[j] == 2.
  size_t (*select_pixels)(const float* flux, const float* ivar, const int* mask, const char* range,
                          size_t n, char* use);
};

}  // namespace velox::prep

#define VELOX_DECLARE_PREP_ISA(level)      \
  namespace velox::prep_isa::level {       \
  const ::velox::prep::Kernels& kernels(); \
  }

VELOX_DECLARE_PREP_ISA(baseline)
VELOX_DECLARE_PREP_ISA(avx2)
VELOX_DECLARE_PREP_ISA(avx512)
