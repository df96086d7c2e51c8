// Shared pieces of the Python extension module velox._core (pybind11). The public Python API is
// python/velox/*.py; _core is its private C++ half: no argument checking beyond what keeps the
// process safe (the Python layer raises the user-facing ValueErrors, docs/python.md).
#pragma once
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "emulator/library.hpp"
#include "io/catalog.hpp"
#include "model/arm_model.hpp"

namespace velox::py {

namespace pyb = pybind11;

// A loaded template library as Python holds it: shared with every engine fitting with it, plus
// the convolved bases velox.model() uses.
struct PyLibrary {
  std::shared_ptr<const TemplateLibrary> lib;
  std::string path;  // file it was loaded from / saved to ("" after build without output)
  std::unique_ptr<ArmModelCache> models;
  explicit PyLibrary(std::shared_ptr<const TemplateLibrary> l, std::string p)
      : lib(std::move(l)), path(std::move(p)), models(std::make_unique<ArmModelCache>(*lib)) {}
};

// A NumPy array that owns `v` (moved, not copied), shape `shape` (row-major).
template <class T, class A>
pyb::array_t<T> to_numpy(std::vector<T, A>&& v, std::vector<pyb::ssize_t> shape) {
  auto* heap = new std::vector<T, A>(std::move(v));
  pyb::capsule owner(heap, [](void* p) { delete static_cast<std::vector<T, A>*>(p); });
  return pyb::array_t<T>(shape, heap->data(), owner);
}
template <class T, class A>
pyb::array_t<T> to_numpy(std::vector<T, A>&& v) {
  const auto n = static_cast<pyb::ssize_t>(v.size());
  return to_numpy(std::move(v), {n});
}

// The catalog rows as packed records (catalog_record_offsets layout): a uint8 array [n * size]
// that the Python layer views with the catalog dtype.
pyb::array_t<unsigned char> rows_to_records(const std::vector<CatalogRow>& rows);

// The buffer of `obj` if it is a C-contiguous 1-D (ndim = 1) or 2-D (ndim = 2) array of T;
// throws std::invalid_argument naming `what` otherwise (the Python layer converts first).
template <class T>
const T* buffer_of(const pyb::handle& obj, int ndim, size_t n_last, const char* what) {
  if (!pyb::array_t<T, pyb::array::c_style>::check_(obj))
    throw std::invalid_argument(std::string("_core: ") + what + ": expected a C-contiguous " +
                                pyb::format_descriptor<T>::format() + " array");
  auto a = pyb::reinterpret_borrow<pyb::array>(obj);
  if (a.ndim() != ndim || static_cast<size_t>(a.shape(ndim - 1)) != n_last)
    throw std::invalid_argument(std::string("_core: ") + what + ": wrong shape");
  return static_cast<const T*>(a.data());
}

void register_library(pyb::module_& m);
void register_fit(pyb::module_& m);
void register_io(pyb::module_& m);

}  // namespace velox::py
