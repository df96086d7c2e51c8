// The `velox fit` job on one or more MPI ranks (DESIGN.md "MPI driver", docs/running.md).
//  - Rank 0 builds the input list, orders it largest file first, and hands inputs out one at a
//    time on request (kTagRequest/kTagWork/kTagResult, mpi/wire.hpp). It also fits, on a second
//    thread, from the same queue; alone (singleton or -np 1) it fits everything.
//  - Workers fit and send their rows back; rank 0 alone writes: per-input catalogs
//    (--output-dir, atomic), DIR/status.tsv, and the merged catalog (--output or --merge).
//  - Reruns skip inputs whose per-input catalog exists (--overwrite refits them).
// Returns the process exit code (common/error.hpp): 3 when some input failed. Fatal errors
// (bad templates, unwritable outputs) abort every rank.
#pragma once
#include "app/fit_run.hpp"
#include "mpi/comm.hpp"

namespace velox::mpi {

// Check the option combination (the same on every rank). Throws ConfigError.
void validate_job_options(const FitOptions& opt);

int run_fit_job(const FitOptions& opt, Comm& comm);

// Node-local GPU choice: local_rank modulo the device count; -1 when there is no device.
int device_for_local_rank(int local_rank, int n_devices);
// Devices visible to this process (CUDA_VISIBLE_DEVICES, else /dev/nvidia<N>), no CUDA needed.
int visible_gpu_count();

// --threads default: the cores in this rank's affinity mask; when the launcher did not bind
// (every rank sees all cores), the node's cores divided among its ranks.
int default_rank_threads(int local_size);

}  // namespace velox::mpi
