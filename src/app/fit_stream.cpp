// FitEngine::fit_stream: input files through the engine, reported in the order they were pulled.
//  - CPU backend: the barrier-free stream (app/stream_pipeline.hpp): reader threads read and
//    select, the engine's persistent pool fits one spectrum at a time from a shared queue
//    (CpuBackend::fit_one), rows are reported in input order.
//  - GPU backend: chunks of at least gpu_min_batch spectra, chunk k fitted on the device while
//    chunk k+1 is read and prepared (the device wants large batches, not single spectra).
// Both read, select and report through the same two helpers (read_input, report_input).
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <deque>

#include "app/fit_run.hpp"
#include "app/stream_pipeline.hpp"
#include "io/readers.hpp"

namespace velox {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

// One input file on its way through the engine.
struct FitEngine::InputFile : StreamItem {
  FileResult res;
  SpectrumFile file;
  std::string format;
  std::vector<char> selected;  // per spectrum: fitted (selection, fit/select.hpp)?
  bool read_ok = false;
  // The CPU stream's per-file state: task t fits file.spectra[spectra[t]] into rows[t].
  std::unique_ptr<FitContext> ctx;
  std::vector<size_t> spectra;
  std::vector<CatalogRow> rows;
  std::vector<FitDiagnostics> diags;
  std::vector<double> task_seconds;
};

void FitEngine::read_input(InputFile& in) {
  in.res.index = in.index;
  in.res.path = in.path;
  const auto t0 = std::chrono::steady_clock::now();
  try {
    in.file = read_spectra(in.path, fmt_);
    if (in.file.spectra.empty()) spdlog::warn("{}: no spectra in file", in.path);
    in.format = format_name(in.file.format);
    in.res.n_targets = in.file.spectra.size();
    {
      std::lock_guard<std::mutex> lock(outputs_mu_);  // reader threads share the selection
      in.selected = outputs_->on_file(in.path, in.file);
    }
    in.read_ok = true;
  } catch (const std::exception& e) {
    // A bad file: one clear line, a failure row naming it, and the job goes on.
    spdlog::error("{}", e.what());
    in.res.ok = false;
    in.res.error = e.what();
    in.res.rows = {bad_input_row(in.path)};
  }
  in.res.seconds = seconds_since(t0);
}

void FitEngine::report_input(InputFile& in, std::vector<CatalogRow>&& fitted,
                             const std::vector<FitDiagnostics>& diags,
                             const std::function<void(FileResult&&)>& done) {
  if (in.read_ok) {
    std::vector<SpectrumFile> one;
    one.push_back(std::move(in.file));
    outputs_->collect(one, {in.selected}, std::move(fitted), diags, in.res.rows);
  } else {
    outputs_->add_failure_row();
  }
  done(std::move(in.res));
}

void FitEngine::fit_stream(const NextInput& next, const std::function<void(FileResult&&)>& done,
                           size_t chunk_min_spectra, const std::function<void(size_t)>& on_fitted) {
  if (gpu_)
    fit_stream_chunked(next, done, chunk_min_spectra, on_fitted);
  else
    fit_stream_cpu(next, done, on_fitted);
}

void FitEngine::fit_stream_cpu(const NextInput& next,
                               const std::function<void(FileResult&&)>& done,
                               const std::function<void(size_t)>& on_fitted) {
  const bool want_diag = outputs_->want_diagnostics();
  std::atomic<size_t> n_fitted{0};
  StreamStages s;
  s.make = [] { return std::make_unique<InputFile>(); };
  s.next = next;
  s.read = [&](StreamItem& item) -> size_t {
    auto& in = static_cast<InputFile&>(item);
    read_input(in);
    if (!in.read_ok) return 0;
    in.ctx = std::make_unique<FitContext>(context(in.format));
    for (size_t i = 0; i < in.selected.size(); ++i)
      if (in.selected[i]) in.spectra.push_back(i);
    const size_t n = in.spectra.size();
    in.rows.resize(n);
    in.task_seconds.assign(n, 0.0);
    if (want_diag) in.diags.resize(n);
    return n;
  };
  s.run = [&](StreamItem& item, size_t t, int worker) {
    auto& in = static_cast<InputFile&>(item);
    const auto t0 = std::chrono::steady_clock::now();
    PreparedSpectrum p = prepare_spectrum(in.file.spectra[in.spectra[t]], *in.ctx);
    if (p.ready) {
      const BatchOutput out = cpu_->fit_one(p, worker, want_diag);
      if (want_diag) diagnostics_of(p, out.ivar[0], out.models[0], &in.diags[t]);
      finish_row(p, out.results[0], out.ivar[0], *in.ctx);
    }
    if (want_diag) in.diags[t].messages = p.notes;
    in.rows[t] = std::move(p.row);
    in.task_seconds[t] = seconds_since(t0);
    if (on_fitted) on_fitted(++n_fitted);
  };
  s.emit = [&](std::unique_ptr<StreamItem> item) {
    auto& in = static_cast<InputFile&>(*item);
    for (double x : in.task_seconds) in.res.seconds += x;
    report_input(in, std::move(in.rows), in.diags, done);
  };
  // Reading (CFITSIO is built reentrant) and decompressing: one reader per 4 workers, 1 to 4.
  StreamLimits limits;
  limits.readers = std::clamp(threads_ / 4, 1, 4);
  const auto t0 = std::chrono::steady_clock::now();
  run_stream(*pool_, s, limits);
  seconds_fit_ += seconds_since(t0);
}

void FitEngine::fit_stream_chunked(const NextInput& next,
                                   const std::function<void(FileResult&&)>& done,
                                   size_t chunk_min_spectra,
                                   const std::function<void(size_t)>& on_fitted) {
  using Pending = InputFile;
  // A chunk between submit and finish: its files, their contexts and the engine's batch.
  struct Chunk {
    std::vector<Pending> files;
    std::vector<std::unique_ptr<FitContext>> ctxs;
    EngineBatch batch;
  };
  std::vector<Pending> chunk;
  std::deque<Chunk> in_flight;  // submitted, oldest first
  size_t chunk_spectra = 0;
  const size_t chunk_min = std::max(chunk_min_spectra, gpu_ ? gpu_chunk_ : size_t{0});

  // Finish the oldest chunk's rows and report its files.
  auto complete = [&] {
    Chunk c = std::move(in_flight.front());
    in_flight.pop_front();
    std::vector<FitDiagnostics> diags;
    finish(c.batch, &diags);
    const EngineBatch& b = c.batch;
    size_t k = 0;
    for (auto& p : c.files) {
      size_t n = 0;
      for (char ch : p.selected) n += ch != 0;
      std::vector<CatalogRow> fitted;
      for (size_t i = k; i < k + n; ++i) fitted.push_back(std::move(c.batch.prep[i].row));
      std::vector<FitDiagnostics> dg;
      if (!diags.empty()) dg.assign(diags.begin() + k, diags.begin() + k + n);
      k += n;
      p.res.seconds += b.jobs.empty() ? 0.0 : b.seconds * n / b.jobs.size();
      report_input(p, std::move(fitted), dg, done);
    }
  };
  // Prepare the pending files' spectra and submit them; keep at most one chunk in flight on an
  // asynchronous backend while the next one is read.
  auto flush = [&] {
    Chunk c;
    c.files = std::move(chunk);
    chunk.clear();
    chunk_spectra = 0;
    std::vector<FitJob> jobs;
    for (auto& p : c.files) {
      c.ctxs.push_back(std::make_unique<FitContext>(context(p.format)));
      for (size_t i = 0; i < p.file.spectra.size(); ++i)
        if (p.selected[i]) jobs.push_back({&p.file.spectra[i], c.ctxs.back().get()});
    }
    c.batch = submit(std::move(jobs), outputs_->want_diagnostics(), on_fitted);
    const bool async = c.batch.backend && c.batch.backend != cpu_.get();
    in_flight.push_back(std::move(c));
    while (in_flight.size() > (async ? 1u : 0u)) complete();
  };
  auto drain = [&] {
    if (!chunk.empty()) flush();
    while (!in_flight.empty()) complete();
  };
  Pending p;
  while (next(p.index, p.path)) {
    read_input(p);
    if (!p.read_ok) {
      // Files read before it are reported first, so `done` sees inputs in the order pulled.
      drain();
      report_input(p, {}, {}, done);
    } else {
      for (char c : p.selected) chunk_spectra += c != 0;
      chunk.push_back(std::move(p));
      if (chunk_spectra >= chunk_min) flush();
    }
    p = Pending();
  }
  drain();
}

}  // namespace velox
