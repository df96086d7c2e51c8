#include "backend/cpu/flop_count.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <string>

namespace velox {

namespace {

// Per-unit costs (the counting rule of flop_count.hpp), from the loops of kernels/.
// Legendre P_0..P_deg (Bonnet recursion: 2 mul, 1 sub, 1 div, 1 mul per order >= 2) at a scaled
// argument (x * scale + off: 2).
double legendre_flops(int deg) { return 2.0 + 5.0 * std::max(0, deg - 1); }
// grid_stencil (4) + cubic_weights (30: weights and their derivatives).
constexpr double kStencil = 34.0;
// Packed Gram sum of m slots: one FMA per slot and pixel.
double gram(double m) { return 2.0 * m; }

// template_at_pixels per evaluation point: stencil, then per component the 4-tap interpolation
// of the basis (7) and the sum into T (2); with the Jacobian also the derivative taps (7), dT/du
// (2) and the L label derivatives (2 L); VOnly: no label derivatives.
double template_point(const FlopShape& s, EvalKind k) {
  const double K1 = s.n_comp, L = s.n_label;
  switch (k) {
    case EvalKind::kChi2:
      return kStencil + K1 * 9.0;
    case EvalKind::kJacobian:
      return kStencil + K1 * (18.0 + 2.0 * L) + 1.0;
    case EvalKind::kVelocityOnly:
      return kStencil + K1 * 18.0 + 1.0;
    case EvalKind::kContinuumOnly:
      return 0.0;
  }
  return 0.0;
}

// emulator_coeffs_team: per training star the distance and kernel weight with its derivatives
// (6 L + 2), then the (P + N) x (K) x (1 + L) coefficient sums (FMA each) and the label scaling.
// Training stars beyond exp(-30) are skipped at run time; all N are counted (an upper bound).
double emulator_flops(const FlopShape& s) {
  const double L = s.n_label, K1 = s.n_comp;
  return 2.0 * L + s.n_train * (6.0 * L + 2.0) + 2.0 * (s.n_poly + s.n_train) * (K1 - 1) * (1 + L) +
         L * K1;
}

// profile_continuum on n used pixels of one arm with np Jacobian columns: pass 1 (G, A^T W f),
// the Cholesky of G and the solve, pass 2 (chi^2, and with the Jacobian J^T W J, J^T W r, C),
// and the Schur complement.
double profile_arm(const FlopShape& s, double n, int np, bool jac) {
  const double nc = s.cont_deg + 1, ntri = nc * (nc + 1) / 2, leg = legendre_flops(s.cont_deg);
  double per_pix = leg + nc + 3.0 + gram(ntri + nc);  // pass 1
  per_pix += leg + 2.0 * nc + 4.0;                    // pass 2: continuum and residual
  if (jac)
    per_pix += nc + np + 2.0 + gram(1.0 + np * (np + 1) / 2.0 + np + nc * np);
  else
    per_pix += gram(1.0);
  double per_arm = nc * nc * nc / 3.0 + 2.0 * nc * nc;  // Cholesky + solve
  if (jac) per_arm += np * (2.0 * nc * nc + 2.0 * nc * np);
  return n * per_pix + per_arm;
}

}  // namespace

FlopShape flop_shape(const Packed& pk, const kern::PipelineConfig& pc, const TemplateLibrary& lib) {
  FlopShape s;
  for (int a = 0; a < pk.n_arms; ++a) {
    const int n = pk.arm_start[a + 1] - pk.arm_start[a];
    const int nf =
        a < static_cast<int>(pk.full_lnlam.size()) ? static_cast<int>(pk.full_lnlam[a].size()) : 0;
    s.n_used.push_back(n);
    s.n_points.push_back(nf > 0 ? nf : n);
    s.ndiag.push_back(nf > 0 && a < static_cast<int>(pk.ndiag.size()) ? pk.ndiag[a] : 0);
    if (a < static_cast<int>(pk.models.size()) && pk.models[a]) s.n_ccf = pk.models[a]->n_ccf;
  }
  s.n_seg = pk.n_seg;
  s.n_comp = lib.n_comp;
  s.n_label = lib.n_label;
  s.n_train = lib.n_train;
  s.n_poly = lib.n_poly;
  s.cont_deg = pc.cont_deg;
  s.ccf_cont_deg = pc.ccf_cont_deg;
  s.n_ccf_use = std::max(1, std::min(pc.n_ccf_use, s.n_ccf));
  s.n_lags = kern::ccf_lags(pc, lib.grid());
  s.clip = pc.clip_sigma > 0;
  return s;
}

double eval_flops(const FlopShape& s, EvalKind kind) {
  const bool jac = kind == EvalKind::kJacobian || kind == EvalKind::kVelocityOnly;
  const int np = kind == EvalKind::kJacobian ? 1 + s.n_label : 1;
  // A velocity-only evaluation covers one segment: the mean segment is 1/n_seg of the spectrum.
  const double part = kind == EvalKind::kVelocityOnly && s.n_seg > 0 ? 1.0 / s.n_seg : 1.0;
  double f = kind == EvalKind::kChi2 || kind == EvalKind::kJacobian ? emulator_flops(s) : 0.0;
  for (size_t a = 0; a < s.n_used.size(); ++a) {
    double arm = s.n_points[a] * template_point(s, kind);
    if (s.ndiag[a] > 0 && kind != EvalKind::kContinuumOnly)  // resolution-matrix rows
      arm += s.n_used[a] * 2.0 * s.ndiag[a] * (jac ? 1 + np : 1);
    arm += profile_arm(s, s.n_used[a], np, jac);
    f += part * arm;
  }
  return f;
}

double fixed_flops(const FlopShape& s) {
  double n = 0, f = 0;
  const double ncc = s.ccf_cont_deg + 1, leg_c = legendre_flops(s.ccf_cont_deg) - 2.0;
  for (int na : s.n_used) n += na;
  // pseudo_normalise: 4 clipped fits of the pseudo-continuum (Gram sums, then its value).
  f += 4.0 * n * (leg_c + ncc + 2.0 + gram(ncc * (ncc + 1) / 2 + ncc) + leg_c + 2.0 * ncc + 4.0);
  f += 3.0 * n;  // pixel_positions
  // cross_correlate: two weighted means (7), then per pixel and lag the linear interpolation
  // (3) and four weighted sums (10); n_ccf_use templates at the coarse lags, one at 7 fine lags.
  f += (s.n_ccf_use + 1) * 7.0 * n + (s.n_ccf_use * double(s.n_lags) + 7.0) * 13.0 * n;
  // chi^2 grid: each coarse template interpolated (stencil + 7) and profiled (chi^2 only). The
  // CPU finds the stencils once for all templates (grid_stencils_at); the model counts the
  // algorithm as the GPU runs it, a stencil per template.
  for (size_t a = 0; a < s.n_used.size(); ++a) {
    f += s.n_ccf * (s.n_points[a] * (kStencil + 7.0) + 2.0 * s.ndiag[a] * s.n_used[a] +
                    profile_arm(s, s.n_used[a], 1, false));
  }
  f += eval_flops(s, EvalKind::kContinuumOnly);  // chi^2 of the continuum alone
  if (s.clip) f += n * (legendre_flops(s.cont_deg) + 2.0 * (s.cont_deg + 1) + 5.0);
  return f;
}

double fit_flops(const FlopShape& s, const kern::PipelineResult& r) {
  return fixed_flops(s) + r.n_eval[0] * eval_flops(s, EvalKind::kChi2) +
         r.n_eval[1] * eval_flops(s, EvalKind::kJacobian) +
         r.n_eval[2] * eval_flops(s, EvalKind::kVelocityOnly);
}

double flop_per_cycle(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kBaseline:
      return 4.0;
    case CpuIsa::kAvx2:
      return 16.0;
    case CpuIsa::kAvx512:
      return 32.0;
  }
  return NAN;
}

namespace {

#if defined(__x86_64__)
// Billions of chain steps per second: the best of 30 runs of `steps` dependent instructions
// (short runs, about 1 ms: a run that the scheduler interrupted only lowers its own reading).
template <class Run>
double best_rate(long steps, Run run) {
  double best = 0.0;
  for (int rep = 0; rep < 30; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    run(steps);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (s > 0) best = std::max(best, steps / s / 1e9);
  }
  return best > 0 ? best : NAN;
}

// 8 dependent instructions per trip (the loop counter is free): `imul` (3 cycles each; an odd
// start keeps the squares odd and never trivial) or `add $1` (1 cycle each, unless the core
// folds them).
#define VELOX_TIMES8(text) text text text text text text text text
template <bool kImul>
void chain(long steps) {
  unsigned long x = kImul ? 0x9E3779B97F4A7C15ul : 0;
  for (long i = 0; i < steps / 8; ++i) {
    if constexpr (kImul)
      asm volatile(VELOX_TIMES8("imul %0, %0\n\t") : "+r"(x));
    else
      asm volatile(VELOX_TIMES8("add $1, %0\n\t") : "+r"(x));
  }
}
#undef VELOX_TIMES8
#endif

}  // namespace

CoreClock pick_core_clock(double add_ghz, double imul_ghz, double max_ghz, double cpuinfo) {
  CoreClock c;
  const bool add_ok = add_ghz > 0, imul_ok = imul_ghz > 0;
  if (add_ok || imul_ok) {
    // Each chain errs only high (a shortcut add, an imul slower than 3 cycles): the smaller one.
    const bool imul = imul_ok && (!add_ok || imul_ghz <= add_ghz);
    c.ghz = imul ? imul_ghz : add_ghz;
    if (add_ok && imul_ok && std::fabs(add_ghz / imul_ghz - 1.0) <= 0.1) {
      c.source = "measured: dependent imul and add chains agree";
    } else {
      c.source = fmt::format("measured: dependent {} chain", imul ? "imul" : "add");
      if (add_ok && imul_ok)
        c.source += fmt::format(" (the {} chain read {:.2f} GHz: {})", imul ? "add" : "imul",
                                imul ? add_ghz : imul_ghz,
                                imul ? "shortcut by this core" : "imul slower than 3 cycles here");
    }
    if (max_ghz > 0 && c.ghz > 1.05 * max_ghz)
      return {max_ghz, fmt::format("cpufreq cpuinfo_max_freq (the chains read {:.2f} GHz, above "
                                   "the maximum boost)",
                                   c.ghz)};
    if (!(max_ghz > 0) && cpuinfo > 0 && c.ghz > 2.0 * cpuinfo)
      return {cpuinfo,
              fmt::format("/proc/cpuinfo (the chains read {:.2f} GHz, over twice it)", c.ghz)};
    return c;
  }
  if (max_ghz > 0) return {max_ghz, "cpufreq cpuinfo_max_freq (not measured on this CPU)"};
  if (cpuinfo > 0) return {cpuinfo, "/proc/cpuinfo (not measured on this CPU)"};
  return {NAN, "unknown"};
}

CoreClock core_clock() {
  double add_ghz = NAN, imul_ghz = NAN;
#if defined(__x86_64__)
  add_ghz = best_rate(1L << 22, chain<false>);
  imul_ghz = 3.0 * best_rate(1L << 20, chain<true>);
#endif
  return pick_core_clock(add_ghz, imul_ghz, cpufreq_max_ghz(), cpuinfo_ghz());
}

double cpuinfo_ghz() {
  std::ifstream in("/proc/cpuinfo");
  double mhz = NAN;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("cpu MHz", 0) != 0) continue;
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    const double v = std::atof(line.c_str() + colon + 1);
    if (v > 0 && !(mhz >= v)) mhz = v;
  }
  return mhz / 1000.0;
}

double cpufreq_max_ghz() {
  std::ifstream in("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq");
  double khz = NAN;
  if (!(in >> khz) || !(khz > 0)) return NAN;  // absent (most VMs) or unreadable: not used
  return khz / 1e6;
}

}  // namespace velox
