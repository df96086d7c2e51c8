// FitEngine::fit_stream: input files through the engine's one stream (app/stream_pipeline.hpp),
// reported in the order they were pulled. Reader threads read and select; then
//  - CPU backend: the engine's persistent pool fits one spectrum at a time from the shared queue
//    (CpuBackend::fit_one);
//  - GPU backend: the stream's batch mode, batches of at least gpu_min_batch spectra through
//    submit/finish, batch k on the device while batch k+1 is prepared (the device wants
//    thousands of spectra at once). `--cpu-batch N` runs the CPU this way too (a test of the
//    GPU's path without a device).
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <optional>
#include <set>

#include "app/epochs.hpp"
#include "app/fit_run.hpp"
#include "app/job_outputs.hpp"
#include "app/stream_pipeline.hpp"
#include "common/error.hpp"
#include "io/readers.hpp"
#include "io/rvs_warn.hpp"

namespace velox {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

// One input file on its way through the engine.
struct FitEngine::InputFile : StreamItem {
  // A block of a large DESI coadd: fibres [first, first + count), part `part` of `n_parts`
  // (n_parts 1: the whole file).
  size_t first = 0, count = SIZE_MAX, part = 0, n_parts = 1;
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
  // --epochs, CPU stream: each task's prepared spectrum as prepare_spectrum left it (its row not
  // yet finished), for step 3 (app/epochs.hpp), so the epoch is not prepared twice.
  std::vector<PreparedSpectrum> kept;
  // CPU stream without --epochs: task t's spectrum, where an idle reader thread prepared it
  // (StreamStages::pre; the seconds that took are in task_seconds[t] already).
  std::vector<std::optional<PreparedSpectrum>> pre;
};

void FitEngine::read_input(InputFile& in) {
  in.res.index = in.index;
  in.res.path = in.path;
  const auto t0 = std::chrono::steady_clock::now();
  try {
    if (!epochs_) {
      in.file = read_spectra(in.path, fmt_, in.first, in.count);
    } else {
      // An input group (job_plan.hpp) is read member after member into one file of spectra. A
      // member that cannot be read, or has another format, becomes one BAD_INPUT epoch of the
      // star carrying its error, and the others are fitted; the group fails when none reads.
      const auto members = input_members(in.path);
      std::vector<std::pair<std::string, std::string>> bad;  // (member, why)
      bool any = false;
      for (const auto& m : members) {
        try {
          SpectrumFile more = read_exposures(m, fmt_);
          if (any && more.format != in.file.format)
            throw IoError(m + ": format " + format_name(more.format) + " differs from " +
                          format_name(in.file.format) + " in the same --group-by star");
          if (any && more.survey != in.file.survey)  // the survey picks the calibrations
            throw IoError(m + ": SURVEY '" + more.survey + "' differs from '" + in.file.survey +
                          "' in the same --group-by star");
          if (!any) in.file.format = more.format, in.file.survey = more.survey;
          any = true;
          for (auto& s : more.spectra) in.file.spectra.push_back(std::move(s));
        } catch (const std::exception& e) {
          if (members.size() == 1) throw;
          spdlog::error("{}", e.what());
          bad.emplace_back(m, e.what());
        }
      }
      if (!any) throw IoError(bad.front().second);
      // The input is fitted (ok) but not whole: its status is "partial" with the members'
      // errors, and the job's exit code says a file failed (app/job.cpp).
      for (const auto& b : bad) in.res.error += (in.res.error.empty() ? "" : "; ") + b.second;
      for (const auto& [m, why] : bad) {
        Spectrum s;
        s.source_file = std::filesystem::path(m).filename().string();
        s.problem = why;
        if (!in.file.spectra.empty() && in.file.spectra.front().meta.count(group_by_))
          s.meta[group_by_] = in.file.spectra.front().meta.at(group_by_);
        in.file.spectra.push_back(std::move(s));
      }
      in.file.path = in.path;
    }
    if (in.file.spectra.empty()) spdlog::warn("{}: no spectra in file", in.path);
    in.format = format_name(in.file.format);
    in.res.side_hdus = in.file.format == SpectrumFormat::DesiCoadd;  // FIBERMAP, SCORES
    in.res.n_targets = in.file.spectra.size();
    {
      std::lock_guard<std::mutex> lock(outputs_mu_);  // reader threads share the selection
      in.selected = outputs_->on_file(in.path, in.file);
    }
    const std::set<int64_t>& listed = outputs_->selection().targetids;
    for (const auto& s : in.file.spectra)
      if (listed.count(s.targetid)) in.res.targetids_listed.push_back(s.targetid);
    in.read_ok = true;
  } catch (const std::exception& e) {
    // A bad file: one clear line, a failure row naming it, and the job goes on.
    spdlog::error("{}", e.what());
    in.res.ok = false;
    in.res.error = e.what();
    in.res.rows = {bad_input_row(in.path)};
    in.res.side_hdus = false;
  }
  in.res.seconds = seconds_since(t0);
}

size_t FitEngine::read_block_fibres(const std::string& path) const {
  if (read_block_ == 0 || epochs_) return 0;  // a star's exposures stay in one block
  std::error_code ec;
  const uintmax_t bytes = std::filesystem::file_size(path, ec);
  // About 0.5 MB per DESI fibre (three arms of ~2800 pixels: flux, ivar, mask, 11-diagonal
  // resolution). Compressed files are decompressed whole by CFITSIO anyway.
  if (ec || bytes <= read_block_ * (uintmax_t{1} << 19) || !ends_with(path, ".fits")) return 0;
  try {
    const size_t n = count_desi_fibres(path, fmt_);
    return n > read_block_ ? n : 0;
  } catch (const std::exception&) {
    return 0;  // the reader reports it
  }
}

void FitEngine::report_input(InputFile& in, std::vector<CatalogRow>&& fitted,
                             const std::vector<FitDiagnostics>& diags,
                             const std::function<void(FileResult&&)>& done) {
  if (in.read_ok) {
    std::vector<SpectrumFile> one;
    one.push_back(std::move(in.file));
    outputs_->collect(one, {in.selected}, std::move(fitted), diags, in.res.rows);
    if (epochs_) {
      // The rows collect() kept, in spectrum order: selected ones (and the rest with
      // --include-unselected).
      std::vector<size_t> spectrum_of_row;
      const auto& sp = one.front().spectra;
      for (size_t i = 0; i < sp.size(); ++i)
        if (in.selected[i] || outputs_->selection().include_unselected)
          spectrum_of_row.push_back(i);
      // The CPU stream kept each task's prepared spectrum: index them by spectrum.
      std::vector<PreparedSpectrum*> prepared(sp.size(), nullptr);
      for (size_t t = 0; t < in.kept.size() && t < in.spectra.size(); ++t)
        if (in.kept[t].ready) prepared[in.spectra[t]] = &in.kept[t];
      in.res.rows = fit_epochs(one.front(), spectrum_of_row, std::move(in.res.rows), *in.ctx,
                               group_by_, in.kept.empty() ? nullptr : &prepared);
      in.kept.clear();
    }
  } else {
    outputs_->add_failure_row();
  }
  for (const auto& row : in.res.rows)
    in.res.n_fitted += (row.RVS_WARN & (warn::kBadInput | warn::kNotFitted)) == 0 &&
                       (row.EPOCH >= 0 || row.N_EPOCHS == 0);
  done(std::move(in.res));
}

namespace {

// Frees a spectrum's flux, ivar, mask and resolution matrix (its wavelengths, identity and meta
// stay): what is left of it once it is prepared.
void release_pixels(Spectrum& s) {
  for (auto& a : s.arms) {
    UninitVector<float>().swap(a.flux);
    UninitVector<float>().swap(a.ivar);
    UninitVector<int32_t>().swap(a.mask);
    UninitVector<float>().swap(a.resolution);
  }
}

}  // namespace

void FitEngine::fit_stream(const NextInput& next, const std::function<void(FileResult&&)>& done,
                           size_t chunk_min_spectra, const std::function<void(size_t)>& on_fitted) {
  const bool want_diag = outputs_->want_diagnostics();
  std::atomic<size_t> n_fitted{0};
  StreamStages s;
  // make() and next() run in turn on the calling thread: next() fills in the item make() just
  // made, one block of a large DESI coadd at a time (FitOptions::read_block_fibres).
  InputFile* made = nullptr;
  size_t cur_index = 0, cur_part = 0;
  // The current input's parts, fibres [bounds[p], bounds[p + 1]); read whole: {0, SIZE_MAX}
  // (InputFile's own first and count).
  std::vector<size_t> cur_bounds;
  std::string cur_path;
  // When the stream's first input is read in blocks, its blocks start small (kRampFibres,
  // doubling up to read_block_): nothing is fitting yet, so every worker waits for the first
  // block's read, about 20 ms for 32 DESI fibres on one thread. Each block is read while the one
  // before it is fitted, which takes longer than the read from the second block on. Not in batch
  // mode, whose batches wait for thousands of spectra anyway.
  constexpr size_t kRampFibres = 4;
  bool ramp = !(gpu_ || cpu_batch_ > 0);
  s.make = [&made] {
    auto in = std::make_unique<InputFile>();
    made = in.get();
    return in;
  };
  s.next = [&](size_t& index, std::string& path) {
    if (cur_part + 1 >= cur_bounds.size()) {
      if (!next(index, path)) return false;
      cur_index = index, cur_path = path, cur_part = 0;
      size_t block = ramp ? std::min(kRampFibres, read_block_) : read_block_;
      ramp = false;
      const size_t n_fibres = read_block_fibres(path);
      cur_bounds.assign(1, 0);
      while (n_fibres && cur_bounds.back() < n_fibres) {
        cur_bounds.push_back(std::min(n_fibres, cur_bounds.back() + block));
        block = std::min(2 * block, read_block_);
      }
      if (!n_fibres) cur_bounds.push_back(SIZE_MAX);  // one part: the whole input
      if (cur_bounds.size() > 2)
        spdlog::debug("{}: {} fibres, read and fitted in {} blocks of up to {}", path, n_fibres,
                      cur_bounds.size() - 1, read_block_);
    }
    index = cur_index, path = cur_path;
    made->part = cur_part++;
    made->n_parts = cur_bounds.size() - 1;
    made->first = cur_bounds[made->part];
    made->count = cur_bounds[made->part + 1] - cur_bounds[made->part];
    return true;
  };
  // The parts of one input are emitted in order; the last one reports the input. A failed input
  // gets one failure row (and one side row), whatever number of its parts failed to read: a part
  // after the first that fails is not reported once `joined` already failed.
  FileResult joined;
  s.read = [&](StreamItem& item) -> size_t {
    auto& in = static_cast<InputFile&>(item);
    read_input(in);
    if (!in.read_ok) return 0;
    in.ctx = std::make_unique<FitContext>(context(in.format, in.file.survey));
    for (size_t i = 0; i < in.selected.size(); ++i) {
      if (in.selected[i])
        in.spectra.push_back(i);
      else if (!epochs_ && i < in.file.spectra.size())
        release_pixels(in.file.spectra[i]);  // not fitted: only its meta and wavelengths are read
    }
    const size_t n = in.spectra.size();
    in.rows.resize(n);
    if (epochs_ && !gpu_ && cpu_batch_ == 0) in.kept.resize(n);
    if (s.pre) in.pre.assign(n, std::nullopt);
    in.task_seconds.assign(n, 0.0);
    if (want_diag) in.diags.resize(n);
    return n;
  };
  s.emit = [&](std::unique_ptr<StreamItem> item) {
    auto& in = static_cast<InputFile&>(*item);
    for (double x : in.task_seconds) in.res.seconds += x;
    if (in.n_parts == 1) return report_input(in, std::move(in.rows), in.diags, done);
    if (in.part == 0 || in.read_ok || joined.ok) {
      report_input(in, std::move(in.rows), in.diags, [&](FileResult&& r) {
        if (in.part == 0) {
          joined = std::move(r);
          return;
        }
        if (!r.ok && joined.ok) joined.ok = false, joined.error = r.error;
        joined.n_targets += r.n_targets;
        joined.n_fitted += r.n_fitted;
        joined.targetids_listed.insert(joined.targetids_listed.end(), r.targetids_listed.begin(),
                                       r.targetids_listed.end());
        joined.seconds += r.seconds;
        joined.side_hdus = joined.side_hdus || r.side_hdus;  // a part that read says the format
        joined.rows.insert(joined.rows.end(), std::make_move_iterator(r.rows.begin()),
                           std::make_move_iterator(r.rows.end()));
      });
    }
    if (in.part + 1 == in.n_parts) done(std::move(joined));
  };
  // Reading (CFITSIO is built reentrant) and decompressing: one reader per 4 threads, 1 to 4.
  StreamLimits limits;
  limits.readers = std::clamp(threads_ / 4, 1, 4);
  limits.read_ahead = read_block_;  // one block of a large DESI coadd
  if (gpu_ || cpu_batch_ > 0) {
    // Batches for the GPU (or, as a test of that path, the CPU): prepared on the pool, fitted by
    // the backend route() picks; each spectrum's time is its share of the batch's.
    limits.batch = gpu_ ? std::max(chunk_min_spectra, gpu_chunk_) : cpu_batch_;
    s.submit_batch = [&, want_diag](const std::vector<StreamTask>& tasks) -> std::function<void()> {
      std::vector<FitJob> jobs;
      for (const auto& [item, t] : tasks) {
        auto& in = static_cast<InputFile&>(*item);
        jobs.push_back({&in.file.spectra[in.spectra[t]], in.ctx.get()});
      }
      // Once a spectrum is prepared (its packed copy is what the backend and finish_row read),
      // its input pixel arrays are not needed again: a GPU rank holds them only for the spectra
      // still queued (docs/gpu.md "Host memory"). --epochs prepares its epochs again in step 3.
      std::function<void(size_t)> release;
      if (!epochs_)
        release = [&tasks](size_t k) {
          auto& in = static_cast<InputFile&>(*tasks[k].first);
          release_pixels(in.file.spectra[in.spectra[tasks[k].second]]);
        };
      auto b =
          std::make_shared<EngineBatch>(submit(std::move(jobs), want_diag, on_fitted, release));
      return [this, b, tasks, want_diag] {
        std::vector<FitDiagnostics> diags;
        finish(*b, &diags);
        const double share = b->seconds / static_cast<double>(tasks.size());
        for (size_t k = 0; k < tasks.size(); ++k) {
          auto& in = static_cast<InputFile&>(*tasks[k].first);
          const size_t t = tasks[k].second;
          in.rows[t] = std::move(b->prep[k].row);
          if (want_diag) in.diags[t] = std::move(diags[k]);
          in.task_seconds[t] = share;
        }
      };
    };
  } else {
    // Preparation on reader threads that have nothing to read (StreamStages::pre): hidden
    // behind the fit where a core is free (one worker: a DESI spectrum's preparation is a tenth
    // of its fit), otherwise the same work. The raw pixels go once the spectrum is prepared.
    // Not with --epochs, whose step 3 reads each epoch's pixels again.
    if (!epochs_)
      s.pre = [&](StreamItem& item, size_t t) {
        auto& in = static_cast<InputFile&>(item);
        const auto t0 = std::chrono::steady_clock::now();
        Spectrum& spec = in.file.spectra[in.spectra[t]];
        in.pre[t] = prepare_spectrum(spec, *in.ctx);
        release_pixels(spec);
        in.task_seconds[t] = seconds_since(t0);  // run adds its own
      };
    s.run = [&](StreamItem& item, size_t t, int worker) {
      auto& in = static_cast<InputFile&>(item);
      const auto t0 = std::chrono::steady_clock::now();
      PreparedSpectrum p = !in.pre.empty() && in.pre[t]
                               ? std::move(*in.pre[t])
                               : prepare_spectrum(in.file.spectra[in.spectra[t]], *in.ctx);
      CatalogRow prepared_row;
      if (p.ready) {
        if (epochs_) prepared_row = p.row;
        const BatchOutput out = cpu_->fit_one(p.packed, worker, want_diag);
        if (want_diag)  // the spectrum keeps its wavelengths (release_pixels)
          diagnostics_of(p, in.file.spectra[in.spectra[t]], nullptr, out.ivar[0], out.models[0],
                         &in.diags[t]);
        finish_row(p, out.results[0], out.ivar[0], *in.ctx);
      }
      if (want_diag) in.diags[t].messages = p.notes;
      in.rows[t] = std::move(p.row);
      if (epochs_ && p.ready) {
        p.row = std::move(prepared_row);
        in.kept[t] = std::move(p);
      }
      in.task_seconds[t] += seconds_since(t0);
      if (on_fitted) on_fitted(++n_fitted);
    };
  }
  // The stream's wall time (submit/finish in batch mode count theirs; this replaces them).
  const double before = seconds_fit_;
  const auto t0 = std::chrono::steady_clock::now();
  run_stream(*pool_, s, limits);
  seconds_fit_ = before + seconds_since(t0);
}

}  // namespace velox
