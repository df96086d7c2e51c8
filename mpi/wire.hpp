// Byte layouts of the driver's MPI messages: a work item (input index and path) and a FileResult
// (status, timing and its catalog rows). Fields are copied one by one in a fixed order, strings
// as a 32-bit length plus bytes, so the rows arrive bit-for-bit as the worker computed them
// (NaN payloads included). Both ends run the same binary, so native byte order is fine.
#pragma once
#include <string>
#include <vector>

#include "app/fit_run.hpp"

namespace velox::mpi {

// Message tags of the driver protocol (mpi/driver.cpp).
enum Tag : int {
  kTagRequest = 1,  // worker -> rank 0: empty, "give me an input"; one byte: "I was
                    // signalled: stop the job" (rank 0 answers stop)
  kTagWork = 2,     // rank 0 -> worker: pack_work(); an empty message means "stop"
  kTagResult = 3,   // worker -> rank 0: pack_result()
  kTagExit = 4,     // rank 0 -> worker, at the very end: the job's exit code (int32)
};

std::vector<char> pack_work(size_t index, const std::string& path);
void unpack_work(const std::vector<char>& msg, size_t& index, std::string& path);

std::vector<char> pack_result(const FileResult& r);
FileResult unpack_result(const std::vector<char>& msg);  // throws IoError if truncated

}  // namespace velox::mpi
