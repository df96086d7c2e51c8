#include "mpi/comm.hpp"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "common/error.hpp"

#ifdef VELOX_HAVE_MPI
// The C API only (CMake links MPI::MPI_C): keep mpi.h from declaring the C++ bindings.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

namespace velox::mpi {

#ifdef VELOX_HAVE_MPI

namespace {

// True when an MPI launcher started this process (Open MPI, PMIx, PMI-1/2 as set by srun and
// MPICH's hydra), or when VELOX_MPI says so.
bool launched_by_mpi() {
  if (const char* force = std::getenv("VELOX_MPI")) return std::string(force) != "0";
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE",
                        "MPI_LOCALNRANKS"})
    if (std::getenv(v)) return true;
  return false;
}

void nap() { std::this_thread::sleep_for(std::chrono::microseconds(500)); }

}  // namespace

Comm::Comm(int* argc, char*** argv) {
  if (!launched_by_mpi()) return;
  int provided = 0;
  MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
  active_ = true;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node);
  MPI_Comm_rank(node, &local_rank_);
  MPI_Comm_size(node, &local_size_);
  MPI_Comm_free(&node);
}

Comm::~Comm() {
  if (active_) MPI_Finalize();
}

void Comm::send(int dest, int tag, const std::vector<char>& bytes) {
  if (bytes.size() > static_cast<size_t>(INT32_MAX))
    throw IoError("MPI message of " + std::to_string(bytes.size()) + " bytes is too large");
  MPI_Send(bytes.data(), static_cast<int>(bytes.size()), MPI_BYTE, dest, tag, MPI_COMM_WORLD);
}

bool Comm::probe(int& source, int& tag, size_t& bytes) {
  if (!active_) return false;
  int flag = 0;
  MPI_Status st;
  MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st);
  if (!flag) return false;
  int count = 0;
  MPI_Get_count(&st, MPI_BYTE, &count);
  source = st.MPI_SOURCE;
  tag = st.MPI_TAG;
  bytes = static_cast<size_t>(count);
  return true;
}

std::vector<char> Comm::recv(int source, int tag, size_t bytes) {
  std::vector<char> buf(bytes);
  MPI_Recv(buf.data(), static_cast<int>(bytes), MPI_BYTE, source, tag, MPI_COMM_WORLD,
           MPI_STATUS_IGNORE);
  return buf;
}

std::vector<char> Comm::wait_recv(int source, int tag) {
  for (;;) {
    int flag = 0;
    MPI_Status st;
    MPI_Iprobe(source, tag, MPI_COMM_WORLD, &flag, &st);
    if (flag) {
      int count = 0;
      MPI_Get_count(&st, MPI_BYTE, &count);
      return recv(source, tag, static_cast<size_t>(count));
    }
    nap();
  }
}

void Comm::abort(int code) {
  if (active_) MPI_Abort(MPI_COMM_WORLD, code);
  std::exit(code);
}

#else  // no MPI: a single rank

Comm::Comm(int*, char***) {
  // Started by a launcher but built without MPI: rank 0 does the work alone, the others leave
  // (otherwise every copy would write the same outputs).
  for (const char* v : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"})
    if (const char* r = std::getenv(v); r && std::string(r) != "0") std::exit(0);
}
Comm::~Comm() = default;
void Comm::send(int, int, const std::vector<char>&) { throw IoError("velox was built without MPI"); }
bool Comm::probe(int&, int&, size_t&) { return false; }
std::vector<char> Comm::recv(int, int, size_t) { throw IoError("velox was built without MPI"); }
std::vector<char> Comm::wait_recv(int, int) { throw IoError("velox was built without MPI"); }
void Comm::abort(int code) { std::exit(code); }

#endif

}  // namespace velox::mpi
