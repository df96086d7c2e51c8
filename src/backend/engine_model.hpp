// The batched GPU engine's stage model (issue 51; docs/gpu.md "Stage model"): for each stage of
// the staged engine's evaluations and fixed passes, the FP64 SIMT, FP32 SIMT and FP64 tensor
// FLOPs and the device-memory bytes it moves, and the time a device takes for it at stated
// shares of its peaks, time = max(compute, memory). `velox bench` prints it with the measured
// evaluation counts and the rate it predicts. The formulas are those of
// ../shared/perf/gpu-design-study.md section 3 (staged, unfused; no rotation), scaled by the
// spectrum's shape; continuum constants assume the default degree 8. A model of the target
// design, not of the kernels that run today: docs/gpu.md compares it with measured rates.
#pragma once
#include <string>
#include <vector>

#include "backend/cpu/flop_count.hpp"

namespace velox {

struct StageCost {
  std::string stage;
  double f64 = 0, f32 = 0, dmma = 0;  // FLOPs: FP64 SIMT, FP32 SIMT, FP64 tensor cores
  double bytes = 0;                   // device memory read + written
};

// A device's peaks (vendor figures) and the shares of them the model assumes are reached.
struct DeviceModel {
  std::string name;
  double fp64 = 0, fp32 = 0, dmma = 0, hbm = 0;  // FLOP/s, FLOP/s, FLOP/s, bytes/s
  double simt_share = 0.3, dmma_share = 0.3, hbm_share = 0.6;
};
// H200 SXM: FP64 34 TFLOP/s, FP32 67, FP64 tensor 67, HBM3e 4.8 TB/s (NVIDIA's data sheet; the
// design study's figures).
DeviceModel h200_model();

// Seconds one stage takes on d.
double stage_seconds(const StageCost& c, const DeviceModel& d);

// The stages of one evaluation of `kind` (kChi2, kJacobian: emulator, rows, interp, rmat,
// continuum; kVelocityOnly over the whole spectrum from kept rows: interp, rmat, continuum) and
// of the fixed passes of one fit (chi2 grid, CCF, other). n_rows: template-grid rows the
// spectrum spans (the library's n_tpix).
std::vector<StageCost> engine_eval_stages(const FlopShape& s, EvalKind kind, int n_rows);
std::vector<StageCost> engine_fixed_stages(const FlopShape& s, int n_rows);

// Per fit: the model's device seconds, with counts of evaluations per fit (chi^2-only,
// Jacobian, velocity-only over a segment, velocity-only over the whole spectrum: the moments
// grid).
struct EvalCounts {
  double chi2 = 0, jac = 0, vseg = 0, vfull = 0;
};
double engine_fit_seconds(const FlopShape& s, int n_rows, const EvalCounts& n,
                          const DeviceModel& d);

}  // namespace velox
