// `velox bench`: throughput of the fit on real inputs, without writing anything
// (docs/performance.md). One device's rates per run (host prepare, the backend alone on prepared
// spectra in memory, end to end from the files), the work per spectrum (backend/cpu/flop_count.hpp)
// and what a GPU host needs to feed a device (issue 26). Used by src/main.cpp.
#pragma once
#include <vector>

#include "app/fit_run.hpp"
#include "backend/cpu/isa.hpp"

namespace velox {

// Benchmarks every device of base.device (a comma-separated list: cpu,gpu) in turn: `repeat`
// timed runs each (medians printed), the backend on `replicate` spectra (0: the inputs once), the
// CPU at each instruction set of `isas` (alternated within each run; ratios to the first), and
// the host threads needed to feed `feed_rate` spectra/s. Prints to stdout; returns kExitOk.
// Throws ConfigError for bad options, IoError for unreadable inputs.
int cmd_bench(const FitOptions& base, int repeat, size_t replicate, const std::vector<CpuIsa>& isas,
              double feed_rate);

}  // namespace velox
