// Byte layouts of the driver's MPI messages (mpi/driver.cpp): a batch of work items from rank 0,
// and a worker's report (the status of each input it finished, the inputs it hands back
// unfitted, its measured rate). Fields are copied one by one in a fixed order, strings as a
// 32-bit length plus bytes, so catalog rows (carried only when rank 0 writes a merged catalog)
// arrive bit-for-bit as the worker computed them (NaN payloads included). Both ends run the same
// binary, so native byte order is fine.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "app/fit_run.hpp"
#include "app/handout.hpp"

namespace velox::mpi {

// Message tags of the driver protocol (mpi/driver.cpp).
enum Tag : int {
  kTagRequest = 1,  // worker -> rank 0: pack_report(), "here is what I did, give me more"
  kTagWork = 2,     // rank 0 -> worker: pack_work(); an empty batch means "stop"
  kTagResult = 3,   // worker -> rank 0: pack_report(), the last one (after "stop"); no answer
  kTagExit = 4,     // rank 0 -> worker, at the very end: the job's exit code (int32)
};

std::vector<char> pack_work(const std::vector<WorkItem>& batch);
std::vector<WorkItem> unpack_work(const std::vector<char>& msg);  // throws IoError if truncated

// What a worker tells rank 0 with each request and in its last message.
struct Report {
  bool stop = false;              // this rank was signalled: stop the whole job
  double rate_bytes_s = 0.0;      // input bytes fitted per busy second so far (0: not known yet)
  double busy_s = 0.0;            // seconds this rank has spent fitting (not waiting for work)
  std::vector<FileResult> done;   // inputs finished since the last report (rows only when a
                                  // merged catalog is wanted)
  std::vector<size_t> returned;   // inputs handed to it that it will not fit (it was stopped)
};

std::vector<char> pack_report(const Report& r);
Report unpack_report(const std::vector<char>& msg);  // throws IoError if truncated

// One FileResult (used inside reports; exposed for the tests).
std::vector<char> pack_result(const FileResult& r);
FileResult unpack_result(const std::vector<char>& msg);  // throws IoError if truncated

}  // namespace velox::mpi
