// The CPU kernel's entry at the active instruction-set level (fit/cpu_isa.hpp chooses the level;
// docs/performance.md "Instruction sets"). The CPU backend's kernel is compiled three times
// (cmake/cpu_isa.cmake): baseline x86-64 (SSE2), x86-64-v3 (AVX2 + FMA) and x86-64-v4 (AVX-512).
#pragma once
#include "fit/cpu_isa.hpp"
#include "kernels/batch.hpp"

namespace velox {

// The CPU kernel entry of the active level: fit spectrum s of batch b in slot `slot` with the
// serial team; model (null: not wanted): [b.spec[s].n_pix] best-fit model, written when the fit
// succeeded (backend/cpu/isa/fit_slot.hpp).
using CpuFitKernel = void (*)(const kern::BatchView& b, int s, int slot, double* model);
CpuFitKernel cpu_fit_kernel();

// Level isa's SIMD form of the chi^2 grid's template values (kern::fixed_taps): out[i] =
// taps4(cubic_weights(frac[i]), t + k[i] - 1) for i < n, k from ki (int) or, where ki is null,
// from kd (taps held as doubles; the matrix arms' layout). For tests: every level must give the
// scalar form's bits. Null where this build lacks the level.
using CpuFixedTaps = void (*)(const float* t, int n, const double* frac, const int* ki,
                              const double* kd, double* out);
CpuFixedTaps cpu_fixed_taps(CpuIsa isa);

}  // namespace velox
