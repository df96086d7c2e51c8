// velox._core.Engine and the fits behind velox.fit / velox.fit_files: the CLI's FitEngine
// (app/fit_run.hpp) with the library shared from Python. Arrays are read in place: every arm is
// an ArmView over the NumPy buffers (the Python layer hands C-contiguous arrays of the core's
// dtypes, converting only where the caller's layout differs). The GIL is released while fitting.
#include <pybind11/stl.h>

#include <algorithm>
#include <cmath>
#include <deque>
#include <mutex>

#include "app/fit_run.hpp"
#include "backend/backend.hpp"
#include "bindings.hpp"
#include "fit/resolution.hpp"
#include "io/readers.hpp"

namespace velox::py {

namespace {

// One FitEngine per (library, config, device, threads): reused call after call (thread pool,
// convolved bases, GPU engine), one fit at a time.
struct Engine {
  std::shared_ptr<PyLibrary> library;
  FitOptions opt;
  std::unique_ptr<FitEngine> engine;
  std::mutex mu;
};

std::shared_ptr<Engine> make_engine(std::shared_ptr<PyLibrary> lib, const std::string& config,
                                    const std::string& device, int threads, int resolution_matrix) {
  auto e = std::make_shared<Engine>();
  e->library = std::move(lib);
  e->opt.config = config;
  e->opt.device = device;
  e->opt.threads = threads;
  e->opt.resolution_matrix = resolution_matrix;
  e->opt.quiet = true;
  pyb::gil_scoped_release release;
  e->engine = std::make_unique<FitEngine>(e->opt, threads, e->library->lib);
  return e;
}

// The arrays of one spectrum, as views, and its identity.
struct ArraySpectrum {
  Spectrum header;  // identity, problem, OBJTYPE; no arms (the pixels are the views)
  std::vector<ArmView> arms;
};

// spectra: list of (arms, targetid, source_file, row_in_file, problem, objtype); arms: list of
// (name, wave f8[n], flux f4[n], ivar f4[n], mask i4[n] | None, R, resolution f4[ndiag][n] | None).
// The names are kept in `names` (the views point into them).
std::vector<ArraySpectrum> views_of(const pyb::list& spectra, std::deque<std::string>& names) {
  std::vector<ArraySpectrum> out;
  out.reserve(spectra.size());
  for (const auto& item : spectra) {
    const auto t = item.cast<pyb::tuple>();
    if (t.size() != 6) throw std::invalid_argument("_core: a spectrum is a 6-tuple");
    ArraySpectrum s;
    s.header.targetid = t[1].cast<int64_t>();
    s.header.source_file = t[2].cast<std::string>();
    s.header.row_in_file = t[3].cast<int64_t>();
    s.header.problem = t[4].cast<std::string>();
    const auto objtype = t[5].cast<std::string>();
    if (!objtype.empty()) s.header.meta["OBJTYPE"] = objtype;
    for (const auto& a : t[0].cast<pyb::list>()) {
      const auto arm = a.cast<pyb::tuple>();
      if (arm.size() != 7) throw std::invalid_argument("_core: an arm is a 7-tuple");
      if (s.arms.size() == static_cast<size_t>(kern::kMaxArms))
        throw std::invalid_argument("_core: more than " + std::to_string(kern::kMaxArms) + " arms");
      ArmView v;
      names.push_back(arm[0].cast<std::string>());
      v.name = names.back();
      const auto wave = pyb::reinterpret_borrow<pyb::array>(arm[1]);
      v.n_pix = static_cast<size_t>(wave.size());
      v.wave_vac_A = buffer_of<double>(arm[1], 1, v.n_pix, "wave");
      v.flux = buffer_of<float>(arm[2], 1, v.n_pix, "flux");
      v.ivar = buffer_of<float>(arm[3], 1, v.n_pix, "ivar");
      if (!arm[4].is_none()) v.mask = buffer_of<int32_t>(arm[4], 1, v.n_pix, "mask");
      v.resolution_R = arm[5].cast<double>();
      if (!arm[6].is_none()) {
        const auto rm = pyb::reinterpret_borrow<pyb::array>(arm[6]);
        v.resolution = buffer_of<float>(arm[6], 2, v.n_pix, "resolution");
        v.ndiag = static_cast<int>(rm.shape(0));
        if (v.ndiag < 1 || v.ndiag > kMaxResolutionDiagonals)
          throw std::invalid_argument("_core: resolution matrix diagonals out of range");
      }
      s.arms.push_back(v);
    }
    out.push_back(std::move(s));
  }
  return out;
}

// A fit's model (at the packed pixels of `pk`, empty for a failed fit) on the input arms' grids:
// NaN at pixels not fitted.
std::vector<std::vector<double>> models_on_arms(const Packed& pk, const std::vector<double>& m,
                                                const std::vector<ArmView>& arms) {
  std::vector<std::vector<double>> out;
  for (const auto& a : arms) out.emplace_back(a.n_pix, NAN);
  if (m.empty()) return out;
  for (int a = 0; a < pk.n_arms; ++a)
    for (int p = pk.arm_start[a]; p < pk.arm_start[a + 1]; ++p)
      out[pk.input_arm[a]][pk.input_pixel[p]] = m[p];
  return out;
}

// The best-fit model of job i on its input arms' grids (NaN at pixels not fitted).
std::vector<std::vector<double>> models_of(const EngineBatch& b, size_t i,
                                           const std::vector<ArmView>& arms) {
  const size_t k = b.fitted[i];
  if (k == EngineBatch::npos || b.out.models.empty())
    return models_on_arms(b.prep[i].packed, {}, arms);
  return models_on_arms(b.prep[i].packed, b.out.models[k], arms);
}

// Per spectrum, per arm: the models as NumPy arrays.
pyb::list models_to_numpy(std::vector<std::vector<std::vector<double>>>& models) {
  pyb::list l;
  for (auto& per_spec : models) {
    pyb::list arms;
    for (auto& arm : per_spec) arms.append(to_numpy(std::move(arm)));
    l.append(arms);
  }
  return l;
}

// The engine's context for "FORMAT" or "FORMAT:SURVEY" (fit_arrays); ConfigError (ValueError)
// for an unknown format.
FitContext context_of(Engine& e, const std::string& format) {
  const size_t colon = format.find(':');
  const std::string base = format.substr(0, colon);
  const std::string survey = colon == std::string::npos ? "" : format.substr(colon + 1);
  if (base != "arrays") parse_format(base);
  return e.engine->context(base, survey);
}

// Fit arrays in memory in the context of input format `format` (format_name(), whose defaults
// apply: default_R, error floors, arm split; or "arrays": none of them unless configured), or
// "format:SURVEY": that format with its survey's calibrations (FitConfig, format_entry).
// Chunks of `chunk` spectra go through submit/finish, one chunk in flight on an asynchronous
// (GPU) backend; Ctrl-C is honoured between chunks. Returns (records, models): models[spectrum]
// [arm] when want_models, else None.
pyb::tuple fit_arrays(Engine& e, const pyb::list& spectra, const std::string& format,
                      bool want_models, size_t chunk) {
  const FitContext ctx = context_of(e, format);
  std::deque<std::string> names;
  const std::vector<ArraySpectrum> specs = views_of(spectra, names);
  std::vector<CatalogRow> rows(specs.size());
  std::vector<std::vector<std::vector<double>>> models(want_models ? specs.size() : 0);
  chunk = std::max<size_t>(chunk, 1);
  {
    pyb::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(e.mu);
    FitEngine& fe = *e.engine;
    std::deque<std::pair<size_t, EngineBatch>> in_flight;  // first spectrum, batch
    auto complete = [&] {
      auto [start, b] = std::move(in_flight.front());
      in_flight.pop_front();
      fe.finish(b);
      for (size_t i = 0; i < b.jobs.size(); ++i) {
        rows[start + i] = std::move(b.prep[i].row);
        if (want_models) models[start + i] = models_of(b, i, specs[start + i].arms);
      }
    };
    bool interrupted = false;
    for (size_t start = 0; start < specs.size() && !interrupted; start += chunk) {
      std::vector<FitJob> jobs;
      for (size_t i = start; i < std::min(specs.size(), start + chunk); ++i)
        jobs.push_back({&specs[i].header, &ctx, &specs[i].arms});
      in_flight.emplace_back(start, fe.submit(std::move(jobs), want_models));
      const Backend* be = in_flight.back().second.backend;
      const bool async = be && be != &fe.cpu_backend();
      while (in_flight.size() > (async ? 1u : 0u)) complete();
      pyb::gil_scoped_acquire acquire;
      interrupted = PyErr_CheckSignals() != 0;
    }
    while (!in_flight.empty()) complete();
    if (interrupted) {
      pyb::gil_scoped_acquire acquire;
      throw pyb::error_already_set();
    }
  }
  pyb::object py_models = pyb::none();
  if (want_models) py_models = models_to_numpy(models);
  return pyb::make_tuple(rows_to_records(rows), py_models);
}

// velox.model_of_row: the fit's own model of each spectrum at given parameters (a catalog row's
// model without the fit). Each spectrum is prepared as the fit prepares it (masking, per-arm
// zero points, resolution matrices, the emulator's variance), then VRAD alone is re-solved with
// the labels and VSINI held at theta, as --epochs' pass 2 does (kern::fit_velocity_held: a few
// Newton steps from theta[0] with the continuum profiled, one clipped re-fit, the per-arm
// velocities), on the calling thread; no classification. thetas[i]: VRAD [km/s], the labels as
// the library stores them (log10 Teff, ...), VSINI [km/s]. Returns (records, models[spectrum]
// [arm]): the rows of these held fits (VRAD re-solved) and the models on the arms' grids (NaN at
// pixels not fitted; all NaN where the spectrum cannot be fitted: its row says why).
pyb::tuple model_held(Engine& e, const pyb::list& spectra, const std::string& format,
                      const std::vector<std::vector<double>>& thetas) {
  const FitContext ctx = context_of(e, format);
  std::deque<std::string> names;
  const std::vector<ArraySpectrum> specs = views_of(spectra, names);
  const size_t n_theta = static_cast<size_t>(kern::n_fit_params(ctx.lib.n_label, 1));
  if (thetas.size() != specs.size())
    throw std::invalid_argument("_core: model_held: one theta per spectrum");
  for (const auto& t : thetas)
    if (t.size() != n_theta)
      throw std::invalid_argument("_core: model_held: theta must have " +
                                  std::to_string(n_theta) + " values (VRAD, labels, VSINI)");
  std::vector<CatalogRow> rows(specs.size());
  std::vector<std::vector<std::vector<double>>> models(specs.size());
  {
    pyb::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(e.mu);
    const kern::PipelineConfig pc = pipeline_config(ctx.cfg, ctx.lib);
    for (size_t i = 0; i < specs.size(); ++i) {
      PreparedSpectrum p = prepare_spectrum(specs[i].header, specs[i].arms, ctx);
      if (!p.ready) {
        rows[i] = std::move(p.row);
        models[i] = models_on_arms(p.packed, {}, specs[i].arms);
        continue;
      }
      p.packed.held = true;
      std::fill(std::begin(p.packed.held_theta), std::end(p.packed.held_theta), 0.0);
      std::copy(thetas[i].begin(), thetas[i].end(), p.packed.held_theta);
      p.cls = ClassSpectrum{};
      const BatchOutput out = fit_batch_serial({&p.packed}, ctx.lib, pc, true);
      finish_row(p, out.results[0], out.ivar[0], ctx);
      models[i] = models_on_arms(p.packed, out.models[0], specs[i].arms);
      rows[i] = std::move(p.row);
    }
  }
  return pyb::make_tuple(rows_to_records(rows), models_to_numpy(models));
}

// velox.fit_files: the CLI's fit of files (reading, selection, prepare, backend, finish) without
// writing a catalog (run_fit). Returns (records, [reason of each failed file]).
pyb::tuple fit_files(std::shared_ptr<PyLibrary> lib, const std::vector<std::string>& paths,
                     FitOptions opt) {
  FitRunResult res;
  {
    pyb::gil_scoped_release release;
    opt.inputs = paths;
    opt.quiet = true;
    res = run_fit(opt, lib->lib);
  }
  return pyb::make_tuple(rows_to_records(res.rows), res.file_errors);
}

}  // namespace

void register_fit(pyb::module_& m) {
  pyb::class_<Engine, std::shared_ptr<Engine>>(m, "Engine")
      .def(pyb::init(&make_engine), pyb::arg("library"), pyb::arg("config"), pyb::arg("device"),
           pyb::arg("threads"), pyb::arg("resolution_matrix"))
      .def_property_readonly("threads", [](const Engine& e) { return e.engine->threads(); })
      .def_property_readonly("uses_gpu", [](const Engine& e) { return e.engine->uses_gpu(); });
  m.def("fit_arrays", &fit_arrays, pyb::arg("engine"), pyb::arg("spectra"), pyb::arg("format"),
        pyb::arg("want_models"), pyb::arg("chunk"));
  m.def("model_held", &model_held, pyb::arg("engine"), pyb::arg("spectra"), pyb::arg("format"),
        pyb::arg("thetas"));
  pyb::class_<FitOptions>(m, "FitOptions")
      .def(pyb::init<>())
      .def_readwrite("config", &FitOptions::config)
      .def_readwrite("format", &FitOptions::format)
      .def_readwrite("threads", &FitOptions::threads)
      .def_readwrite("device", &FitOptions::device)
      .def_readwrite("resolution_matrix", &FitOptions::resolution_matrix)
      .def_readwrite("objtypes", &FitOptions::objtypes)
      .def_readwrite("targetids", &FitOptions::targetids)
      .def_readwrite("targetid_file", &FitOptions::targetid_file)
      .def_readwrite("min_sn", &FitOptions::min_sn)
      .def_readwrite("include_unselected", &FitOptions::include_unselected)
      .def_readwrite("epochs", &FitOptions::epochs)
      .def_readwrite("group_by", &FitOptions::group_by);
  m.def("fit_files", &fit_files, pyb::arg("library"), pyb::arg("paths"), pyb::arg("options"));
}

}  // namespace velox::py
