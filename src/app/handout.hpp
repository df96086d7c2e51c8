// How many inputs rank 0 hands out per request (docs/running.md "MPI"): enough for about
// `batch_seconds` of work at the asking rank's measured rate (input bytes per second), so a rank
// sends about one message per second whatever its speed; but never more than a share of what is
// left, so the batches shrink near the end of the queue and the ranks finish together. That is
// guided self-scheduling (Polychronopoulos & Kuck 1987) with a factor of 2 ("factoring",
// Hummel, Schonberg & Flynn 1992): a batch takes at most remaining / (2 x ranks).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace velox {

// One input handed to a rank: its index in rank 0's plan, path and size in bytes (the rank's
// rate is measured in input bytes per second).
struct WorkItem {
  size_t index = 0;
  std::string path;
  uintmax_t bytes = 0;
};

struct HandoutPolicy {
  double batch_seconds = 1.0;   // work per batch at the rank's measured rate
  size_t max_inputs = 100000;   // at most this many inputs per message
};

// The number of inputs of the next batch, from the queue `bytes[0..n)` (sizes of the inputs not
// yet handed out, in hand-out order) whose sizes add up to `bytes_left`. `rate_bytes_s` is the
// asking rank's measured rate (<= 0: not known yet: one input, which measures it); `n_ranks` the
// ranks that fit. At least 1 when n > 0; 0 when the queue is empty.
size_t batch_length(const uintmax_t* bytes, size_t n, uintmax_t bytes_left, double rate_bytes_s,
                    int n_ranks, const HandoutPolicy& policy);

}  // namespace velox
