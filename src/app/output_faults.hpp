// What a failed output write means for the job (issue 50; docs/running.md "When the disk fills
// or writes fail"). A write error on an input's outputs fails that input only: it gets a
// status.tsv line with the error and its errno, and no final file, and the job goes on. The job
// stops cleanly (exit kExitOutputFailed, common/error.hpp) when the output filesystem is full
// (ENOSPC, EDQUOT), read-only (EROFS) or gone (the folder vanished, ENODEV, ENXIO, ESTALE,
// ENOTCONN, ESHUTDOWN), or when kMaxConsecutive writes in a row failed for any reason (EIO,
// EFBIG, ...): then every following input would fail the same way.
#pragma once
#include <string>

namespace velox {

class OutputFaultPolicy {
 public:
  static constexpr int kMaxConsecutive = 3;

  explicit OutputFaultPolicy(std::string output_dir) : dir_(std::move(output_dir)) {}
  // An input's outputs were written.
  void ok() { consecutive_ = 0; }
  // They failed with `errnum` (0: unknown). Returns a non-empty reason when the job must stop,
  // e.g. "the output filesystem is full (ENOSPC)".
  std::string failed(int errnum);

 private:
  std::string dir_;
  int consecutive_ = 0;
};

// "No space left on device (ENOSPC)": strerror and the symbolic name; "unknown error" for 0.
std::string errno_text(int errnum);

}  // namespace velox
