#include "app/stream_pipeline.hpp"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace velox {

namespace {

enum PreState : unsigned char { kQueued, kPreRunning, kPreDone, kTaken };

struct Slot {
  std::unique_ptr<StreamItem> item;
  size_t n_tasks = 0, n_done = 0;
  bool read = false;
  // Per task, with StreamStages::pre: kQueued, kPreRunning (a reader is on it), kPreDone, or
  // kTaken (a worker took it before any reader).
  std::vector<unsigned char> pre_state;
  bool finished() const { return read && n_done == n_tasks; }
};

// The shared state of one run_stream call; every field under `mu`.
class Stream {
 public:
  Stream(ThreadPool& pool, const StreamStages& s, const StreamLimits& l) : pool_(pool), s_(s) {
    const size_t workers = static_cast<size_t>(pool.size());
    readers_ = std::max(1, l.readers);
    batch_ = l.batch;
    const size_t unit = batch_ ? batch_ : workers;
    // Batch mode: one batch waits while the batcher prepares the next and the device fits the
    // one before; every waiting spectrum is a read input's pixels (docs/gpu.md "Host memory").
    queued_low_ = l.queued_tasks ? l.queued_tasks : (batch_ ? 1 : 2) * unit;
    max_items_ = l.max_items ? l.max_items : (batch_ ? 4 : 8) * unit + readers_ + 2;
    read_ahead_ = l.read_ahead;
    pre_ = !batch_ && static_cast<bool>(s.pre);
  }

  void run() {
    std::vector<std::thread> threads;
    for (int r = 0; r < readers_; ++r) threads.emplace_back([this] { guarded([this] { reader(); }); });
    if (batch_) {
      threads.emplace_back([this] { guarded([this] { batcher(); }); });
    } else {
      // The pool's threads become the workers for the whole stream; for_each blocks, so it runs
      // on a thread of its own (it takes part as worker 0). A task's exception must stop the
      // stream here: the pool would only report it once every worker has returned.
      threads.emplace_back([this] {
        guarded([this] {
          pool_.for_each(static_cast<size_t>(pool_.size()),
                         [this](size_t, int w) { guarded([this, w] { worker(w); }); });
        });
      });
    }
    guarded([this] { drive(); });
    {
      std::lock_guard<std::mutex> lock(mu_);
      closing_ = true;
    }
    cv_work_.notify_all();
    cv_read_.notify_all();
    for (auto& t : threads) t.join();
    if (error_) std::rethrow_exception(error_);
  }

 private:
  // Runs f; the first exception stops the stream (every loop checks closing_).
  template <class F>
  void guarded(F&& f) {
    try {
      f();
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu_);
      if (!error_) error_ = std::current_exception();
      closing_ = true;
      cv_work_.notify_all();
      cv_read_.notify_all();
      cv_main_.notify_all();
    }
  }

  bool want_more() const {
    if (inputs_done_ || order_.size() >= max_items_) return false;
    // An input not read yet counts as the mean number of tasks of the inputs read so far: counted
    // as one, a batch mode's low mark of 2 batches pulled (and read) thousands of DESI coadds.
    // Until an input with tasks is read, at most one input per reader waits unread (a first input
    // of 0 or 1 tasks would otherwise let a whole batch of inputs in); in batch mode two per
    // reader, so that readers need not wait for this thread while it emits (one per reader cost
    // the H200's DESI rate 3-9%, docs/gpu.md).
    const size_t r = static_cast<size_t>(readers_);
    if (n_read_tasks_ == 0 && unread_ >= r) return false;
    if (batch_ && unread_ >= 2 * r) return false;
    if (n_read_tasks_ == 0) return true;
    const size_t per_input = std::max<size_t>(1, n_read_tasks_ / n_read_);
    const size_t waiting = tasks_.size() + unread_ * per_input;
    // Idle readers may read ahead up to 4x the low mark, or the largest input's tasks so far up
    // to StreamLimits::read_ahead where inputs are larger (the blocks of a DESI coadd: the next
    // block is read while the one before is fitted, not after it; one thread reads 32 DESI
    // fibres in the time it fits 10; the cap keeps a whole large input from being read ahead),
    // but not in batch mode: there a task is a spectrum of a GPU batch (DESI: about 0.5 MB of
    // pixels each), and one batch queued keeps the device fed; reading further ahead only held
    // memory (6 GB on 3840 DESI spectra).
    const size_t ahead = std::max(4 * queued_low_, std::min(max_input_tasks_, read_ahead_));
    return waiting < queued_low_ ||
           (!batch_ && unread_ < static_cast<size_t>(readers_) && tasks_.size() < ahead);
  }

  // The calling thread: pull inputs while there is room, emit finished ones in order.
  void drive() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      if (closing_) return;
      if (!order_.empty() && order_.front()->finished()) {
        const Slot* done = order_.front().get();
        // Its tasks' entries left for the readers are stale (every task ran): drop them before
        // the slot goes.
        to_pre_.erase(std::remove_if(to_pre_.begin(), to_pre_.end(),
                                     [done](const auto& e) { return e.first == done; }),
                      to_pre_.end());
        std::unique_ptr<StreamItem> item = std::move(order_.front()->item);
        order_.pop_front();
        lock.unlock();
        s_.emit(std::move(item));
        lock.lock();
        continue;
      }
      if (want_more()) {
        lock.unlock();
        auto item = s_.make();
        const bool more = s_.next(item->index, item->path);
        lock.lock();
        if (!more) {
          inputs_done_ = true;
          cv_work_.notify_all();  // the batcher may be waiting for the last tasks
          continue;
        }
        auto slot = std::make_unique<Slot>();
        slot->item = std::move(item);
        to_read_.push_back(slot.get());
        order_.push_back(std::move(slot));
        ++unread_;
        cv_read_.notify_one();
        continue;
      }
      if (inputs_done_ && order_.empty()) return;
      cv_main_.wait(lock);
    }
  }

  // The newest queued task no worker or reader has started (lock held), or {nullptr, 0}.
  std::pair<Slot*, size_t> next_pre() {
    while (!to_pre_.empty()) {
      const auto [slot, t] = to_pre_.back();
      to_pre_.pop_back();
      if (slot->pre_state[t] == kQueued) return {slot, t};
    }
    return {nullptr, 0};
  }

  void reader() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      cv_read_.wait(lock, [&] { return closing_ || !to_read_.empty() || !to_pre_.empty(); });
      if (closing_) return;
      if (to_read_.empty()) {  // nothing to read: prepare a queued task ahead of the workers
        const auto [slot, t] = next_pre();
        if (!slot) continue;
        slot->pre_state[t] = kPreRunning;
        lock.unlock();
        s_.pre(*slot->item, t);
        lock.lock();
        slot->pre_state[t] = kPreDone;
        cv_work_.notify_all();  // a worker may wait for this task
        continue;
      }
      Slot* slot = to_read_.front();
      to_read_.pop_front();
      lock.unlock();
      const size_t n = s_.read(*slot->item);
      lock.lock();
      slot->n_tasks = n;
      slot->read = true;
      --unread_;
      ++n_read_;
      n_read_tasks_ += n;
      max_input_tasks_ = std::max(max_input_tasks_, n);
      for (size_t t = 0; t < n; ++t) tasks_.push_back({slot, t});
      if (pre_) {
        slot->pre_state.assign(n, kQueued);
        for (size_t t = 0; t < n; ++t) to_pre_.push_back({slot, t});
        if (n) cv_read_.notify_all();  // idle readers: tasks to prepare
      }
      if (n || batch_) cv_work_.notify_all();
      cv_main_.notify_one();  // a finished item, or room to pull the next input
    }
  }

  void worker(int w) {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      cv_work_.wait(lock, [&] { return closing_ || !tasks_.empty(); });
      if (closing_) return;
      auto [slot, t] = tasks_.front();
      tasks_.pop_front();
      if (want_more()) cv_main_.notify_one();  // pull more inputs
      if (pre_) {
        unsigned char& state = slot->pre_state[t];  // (a lambda cannot capture a binding in C++17)
        if (state == kQueued) state = kTaken;       // no reader starts it
        cv_work_.wait(lock, [&] { return closing_ || state != kPreRunning; });
        if (closing_) return;
      }
      lock.unlock();
      s_.run(*slot->item, t, w);
      lock.lock();
      if (++slot->n_done == slot->n_tasks) cv_main_.notify_one();
    }
  }

  // Batch mode: take `batch_` tasks when that many wait (or the rest at the end), submit them,
  // then finish the batch before; with nothing to submit, finish the batch in flight rather than
  // hold its results back.
  void batcher() {
    std::unique_lock<std::mutex> lock(mu_);
    std::function<void()> in_flight;
    std::vector<std::pair<Slot*, size_t>> flying;
    auto land = [&] {  // finish the batch in flight (lock held on entry and exit)
      lock.unlock();
      in_flight();
      lock.lock();
      in_flight = nullptr;
      for (auto& [slot, t] : flying)
        if (++slot->n_done == slot->n_tasks) cv_main_.notify_one();
      flying.clear();
    };
    for (;;) {
      if (closing_) return;
      const bool end = inputs_done_ && unread_ == 0;
      // Nothing more can arrive before this batch goes: every input slot is taken (max_items_)
      // and read, and no batch is in flight to free one (e.g. many inputs without a selected
      // fibre behind a few tasks). Then a partial batch goes rather than waiting for ever.
      const bool stuck = unread_ == 0 && order_.size() >= max_items_ && !in_flight;
      if (tasks_.size() >= batch_ || ((end || stuck) && !tasks_.empty())) {
        const size_t n = std::min(batch_, tasks_.size());
        std::vector<std::pair<Slot*, size_t>> take(tasks_.begin(), tasks_.begin() + n);
        tasks_.erase(tasks_.begin(), tasks_.begin() + n);
        cv_main_.notify_one();  // room to pull more inputs
        std::vector<StreamTask> tasks;
        for (auto& [slot, t] : take) tasks.push_back({slot->item.get(), t});
        lock.unlock();
        auto next = s_.submit_batch(tasks);
        lock.lock();
        if (in_flight) land();
        in_flight = std::move(next);
        flying = std::move(take);
        continue;
      }
      if (in_flight) {
        land();
        continue;
      }
      if (end) return;
      cv_work_.wait(lock);
    }
  }

  ThreadPool& pool_;
  const StreamStages& s_;
  size_t batch_ = 0;
  int readers_ = 1;
  size_t queued_low_ = 2, max_items_ = 16;

  std::mutex mu_;
  std::condition_variable cv_main_, cv_read_, cv_work_;
  std::deque<std::unique_ptr<Slot>> order_;  // pulled, not yet emitted, in pull order
  std::deque<Slot*> to_read_;
  std::deque<std::pair<Slot*, size_t>> tasks_;
  // With StreamStages::pre: queued tasks for idle readers, newest at the back (those a worker
  // took are skipped when reached).
  std::deque<std::pair<Slot*, size_t>> to_pre_;
  bool pre_ = false;
  size_t unread_ = 0;  // pulled, not yet read
  size_t n_read_ = 0, n_read_tasks_ = 0;  // inputs read so far and their tasks
  size_t max_input_tasks_ = 0;            // the most tasks of one input read so far
  size_t read_ahead_ = 0;                 // StreamLimits::read_ahead
  bool inputs_done_ = false, closing_ = false;
  std::exception_ptr error_;
};

}  // namespace

void run_stream(ThreadPool& pool, const StreamStages& stages, const StreamLimits& limits) {
  Stream(pool, stages, limits).run();
}

}  // namespace velox
