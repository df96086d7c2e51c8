// Fit one spectrum: masking → CCF initial velocity → chi^2 grid of coarse templates → LM
// refinement of (VRAD, labels) with profiled per-arm continua → Hessian errors → RVS_WARN.
// Runs the kernels in kernels/ with the serial team (the CPU backend calls this per thread).
#pragma once
#include <string>
#include <vector>

#include "emulator/library.hpp"
#include "fit/config.hpp"
#include "io/catalog.hpp"
#include "io/spectrum.hpp"
#include "kernels/fit_pipeline.hpp"
#include "model/arm_model.hpp"

namespace velox {

struct FitContext {
  const TemplateLibrary& lib;
  ArmModelCache& cache;
  const FitConfig& cfg;
  std::string format;  // format_name() of the input, for the default resolution
};

// Optional outputs for tests and plots.
struct FitDiagnostics {
  std::vector<double> wave_vac_A;  // used pixels (all arms, concatenated)
  std::vector<double> flux, ivar, model;
  std::vector<int> arm_of_pixel;
  std::vector<std::string> messages;  // human-readable notes (excluded arms, ...)
};

// The kernel pipeline's numbers from the configuration and the library's label box.
kern::PipelineConfig pipeline_config(const FitConfig& cfg, const TemplateLibrary& lib);

// Never throws for data problems: they become RVS_WARN bits with SUCCESS=false.
CatalogRow fit_spectrum(const Spectrum& spec, const FitContext& ctx, FitDiagnostics* diag = nullptr);

}  // namespace velox
