#include "backend/cpu/cpu_backend.hpp"

#include <sched.h>

#include <atomic>
#include <thread>

namespace velox {

std::vector<CatalogRow> fit_on_cpu(const std::vector<FitJob>& jobs, int n_threads,
                                   const std::function<void(size_t)>& on_done,
                                   std::vector<FitDiagnostics>* diags) {
  std::vector<CatalogRow> rows(jobs.size());
  if (diags) diags->assign(jobs.size(), FitDiagnostics{});
  std::atomic<size_t> next{0}, done{0};
  auto worker = [&] {
    for (size_t i = next++; i < jobs.size(); i = next++) {
      rows[i] = fit_spectrum(*jobs[i].spectrum, *jobs[i].ctx, diags ? &(*diags)[i] : nullptr);
      const size_t d = ++done;
      if (on_done) on_done(d);
    }
  };
  const int n = std::max(1, std::min<int>(n_threads, static_cast<int>(jobs.size())));
  if (n == 1) {
    worker();
    return rows;
  }
  std::vector<std::thread> pool;
  for (int t = 0; t < n; ++t) pool.emplace_back(worker);
  for (auto& t : pool) t.join();
  return rows;
}

int default_thread_count() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

}  // namespace velox
