// The CPU backend's kernel entry point, compiled once per instruction-set level into its own
// namespace velox::cpu_isa::<level> (cmake/cpu_isa.cmake, fit_slot.cpp). Only the dispatcher
// (backend/cpu/isa.cpp) names these; everyone else calls cpu_fit_kernel() (backend/cpu/isa.hpp).
#pragma once
#include "kernels/batch.hpp"

// fit_spectrum(b, s, slot, model): fit spectrum s of batch b with the serial team in slot
// `slot` (kern::fit_one; the result goes to b.results[s]). model (null: not wanted): the best-fit
// model at the used pixels, [b.spec[s].n_pix] doubles, written when the fit succeeded.
// fixed_taps(t, n, frac, ki, kd, out): this level's SIMD form of kern::fixed_taps (the chi^2
// grid's template values, simd_forms.hpp fixed_taps_cpu) on n stencils whose taps are ki (int)
// or, where ki is null, kd (doubles); out[n]. For tests (backend/cpu/isa.hpp cpu_fixed_taps).
#define VELOX_DECLARE_CPU_ISA(level)                                                          \
  namespace velox::cpu_isa::level {                                                           \
  void fit_spectrum(const kern::BatchView& b, int s, int slot, double* model);                \
  void fixed_taps(const float* t, int n, const double* frac, const int* ki, const double* kd, \
                  double* out);                                                               \
  }

VELOX_DECLARE_CPU_ISA(baseline)
VELOX_DECLARE_CPU_ISA(avx2)
VELOX_DECLARE_CPU_ISA(avx512)
