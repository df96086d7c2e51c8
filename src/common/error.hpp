// Exceptions thrown at I/O and configuration boundaries, and the documented process exit codes.
#pragma once
#include <stdexcept>
#include <string>

namespace velox {

// An input/output failure: message names the file, HDU/column/dataset and the reason.
// `error_number` is the errno of the failed system call where one is known (ENOSPC, EIO, EFBIG,
// ...; from HDF5's and CFITSIO's own reports too), else 0: the job decides from it whether an
// output failure fails one input or stops the job (app/output_faults.hpp).
struct IoError : std::runtime_error {
  explicit IoError(const std::string& what, int error_number = 0)
      : std::runtime_error(what), error_number(error_number) {}
  int error_number = 0;
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
  kExitOutputFailed = 5,  // stopped because the outputs cannot be written: the output filesystem
                          // is full (ENOSPC, EDQUOT), read-only or gone, or writes kept failing.
                          // Finished inputs are saved and listed in status.tsv, the others are
                          // "interrupted"; free space and rerun the same command to resume
};

}  // namespace velox
