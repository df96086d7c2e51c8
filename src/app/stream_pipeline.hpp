// One stream of inputs through the CPU without barriers (docs/design.md "The fit stream"):
//   calling thread: pulls inputs (`next`) while there is room, and emits finished inputs in the
//                   order they were pulled;
//   reader threads: read (and decompress) an input and split it into tasks (its spectra); with
//                   nothing to read, do the first part of queued tasks (`pre`: preparation);
//   workers:        the threads of a persistent ThreadPool, each taking one task at a time from
//                   one shared queue, so no thread waits for the slowest task of a chunk;
//   or, in batch mode (a GPU), one thread that takes the tasks `batch` at a time, submits a
//                   batch and finishes the previous one, so the device fits batch k while the
//                   host prepares batch k+1.
// Reading overlaps fitting, and a slow task holds back only the emission of its own input (the
// others finish and wait, up to `max_items` inputs in flight). Knows nothing about spectra: the
// engine (app/fit_run.cpp) and the tests (a sleeping fake) fill in the stages.
#pragma once
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/thread_pool.hpp"

namespace velox {

// One input in flight; the stages keep their state in a derived type.
struct StreamItem {
  StreamItem() = default;
  StreamItem(StreamItem&&) = default;
  StreamItem& operator=(StreamItem&&) = default;
  virtual ~StreamItem() = default;
  size_t index = 0;
  std::string path;
};

// One task: task t of an item.
using StreamTask = std::pair<StreamItem*, size_t>;

struct StreamStages {
  // Calling thread: a fresh item (derived type) for the next input.
  std::function<std::unique_ptr<StreamItem>()> make;
  // Calling thread: fill in the next input's index and path; false when there are no more.
  std::function<bool(size_t& index, std::string& path)> next;
  // A reader thread: read the item; returns its number of tasks (0: nothing to fit, e.g. an
  // unreadable input, which the stage records itself).
  std::function<size_t(StreamItem& item)> read;
  // A worker thread (`worker` < pool size, one task at a time per worker): task t of item.
  std::function<void(StreamItem& item, size_t t, int worker)> run;
  // Optional, not in batch mode: the first part of task t (the host's preparation), which a
  // reader thread with nothing to read may do ahead of the workers. At most once per task, only
  // for a task still queued, and always finished before `run` starts on the task; `run` must do
  // that part itself where it was not done. Readers take the queue's newest tasks first, the
  // workers its oldest, so that they rarely meet on one task (a worker that takes a task a
  // reader is preparing waits for it).
  std::function<void(StreamItem& item, size_t t)> pre;
  // Batch mode only, instead of `run`: start the tasks (fewer than `batch` only at the end of the
  // stream) and return the function that waits for them and stores their results. The pool is
  // free for it to use.
  std::function<std::function<void()>(const std::vector<StreamTask>& tasks)> submit_batch;
  // Calling thread, in the order the inputs were pulled, once every task of the item is done.
  std::function<void(std::unique_ptr<StreamItem> item)> emit;
};

struct StreamLimits {
  int readers = 1;           // reader threads
  size_t queued_tasks = 0;   // pull more inputs while fewer tasks wait (0: 2 per worker)
  size_t max_items = 0;      // inputs in flight at most (0: 8 per worker + readers + 2)
  size_t batch = 0;          // > 0: batch mode, tasks per batch (queued_tasks and max_items
                             // default to 1 and 4 batches)
  size_t read_ahead = 0;     // idle readers also read ahead while fewer tasks wait than the
                             // largest input so far held, up to this many (0: not)
};

// Run the stream to its end on `pool`'s threads (all of them work; the calling thread does not
// fit). Rethrows the first exception a stage threw, after stopping every thread.
void run_stream(ThreadPool& pool, const StreamStages& stages, const StreamLimits& limits = {});

}  // namespace velox
