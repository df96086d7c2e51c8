#include "common/thread_pool.hpp"

#include <algorithm>

namespace velox {

ThreadPool::ThreadPool(int n_threads) : n_(std::max(1, n_threads)) {
  for (int w = 1; w < n_; ++w) threads_.emplace_back([this, w] { loop(w); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_start_.notify_all();
  for (auto& t : threads_) t.join();
}

void ThreadPool::work(int worker) {
  for (size_t i = next_++; i < job_n_; i = next_++) {
    try {
      (*job_)(i, worker);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu_);
      if (!error_) error_ = std::current_exception();
      next_ = job_n_;  // the others stop taking work
    }
  }
}

void ThreadPool::loop(int worker) {
  long seen = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_start_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
    }
    work(worker);
    std::lock_guard<std::mutex> lock(mu_);
    if (--busy_ == 0) cv_done_.notify_one();
  }
}

void ThreadPool::for_each(size_t n, const std::function<void(size_t, int)>& f) {
  if (n == 0) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    job_ = &f;
    job_n_ = n;
    next_ = 0;
    error_ = nullptr;
    busy_ = static_cast<int>(threads_.size());
    ++generation_;
  }
  if (!threads_.empty()) cv_start_.notify_all();
  work(0);
  std::unique_lock<std::mutex> lock(mu_);
  cv_done_.wait(lock, [&] { return busy_ == 0; });
  job_ = nullptr;
  if (error_) std::rethrow_exception(error_);
}

}  // namespace velox
