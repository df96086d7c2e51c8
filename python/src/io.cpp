// velox._core readers: spectra files as arrays (velox.read_spectra), catalogs as packed records
// (velox.read_catalog), and the catalog's column table (the NumPy dtype of every result).
#include <pybind11/stl.h>

#include "bindings.hpp"
#include "io/readers.hpp"

namespace velox::py {

namespace {

const char* kind_of(const CatalogField& f) {
  constexpr const char* kinds[] = {"int32", "int64", "float64", "bool", "string"};
  return kinds[f.index()];
}

// [(name, kind, offset, bytes, unit, description)] in column order, and the record size.
pyb::tuple catalog_layout() {
  const auto& cols = catalog_columns();
  const auto off = catalog_record_offsets();
  pyb::list l;
  for (size_t c = 0; c < cols.size(); ++c)
    l.append(pyb::make_tuple(cols[c].name, kind_of(cols[c].field), off[c], off[c + 1] - off[c],
                             cols[c].unit, cols[c].desc));
  return pyb::make_tuple(l, off.back());
}

pyb::dict arm_dict(ArmData&& a) {
  pyb::dict d;
  const auto n = static_cast<pyb::ssize_t>(a.size());
  const bool rm = a.ndiag > 0 && a.resolution.size() == static_cast<size_t>(a.ndiag) * a.size();
  d["name"] = a.name;
  d["resolution_R"] = a.resolution_R;
  d["wave"] = to_numpy(std::vector<double>(a.wave_vac_A.vec()));  // maybe shared by other arms
  d["flux"] = to_numpy(std::move(a.flux));
  d["ivar"] = to_numpy(std::move(a.ivar));
  d["mask"] = to_numpy(std::move(a.mask));
  d["resolution"] =
      rm ? pyb::object(to_numpy(std::move(a.resolution), {a.ndiag, n})) : pyb::object(pyb::none());
  return d;
}

// (format name, [spectrum dict]) with spectrum dict keys targetid, source_file, row_in_file,
// meta, problem, arms ([arm dict]).
pyb::tuple read_spectra_py(const std::string& path, const std::string& format) {
  SpectrumFile f;
  {
    pyb::gil_scoped_release release;
    f = read_spectra(path, parse_format(format));
  }
  pyb::list spectra;
  for (auto& s : f.spectra) {
    pyb::dict d;
    d["targetid"] = s.targetid;
    d["source_file"] = s.source_file;
    d["row_in_file"] = s.row_in_file;
    d["meta"] = s.meta;
    d["problem"] = s.problem;
    d["survey"] = f.survey;
    pyb::list arms;
    for (auto& a : s.arms) arms.append(arm_dict(std::move(a)));
    d["arms"] = arms;
    spectra.append(d);
  }
  return pyb::make_tuple(format_name(f.format), spectra);
}

// (records, provenance dict).
pyb::tuple read_catalog_py(const std::string& path) {
  std::vector<CatalogRow> rows;
  Provenance prov;
  {
    pyb::gil_scoped_release release;
    rows = read_catalog(path, &prov);
  }
  return pyb::make_tuple(rows_to_records(rows), prov);
}

}  // namespace

void register_io(pyb::module_& m) {
  m.def("catalog_layout", &catalog_layout);
  m.def("read_spectra", &read_spectra_py, pyb::arg("path"), pyb::arg("format"));
  m.def("read_catalog", &read_catalog_py, pyb::arg("path"));
}

}  // namespace velox::py
