// Analytic floating-point operation count of the CPU kernel (kern::fit_one) and the nominal peak
// of the cores it runs on: `velox bench` prints achieved GFLOP/s and the share of peak
// (docs/performance.md "FLOP count" gives the formulas and the assumptions).
// Counting rule: a double or float add, subtract, multiply or divide is 1 FLOP (an FMA 2); sqrt,
// exp, atanh and floor count 1; integer index arithmetic and comparisons count 0. Terms that
// are O(1) per evaluation (the LM's 4x4 Cholesky, CCF peak search) are left out (< 0.1%).
#pragma once
#include <cmath>
#include <string>
#include <vector>

#include "backend/cpu/isa.hpp"
#include "fit/fitter.hpp"

namespace velox {

// The shape of a problem: what the FLOP count depends on.
struct FlopShape {
  // Per arm: used pixels, model evaluation points (n_full for resolution-matrix arms, else the
  // used pixels) and the matrix diagonals (0: none).
  std::vector<int> n_used, n_points, ndiag;
  int n_seg = 0;    // velocity segments (per-arm VRAD)
  int n_comp = 0;   // K + 1 (mean + K basis components)
  int n_label = 0;  // L
  int n_train = 0;  // emulator training stars N (all counted: an upper bound, see .cpp)
  int n_poly = 0;   // emulator polynomial terms P
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
// The core clock `velox bench` divides by, and where it came from (in words, printed by the bench).
struct CoreClock {
  double ghz = NAN;
  std::string source;
};
// Core clock while running. x86-64: timed chains of dependent 64-bit integer multiplies (imul,
// 3 cycles each on every x86-64 core since Nehalem and Zen) and of dependent adds (1 cycle each,
// but recent Intel cores fold `add $1` chains at rename and run them several per cycle: the add
// chain alone read 10-11 GHz on a 2.1 GHz Xeon), each the best of 30 runs of about 1 ms. Each
// chain can only read high (a shortcut, a slower imul) or low (preemption, which the best run
// avoids), so the smaller of the two is taken; the source says whether they agree. Bounded by
// the kernel's cpufreq cpuinfo_max_freq where present, and by 2x the largest "cpu MHz" of
// /proc/cpuinfo (no boost reaches that); without a measurement (other CPUs) the first of those
// that exists. ghz NaN when nothing works. Measured once per call (about 70 ms).
CoreClock core_clock();
// The choice core_clock() makes from the two chains' readings (GHz; NaN: not measured), the
// cpufreq maximum (NaN: absent) and the /proc/cpuinfo clock (NaN: absent).
CoreClock pick_core_clock(double add_ghz, double imul_ghz, double max_ghz, double cpuinfo_ghz);
// The largest "cpu MHz" of /proc/cpuinfo in GHz (in a virtual machine often the nominal clock,
// not the turbo clock the core runs at); NaN when absent.
double cpuinfo_ghz();
// /sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq in GHz; NaN when absent (most VMs).
double cpufreq_max_ghz();

}  // namespace velox
