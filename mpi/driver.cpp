#include "mpi/driver.hpp"

#include <spdlog/spdlog.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "app/job.hpp"
#include "app/job_plan.hpp"
#include "common/error.hpp"
#include "common/stop.hpp"
#include "mpi/wire.hpp"

namespace velox::mpi {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// A worker's side of the protocol: the batch in hand, the statuses not yet reported, the rate.
// Every call is on the thread that calls MPI (FUNNELED): the fit loop's next/done run there.
class WorkerLink {
 public:
  WorkerLink(Comm& comm, bool send_rows) : comm_(comm), send_rows_(send_rows) {}

  // FitEngine::NextInput: the next input of the batch in hand; asks rank 0 for the next batch
  // when it hands out the last one, and waits only when the answer has not arrived yet.
  bool next(size_t& index, std::string& path) {
    if (stop_requested() && !signalled_) return stop_here();
    if (q_.empty()) {
      if (stopped_) return false;
      if (!asked_) ask(false);
      const auto t0 = Clock::now();
      receive();
      if (started_) waited_s_ += seconds_between(t0, Clock::now());
      if (q_.empty()) return false;
    }
    if (!started_) {
      started_ = true;
      t_start_ = Clock::now();
    }
    WorkItem it = std::move(q_.front());
    q_.pop_front();
    in_hand_[it.index] = it.bytes;
    index = it.index;
    path = std::move(it.path);
    if (q_.empty() && !stopped_ && !asked_) ask(false);
    return true;
  }

  void done(FileResult&& r) {
    if (!send_rows_) r.rows.clear();
    if (auto it = in_hand_.find(r.index); it != in_hand_.end()) {
      bytes_done_ += it->second;
      in_hand_.erase(it);
    }
    done_.push_back(std::move(r));
  }

  // After the fit loop: the last report (statuses not sent yet, busy time).
  void finish() {
    if (asked_) {
      receive();
      return_queue();
    }
    comm_.send(0, kTagResult, pack_report(report(signalled_)));
  }

 private:
  // A signalled worker: the batch it has not started goes back, its request tells rank 0 to
  // stop the whole job; what it is fitting finishes.
  bool stop_here() {
    signalled_ = true;
    spdlog::warn("{}: rank {} stops after its chunk in flight", stop_reason(), comm_.rank());
    if (asked_) receive();
    return_queue();
    if (!stopped_) {
      ask(true);
      receive();
    }
    stopped_ = true;
    return false;
  }
  void return_queue() {
    for (const auto& it : q_) returned_.push_back(it.index);
    q_.clear();
  }
  Report report(bool stop) {
    Report rep;
    rep.stop = stop;
    const double busy = busy_s();
    rep.rate_bytes_s = busy > 0 && bytes_done_ > 0 ? bytes_done_ / busy : 0.0;
    rep.busy_s = busy;
    rep.done = std::move(done_);
    rep.returned = std::move(returned_);
    done_.clear();
    returned_.clear();
    return rep;
  }
  double busy_s() const {
    return started_ ? seconds_between(t_start_, Clock::now()) - waited_s_ : 0.0;
  }
  void ask(bool stop) {
    comm_.send(0, kTagRequest, pack_report(report(stop)));
    asked_ = true;
  }
  void receive() {
    auto batch = unpack_work(comm_.wait_recv(0, kTagWork));
    asked_ = false;
    if (batch.empty()) stopped_ = true;
    for (auto& it : batch) q_.push_back(std::move(it));
  }

  Comm& comm_;
  bool send_rows_;
  std::deque<WorkItem> q_;
  std::unordered_map<size_t, uintmax_t> in_hand_;  // pulled, not yet done: bytes
  std::vector<FileResult> done_;
  std::vector<size_t> returned_;
  bool asked_ = false, stopped_ = false, signalled_ = false, started_ = false;
  Clock::time_point t_start_{};
  double waited_s_ = 0.0, bytes_done_ = 0.0;
};

}  // namespace

CoordinatorStats serve(RootJob& job, Comm& comm, const FitLoop& fit, const OnFitted& on_fitted,
                       bool send_rows, const HandoutPolicy& policy) {
  CoordinatorStats stats;
  stats.fitting_ranks = comm.size();
  // The queue, shared by rank 0's fitting thread and the workers' requests.
  std::mutex mu;
  std::condition_variable cv;
  bool stop = false, local_done = false;
  std::deque<FileResult> inbox;
  std::exception_ptr local_error;
  double local_busy_s = 0.0;
  // After a stop request (SIGTERM/SIGINT here or on a worker) nothing more is handed out.
  auto pop = [&](size_t& index, std::string& path) {
    std::lock_guard<std::mutex> lock(mu);
    if (stop || stop_requested()) return false;
    return job.next_input(index, path);
  };
  std::thread local([&] {
    const auto t0 = Clock::now();
    try {
      fit(pop, [&](FileResult&& r) {
        r.rank = 0;
        if (on_fitted) on_fitted(r);
        if (!send_rows) r.rows.clear();
        std::lock_guard<std::mutex> lock(mu);
        inbox.push_back(std::move(r));
        cv.notify_one();
      });
    } catch (...) {
      local_error = std::current_exception();
    }
    std::lock_guard<std::mutex> lock(mu);
    local_busy_s = seconds_between(t0, Clock::now());
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

  // Until every input handed out (to this rank's thread or a worker) is reported, the local
  // thread has drained, and every worker has sent its last report. Normally that is when the
  // queue is empty; after a stop request, when the inputs being fitted are done.
  size_t n_done = 0;
  int n_final = 0;
  bool stopping = false;
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (local_error) std::rethrow_exception(local_error);
      if (local_done && inbox.empty() && n_done == job.n_handed() && n_final == comm.size() - 1)
        break;
    }
    if (!stopping && stop_requested()) {
      stopping = true;
      std::lock_guard<std::mutex> lock(mu);
      spdlog::warn(
          "{}: stopping: no new inputs handed out; finishing the {} in flight, then "
          "exit code {} (rerun the same command to resume)",
          stop_reason(), job.n_handed() - n_done,
          int(output_stop_requested() ? kExitOutputFailed : kExitInterrupted));
    }
    int source = 0, tag = 0;
    size_t bytes = 0;
    bool busy = false;
    while (comm.probe(source, tag, bytes)) {
      busy = true;
      Report rep = unpack_report(comm.recv(source, tag, bytes));
      if (rep.stop) request_stop();  // the worker was signalled: the whole job stops
      for (auto& r : rep.done) job.handle(std::move(r));
      n_done += rep.done.size() + rep.returned.size();  // returned: left unfinished
      if (tag == kTagRequest) {
        ++stats.requests;
        std::vector<WorkItem> batch;
        {
          std::lock_guard<std::mutex> lock(mu);
          if (!stop && !stop_requested())
            batch = job.next_batch(rep.rate_bytes_s, comm.size(), policy);
        }
        stats.inputs += batch.size();
        comm.send(source, kTagWork, pack_work(batch));
      } else if (tag == kTagResult) {
        ++n_final;
        stats.busy_s += rep.busy_s;
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
    for (auto& r : mine) job.handle(std::move(r));
    n_done += mine.size();
    job.flush_status();
    job.maybe_log_progress();
  }
  stats.seconds = job.seconds_since_first_handout();
  {
    std::lock_guard<std::mutex> lock(mu);
    stats.busy_s += local_busy_s;
    stats.inputs = job.n_handed();
  }
  return stats;
}

void send_exit_code(Comm& comm, int code) {
  for (int r = 1; r < comm.size(); ++r)
    comm.send(r, kTagExit,
              std::vector<char>(reinterpret_cast<const char*>(&code),
                                reinterpret_cast<const char*>(&code) + sizeof code));
}

int work(Comm& comm, const FitLoop& fit, const OnFitted& on_fitted, bool send_rows) {
  WorkerLink link(comm, send_rows);
  fit([&](size_t& index, std::string& path) { return link.next(index, path); },
      [&](FileResult&& r) {
        r.rank = comm.rank();
        if (on_fitted) on_fitted(r);
        link.done(std::move(r));
      });
  link.finish();
  const auto msg = comm.wait_recv(0, kTagExit);
  int code = kExitOk;
  if (msg.size() == sizeof code) std::memcpy(&code, msg.data(), sizeof code);
  return code;
}

namespace {

FitLoop engine_loop(FitEngine& engine) {
  return [&engine](const FitEngine::NextInput& next,
                   const std::function<void(FileResult&&)>& done) {
    engine.fit_stream(next, done, chunk_min_spectra(engine.threads()));
  };
}

HandoutPolicy handout_policy(const JobOptions& opt) {
  HandoutPolicy p;
  p.batch_seconds = opt.batch_seconds;
  return p;
}

// Rank 0 when the job cannot start (a refused option or output, an unreadable library): every
// worker's request is answered with no work, and once each has sent its last report it gets
// `code`. No MPI_Abort, no message left unread: every rank exits with `code` by itself.
void release_workers(Comm& comm, int code) {
  int n_final = 0;
  while (n_final < comm.size() - 1) {
    int source = 0, tag = 0;
    size_t bytes = 0;
    if (!comm.probe(source, tag, bytes)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      continue;
    }
    comm.recv(source, tag, bytes);
    if (tag == kTagRequest) comm.send(source, kTagWork, pack_work({}));
    if (tag == kTagResult) ++n_final;
  }
  send_exit_code(comm, code);
}

// A worker that cannot start fitting (its engine failed to load): it takes no work, sends its
// last (empty) report so that rank 0 does not wait for it, and waits for the job's end.
int leave_job(Comm& comm) {
  comm.send(0, kTagResult, pack_report(Report{}));
  const auto msg = comm.wait_recv(0, kTagExit);
  int job_code = kExitOk;
  if (msg.size() == sizeof job_code) std::memcpy(&job_code, msg.data(), sizeof job_code);
  return job_code;  // every rank returns the job's code (this rank's error is logged)
}

// Rank 0: the queue, its own fitting thread, and the statuses of every rank (to RootJob).
int run_root(const FitOptions& opt, Comm& comm, int threads, bool& serving) {
  if (merge_only(opt)) return merge_existing(opt, opt);
  RootJob job(opt, comm.size(), threads);
  InputCatalogWriter writer(opt, opt, job.provenance(), 0);
  serving = true;
  const auto stats = serve(job, comm, engine_loop(job.engine()),
                           [&](FileResult& r) { writer.write(r); }, wants_merged(opt),
                           handout_policy(opt));
  const int code = job.finish(stop_requested() ? stop_reason() : "");
  if (comm.size() > 1)
    spdlog::info("fit: rank 0 handled {} requests for {} inputs; ranks idle {:.1f}% of {:.2f} s",
                 stats.requests, stats.inputs, 100.0 * stats.idle_share(), stats.seconds);
  // Every rank returns the job's exit code, so mpirun/srun report it as is.
  send_exit_code(comm, code);
  return code;
}

int run_worker(const FitOptions& opt, Comm& comm, int threads, bool& serving) {
  if (merge_only(opt)) return kExitOk;
  FitEngine engine(opt, threads);
  InputCatalogWriter writer(opt, opt, job_provenance(engine, opt, comm.size()), comm.rank());
  serving = true;
  return work(comm, engine_loop(engine), [&](FileResult& r) { writer.write(r); },
              wants_merged(opt));
}

}  // namespace

int run_fit_job(const FitOptions& opt, Comm& comm) {
  install_stop_handlers();
  // Set once this rank has entered the message loop: an error after that aborts every rank
  // (inputs are in flight); an error before it ends the job by messages (release_workers,
  // leave_job), so a refused option under mpirun is one plain line and the exit code.
  bool serving = false;
  auto fail = [&](int code, const std::exception& e) {
    spdlog::error("{}", e.what());
    if (comm.size() == 1 || merge_only(opt)) return code;
    if (serving) comm.abort(code);
    if (comm.rank() == 0) {
      release_workers(comm, code);
      return code;
    }
    return leave_job(comm);
  };
  try {
    const RankInfo where{comm.rank(), comm.size(), comm.local_rank(), comm.local_size()};
    setup_job_logging(opt, where);
    const RankSetup s = place_rank(opt, where);
    return comm.rank() == 0 ? run_root(s.opt, comm, s.threads, serving)
                            : run_worker(s.opt, comm, s.threads, serving);
  } catch (const ConfigError& e) {
    return fail(kExitUsage, e);
  } catch (const std::exception& e) {
    return fail(kExitFatal, e);
  }
}

}  // namespace velox::mpi
