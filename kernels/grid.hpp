// The template grid's view, shared by the library (host) and the kernels (both devices).
#pragma once

namespace velox::kern {

// The template grid: n_tpix pixels uniform in ln(lambda_vac / A), pixel t at lnlam0 + t dlnlam.
struct GridView {
  int n_tpix = 0;
  double lnlam0 = 0.0;
  double dlnlam = 0.0;
};

}  // namespace velox::kern
