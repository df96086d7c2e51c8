// The few MPI calls the driver needs, behind one small class, so that velox also builds and runs
// without MPI (VELOX_HAVE_MPI undefined: always a single rank). MPI is initialised only when the
// process was started by an MPI launcher (mpirun/mpiexec/srun set PMIx/PMI variables), so a plain
// `velox fit` never needs mpirun; VELOX_MPI=0 forces a singleton, VELOX_MPI=1 forces MPI_Init.
#pragma once
#include <cstddef>
#include <vector>

namespace velox::mpi {

class Comm {
 public:
  Comm(int* argc, char*** argv);  // MPI_Init (thread level FUNNELED) when launched by MPI
  ~Comm();                        // MPI_Finalize
  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;

  bool active() const { return active_; }  // MPI initialised
  int rank() const { return rank_; }
  int size() const { return size_; }
  // Rank and rank count on this node (MPI_Comm_split_type SHARED); 0 / 1 without MPI.
  int local_rank() const { return local_rank_; }
  int local_size() const { return local_size_; }

  // Point-to-point byte messages on MPI_COMM_WORLD. Only the main thread calls these.
  void send(int dest, int tag, const std::vector<char>& bytes);
  // A message waiting from any rank: true with its source, tag and size; never blocks.
  bool probe(int& source, int& tag, size_t& bytes);
  std::vector<char> recv(int source, int tag, size_t bytes);
  // Wait for a message with `tag` from `source`, sleeping between polls so an idle rank does
  // not spin on a core that another rank is fitting on.
  std::vector<char> wait_recv(int source, int tag);

  [[noreturn]] void abort(int code);  // MPI_Abort on every rank (or exit without MPI)

 private:
  bool active_ = false;
  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1;
};

}  // namespace velox::mpi
