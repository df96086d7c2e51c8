#include "backend/engine_model.hpp"

#include <algorithm>

namespace velox {

DeviceModel h200_model() {
  DeviceModel d;
  d.name = "H200";
  d.fp64 = 34e12;
  d.fp32 = 67e12;
  d.dmma = 67e12;
  d.hbm = 4.8e12;
  return d;
}

double stage_seconds(const StageCost& c, const DeviceModel& d) {
  const double compute = c.f64 / (d.fp64 * d.simt_share) + c.f32 / (d.fp32 * d.simt_share) +
                         c.dmma / (d.dmma * d.dmma_share);
  return std::max(compute, c.bytes / (d.hbm * d.hbm_share));
}

namespace {

struct Totals {
  double n_used = 0, n_points = 0, rm_taps = 0;  // rm_taps: sum over matrix arms of n_used x ndiag
};
Totals totals(const FlopShape& s) {
  Totals t;
  for (size_t a = 0; a < s.n_used.size(); ++a) {
    t.n_used += s.n_used[a];
    t.n_points += s.n_points[a];
    t.rm_taps += static_cast<double>(s.n_used[a]) * s.ndiag[a];
  }
  return t;
}

}  // namespace

std::vector<StageCost> engine_eval_stages(const FlopShape& s, EvalKind kind, int n_rows) {
  const Totals t = totals(s);
  const double N = s.n_train, K = s.n_comp - 1, K1 = s.n_comp, L = s.n_label, R = n_rows;
  std::vector<StageCost> st;
  if (kind == EvalKind::kChi2 || kind == EvalKind::kJacobian) {
    const bool jac = kind == EvalKind::kJacobian;
    const double cols = jac ? 1 + L : 1;  // coefficient columns: value (and d/dlabel)
    // Emulator: kernel weights of the N training stars, then a GEMM [cols x N] x [N x K] (FP64).
    st.push_back({"emulator", 0, 0, 2 * N * K * cols, 2 * N * cols * 8});
    // Template rows: a GEMM over the shared basis [R x K1] x [K1 x cols], rows out in FP32.
    st.push_back({"rows", 0, 0, 2 * R * K1 * cols, 2 * R * cols * 4});
    // Doppler interpolation, 4 taps per evaluation point (value and, with the Jacobian, d/dv).
    const double out_cols = jac ? 2 + L : 1;
    st.push_back({"interp", t.n_points * 40, jac ? t.n_points * 40 : 0, 0,
                  t.n_points * 8 + 2 * t.n_points * out_cols * 4});
    // Resolution matrix: ndiag taps per used pixel and column.
    if (t.rm_taps > 0)
      st.push_back({"rmat", 0, t.rm_taps * out_cols * 2, 0,
                    t.rm_taps * 4 + 2 * t.n_used * out_cols * 4});
    // Continuum profile and chi^2: Gram sums of the 15-16 wide design rows on FP64 tensor cores
    // (1.5: tile padding), the per-pixel Legendre terms in FP64 SIMT (degree 8).
    st.push_back({"continuum", t.n_used * (jac ? 93 : 60), 0,
                  t.n_used * 2 * (jac ? 54 + 66 : 27) * 1.5, t.n_used * 16 * (jac ? 2 : 1)});
  } else if (kind == EvalKind::kVelocityOnly) {
    // From the rows kept since the last evaluation with the emulator: interpolation (value and
    // d/dv), matrix, continuum with one Jacobian column. Over the whole spectrum (the moments
    // grid); a segment's evaluation is 1/n_seg of it.
    st.push_back({"interp", t.n_points * 40, t.n_points * 16, 0,
                  t.n_points * 8 + R * 2 * 4 + 2 * t.n_points * 2 * 4});
    if (t.rm_taps > 0)
      st.push_back({"rmat", 0, t.rm_taps * 2 * 2, 0, t.rm_taps * 4 + 2 * t.n_used * 2 * 8});
    st.push_back({"continuum", t.n_used * 93, 0, t.n_used * 2 * (27 + 12) * 1.5,
                  t.n_used * 16 * 2});
  }
  return st;
}

std::vector<StageCost> engine_fixed_stages(const FlopShape& s, int n_rows) {
  const Totals t = totals(s);
  const double R = n_rows, n_ccf = s.n_ccf, lags = s.n_lags, use = s.n_ccf_use;
  std::vector<StageCost> st;
  // chi^2 grid over the coarse templates: their values at the pixels (FP32) and the continuum
  // profiled through Chebyshev moments as one GEMM [26 x n] x [n x n_ccf].
  st.push_back({"chi2 grid", 0, n_ccf * (t.n_points * 8 + t.rm_taps * 2), 2 * 26 * t.n_used * n_ccf,
                n_ccf * t.n_points * 4 * 2 + t.rm_taps * 4 + t.n_used * 16});
  // CCF: the spectrum scattered onto the template grid, against the lag-Hankel matrices.
  st.push_back({"ccf", t.n_used * 30, 0, 2 * R * lags * use * 4, t.n_used * 24 + R * use * 4});
  // Pseudo-normalisation, pixel positions, the fold of the matrix rows, the clip pass.
  st.push_back({"other", t.n_used * 500, 0, 0, t.n_used * (52 + 11 * 4)});
  return st;
}

double engine_fit_seconds(const FlopShape& s, int n_rows, const EvalCounts& n,
                          const DeviceModel& d) {
  auto sum = [&](const std::vector<StageCost>& st) {
    double x = 0;
    for (const auto& c : st) x += stage_seconds(c, d);
    return x;
  };
  const double vfull = sum(engine_eval_stages(s, EvalKind::kVelocityOnly, n_rows));
  const double vseg = s.n_seg > 0 ? vfull / s.n_seg : vfull;
  return sum(engine_fixed_stages(s, n_rows)) +
         n.chi2 * sum(engine_eval_stages(s, EvalKind::kChi2, n_rows)) +
         n.jac * sum(engine_eval_stages(s, EvalKind::kJacobian, n_rows)) + n.vseg * vseg +
         n.vfull * vfull;
}

}  // namespace velox
