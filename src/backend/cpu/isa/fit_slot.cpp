// The CPU kernel translation unit, compiled once per instruction-set level (cmake/cpu_isa.cmake):
// baseline x86-64, x86-64-v3 (AVX2 + FMA) and x86-64-v4 (AVX-512), each with
// VELOX_ISA_LEVEL = baseline | avx2 | avx512 and VELOX_ISA_TU defined. backend/cpu/isa.cpp
// picks one at run time (docs/performance.md "Instruction sets").
//
// One-definition rule. The kernels are header templates and inline functions; compiled three
// times with different -march flags, the linker would keep ONE copy of each (say the AVX-512
// one) for the whole program, and a baseline run would execute AVX-512 code. So nothing here
// has external linkage except fit_spectrum (and fixed_taps, a test entry):
//  - the team type is declared in an anonymous namespace, so every kernel template instantiated
//    on it (fit_one, evaluate, template_at_pixels, ... and their lambdas), and SimdTeam<IsaTeam>
//    with its SIMD forms (simd_forms.hpp), is local to this object;
//  - VELOX_ISA_TU makes VX_INLINE `static inline` (kernels/hd.hpp) for the non-template helpers;
//  - nothing of the C++ standard library beyond <cmath> is used (its inline functions would be
//    shared too).
// The test cpu_isa.symbols (tests/CMakeLists.txt, scripts/check-isa-objects.sh) checks with nm
// that each object defines no other external symbol, and that the baseline object has no VEX/EVEX
// instruction.
#if !defined(VELOX_ISA_TU) || !defined(VELOX_ISA_LEVEL)
#error "compile through cmake/cpu_isa.cmake (VELOX_ISA_TU, VELOX_ISA_LEVEL)"
#endif
#include "backend/cpu/isa/fit_slot.hpp"

#include "backend/cpu/isa/simd_forms.hpp"
#include "kernels/team.hpp"

namespace {

// The CPU's team (SerialTeam with the SIMD forms) under a name local to this object (see above).
// sync() is redeclared so that not even this non-template member is shared with other objects.
struct IsaTeam : velox::kern::cpu::SimdTeam<IsaTeam> {
  void sync() const {}
};

}  // namespace

namespace velox::cpu_isa::VELOX_ISA_LEVEL {

void fit_spectrum(const kern::BatchView& b, int s, int slot, double* model) {
  kern::FitData d;
  kern::PipelineScratch sc;
  const float* tmpl[kern::kMaxArms] = {};
  kern::batch_views(b, s, slot, &d, &sc, tmpl);
  kern::CpuFitExtras extras;  // the CPU's transposed basis, CCF phases and convolved-row scratch
  kern::cpu::cpu_fit_extras(b, s, slot, &extras);
  d.cpu = &extras;
  kern::PipelineShared* sh = b.shared + slot;
  kern::PipelineResult* res = b.results + s;
  const IsaTeam team;
  if (b.spec[s].held)
    kern::fit_velocity_held(team, b.em, b.grid, d, b.cfg, b.spec[s].held_theta, sc, sh, res);
  else
    kern::fit_one(team, b.em, b.grid, d, tmpl, b.n_ccf, b.ccf_labels, b.cfg, sc, sh, res);
  if (!model || res->status != kern::kPipeOk) return;
  // fit_one's last evaluation is the continuum-only one: evaluate the stellar model again at the
  // solution.
  kern::evaluate(team, &b.em, b.grid, d, b.cfg.cont_deg, res->best.theta, false, &sh->w, sc.T,
                 sc.dT);
  kern::model_at_pixels(team, d, b.cfg.cont_deg, sc.T, &sh->w, model);
}

void fixed_taps(const float* t, int n, const double* frac, const int* ki, const double* kd,
                double* out) {
  if (ki)
    kern::cpu::fixed_taps_cpu(t, n, frac, ki, out);
  else
    kern::cpu::fixed_taps_cpu(t, n, frac, kd, out);
}

}  // namespace velox::cpu_isa::VELOX_ISA_LEVEL
