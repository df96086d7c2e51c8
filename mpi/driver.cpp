#include "mpi/driver.hpp"

#include <spdlog/spdlog.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

#include "app/job.hpp"
#include "common/error.hpp"
#include "common/stop.hpp"
#include "mpi/wire.hpp"

namespace velox::mpi {

namespace {

// Rank 0: the queue, its own fitting thread, and the results of every rank (to RootJob).
int run_root(const FitOptions& opt, Comm& comm, int threads) {
  if (merge_only(opt)) return merge_existing(opt);
  RootJob job(opt, comm.size(), threads);
  FitEngine& engine = job.engine();

  // The queue, shared by rank 0's fitting thread and the workers' requests.
  std::mutex mu;
  std::condition_variable cv;
  bool stop = false, local_done = false;
  std::deque<FileResult> inbox;
  std::exception_ptr local_error;
  // After a stop request (SIGTERM/SIGINT here or on a worker) nothing more is handed out.
  auto pop = [&](size_t& index, std::string& path) {
    std::lock_guard<std::mutex> lock(mu);
    if (stop || stop_requested()) return false;
    return job.next_input(index, path);
  };
  std::thread local([&] {
    try {
      engine.fit_stream(
          pop,
          [&](FileResult&& r) {
            std::lock_guard<std::mutex> lock(mu);
            inbox.push_back(std::move(r));
            cv.notify_one();
          },
          chunk_min_spectra(engine.threads()));
    } catch (...) {
      local_error = std::current_exception();
    }
    std::lock_guard<std::mutex> lock(mu);
    local_done = true;
    cv.notify_one();
  });
  // Stop and join the local thread however this function is left.
  struct Joiner {
    std::thread& t;
    std::mutex& mu;
    bool& stop;
    ~Joiner() {
      {
        std::lock_guard<std::mutex> lock(mu);
        stop = true;
      }
      if (t.joinable()) t.join();
    }
  } joiner{local, mu, stop};

  // Until every input handed out (to this rank's thread or a worker) is back, the local thread
  // has drained, and every worker has been told to stop. Normally that is when the queue is
  // empty; after a stop request, when the chunks in flight are done.
  size_t n_done = 0;
  int n_stopped = 0;
  bool stopping = false;
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (local_error) std::rethrow_exception(local_error);
      if (local_done && inbox.empty() && n_done == job.n_handed() && n_stopped == comm.size() - 1)
        break;
    }
    if (!stopping && stop_requested()) {
      stopping = true;
      std::lock_guard<std::mutex> lock(mu);
      spdlog::warn(
          "{}: stopping: no new inputs handed out; finishing the {} in flight, then "
          "exit code {} (rerun the same command to resume)",
          stop_reason(), job.n_handed() - n_done, int(kExitInterrupted));
    }
    int source = 0, tag = 0;
    size_t bytes = 0;
    bool busy = false;
    while (comm.probe(source, tag, bytes)) {
      busy = true;
      auto msg = comm.recv(source, tag, bytes);
      if (tag == kTagRequest) {
        if (!msg.empty()) request_stop();  // the worker was signalled: the whole job stops
        size_t index = 0;
        std::string path;
        if (pop(index, path)) {
          comm.send(source, kTagWork, pack_work(index, path));
        } else {
          comm.send(source, kTagWork, {});
          ++n_stopped;
        }
      } else if (tag == kTagResult) {
        job.handle(unpack_result(msg));
        ++n_done;
      }
    }
    std::deque<FileResult> mine;
    {
      std::unique_lock<std::mutex> lock(mu);
      if (!busy && inbox.empty())
        cv.wait_for(lock, std::chrono::milliseconds(comm.size() > 1 ? 1 : 200));
      mine.swap(inbox);
      if (local_error) std::rethrow_exception(local_error);
    }
    for (auto& r : mine) {
      job.handle(std::move(r));
      ++n_done;
    }
    job.maybe_log_progress();
  }

  const int code = job.finish(stop_requested() ? stop_reason() : "");
  // Every rank returns the job's exit code, so mpirun/srun report it as is.
  for (int r = 1; r < comm.size(); ++r)
    comm.send(r, kTagExit,
              std::vector<char>(reinterpret_cast<const char*>(&code),
                                reinterpret_cast<const char*>(&code) + sizeof code));
  return code;
}

// Workers: ask rank 0 for an input, fit, send the rows back, until rank 0 says stop.
int run_worker(const FitOptions& opt, Comm& comm, int threads) {
  if (merge_only(opt)) return kExitOk;
  FitEngine engine(opt, threads);
  // A signalled worker asks no more work; its last request carries one byte that tells rank 0
  // to stop the whole job. It then finishes its chunk in flight and sends the results.
  auto next = [&](size_t& index, std::string& path) {
    const bool stopping = stop_requested();
    if (stopping)
      spdlog::warn("{}: rank {} stops after its chunk in flight", stop_reason(), comm.rank());
    comm.send(0, kTagRequest, stopping ? std::vector<char>{1} : std::vector<char>{});
    const auto msg = comm.wait_recv(0, kTagWork);
    if (msg.empty()) return false;
    unpack_work(msg, index, path);
    spdlog::debug("fitting {}", path);
    return true;
  };
  engine.fit_stream(
      next,
      [&](FileResult&& r) {
        r.rank = comm.rank();
        comm.send(0, kTagResult, pack_result(r));
      },
      chunk_min_spectra(engine.threads()));
  const auto msg = comm.wait_recv(0, kTagExit);
  int code = kExitOk;
  if (msg.size() == sizeof code) std::memcpy(&code, msg.data(), sizeof code);
  return code;
}

}  // namespace

int run_fit_job(const FitOptions& opt, Comm& comm) {
  install_stop_handlers();
  try {
    const RankInfo where{comm.rank(), comm.size(), comm.local_rank(), comm.local_size()};
    setup_job_logging(opt, where);
    const RankSetup s = place_rank(opt, where);
    return comm.rank() == 0 ? run_root(s.opt, comm, s.threads) : run_worker(s.opt, comm, s.threads);
  } catch (const ConfigError& e) {
    spdlog::error("{}", e.what());
    if (comm.size() > 1) comm.abort(kExitUsage);
    return kExitUsage;
  } catch (const std::exception& e) {
    spdlog::error("{}", e.what());
    if (comm.size() > 1) comm.abort(kExitFatal);
    return kExitFatal;
  }
}

}  // namespace velox::mpi
