// Clean stops on SIGTERM and SIGINT (docs/running.md "Stopping and requeueing"). The signal
// handler only records the request; the job's message loop (mpi/driver.cpp) polls
// stop_requested(), stops handing out inputs, lets the chunks in flight finish, records the
// unfinished inputs and exits with kExitInterrupted (common/error.hpp). A second signal ends the
// process at once with the signal's default action (complete outputs stay complete: every
// output is written to NAME.tmp and renamed; the next run removes stale .tmp files).
#pragma once
#include <string>

namespace velox {

// Installs the SIGTERM and SIGINT handlers (idempotent; sigaction with SA_RESTART).
void install_stop_handlers();

// True once a stop was requested, by a signal or by request_stop(). Async-signal-safe.
bool stop_requested();

// Requests a stop from code: another MPI rank was signalled, or a test.
void request_stop();

// Requests a stop because the outputs cannot be written (app/output_faults.hpp: the output
// filesystem is full, read-only or gone, or writes keep failing): the job then exits with
// kExitOutputFailed instead of kExitInterrupted. Async-signal-safe.
void request_output_stop();
bool output_stop_requested();

// What asked: "SIGTERM", "SIGINT", "output write failures" or "a stop request from another
// rank"; empty if nothing did.
std::string stop_reason();

// Forgets a request (tests only: one process runs many tests).
void clear_stop_request();

}  // namespace velox
