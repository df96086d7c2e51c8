// The fitted-parameter table: the one place that says what theta holds. Everything that needs
// the parameters iterates over it: the LM box (pipeline_config), the conversion of theta and its
// covariance to catalog values (finish_row), the error floors, the label-edge flag, and the
// rvspecfit FITS layout. The kernels see only theta's layout (kern::vsini_index, n_fit_params):
//   theta = [VRAD km/s, log10 TEFF/K, LOGG dex, FEH dex, (ALPHAFE dex), VSINI km/s]
// with the labels those of the template library (lib.label_names) in library order.
#pragma once
#include <string>
#include <vector>

#include "io/catalog.hpp"

namespace velox {

class TemplateLibrary;
struct FitConfig;

struct FitParam {
  std::string name;   // catalog column of the value: VRAD, TEFF, LOGG, FEH, ALPHAFE, VSINI
  int theta = 0;      // index in theta
  bool log10 = false;  // theta holds log10 of the value (TEFF); errors propagate as ln10 x value
  double lo = 0.0, hi = 0.0;  // LM box in theta units
  double CatalogRow::*value = nullptr;     // the column and its errors (total, statistical)
  double CatalogRow::*err = nullptr;
  double CatalogRow::*err_stat = nullptr;
  const char* unit = "";        // of the catalog value: km/s, K, dex
  const char* description = "";
  bool label = false;  // a template-library label (LABEL_EDGE applies)
};

// The parameters of a fit with `lib` and `cfg`, in theta order. VSINI is always last (it is in
// theta whether or not it is fitted: held at 0 when the spectrum does not resolve rotation).
// Throws std::invalid_argument if the library has a label the table does not know.
std::vector<FitParam> fit_params(const TemplateLibrary& lib, const FitConfig& cfg);

}  // namespace velox
