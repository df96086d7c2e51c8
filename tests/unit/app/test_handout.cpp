// Batch sizes of rank 0's hand-out (app/handout.hpp).
#include <catch2/catch.hpp>

#include <numeric>
#include <vector>

#include "app/handout.hpp"

using namespace velox;

namespace {

uintmax_t sum(const std::vector<uintmax_t>& v, size_t from = 0) {
  return std::accumulate(v.begin() + from, v.end(), uintmax_t{0});
}

}  // namespace

TEST_CASE("a rank of unknown speed gets one input, which measures it", "[handout]") {
  const std::vector<uintmax_t> q(1000, 100);
  CHECK(batch_length(q.data(), q.size(), sum(q), 0.0, 4, {}) == 1);
  CHECK(batch_length(q.data(), 0, 0, 1e9, 4, {}) == 0);  // nothing left
}

TEST_CASE("a batch holds about batch_seconds of work at the rank's rate", "[handout]") {
  const std::vector<uintmax_t> q(100000, 1000);  // 1 kB inputs
  HandoutPolicy p;
  p.batch_seconds = 1.0;
  // 50 kB/s: 50 inputs a second; the queue (100 MB) is far from its end.
  CHECK(batch_length(q.data(), q.size(), sum(q), 50e3, 4, p) == 50);
  p.batch_seconds = 2.0;
  CHECK(batch_length(q.data(), q.size(), sum(q), 50e3, 4, p) == 100);
  p.max_inputs = 30;
  CHECK(batch_length(q.data(), q.size(), sum(q), 50e3, 4, p) == 30);
  // An input larger than the whole budget still goes, alone.
  const std::vector<uintmax_t> big{10000000, 1};
  CHECK(batch_length(big.data(), big.size(), sum(big), 50e3, 4, {}) == 1);
}

TEST_CASE("batches shrink near the end of the queue so the ranks finish together", "[handout]") {
  std::vector<uintmax_t> q(1000, 1000);
  const int ranks = 8;
  const double rate = 1e9;  // every rank could take the whole queue in a second
  size_t next = 0, batches = 0, last = q.size();
  while (next < q.size()) {
    const size_t k = batch_length(q.data() + next, q.size() - next, sum(q, next), rate, ranks, {});
    REQUIRE(k >= 1);
    // Never more than a 1/(2 x ranks) share of what is left (plus the one input that always goes).
    CHECK(k * 1000 <= std::max<uintmax_t>(1000, sum(q, next) / (2 * ranks)));
    CHECK(k <= last);  // non-increasing with equal sizes
    last = k;
    next += k;
    ++batches;
  }
  // Geometric shrinking: about 2 x ranks x ln(1000) batches, far fewer than 1000 inputs.
  CHECK(batches < 200);
}
