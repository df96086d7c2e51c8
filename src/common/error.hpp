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

// Process exit codes (documented in docs/user-guide.md).
enum ExitCode : int {
  kExitOk = 0,                  // every input processed, every target fitted or flagged
  kExitFatal = 1,               // could not run at all (bad templates, unwritable output, ...)
  kExitUsage = 2,               // bad command line or configuration
  kExitCompletedWithFailures = 3,  // ran to the end, but some input files failed to read
};

}  // namespace velox
