// Resolution-matrix convention (desispec.resolution, offsets +5..-5, column-aligned storage) with
// an ASYMMETRIC matrix: a symmetric one would hide a transposition bug.
#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include "fit/resolution.hpp"
#include "kernels/fit_eval.hpp"

using namespace velox;

namespace {
// observed[i] = 0.7 model[i] + 0.3 model[i+1]: in dia storage res[d * n + m] = A[m - off_d, m]
// with off_d = 5 - d, so A[i, i] sits at d = 5 and A[i, i+1] (= A[m-1, m]) at d = 4.
void asymmetric(int n, std::vector<double>* wave, std::vector<float>* res) {
  wave->resize(n);
  res->assign(11 * n, 0.0f);
  for (int m = 0; m < n; ++m) {
    (*wave)[m] = 5000.0 + 0.8 * m;
    (*res)[5 * n + m] = 0.7f;
    if (m >= 1) (*res)[4 * n + m] = 0.3f;
  }
}
double apply_to_ramp(const std::vector<float>& rows, int i, int n) {
  std::vector<double> ramp(n);
  for (int j = 0; j < n; ++j) ramp[j] = j;
  std::vector<int> full_idx(n);
  for (int j = 0; j < n; ++j) full_idx[j] = j;
  kern::FitData d;
  d.n_full[0] = n;
  d.ndiag[0] = 11;
  d.rmat[0] = rows.data();
  d.full_idx = full_idx.data();
  return kern::apply_rmat(d, 0, i, ramp.data(), 1, 0);
}
}  // namespace

TEST_CASE("resolution rows keep the matrix's centroid: an asymmetric row shifts lines redward",
          "[resolution]") {
  const int n = 50;
  std::vector<double> wave;
  std::vector<float> res, rows;
  std::vector<char> ok;
  asymmetric(n, &wave, &res);
  // Sharp templates (FWHM 0): the row (variance 0.21 px^2) becomes a Gaussian at +0.3 px.
  fold_resolution_rows(wave, res, 11, 0.0, &rows, &ok);
  REQUIRE(ok[20]);
  // A ramp samples the centroid: 20 + 0.3 (a transposed matrix would give 19.7). The sampled
  // Gaussian (sigma 0.46 px) reproduces the centroid to ~1e-3 px.
  CHECK(apply_to_ramp(rows, 20, n) == Approx(20.3).margin(0.01));
  // Templates broader than the row (2.5 A = 3.1 px FWHM): only the centroid shift remains, by
  // linear interpolation, exact on a ramp.
  fold_resolution_rows(wave, res, 11, 2.5, &rows, &ok);
  CHECK(apply_to_ramp(rows, 20, n) == Approx(20.3).margin(1e-6));
}

TEST_CASE("all-zero or non-finite resolution rows mark their pixels unusable", "[resolution]") {
  const int n = 30;
  std::vector<double> wave;
  std::vector<float> res, rows;
  std::vector<char> ok;
  asymmetric(n, &wave, &res);
  for (int d = 0; d < 11; ++d) res[d * n + 10] = 0.0f;  // column 10 zero: rows 9 and 10 lose it
  for (int d = 0; d < 11; ++d) res[d * n + 20] = 0.0f;
  for (int d = 0; d < 11; ++d) res[d * n + 21] = 0.0f;  // row 20 uses columns 20, 21: all zero
  res[5 * n + 25] = NAN;
  fold_resolution_rows(wave, res, 11, 0.0, &rows, &ok);
  CHECK(ok[5]);
  CHECK_FALSE(ok[20]);
  CHECK_FALSE(ok[25]);
}
