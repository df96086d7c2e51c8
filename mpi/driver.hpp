// The `velox fit` job's message loop on one or more MPI ranks (DESIGN.md "MPI driver",
// docs/running.md). Only communication lives here; planning, resume, status.tsv, progress and
// all outputs are app/job.hpp (RootJob), option checks app/job_plan.hpp.
//  - Rank 0 hands inputs out one at a time on request (kTagRequest/kTagWork/kTagResult,
//    mpi/wire.hpp). It also fits, on a second thread, from the same queue; alone (singleton or
//    -np 1) it fits everything. Every result goes to RootJob::handle on the main thread.
//  - Workers fit and send their rows back until rank 0 says stop, then wait for the exit code.
//  - SIGTERM/SIGINT (common/stop.hpp) on any rank stops the job cleanly: rank 0 hands out
//    nothing more (a signalled worker tells it so with its last request), every rank finishes
//    its chunk in flight, rank 0 records the rest as interrupted, and every rank exits with 4.
// Returns the process exit code (common/error.hpp), the same on every rank: 3 when some input
// failed, 4 when interrupted, 2 on a ConfigError, 1 on another fatal error (which aborts every
// rank under MPI).
#pragma once
#include "app/fit_run.hpp"
#include "mpi/comm.hpp"

namespace velox::mpi {

int run_fit_job(const FitOptions& opt, Comm& comm);

}  // namespace velox::mpi
