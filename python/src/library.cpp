// velox._core.Library: load / build a template library, its description, and the emulated
// template at given wavelengths (velox.model); air <-> vacuum conversion of arrays.
#include <pybind11/stl.h>

#include <cmath>

#include "bindings.hpp"
#include "emulator/build.hpp"
#include "io/readers.hpp"
#include "model/template_model.hpp"

namespace velox::py {

namespace {

std::shared_ptr<PyLibrary> load_library(const std::string& path) {
  std::shared_ptr<const TemplateLibrary> lib;
  {
    pyb::gil_scoped_release release;
    lib = std::make_shared<const TemplateLibrary>(TemplateLibrary::load(path));
  }
  return std::make_shared<PyLibrary>(std::move(lib), path);
}

std::shared_ptr<PyLibrary> build(const std::string& template_dir, const std::string& config,
                                 const std::string& output) {
  std::shared_ptr<TemplateLibrary> lib;
  {
    pyb::gil_scoped_release release;
    const BuildConfig bc = config.empty() ? BuildConfig{} : load_build_config(config);
    const TemplateSet set = read_templates(template_dir);  // logs what it skipped
    lib = std::make_shared<TemplateLibrary>(build_library(set, bc));
    lib->attrs["source"] = template_dir;
    lib->attrs["build.command_line"] = "velox.Library.build (Python)";
    if (!output.empty()) lib->save(output);
    lib->checksum = lib->compute_checksum();
  }
  return std::make_shared<PyLibrary>(std::move(lib), output);
}

// Physical label ranges: TEFF in K (stored as LOG10_TEFF), the others as stored.
pyb::dict label_ranges(const TemplateLibrary& lib) {
  pyb::dict d;
  for (int l = 0; l < lib.n_label; ++l) {
    const std::string& name = lib.label_names[l];
    if (name == "LOG10_TEFF")
      d["TEFF"] =
          pyb::make_tuple(std::pow(10.0, lib.label_min[l]), std::pow(10.0, lib.label_max[l]));
    else
      d[name.c_str()] = pyb::make_tuple(lib.label_min[l], lib.label_max[l]);
  }
  return d;
}

pyb::array_t<double> model(const PyLibrary& pl, const std::vector<double>& labels, double vrad_kms,
                           const pyb::array& wave, double resolution_R) {
  const TemplateLibrary& lib = *pl.lib;
  if (static_cast<int>(labels.size()) != lib.n_label)
    throw std::invalid_argument("_core: model: expected " + std::to_string(lib.n_label) +
                                " labels");
  const size_t n = static_cast<size_t>(wave.size());
  const double* w = buffer_of<double>(wave, 1, n, "wave");
  std::vector<double> out;
  {
    pyb::gil_scoped_release release;
    // No finite R: the templates' own resolution (as for resolution-matrix arms).
    const double R = std::isfinite(resolution_R) && resolution_R > 0 ? resolution_R : 1e9;
    const auto arm_model = pl.models->get(R);
    out = template_model(lib, *arm_model, labels.data(), vrad_kms, w, n);
  }
  return to_numpy(std::move(out));
}

pyb::array_t<double> convert(
    const pyb::array_t<double, pyb::array::c_style | pyb::array::forcecast>& in,
    double (*f)(double)) {
  std::vector<double> out(static_cast<size_t>(in.size()));
  const double* p = in.data();
  for (size_t i = 0; i < out.size(); ++i) out[i] = f(p[i]);
  std::vector<pyb::ssize_t> shape(in.shape(), in.shape() + in.ndim());
  return to_numpy(std::move(out), shape);
}

}  // namespace

void register_library(pyb::module_& m) {
  pyb::class_<PyLibrary, std::shared_ptr<PyLibrary>>(m, "Library")
      .def_static("load", &load_library, pyb::arg("path"))
      .def_static("build", &build, pyb::arg("template_dir"), pyb::arg("config") = "",
                  pyb::arg("output") = "")
      .def_readonly("path", &PyLibrary::path)
      .def_property_readonly("checksum", [](const PyLibrary& p) { return p.lib->checksum; })
      .def_property_readonly("label_names", [](const PyLibrary& p) { return p.lib->label_names; })
      .def_property_readonly("label_ranges",
                             [](const PyLibrary& p) { return label_ranges(*p.lib); })
      .def_property_readonly("n_label", [](const PyLibrary& p) { return p.lib->n_label; })
      .def_property_readonly("n_train", [](const PyLibrary& p) { return p.lib->n_train; })
      .def_property_readonly("n_components", [](const PyLibrary& p) { return p.lib->n_comp - 1; })
      .def_property_readonly("n_tpix", [](const PyLibrary& p) { return p.lib->n_tpix; })
      .def_property_readonly("dlnlam", [](const PyLibrary& p) { return p.lib->dlnlam; })
      .def_property_readonly("wave_range_vac_A",
                             [](const PyLibrary& p) {
                               return pyb::make_tuple(p.lib->wave_vac_A(0),
                                                      p.lib->wave_vac_A(p.lib->n_tpix - 1));
                             })
      .def_property_readonly("fwhm_A", [](const PyLibrary& p) { return p.lib->fwhm_A; })
      .def_property_readonly("resolution_R", [](const PyLibrary& p) { return p.lib->resolution_R; })
      .def_property_readonly("train_names", [](const PyLibrary& p) { return p.lib->train_names; })
      .def_property_readonly("attrs", [](const PyLibrary& p) { return p.lib->attrs; })
      .def("model", &model, pyb::arg("labels"), pyb::arg("vrad_kms"), pyb::arg("wave"),
           pyb::arg("resolution_R"));
  m.def("air_to_vacuum",
        [](const pyb::array_t<double, pyb::array::c_style | pyb::array::forcecast>& a) {
          return convert(a, &air_to_vacuum_A);
        });
  m.def("vacuum_to_air",
        [](const pyb::array_t<double, pyb::array::c_style | pyb::array::forcecast>& a) {
          return convert(a, &vacuum_to_air_A);
        });
}

}  // namespace velox::py
