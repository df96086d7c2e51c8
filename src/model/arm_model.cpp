#include "model/arm_model.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <list>
#include <mutex>

#include "common/median.hpp"
#include "kernels/ccf.hpp"
#include "kernels/convolve.hpp"
#include "kernels/emulator_eval.hpp"

namespace velox {

// ArmModel::ccf_phases' tables, one per (n_tmpl, step, n_out); a list, so that a table's
// address stays valid while others are added.
struct CcfPhaseCache {
  std::mutex mu;
  std::list<std::pair<std::array<int, 3>, std::vector<float>>> tables;
};

const float* ArmModel::ccf_phases(int n_tmpl, int step, int n_out) const {
  if (!ccf_phase_cache || n_tmpl < 1 || n_tmpl > n_ccf || step < 1) return nullptr;
  const std::array<int, 3> key = {n_tmpl, step, n_out};
  std::lock_guard<std::mutex> lock(ccf_phase_cache->mu);
  for (const auto& t : ccf_phase_cache->tables)
    if (t.first == key) return t.second.data();
  const int n_tpix = static_cast<int>(ccf_templates.size()) / n_ccf;
  const kern::CcfPhases c = kern::ccf_phases(n_tmpl, step, n_tpix, n_out);
  auto& t = ccf_phase_cache->tables.emplace_back(
      key, std::vector<float>(static_cast<size_t>(c.n_tmpl) * c.step * c.len));
  kern::fill_ccf_phases(c, ccf_templates.data(), n_tpix, t.second.data());
  return t.second.data();
}

void convolve_columns(const float* in, float* out, int n, int ncol, const double* sigma_pix) {
  std::vector<double> wk, acc(ncol);
  for (int t = 0; t < n; ++t) {
    const double s = sigma_pix[t];
    const float* row = in + static_cast<size_t>(t) * ncol;
    float* o = out + static_cast<size_t>(t) * ncol;
    if (!(s >= 0.05)) {
      std::copy(row, row + ncol, o);
      continue;
    }
    const int half = static_cast<int>(std::ceil(4.0 * s));
    const double inv2s2 = 0.5 / (s * s);
    const int k_lo = std::max(-half, -t), k_hi = std::min(half, n - 1 - t);
    wk.resize(static_cast<size_t>(k_hi - k_lo + 1));
    double wsum = 0.0;
    for (int k = k_lo; k <= k_hi; ++k) {
      wk[k - k_lo] = std::exp(-static_cast<double>(k) * k * inv2s2);
      wsum += wk[k - k_lo];
    }
    std::fill(acc.begin(), acc.end(), 0.0);
    for (int k = k_lo; k <= k_hi; ++k) {
      const float* src = in + static_cast<size_t>(t + k) * ncol;
      const double w = wk[k - k_lo];
      for (int c = 0; c < ncol; ++c) acc[c] += w * src[c];
    }
    for (int c = 0; c < ncol; ++c) o[c] = static_cast<float>(acc[c] / wsum);
  }
}

ArmModel make_arm_model(const TemplateLibrary& lib, double R) {
  ArmModel m;
  m.resolution_R = R;
  m.ccf_phase_cache = std::make_shared<CcfPhaseCache>();
  const int T = lib.n_tpix, K1 = lib.n_comp;
  std::vector<double> sigma_pix(T, 0.0);
  const double fwhm_to_sigma = 1.0 / std::sqrt(8.0 * std::log(2.0));
  for (int t = 0; t < T; ++t) {
    const double lam = lib.wave_vac_A(t);
    const double f_inst = lam / R;
    const double f_tmpl = lib.template_fwhm_A(lam);
    const double d2 = f_inst * f_inst - f_tmpl * f_tmpl;
    sigma_pix[t] = d2 > 0 ? std::sqrt(d2) * fwhm_to_sigma / (lam * lib.dlnlam) : 0.0;
  }
  // kBasisPad zero floats past the last row: the CPU's FP32 component sums read whole float
  // vectors from a pixel's 4th stencil row (kern::cpu::component_sums_f32).
  m.basis.assign(lib.basis.size() + kern::kBasisPad, 0.0f);
  convolve_columns(lib.basis.data(), m.basis.data(), T, K1, sigma_pix.data());
  m.basis_t.resize(static_cast<size_t>(K1) * T);
  for (int t = 0; t < T; ++t)
    for (int k = 0; k < K1; ++k)
      m.basis_t[static_cast<size_t>(k) * T + t] = m.basis[static_cast<size_t>(t) * K1 + k];
  const int L = lib.n_label;
  m.n_ccf = static_cast<int>(lib.ccf_labels.size()) / L;
  m.ccf_templates = lib.evaluate_many(lib.ccf_labels.data(), m.n_ccf, m.basis.data());
  return m;
}

std::shared_ptr<const ArmModel> ArmModelCache::get(double R) {
  const long key = std::lround(std::log(R) / std::log(1.005));
  std::lock_guard<std::mutex> lock(mu_);
  auto it = cache_.find(key);
  if (it != cache_.end()) return it->second;
  auto m = std::make_shared<const ArmModel>(make_arm_model(lib_, std::pow(1.005, key)));
  cache_[key] = m;
  return m;
}

namespace {

// sigma [px] of a Gaussian centred on the middle tap whose weights at the integer offsets
// -half..half, normalised, have the second moment m2 [px^2]: the inverse of m2(sigma), which
// falls below sigma^2 where the band cuts the wings off (a Gaussian of sigma 2.65 px, R 1800 on
// 0.8 A pixels at 9000 A, keeps 0.73 sigma^2 within 11 diagonals) and, for sigma below ~0.6 px,
// where the taps sample it coarsely. A table of 2048 widths, log-spaced over 0.05-64 px, per
// half-width, inverted by linear interpolation (relative error below 3e-6 for sigma 0.3-20 px,
// up to 3e-4 below 0.11 px); m2 beyond the table's widest Gaussian (a nearly flat row) gives
// 64 px. The band is taken as symmetric, 2 half + 1 taps (DESI: 11); an even ndiag's band has
// 2 half, so its wide rows read up to ~10% narrow. A half-width's table is built on its first
// use (DESI's alone, not the 17 a band may have).
// *hint: the table index the last call found (consecutive rows of a matrix differ by a few
// table steps), from which the search walks; the index found is the upper bound's, so the
// result does not depend on the hint.
double band_gaussian_sigma(double m2, int half, int* hint) {
  constexpr int kN = 2048, kMaxHalf = 16;
  constexpr double kLo = 0.05, kHi = 64.0;
  struct Table {
    double sigma[kN], m2[kN];
  };
  static Table tables[kMaxHalf + 1];
  static std::once_flag built[kMaxHalf + 1];
  if (!(m2 > 0) || half < 0 || half > kMaxHalf) return std::sqrt(m2);
  Table& t = tables[half];
  std::call_once(built[half], [&t, half] {
    for (int i = 0; i < kN; ++i) {
      const double s = kLo * std::pow(kHi / kLo, i / (kN - 1.0));
      double w0 = 0, w2 = 0;
      for (int o = -half; o <= half; ++o) {
        const double w = std::exp(-0.5 * o * o / (s * s));
        w0 += w;
        w2 += w * o * o;
      }
      t.sigma[i] = s;
      t.m2[i] = w2 / w0;
    }
  });
  if (m2 < t.m2[0]) return std::sqrt(m2);  // narrower than the table: sampled as a spike
  if (m2 >= t.m2[kN - 1]) return kHi;
  // i: the first entry above m2 (1 .. kN-1; the table increases), walked to from the hint: a
  // step or two between a matrix's rows, where a binary search's branches were mispredicted
  // (effective_resolution took 7-10% of a DESI spectrum's preparation)
  int i = *hint > 0 ? std::clamp(*hint, 1, kN - 1)
                    : static_cast<int>(std::upper_bound(t.m2, t.m2 + kN, m2) - t.m2);  // first row
  while (i < kN - 1 && t.m2[i] <= m2) ++i;
  while (i > 1 && t.m2[i - 1] > m2) --i;
  *hint = i;
  const double f = (m2 - t.m2[i - 1]) / (t.m2[i] - t.m2[i - 1]);
  return t.sigma[i - 1] + f * (t.sigma[i] - t.sigma[i - 1]);
}

}  // namespace

double effective_resolution(const double* wave, size_t n, const float* res, int ndiag) {
  if (ndiag <= 0 || !res || n < 10) return NAN;
  thread_local std::vector<double> sig;  // per-thread scratch, reused across spectra
  sig.clear();
  const int half = ndiag / 2;
  int hint = 0;  // band_gaussian_sigma's search start
  for (size_t j = half; j + half < n; j += 7) {
    double s0 = 0, s2 = 0;
    for (int d = 0; d < ndiag; ++d) {
      const double o = half - d;  // offsets +half .. -half
      const double r = res[d * n + j];
      if (!std::isfinite(r)) continue;
      s0 += r;
      s2 += r * o * o;
    }
    if (s0 > 0.5 && s2 > 0) {
      const double dl = 0.5 * (wave[j + 1] - wave[j - 1]);
      // sigma in ln(lambda): the Gaussian's whose part within the band has the row's moment
      sig.push_back(band_gaussian_sigma(s2 / s0, half, &hint) * dl / wave[j]);
    }
  }
  if (sig.empty()) return NAN;
  return 1.0 / (median_upper_inplace(sig) * std::sqrt(8.0 * std::log(2.0)));
}

}  // namespace velox
