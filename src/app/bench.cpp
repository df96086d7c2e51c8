#include "app/bench.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <sstream>
#include <string>

#include "backend/cpu/flop_count.hpp"
#include "backend/engine_model.hpp"
#include "common/error.hpp"
#include "common/median.hpp"
#include "io/readers.hpp"

namespace velox {
namespace {

// One device's benchmark, medians over `repeat` runs of three rates (spectra/s): host prepare
// (masking, packing), the backend alone (the kernels on the device, from prepared spectra in
// memory, replicated to `replicate` spectra; on the CPU once per instruction set of `isas`,
// alternated within each run), and end to end from the files (library load, reading, prepare,
// fit; no catalog written; the first instruction set).
// One host thread's time per input format: format_name -> (seconds, spectra).
using SecondsPerFormat = std::map<std::string, std::pair<double, size_t>>;

// Per format, the pass whose rate is the median of `passes` (each pass one SecondsPerFormat):
// single passes of a file or two vary by 2x between runs (first reads, page cache, the heap).
SecondsPerFormat median_pass(const std::vector<SecondsPerFormat>& passes) {
  SecondsPerFormat out;
  std::map<std::string, std::vector<std::pair<double, size_t>>> per_format;
  for (const auto& pass : passes)
    for (const auto& [format, sn] : pass) per_format[format].push_back(sn);
  for (auto& [format, v] : per_format) {
    // the upper median of the seconds per spectrum (all passes hold the same spectra)
    std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) {
      return a.first * static_cast<double>(b.second) < b.first * static_cast<double>(a.second);
    });
    out[format] = v[v.size() / 2];
  }
  return out;
}

struct BenchResult {
  size_t n_files = 0, n_backend = 0;
  std::vector<double> prepare_rates, e2e_rates;
  std::map<CpuIsa, std::vector<double>> backend_rates;  // per instruction set
  // Work of one backend run (the same for every run and level up to rounding): evaluations by
  // kind (kern::PipelineResult::n_eval), LM iterations and the analytic FLOPs (flop_count.hpp).
  double n_eval[3] = {0, 0, 0}, n_lm_iter = 0, flops = 0;
  double n_pix = 0, flops_fixed = 0, flops_eval[3] = {0, 0, 0};  // sums of the FLOP model's terms
  size_t n_ok = 0;
  // The batched engine's stage model on an H200 (engine_model.hpp), summed over the spectra:
  // device seconds per fit, and per Jacobian evaluation and for the fixed passes by stage.
  double engine_fit_s = 0;
  std::map<std::string, double> engine_jac_s, engine_fixed_s;
  std::string backend_name;  // "cpu": rates per instruction set and the peak share
  // One host thread's prepare time per input format (after the runs, for the first device only;
  // the median of `repeat` passes).
  SecondsPerFormat prepare_1t;
  // One host thread's packing (HostBatch without a pool: the copy of a batch's prepared spectra
  // into the arrays that go to the device), per input format; the median of `repeat` passes.
  SecondsPerFormat pack_1t;
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

BenchResult bench_device(const FitOptions& base, const std::string& device, int repeat,
                         size_t replicate, const std::vector<SpectrumFile>& files,
                         const std::vector<CpuIsa>& isas, bool host_prepare) {
  BenchResult b;
  FitOptions o = base;
  o.quiet = true;
  o.device = device;
  FitEngine engine(o, o.threads);  // ConfigError: the device is unavailable
  if (device == "gpu" && !engine.gpu_backend()) throw ConfigError("no GPU backend");
  Backend& backend = engine.gpu_backend() ? *engine.gpu_backend() : engine.cpu_backend();
  b.backend_name = backend.name();
  std::vector<std::unique_ptr<FitContext>> ctxs;
  std::vector<FitJob> jobs;
  for (const auto& f : files) {
    ctxs.push_back(std::make_unique<FitContext>(engine.context(format_name(f.format), f.survey)));
    for (const auto& s : f.spectra) jobs.push_back({&s, ctxs.back().get()});
  }
  for (int r = 0; r < repeat; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    const std::vector<PreparedSpectrum> prep = engine.prepare(jobs);
    b.prepare_rates.push_back(jobs.size() / seconds_since(t0));
    std::vector<const Packed*> unique, batch;
    for (const auto& p : prep)
      if (p.ready) unique.push_back(&p.packed);
    if (unique.empty()) throw ConfigError("bench: no spectrum to fit in the inputs");
    const size_t n = replicate > 0 ? replicate : unique.size();
    for (size_t i = 0; i < n; ++i) batch.push_back(unique[i % unique.size()]);
    // On the GPU the instruction set does not matter: one backend run.
    const size_t n_isa = backend.name() == "cpu" ? isas.size() : 1;
    for (size_t k = 0; k < n_isa; ++k) {
      set_active_isa(isas[k]);
      t0 = std::chrono::steady_clock::now();
      const BatchOutput out = backend.run(batch);
      b.backend_rates[isas[k]].push_back(n / seconds_since(t0));
      if (r > 0 || k > 0) continue;
      const FitContext ctx =
          engine.context(format_name(files.front().format), files.front().survey);
      const kern::PipelineConfig pc = pipeline_config(ctx.cfg, ctx.lib);
      const DeviceModel h200 = h200_model();
      for (size_t i = 0; i < out.results.size(); ++i) {
        const kern::PipelineResult& res = out.results[i];
        if (res.status != kern::kPipeOk) continue;
        ++b.n_ok;
        for (int e = 0; e < 3; ++e) b.n_eval[e] += res.n_eval[e];
        b.n_lm_iter += res.n_lm_iter;
        const FlopShape shape = flop_shape(*batch[i], pc, ctx.lib);
        b.flops += fit_flops(shape, res);
        b.n_pix += batch[i]->flux.size();
        b.flops_fixed += fixed_flops(shape);
        const EvalKind kinds[3] = {EvalKind::kChi2, EvalKind::kJacobian, EvalKind::kVelocityOnly};
        for (int e = 0; e < 3; ++e) b.flops_eval[e] += eval_flops(shape, kinds[e]);
        // The engine model: the moments grid's evaluations cover the whole spectrum, the
        // other velocity-only ones a segment.
        EvalCounts nc;
        nc.chi2 = res.n_eval[0];
        nc.jac = res.n_eval[1];
        nc.vfull = std::min(res.n_eval[2], pc.vpost_half > 0 ? 2 * pc.vpost_half + 1 : 0);
        nc.vseg = res.n_eval[2] - nc.vfull;
        b.engine_fit_s += engine_fit_seconds(shape, ctx.lib.n_tpix, nc, h200);
        for (const auto& c : engine_eval_stages(shape, EvalKind::kJacobian, ctx.lib.n_tpix))
          b.engine_jac_s[c.stage] += stage_seconds(c, h200);
        for (const auto& c : engine_fixed_stages(shape, ctx.lib.n_tpix))
          b.engine_fixed_s[c.stage] += stage_seconds(c, h200);
      }
    }
    set_active_isa(isas.front());
    b.n_backend = n;
    t0 = std::chrono::steady_clock::now();
    const auto res = run_fit(o);
    const double wall = seconds_since(t0);
    b.n_files = res.n_spectra;
    b.e2e_rates.push_back(res.n_spectra / wall);
    spdlog::info(
        "bench {} run {}: prepare {:.1f}/s, {} on {} spectra {:.2f}/s ({}), end to end "
        "{} spectra {:.2f}/s",
        device, r + 1, b.prepare_rates.back(), backend.name(), n,
        b.backend_rates[isas.front()].back(), isa_name(isas.front()), res.n_spectra,
        b.e2e_rates.back());
  }
  // What one host thread prepares per second, per format, with the arm models already built by
  // the runs (the pool's rate is above); the host does not depend on the device.
  if (!host_prepare) return b;
  std::vector<SecondsPerFormat> passes(static_cast<size_t>(std::max(repeat, 1)));
  for (SecondsPerFormat& pass : passes)
    for (const FitJob& job : jobs) {
      auto& [sec, n] = pass[job.ctx->format];
      const auto t0 = std::chrono::steady_clock::now();
      (void)prepare_spectrum(*job.spectrum, *job.ctx);
      sec += seconds_since(t0);
      ++n;
    }
  b.prepare_1t = median_pass(passes);
  std::map<std::string, std::vector<PreparedSpectrum>> by_format;
  for (const FitJob& job : jobs) {
    PreparedSpectrum p = prepare_spectrum(*job.spectrum, *job.ctx);
    if (p.ready) by_format[job.ctx->format].push_back(std::move(p));
  }
  std::vector<SecondsPerFormat> packs(passes.size());
  for (SecondsPerFormat& pass : packs)
    for (const auto& [format, prep] : by_format) {
      std::vector<const Packed*> ptrs;
      for (const auto& p : prep) ptrs.push_back(&p.packed);
      const FitContext& ctx = *ctxs.front();
      const auto t0 = std::chrono::steady_clock::now();
      const HostBatch hb(ptrs, ctx.lib, pipeline_config(ctx.cfg, ctx.lib));
      pass[format] = {seconds_since(t0), ptrs.size()};
    }
  b.pack_1t = median_pass(packs);
  return b;
}

// The work per spectrum and, on the CPU, the achieved GFLOP/s and share of the nominal peak of
// the cores used (flop_count.hpp) at instruction set `isa` and backend rate `rate` spectra/s.
void print_work(const std::string& dev, const BenchResult& b, CpuIsa isa, double rate, int threads,
                bool prefix) {
  if (b.n_ok == 0) return;
  const double per = 1.0 / b.n_ok, gflop = b.flops * per / 1e9, gflops = gflop * rate;
  if (prefix) fmt::print("velox bench [{}]: ", dev);
  fmt::print(
      "per spectrum {:.1f} model evaluations ({:.1f} chi2-only, {:.1f} "
      "with the Jacobian, {:.1f} velocity-only), {:.1f} LM iterations, {:.3f} GFLOP "
      "(analytic); {:.2f} GFLOP/s",
      (b.n_eval[0] + b.n_eval[1] + b.n_eval[2]) * per, b.n_eval[0] * per, b.n_eval[1] * per,
      b.n_eval[2] * per, b.n_lm_iter * per, gflop, gflops);
  if (b.backend_name == "cpu") {
    const int cores = std::min(threads, default_thread_count());
    static const CoreClock clock = core_clock();
    const double peak = cores * clock.ghz * flop_per_cycle(isa);
    if (peak > 0)
      fmt::print(
          " = {:.1f}% of the {} peak ({} core{} x {:.2f} GHz x {:.0f} FLOP/cycle; clock: {}; "
          "/proc/cpuinfo: {:.2f} GHz)",
          100.0 * gflops / peak, isa_name(isa), cores, cores > 1 ? "s" : "", clock.ghz,
          flop_per_cycle(isa), clock.source, cpuinfo_ghz());
  }
  fmt::print("\n");
}

// What a GPU host needs (issue 26): per input format, one host thread's read and prepare rates
// and the host threads that reading plus preparing take to feed a device at `feed_rate`
// spectra/s (finishing rows and writing are not counted). Nothing without prepare times.
void print_host_feed(const SecondsPerFormat& reads, const BenchResult& b, double feed_rate) {
  for (const auto& [format, sp] : b.prepare_1t) {
    auto it = reads.find(format);
    if (it == reads.end() || sp.second == 0 || it->second.second == 0) continue;
    const double t_read = it->second.first / it->second.second, t_prep = sp.first / sp.second;
    // Packing the batch (HostBatch, on the engine's pool) is host work too; the upload's own
    // copy (the driver's staging, on the batch thread) is not counted.
    auto pk = b.pack_1t.find(format);
    const double t_pack =
        pk != b.pack_1t.end() && pk->second.second > 0 ? pk->second.first / pk->second.second : 0.0;
    fmt::print(
        "velox bench [host]: {}: 1 thread reads {:.0f} spectra/s, prepares {:.0f} spectra/s and "
        "packs {:.0f} spectra/s; feeding {:.0f} spectra/s takes {:.1f} host threads (read {:.1f} "
        "+ prepare {:.1f} + pack {:.1f})\n",
        format, 1.0 / t_read, 1.0 / t_prep, t_pack > 0 ? 1.0 / t_pack : 0.0, feed_rate,
        feed_rate * (t_read + t_prep + t_pack), feed_rate * t_read, feed_rate * t_prep,
        feed_rate * t_pack);
  }
}

}  // namespace

// `--device cpu,gpu` benchmarks each device in turn in the same run, with the GPU/CPU ratio of
// the backend rates when both ran; `--isa a,b` runs the CPU backend at each instruction set in
// turn within every run, with the rate ratios to the first.
int cmd_bench(const FitOptions& base, int repeat, size_t replicate, const std::vector<CpuIsa>& isas,
              double feed_rate) {
  std::vector<std::string> devices;
  std::stringstream ss(base.device);
  for (std::string d; std::getline(ss, d, ',');) devices.push_back(d);
  // Read every input `repeat` times (one host thread; the median pass is reported). Each pass's
  // spectra are freed before the next, as a run frees each file's spectra after their fit, except
  // the last pass's: the backend runs replicate them in memory.
  std::vector<SpectrumFile> files;
  std::vector<SecondsPerFormat> read_passes(static_cast<size_t>(std::max(repeat, 1)));
  const std::vector<std::string> inputs = collect_inputs(base);
  for (auto& pass : read_passes) {
    files.clear();
    for (const auto& path : inputs) {
      const auto t0 = std::chrono::steady_clock::now();
      files.push_back(read_spectra(path, parse_format(base.format)));
      auto& [sec, n] = pass[format_name(files.back().format)];
      sec += seconds_since(t0);
      n += files.back().spectra.size();
    }
  }
  const SecondsPerFormat reads = median_pass(read_passes);
  const std::string threads = base.threads > 0 ? std::to_string(base.threads) : "all";
  std::map<std::string, double> backend_rate;
  for (const auto& dev : devices) {
    BenchResult b;
    try {
      // The host's prepare rate with the first device that runs (no backend rate yet).
      b = bench_device(base, dev, repeat, replicate, files, isas, backend_rate.empty());
    } catch (const ConfigError& e) {
      fmt::print("velox bench [{}]: unavailable: {}\n", dev, e.what());
      continue;
    }
    // The CPU's rates per instruction set in --isa order; the GPU has one entry.
    std::vector<CpuIsa> ran;
    for (CpuIsa isa : isas)
      if (b.backend_rates.count(isa)) ran.push_back(isa);
    const std::vector<double>& rates0 = b.backend_rates[ran.front()];
    const double fit_med = median_upper(rates0);
    backend_rate[dev] = fit_med;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    const int n_threads = base.threads > 0 ? base.threads : default_thread_count();
    fmt::print(
        "velox bench [{}]: {} threads, {} runs (medians): prepare {:.1f} spectra/s; "
        "backend {:.2f} spectra/s on {} spectra (min {:.2f}, max {:.2f}; {:.2f} per "
        "thread); end to end {:.2f} spectra/s on {} spectra from files; peak RSS {:.0f} MB",
        dev, threads, repeat, median_upper(b.prepare_rates), fit_med, b.n_backend,
        *std::min_element(rates0.begin(), rates0.end()),
        *std::max_element(rates0.begin(), rates0.end()),
        fit_med / std::max(1, base.threads > 0 ? base.threads : 1), median_upper(b.e2e_rates),
        b.n_files, ru.ru_maxrss / 1024.0);
    fmt::print(b.backend_name == "cpu" ? "; CPU kernel isa {}\n" : "\n", isa_name(ran.front()));
    for (size_t k = 1; k < ran.size(); ++k) {
      const std::vector<double>& r = b.backend_rates[ran[k]];
      fmt::print(
          "velox bench [{}]: isa {}: backend {:.2f} spectra/s (min {:.2f}, max {:.2f}), "
          "x{:.3f} the {} rate (medians of the alternated runs)\n",
          dev, isa_name(ran[k]), median_upper(r), *std::min_element(r.begin(), r.end()),
          *std::max_element(r.begin(), r.end()), median_upper(r) / fit_med, isa_name(ran.front()));
    }
    if (b.n_ok > 0)
      fmt::print(
          "velox bench [{}]: FLOP model (means over the spectra): {:.0f} pixels; one "
          "evaluation {:.2f} MFLOP chi2-only, {:.2f} with the Jacobian, {:.2f} "
          "velocity-only; CCF, chi2 grid and the other fixed stages {:.1f} MFLOP\n",
          dev, b.n_pix / b.n_ok, b.flops_eval[0] / b.n_ok / 1e6, b.flops_eval[1] / b.n_ok / 1e6,
          b.flops_eval[2] / b.n_ok / 1e6, b.flops_fixed / b.n_ok / 1e6);
    if (b.n_ok > 0) {
      const DeviceModel d = h200_model();
      auto us = [&](const std::map<std::string, double>& m) {
        std::string t;
        double sum = 0;
        for (const auto& [k, v] : m) {
          t += fmt::format("{}{} {:.3f}", t.empty() ? "" : ", ", k, v / b.n_ok * 1e6);
          sum += v;
        }
        return fmt::format("{:.2f} us ({})", sum / b.n_ok * 1e6, t);
      };
      fmt::print(
          "velox bench [{}]: engine stage model ({}, {:.0f}% of the SIMT and FP64-tensor "
          "peaks, {:.0f}% of HBM; docs/gpu.md \"Stage model\"): a Jacobian evaluation {}; "
          "fixed passes {}; per fit {:.1f} us = {:.0f} spectra/s predicted\n",
          dev, d.name, 100 * d.simt_share, 100 * d.hbm_share, us(b.engine_jac_s),
          us(b.engine_fixed_s), b.engine_fit_s / b.n_ok * 1e6, b.n_ok / b.engine_fit_s);
    }
    for (CpuIsa isa : ran) {
      if (ran.size() > 1) fmt::print("velox bench [{}]: isa {}: ", dev, isa_name(isa));
      print_work(dev, b, isa, median_upper(b.backend_rates[isa]), n_threads, ran.size() == 1);
    }
    print_host_feed(reads, b, feed_rate);
  }
  if (backend_rate.count("cpu") && backend_rate.count("gpu"))
    fmt::print("velox bench: GPU/CPU backend ratio x{:.2f}\n",
               backend_rate["gpu"] / backend_rate["cpu"]);
  return kExitOk;
}

}  // namespace velox
