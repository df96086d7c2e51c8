// velox._core: the C++ half of the Python module (python/velox is the public API). Every C++
// exception becomes a Python exception, so no input reaches std::terminate:
//   ConfigError, std::invalid_argument -> ValueError;  IoError -> OSError;
//   std::bad_alloc -> MemoryError;  any other std::exception -> RuntimeError (pybind11).
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "bindings.hpp"
#include "common/error.hpp"
#include "common/version.hpp"

namespace velox::py {

pyb::array_t<unsigned char> rows_to_records(const std::vector<CatalogRow>& rows) {
  return to_numpy(pack_catalog_rows(rows));
}

}  // namespace velox::py

PYBIND11_MODULE(_core, m) {
  namespace pyb = pybind11;
  using namespace velox;
  m.doc() = "velox C++ core (private: use the velox package)";
  pyb::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const ConfigError& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const IoError& e) {
      PyErr_SetString(PyExc_OSError, e.what());
    }
  });
  // Logs go to stderr (as the CLI's); warnings and errors only unless set_log_level is called.
  if (!spdlog::get("velox")) spdlog::set_default_logger(spdlog::stderr_color_mt("velox"));
  spdlog::set_level(spdlog::level::warn);
  m.def(
      "set_log_level",
      [](const std::string& level) {
        const auto l = spdlog::level::from_str(level);
        if (l == spdlog::level::off && level != "off")
          throw std::invalid_argument("log level '" + level +
                                      "': expected trace, debug, info, warn, error or off");
        spdlog::set_level(l);
      },
      pyb::arg("level"));
  m.attr("__version__") = version();
  m.attr("git_commit") = git_commit();
  py::register_library(m);
  py::register_fit(m);
  py::register_io(m);
}
