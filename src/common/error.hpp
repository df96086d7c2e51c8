// Exceptions thrown at I/O and configuration boundaries, and the documented process exit codes.
#pragma once
#include <stdexcept>
#include <string>

namespace velox {

// An input/output failure: message names the file, HDU/column/dataset and the reason.
struct IoError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// A configuration or command-line problem.
struct ConfigError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Process exit codes: the one list, documented in docs/user-guide.md "Exit codes". Under MPI
// every rank returns the job's code.
enum ExitCode : int {
  kExitOk = 0,     // every input processed, every target fitted or flagged
  kExitFatal = 1,  // could not run at all (bad or missing template library, I/O error, ...)
  kExitUsage = 2,  // bad command line, configuration or output path; nothing was fitted
  kExitCompletedWithFailures = 3,  // ran to the end, but some input files failed to read
  kExitInterrupted = 4,  // stopped by SIGTERM/SIGINT: finished inputs are saved, the others are
                         // "interrupted" in status.tsv; rerunning the same command resumes
};

}  // namespace velox
