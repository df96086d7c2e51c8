// The coordinator simulation (`velox simulate-coordinator`, docs/running.md "Coordinator
// capacity"): rank 0 runs the real hand-out, status and bookkeeping code of a fit job (mpi::serve
// over RootJob, status.tsv included), and every rank's fit is replaced by a sleep of
// spectra / rate seconds per input, so the coordinator can be measured with many ranks on a
// small machine (mpirun --oversubscribe). No file is read and no catalog written.
#pragma once
#include <string>

#include "mpi/comm.hpp"

namespace velox::mpi {

struct SimOptions {
  size_t n_inputs = 100000;
  double spectra_per_input = 1.0;  // LAMOST: 1; DESI coadds: about 500
  double rate = 10000.0;           // spectra per second per rank; 0: no sleep at all (capacity)
  double batch_seconds = 1.0;      // --batch-seconds of the job
  std::string status_dir;          // status.tsv goes there (empty: none)
};

// Runs on every rank; rank 0 prints one line of results on stdout (inputs/s handed out,
// requests, ranks' idle share) and returns 0.
int run_coordinator_sim(const SimOptions& sim, Comm& comm);

}  // namespace velox::mpi
