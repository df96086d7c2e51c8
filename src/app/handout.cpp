#include "app/handout.hpp"

#include <algorithm>

namespace velox {

size_t batch_length(const uintmax_t* bytes, size_t n, uintmax_t bytes_left, double rate_bytes_s,
                    int n_ranks, const HandoutPolicy& policy) {
  if (n == 0) return 0;
  if (!(rate_bytes_s > 0)) return 1;
  const double target = rate_bytes_s * policy.batch_seconds;
  const double share = static_cast<double>(bytes_left) / (2.0 * std::max(1, n_ranks));
  const double budget = std::min(target, share);
  const size_t cap = std::min(n, std::max<size_t>(1, policy.max_inputs));
  // The first input always goes; the next ones while the batch stays within the budget.
  double sum = static_cast<double>(bytes[0]);
  size_t k = 1;
  while (k < cap && sum + static_cast<double>(bytes[k]) <= budget) sum += static_cast<double>(bytes[k++]);
  return k;
}

}  // namespace velox
