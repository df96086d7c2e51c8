// The barrier-free fit stream (app/stream_pipeline.hpp) with a fake backend that sleeps: inputs
// come back in order, and 16 workers with skewed task times finish close to the ideal time, on a
// 2-core machine (sleeping threads need no core).
#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <functional>
#include <mutex>
#include <numeric>
#include <stdexcept>
#include <thread>
#include <vector>

#include "app/stream_pipeline.hpp"

using namespace velox;
using Clock = std::chrono::steady_clock;

namespace {

// A fake input: n_tasks spectra, each of which "fits" by sleeping its own duration.
struct FakeInput : StreamItem {
  std::vector<double> task_ms;
  std::vector<double> slept_s;  // what each sleep really took (oversleeping included)
};

double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

struct Run {
  double wall_s = 0.0;
  std::vector<double> slept_s;  // every task's measured duration
  std::vector<size_t> emitted;  // indices in emission order
  std::vector<size_t> started_at_read;  // per input: tasks started when its read began
};

// Streams `files` (task durations in ms per input) through `workers` sleeping workers; each
// read sleeps read_ms.
Run stream_sleeping(const std::vector<std::vector<double>>& files, int workers,
                    double read_ms = 0.5, const StreamLimits& limits = {}) {
  ThreadPool pool(workers);
  Run run;
  run.started_at_read.assign(files.size(), 0);
  std::atomic<size_t> started{0};
  size_t next = 0;
  StreamStages s;
  s.make = [] { return std::make_unique<FakeInput>(); };
  s.next = [&](size_t& index, std::string& path) {
    if (next == files.size()) return false;
    index = next++;
    path = "fake-" + std::to_string(index);
    return true;
  };
  s.read = [&](StreamItem& item) -> size_t {
    auto& in = static_cast<FakeInput&>(item);
    run.started_at_read[in.index] = started.load();
    std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(read_ms));  // reading
    in.task_ms = files[in.index];
    in.slept_s.assign(in.task_ms.size(), 0.0);
    return in.task_ms.size();
  };
  s.run = [&started](StreamItem& item, size_t t, int) {
    ++started;
    auto& in = static_cast<FakeInput&>(item);
    const auto t0 = Clock::now();
    std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(in.task_ms[t]));
    in.slept_s[t] = since(t0);
  };
  s.emit = [&](std::unique_ptr<StreamItem> item) {
    auto& in = static_cast<FakeInput&>(*item);
    run.emitted.push_back(in.index);
    run.slept_s.insert(run.slept_s.end(), in.slept_s.begin(), in.slept_s.end());
  };
  const auto t0 = Clock::now();
  run_stream(pool, s, limits);
  run.wall_s = since(t0);
  return run;
}

}  // namespace

TEST_CASE("16 workers with skewed spectrum times finish within 10% of the ideal time",
          "[stream]") {
  // 300 inputs of 1-8 spectra; a spectrum takes 10 ms, every fifth one 60 ms (a skew of 6x, as
  // between a quick converged fit and a two-start clipped re-fit), about 1,350 spectra in all.
  std::vector<std::vector<double>> files(300);
  size_t k = 0;
  for (size_t f = 0; f < files.size(); ++f)
    for (size_t j = 0; j < 1 + (f * 5) % 8; ++j) files[f].push_back(++k % 5 == 0 ? 60.0 : 10.0);
  const int workers = 16;
  const Run run = stream_sleeping(files, workers);

  REQUIRE(run.emitted.size() == files.size());
  for (size_t i = 0; i < run.emitted.size(); ++i) REQUIRE(run.emitted[i] == i);
  // The ideal: every worker busy from start to end with the work as it really took (measured
  // sleeps, so a loaded machine's late wake-ups count as work, not as scheduling loss), and no
  // shorter than the longest task.
  const double work = std::accumulate(run.slept_s.begin(), run.slept_s.end(), 0.0);
  const double longest = *std::max_element(run.slept_s.begin(), run.slept_s.end());
  const double ideal = std::max(work / workers, longest);
  INFO("wall " << run.wall_s << " s, ideal " << ideal << " s, work " << work << " s");
  // 10% is the requirement. What stays between the stream and the ideal is the end of the job
  // (the last tasks, at most one 60 ms spectrum per worker: about 4% of the ~1.7 s ideal) and
  // the first reads: measured 1.026x on a loaded 2-core machine. The old chunk loop (chunks of
  // 64 spectra read on the calling thread, each waiting for its slowest) took 1.59x here.
  CHECK(run.wall_s <= 1.10 * ideal);
}

TEST_CASE("one worker fitting large inputs never waits for the next input's read", "[stream]") {
  // Blocks of 32 DESI fibres on one thread: a block's read takes as long as 10 of its fits
  // (measured: 21 ms against 7 ms a fit). Here 6 inputs of 32 tasks of 2 ms, each read 40 ms
  // (20 tasks' time), with the read-ahead fit_stream gives (StreamLimits::read_ahead, one block
  // of 32): the next input must be read while the current one is fitted. With a read-ahead of
  // 4x the low mark only (8 tasks for one worker, read_ahead 0), every input after the first
  // waited about 24 ms for its read: 1.3x the ideal below.
  const std::vector<std::vector<double>> files(6, std::vector<double>(32, 2.0));
  const double read_ms = 40.0;
  StreamLimits limits;
  limits.read_ahead = 32;
  const Run run = stream_sleeping(files, 1, read_ms, limits);
  REQUIRE(run.emitted.size() == files.size());
  const double work = std::accumulate(run.slept_s.begin(), run.slept_s.end(), 0.0);
  const double ideal = work + read_ms / 1e3;  // the first read cannot overlap anything
  INFO("wall " << run.wall_s << " s, ideal " << ideal << " s");
  // 10%: the first test's margin (late wake-ups of a loaded machine beyond the measured sleeps).
  CHECK(run.wall_s <= 1.10 * ideal);
}

TEST_CASE("read-ahead stops at StreamLimits::read_ahead: a large input is not read early",
          "[stream]") {
  // Inputs of 200 tasks (a DESI coadd read whole) with the read-ahead of one block of 32: the
  // second input is read only once fewer than 32 of the first's tasks wait (at least 168 started;
  // one more may be running). Uncapped (the largest input's 200 tasks), it was read as soon as
  // the first task began, holding a second whole file in memory.
  const std::vector<std::vector<double>> files(2, std::vector<double>(200, 0.2));
  StreamLimits limits;
  limits.read_ahead = 32;
  const Run run = stream_sleeping(files, 1, 0.5, limits);
  REQUIRE(run.emitted.size() == 2);
  INFO("tasks started when the second input's read began: " << run.started_at_read[1]);
  CHECK(run.started_at_read[1] >= 200 - 32);
}

namespace {

// Tasks with a first part (StreamStages::pre, the host's preparation: pre_ms) and the rest (the
// fit: run_ms; run does the first part itself where no reader did). Per task: how often each
// part ran, and whether run ever started while a reader was still on the first part.
struct PreRun {
  double wall_s = 0.0, work_s = 0.0;  // work: every run's measured sleep, first parts included
  size_t n_tasks = 0, n_pre = 0, n_pre_by_run = 0, n_twice = 0, n_overlap = 0;
};
PreRun stream_with_pre(size_t n_inputs, size_t tasks_per_input, int workers, double pre_ms,
                       double run_ms, double read_ms) {
  struct Input : StreamItem {
    std::unique_ptr<std::atomic<int>[]> state;  // 0 raw, 1 first part running, 2 prepared
    std::unique_ptr<std::atomic<int>[]> runs;
  };
  ThreadPool pool(workers);
  PreRun r;
  std::mutex mu;
  size_t next = 0;
  auto sleep_ms = [](double ms) {
    std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(ms));
  };
  StreamStages s;
  s.make = [] { return std::make_unique<Input>(); };
  s.next = [&](size_t& index, std::string& path) {
    if (next == n_inputs) return false;
    index = next++;
    path = "fake-" + std::to_string(index);
    return true;
  };
  s.read = [&](StreamItem& item) -> size_t {
    auto& in = static_cast<Input&>(item);
    sleep_ms(read_ms);
    in.state.reset(new std::atomic<int>[tasks_per_input]);
    in.runs.reset(new std::atomic<int>[tasks_per_input]);
    for (size_t t = 0; t < tasks_per_input; ++t) in.state[t] = 0, in.runs[t] = 0;
    return tasks_per_input;
  };
  s.pre = [&](StreamItem& item, size_t t) {
    auto& in = static_cast<Input&>(item);
    if (in.state[t].exchange(1) != 0) {
      std::lock_guard<std::mutex> lock(mu);
      ++r.n_twice;  // a first part started on a task already (being) prepared
    }
    sleep_ms(pre_ms);
    in.state[t] = 2;
    std::lock_guard<std::mutex> lock(mu);
    ++r.n_pre;
  };
  s.run = [&](StreamItem& item, size_t t, int) {
    auto& in = static_cast<Input&>(item);
    const auto t0 = Clock::now();
    const int st = in.state[t].load();
    bool by_run = false;
    if (st == 0) {
      in.state[t] = 2;
      sleep_ms(pre_ms);  // the first part, here
      by_run = true;
    }
    sleep_ms(run_ms);
    const double took = since(t0);
    std::lock_guard<std::mutex> lock(mu);
    r.n_overlap += st == 1;
    r.n_twice += in.runs[t]++ != 0;
    r.n_pre_by_run += by_run;
    r.work_s += took;
    ++r.n_tasks;
  };
  s.emit = [](std::unique_ptr<StreamItem>) {};
  const auto t0 = Clock::now();
  run_stream(pool, s, {});
  r.wall_s = since(t0);
  return r;
}

}  // namespace

TEST_CASE("idle readers prepare queued tasks ahead of one worker, each task once", "[stream]") {
  // One worker (the bench's end-to-end figure with --threads 1), a preparation a tenth of the
  // fit (DESI: 0.5 against 6.5 ms): the reader, idle between reads, prepares nearly every task,
  // so the worker's time is the fits alone. Every first part runs once (by a reader or by run),
  // never while run runs, and every task runs once.
  const PreRun r = stream_with_pre(6, 16, 1, 1.0, 10.0, 2.0);
  INFO(r.n_pre << " first parts by the reader, " << r.n_pre_by_run << " by the worker; wall "
               << r.wall_s << " s, work " << r.work_s << " s");
  REQUIRE(r.n_tasks == 96);
  CHECK(r.n_pre + r.n_pre_by_run == 96);
  CHECK(r.n_twice == 0);
  CHECK(r.n_overlap == 0);
  // Only the first input's first task cannot be prepared ahead (the worker takes it at once);
  // a slow machine may let the worker reach a few more first: at least 90% by the reader.
  CHECK(r.n_pre >= 86);
  // The worker never waits for the readers: the wall time is within 10% (+ 20 ms for the first
  // read) of the measured time of its own tasks (the fits plus the few first parts it prepared).
  // Measured, not nominal (96 x 10 ms): a loaded machine's late wake-ups lengthen both sides
  // (the nominal bound failed under the sanitizers in CI: wall 1.24 s, work 1.20 s).
  CHECK(r.wall_s <= 1.10 * r.work_s + 0.020);
}

TEST_CASE("readers and 16 fast workers share the first parts without doing one twice", "[stream]") {
  // Workers faster than the readers (a node with many threads): the workers take most tasks
  // before a reader reaches them and prepare them themselves; readers take the newest queued
  // tasks, so they rarely meet a worker on one. Exactly once each, never concurrently.
  const PreRun r = stream_with_pre(40, 8, 16, 0.3, 0.3, 0.5);
  INFO(r.n_pre << " first parts by readers, " << r.n_pre_by_run << " by workers");
  REQUIRE(r.n_tasks == 320);
  CHECK(r.n_pre + r.n_pre_by_run == 320);
  CHECK(r.n_twice == 0);
  CHECK(r.n_overlap == 0);
  CHECK(r.n_pre_by_run > 0);
}

TEST_CASE("the stream hands inputs back in order whatever their tasks take", "[stream]") {
  // Later inputs are quicker, inputs without tasks (unreadable files) finish at once.
  std::vector<std::vector<double>> files;
  for (int f = 0; f < 40; ++f)
    files.push_back(f % 7 == 3 ? std::vector<double>{} : std::vector<double>(1 + f % 3, 40.0 - f));
  const Run run = stream_sleeping(files, 4);
  REQUIRE(run.emitted.size() == files.size());
  for (size_t i = 0; i < run.emitted.size(); ++i) CHECK(run.emitted[i] == i);
}

TEST_CASE("an exception in a task stops the stream and reaches the caller", "[stream]") {
  ThreadPool pool(3);
  size_t next = 0;
  StreamStages s;
  s.make = [] { return std::make_unique<StreamItem>(); };
  s.next = [&](size_t& index, std::string&) {
    index = next++;
    return index < 1000;
  };
  s.read = [](StreamItem&) -> size_t { return 2; };
  s.run = [](StreamItem& item, size_t, int) {
    if (item.index == 17) throw std::runtime_error("device error");
  };
  s.emit = [](std::unique_ptr<StreamItem>) {};
  CHECK_THROWS_WITH(run_stream(pool, s), "device error");
  // The pool is usable afterwards.
  std::atomic<int> n{0};
  pool.for_each(10, [&](size_t, int) { ++n; });
  CHECK(n == 10);
}

TEST_CASE("batch mode submits full batches, one in flight, and ends with the rest", "[stream]") {
  // 30 inputs of 0-3 tasks (43 in all), batches of 8: five full ones and a last one of 3; each
  // task finished once, by the finisher of its own batch, and inputs reported in order.
  ThreadPool pool(2);
  size_t next = 0;
  std::vector<size_t> sizes;
  std::mutex mu;
  int in_flight = 0, most_in_flight = 0;
  std::vector<size_t> emitted;
  struct Counted : StreamItem {
    std::vector<int> done;
  };
  StreamStages s;
  s.make = [] { return std::make_unique<Counted>(); };
  s.next = [&](size_t& index, std::string&) {
    index = next++;
    return index < 30;
  };
  s.read = [](StreamItem& item) -> size_t {
    auto& c = static_cast<Counted&>(item);
    c.done.assign(item.index % 4 == 0 ? 0 : item.index % 4, 0);
    return c.done.size();
  };
  s.submit_batch = [&](const std::vector<StreamTask>& tasks) -> std::function<void()> {
    {
      std::lock_guard<std::mutex> lock(mu);
      sizes.push_back(tasks.size());
      most_in_flight = std::max(most_in_flight, ++in_flight);
    }
    return [&, tasks] {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      for (const auto& [item, t] : tasks) ++static_cast<Counted&>(*item).done[t];
      std::lock_guard<std::mutex> lock(mu);
      --in_flight;
    };
  };
  s.emit = [&](std::unique_ptr<StreamItem> item) {
    for (int d : static_cast<Counted&>(*item).done) CHECK(d == 1);
    emitted.push_back(item->index);
  };
  StreamLimits limits;
  limits.batch = 8;
  run_stream(pool, s, limits);
  REQUIRE(emitted.size() == 30);
  for (size_t i = 0; i < emitted.size(); ++i) CHECK(emitted[i] == i);
  CHECK(std::accumulate(sizes.begin(), sizes.end(), size_t{0}) == 43);
  for (size_t i = 0; i + 1 < sizes.size(); ++i) CHECK(sizes[i] == 8);
  CHECK(most_in_flight <= 2);  // one being fitted, the next being submitted
}

namespace {

// Batch mode over `n_inputs` inputs whose task counts `tasks_of(index)` gives (batch 128, 4
// readers): the most tasks read and not yet submitted, and the tasks submitted in all.
struct ReadAhead {
  long long most = 0, total = 0;
};
ReadAhead batch_read_ahead(size_t n_inputs, const std::function<size_t(size_t)>& tasks_of,
                           size_t batch = 128) {
  ThreadPool pool(2);
  size_t next = 0;
  std::mutex mu;
  long long outstanding = 0;
  ReadAhead r;
  StreamStages s;
  s.make = [] { return std::make_unique<StreamItem>(); };
  s.next = [&](size_t& index, std::string&) {
    index = next++;
    return index < n_inputs;
  };
  s.read = [&](StreamItem& item) -> size_t {
    // The first input reads at once, the others take 2 ms: the stream decides how far to read
    // ahead while it knows only the first.
    if (item.index > 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    const size_t n = tasks_of(item.index);
    std::lock_guard<std::mutex> lock(mu);
    outstanding += static_cast<long long>(n);
    r.most = std::max(r.most, outstanding);
    return n;
  };
  s.submit_batch = [&](const std::vector<StreamTask>& tasks) -> std::function<void()> {
    {
      std::lock_guard<std::mutex> lock(mu);
      outstanding -= static_cast<long long>(tasks.size());
      r.total += static_cast<long long>(tasks.size());
    }
    return [] { std::this_thread::sleep_for(std::chrono::milliseconds(1)); };
  };
  s.emit = [](std::unique_ptr<StreamItem>) {};
  StreamLimits limits;
  limits.batch = batch;
  limits.readers = 4;
  run_stream(pool, s, limits);
  return r;
}

}  // namespace

TEST_CASE("batch mode read-ahead stays bounded after a first input of 0 or 1 tasks", "[stream]") {
  // A first input without a selected fibre (or with one) must not make the stream count every
  // unread input as one task and pull a batch's worth of 64-task inputs at once (8192 tasks):
  // the bound below, 128 + 5 x 64, plus the batch the batcher has taken from the queue but not
  // yet handed to submit_batch, where this count drops (a batcher descheduled between the two,
  // on a loaded 2-core CI machine, gave 513).
  for (size_t first : {size_t{0}, size_t{1}}) {
    const auto r = batch_read_ahead(200, [first](size_t i) { return i == 0 ? first : 64; });
    CHECK(r.total == static_cast<long long>(first + 199 * 64));
    CHECK(r.most <= 2 * 128 + 5 * 64);
  }
}

TEST_CASE("batch mode ends when a few tasks sit behind many inputs without tasks", "[stream]") {
  // 3 tasks, then 400 inputs with none (a --targetids run over coadds that mostly lack the
  // targets), batch 8: every input slot fills with read inputs and no full batch can come. The
  // batcher must send the 3 tasks rather than wait for ever (it did, before).
  const auto r = batch_read_ahead(
      401, [](size_t i) { return i == 0 ? size_t{3} : size_t{0}; }, 8);
  CHECK(r.total == 3);
}

TEST_CASE("batch mode reads ahead about one batch and not the whole input list", "[stream]") {
  // 200 inputs of 64 tasks each (DESI coadds of 64 fibres: about 0.5 MB of pixels per task),
  // batches of 128, 4 readers. What is read and not yet submitted is held in memory: it must stay
  // near one batch plus what the readers hold (the low mark, 128, plus at most one input per
  // reader in flight and one more pulled on the running mean: 128 + 5 x 64 = 448). Before,
  // inputs not yet read counted as one task each and the stream read 128 of them (8192 tasks) at
  // its start; a GPU rank held 6 GB of DESI pixels.
  ThreadPool pool(2);
  size_t next = 0;
  std::mutex mu;
  long long outstanding = 0, most = 0, total = 0;
  StreamStages s;
  s.make = [] { return std::make_unique<StreamItem>(); };
  s.next = [&](size_t& index, std::string&) {
    index = next++;
    return index < 200;
  };
  s.read = [&](StreamItem&) -> size_t {
    std::this_thread::sleep_for(std::chrono::microseconds(200));
    std::lock_guard<std::mutex> lock(mu);
    outstanding += 64;
    most = std::max(most, outstanding);
    return 64;
  };
  s.submit_batch = [&](const std::vector<StreamTask>& tasks) -> std::function<void()> {
    {
      std::lock_guard<std::mutex> lock(mu);
      outstanding -= static_cast<long long>(tasks.size());
      total += static_cast<long long>(tasks.size());
    }
    return [] { std::this_thread::sleep_for(std::chrono::milliseconds(1)); };
  };
  s.emit = [](std::unique_ptr<StreamItem>) {};
  StreamLimits limits;
  limits.batch = 128;
  limits.readers = 4;
  run_stream(pool, s, limits);
  CHECK(total == 200 * 64);
  // Counted here until submit_batch runs, the batch the batcher has just taken from the queue
  // may add one batch to the stream's own bound (a batcher descheduled between the two).
  CHECK(most <= 2 * 128 + 5 * 64);
}
