// A pool of persistent worker threads (created once, reused call after call): the CPU backend's
// slots and the engine's parallel prepare/finish. The calling thread takes part as worker 0, so a
// pool of one thread starts no thread at all.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace velox {

class ThreadPool {
 public:
  explicit ThreadPool(int n_threads);  // n_threads >= 1 workers in all (n_threads - 1 started)
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_; }

  // Call f(i, worker) for every i < n, dynamically scheduled; worker < size() identifies the
  // thread (a slot: no two concurrent calls share one). Blocks until all are done; rethrows the
  // first exception f threw. Not reentrant: one for_each at a time per pool.
  void for_each(size_t n, const std::function<void(size_t i, int worker)>& f);

 private:
  void work(int worker);
  void loop(int worker);

  int n_;
  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::condition_variable cv_start_, cv_done_;
  const std::function<void(size_t, int)>* job_ = nullptr;
  size_t job_n_ = 0;
  std::atomic<size_t> next_{0};
  long generation_ = 0;
  int busy_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;
};

}  // namespace velox
