// The `velox fit` job's message loop on one or more MPI ranks (docs/design.md "The fit stream and
// the job's scale-out", docs/running.md). Only communication lives here; planning, resume,
// status.tsv, progress and the merged outputs are app/job.hpp (RootJob), option checks
// app/job_plan.hpp.
//  - Rank 0 hands inputs out in batches of about --batch-seconds of work at the asking rank's
//    measured rate, smaller near the end of the queue (app/handout.hpp). It also fits, on a
//    second thread, taking inputs one at a time from the same queue; alone (singleton or -np 1)
//    it fits everything.
//  - Every rank writes the per-input catalogs of the inputs it fitted (InputCatalogWriter). A
//    worker's next request carries a short status per finished input (no rows unless a merged
//    catalog is wanted), the inputs it hands back unfitted (after a stop) and its rate. It asks
//    for the next batch when it takes the last input of the current one, so the answer arrives
//    while that input is fitted. Every status goes to RootJob::handle on rank 0's main thread.
//  - SIGTERM/SIGINT (common/stop.hpp) on any rank stops the job cleanly: rank 0 hands out
//    nothing more (a signalled worker tells it so in its request and hands back the inputs it
//    has not started), every rank finishes what it is fitting, rank 0 records the rest as
//    interrupted, and every rank exits with 4.
// Returns the process exit code (common/error.hpp), the same on every rank: 3 when some input
// failed, 4 when interrupted, 2 on a ConfigError, 1 on another fatal error (which aborts every
// rank under MPI).
#pragma once
#include <functional>

#include "app/fit_run.hpp"
#include "app/handout.hpp"
#include "mpi/comm.hpp"

namespace velox {
class RootJob;
}

namespace velox::mpi {

int run_fit_job(const FitOptions& opt, Comm& comm);

// ---- The pieces run_fit_job is made of, shared with the coordinator simulation ----------------

// How a rank fits a stream of inputs: FitEngine::fit_stream, or the simulation's sleeping fit.
// Pulls inputs with `next` until it returns false and calls `done` once per input, in order.
using FitLoop = std::function<void(const FitEngine::NextInput& next,
                                   const std::function<void(FileResult&&)>& done)>;
// Called on the fitting thread with each result of this rank before it is reported (r.rank is
// set): writes the per-input catalog, and marks the input failed when that write fails
// (InputCatalogWriter::write).
using OnFitted = std::function<void(FileResult& r)>;

// What rank 0 saw of the job: requests answered, inputs handed out, and the ranks' busy time.
struct CoordinatorStats {
  size_t requests = 0, inputs = 0;
  double seconds = 0.0;  // from the first hand-out to the last status received
  double busy_s = 0.0;   // summed over the fitting ranks (rank 0's thread included)
  int fitting_ranks = 0;
  // 1 - busy / (ranks x seconds): the share of the ranks' time spent without work.
  double idle_share() const {
    return fitting_ranks > 0 && seconds > 0
               ? std::max(0.0, 1.0 - busy_s / (fitting_ranks * seconds))
               : 0.0;
  }
};

// Rank 0: serve `job`'s inputs to every rank and fit on a second thread with `fit`, until every
// input handed out is reported; every worker has sent its last report. Does not call
// job.finish(). `send_rows`: results keep their rows (a merged catalog is written).
CoordinatorStats serve(RootJob& job, Comm& comm, const FitLoop& fit, const OnFitted& on_fitted,
                       bool send_rows, const HandoutPolicy& policy);
// Workers: fit batches from rank 0 with `fit` until told to stop, report, and return the job's
// exit code from rank 0.
int work(Comm& comm, const FitLoop& fit, const OnFitted& on_fitted, bool send_rows);
// Rank 0 at the end: send every worker the job's exit code.
void send_exit_code(Comm& comm, int code);

}  // namespace velox::mpi
