// Analytic floating-point operation count of the CPU kernel (kern::fit_one) and the nominal peak
// of the cores it runs on: `velox bench` prints achieved GFLOP/s and the share of peak
// (docs/performance.md "FLOP count" gives the formulas and the assumptions).
// Counting rule: a double or float add, subtract, multiply or divide is 1 FLOP (an FMA 2); sqrt,
// exp, atanh and floor count 1; integer index arithmetic and comparisons count 0. Terms that
// are O(1) per evaluation (the LM's 4x4 Cholesky, CCF peak search) are left out (< 0.1%).
#pragma once
#include <vector>

#include "backend/cpu/isa.hpp"
#include "fit/fitter.hpp"

namespace velox {

// The shape of a problem: what the FLOP count depends on.
struct FlopShape {
  // Per arm: used pixels, model evaluation points (n_full for resolution-matrix arms, else the
  // used pixels) and the matrix diagonals (0: none).
  std::vector<int> n_used, n_points, ndiag;
  int n_seg = 0;     // velocity segments (per-arm VRAD)
  int n_comp = 0;    // K + 1 (mean + K basis components)
  int n_label = 0;   // L
  int n_train = 0;   // emulator training stars N (all counted: an upper bound, see .cpp)
  int n_poly = 0;    // emulator polynomial terms P
  int cont_deg = 8, ccf_cont_deg = 5;
  int n_ccf = 0, n_ccf_use = 0, n_lags = 0;  // coarse templates, those cross-correlated, lags
  bool clip = true;                          // one re-fit after clipping
};

// The shape of one prepared spectrum under pipeline config pc and library lib.
FlopShape flop_shape(const Packed& pk, const kern::PipelineConfig& pc, const TemplateLibrary& lib);

enum class EvalKind { kChi2, kJacobian, kVelocityOnly, kContinuumOnly };

// FLOPs of one kern::evaluate of the given kind (template_at_pixels + profile_continuum).
double eval_flops(const FlopShape& s, EvalKind kind);
// FLOPs of the fixed stages of one fit: pseudo-normalisation, CCF (coarse + fine lags), the
// chi^2 grid over the coarse templates, the continuum-only evaluation and the clipping pass.
double fixed_flops(const FlopShape& s);
// FLOPs of one whole fit with result r's evaluation counters (kern::PipelineResult::n_eval).
double fit_flops(const FlopShape& s, const kern::PipelineResult& r);

// Nominal FP64 FLOP per cycle and core of a level: baseline SSE2 4 (two 2-wide add/mul ports,
// no FMA), AVX2+FMA 16 (two 4-wide FMA ports), AVX-512 32 (two 8-wide FMA ports).
double flop_per_cycle(CpuIsa isa);
// Core clock in GHz while running: measured (x86-64) by timing chains of 2^22 dependent integer
// adds, one cycle each on every x86-64 core, best of 30 (about 40 ms); elsewhere the largest
// "cpu MHz" of /proc/cpuinfo. NaN when neither works. cpuinfo_ghz(): that /proc/cpuinfo value
// (in a virtual machine often the nominal clock, not the turbo clock the core runs at).
double core_ghz();
double cpuinfo_ghz();

}  // namespace velox
