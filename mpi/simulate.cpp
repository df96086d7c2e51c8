#include "mpi/simulate.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <ctime>
#include <filesystem>
#include <thread>

#include "app/job.hpp"
#include "common/error.hpp"
#include "mpi/driver.hpp"

namespace velox::mpi {

namespace {

using Clock = std::chrono::steady_clock;

// Bytes the simulation gives one spectrum: the hand-out sizes batches by bytes and the ranks'
// measured rate in bytes per second, so only the ratio matters (about a LAMOST DR8 file).
constexpr double kBytesPerSpectrum = 60000.0;

// A fit that takes spectra_per_input / rate seconds per input and reports a status without rows.
// The sleeps keep a running deadline, so oversleeping one input is made up on the next ones;
// after waiting for work the deadline restarts from now (no credit for idle time).
FitLoop sleeping_fit(const SimOptions& sim) {
  return [sim](const FitEngine::NextInput& next, const std::function<void(FileResult&&)>& done) {
    const auto per_input = std::chrono::duration_cast<Clock::duration>(
        std::chrono::duration<double>(sim.rate > 0 ? sim.spectra_per_input / sim.rate : 0.0));
    auto deadline = Clock::now();
    size_t index = 0;
    std::string path;
    for (;;) {
      const auto t0 = Clock::now();
      if (!next(index, path)) break;
      const auto t1 = Clock::now();
      if (t1 - t0 > std::chrono::microseconds(200) && deadline < t1) deadline = t1;
      deadline += per_input;
      if (sim.rate > 0 && deadline - Clock::now() > std::chrono::microseconds(500))
        std::this_thread::sleep_until(deadline);
      FileResult r;
      r.index = index;
      r.path = std::move(path);
      r.n_targets = r.n_fitted = static_cast<size_t>(sim.spectra_per_input);
      r.seconds = std::chrono::duration<double>(per_input).count();
      done(std::move(r));
    }
  };
}

}  // namespace

int run_coordinator_sim(const SimOptions& sim, Comm& comm) {
  FitOptions opt;
  opt.output_dir = sim.status_dir;
  opt.batch_seconds = sim.batch_seconds;
  opt.quiet = true;
  HandoutPolicy policy;
  policy.batch_seconds = sim.batch_seconds;
  const FitLoop fit = sleeping_fit(sim);
  if (comm.rank() != 0) return work(comm, fit, {}, false);

  if (!sim.status_dir.empty()) std::filesystem::create_directories(sim.status_dir);
  std::vector<JobInput> inputs(sim.n_inputs);
  for (size_t i = 0; i < inputs.size(); ++i) {
    inputs[i].path = fmt::format("/survey/sim/spec-{:08d}.fits.gz", i);
    inputs[i].bytes = static_cast<uintmax_t>(sim.spectra_per_input * kBytesPerSpectrum);
  }
  RootJob job(opt, comm.size(), std::move(inputs));
  const CoordinatorStats st = serve(job, comm, fit, {}, false, policy);
  job.finish();
  send_exit_code(comm, kExitOk);
  const double need = sim.rate > 0 ? comm.size() * sim.rate / sim.spectra_per_input : 0.0;
  fmt::print(
      "simulate-coordinator: ranks={} inputs={} spectra_per_input={} rate={} "
      "batch_seconds={} seconds={:.3f} inputs_per_s={:.0f} needed_inputs_per_s={:.0f} "
      "requests={} idle_share={:.4f} rank0_cpu_s={:.3f}\n",  // CPU time of all of rank 0
      comm.size(), st.inputs, sim.spectra_per_input, sim.rate, sim.batch_seconds, st.seconds,
      st.inputs / std::max(st.seconds, 1e-9), need, st.requests, st.idle_share(),
      [] {
        timespec ts{};
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
        return ts.tv_sec + 1e-9 * ts.tv_nsec;
      }());
  return kExitOk;
}

}  // namespace velox::mpi
