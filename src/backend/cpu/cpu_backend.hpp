// CPU backend: a pool of std::threads, each fitting whole spectra with the serial team (the same
// kernels the CUDA backend launches). Results are written in input order, so the catalog does
// not depend on the thread count or scheduling.
#pragma once
#include <functional>
#include <vector>

#include "fit/fitter.hpp"

namespace velox {

struct FitJob {
  const Spectrum* spectrum;
  const FitContext* ctx;
};

// Fit every job with `n_threads` workers (>= 1). `on_done` (may be empty) is called from worker
// threads after each fit with the number completed so far; it must be thread-safe.
// `diags`, if given, is resized to jobs.size() and receives each fit's FitDiagnostics (used
// pixels, model) for --save-models.
std::vector<CatalogRow> fit_on_cpu(const std::vector<FitJob>& jobs, int n_threads,
                                   const std::function<void(size_t)>& on_done = {},
                                   std::vector<FitDiagnostics>* diags = nullptr);

int default_thread_count();  // cores available to this process (sched_getaffinity)

}  // namespace velox
