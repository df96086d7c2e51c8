// One resolution-matrix row from its three fold parameters (kernels/fold.hpp): the row's
// centroid [px from the central tap], the variance [px^2] of the Gaussian that remains once the
// template's line spread is removed, and the row's sum (fit/resolution.hpp). Scalar, one row per
// call: the fit's team-generic form (a GPU lane per row), and the host's SIMD form
// (src/fit/isa/prep_slot.cpp, expand_rows) for the rows it does not put on vector lanes.
#pragma once
#include <cmath>

#include "kernels/emulator_eval.hpp"
#include "kernels/hd.hpp"

namespace velox::kern {

// The most diagonals folded (fit/resolution.hpp kMaxResolutionDiagonals).
constexpr int kFoldMaxDiag = 32;
// Centroid tolerances [px]: FP64 1e-7 (5e-6 km/s on DESI's pixels; the rows are stored as floats,
// relative 6e-8, anyway); FP32 2e-6 (1e-4 km/s), what the centroid's FP32 sums resolve (their
// rounding, ~5e-7 px, is below it).
constexpr double kFoldTolF64 = 1e-7;
constexpr float kFoldTolF32 = 2e-6f;
// Which rows take which step. The plain centroid step (centre += miss) shrinks the miss by 0.15x
// or less per step for sigma^2 in [kFoldPlainMinVar, kFoldPlainMaxVar] = [0.25, 3] px^2 and
// centroids within kFoldFloatMaxMu = 2 px (the rate var_w / var within 0.85-1.15): those rows
// take it in FP32, whose weights then stay within its range. Wider rows (the band cuts the wings:
// 0.19x at 4 px^2, 0.28x at 6) take the Newton step in FP32; narrower ones (0.68x at 0.15 px^2;
// below 0.125 px^2 it diverges near half pixels, where the weights sit on two taps) and those
// centred beyond 2 px take it in FP64.
constexpr double kFoldFloatMaxMu = 2.0, kFoldPlainMinVar = 0.25, kFoldPlainMaxVar = 3.0;

// Cephes' expf (Moshier 1992: about 1 ulp) after the reduction x = n ln2 + r, |r| <= ln2/2:
// exp(r) by its polynomial, for a float or a GCC vector of floats (the host's exp_lanes, and
// fold_exp below).
template <class F>
VX_HD VX_INLINE F expf_reduced(F r) {
  F p = F{} + 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  return p * (r * r) + r + 1.0f;
}
// The float (from an int) or double (from a long long) with the bits of i: 2^n for the exps below.
template <class T, class I>
VX_HD VX_INLINE T fold_bits(I i) {
  static_assert(sizeof(T) == sizeof(I), "same width");
#ifdef __CUDA_ARCH__
  if constexpr (sizeof(T) == 4)
    return __int_as_float(i);
  else
    return __longlong_as_double(i);
#else
  T t;
  __builtin_memcpy(&t, &i, sizeof t);
  return t;
#endif
}
// exp(x) in FP32 (x clamped to [-87, 87]; ln2 in two parts, 2^n from the exponent bits), the
// host SIMD form's exp_lanes lane by lane.
VX_HD VX_INLINE float fold_exp(float x) {
  x = x < 87.0f ? x : 87.0f;
  x = x > -87.0f ? x : -87.0f;
  const float h = x < 0 ? -0.5f : 0.5f;
  const int ni = static_cast<int>(x * 1.44269504088896341f + h);
  const float n = static_cast<float>(ni);
  const float p = expf_reduced((x - n * 0.693359375f) - n * -2.12194440e-4f);
  return p * fold_bits<float>((ni + 127) << 23);
}
// exp(x) in FP64, x in [-708, 700], as the host's exp_vec lane by lane (kernels/emulator_eval.hpp:
// Cody & Waite reduction, Taylor series to r^13/13!).
VX_HD VX_INLINE double fold_exp(double x) {
  const double h = x < 0 ? -0.5 : 0.5;
  const int ni = static_cast<int>(x * 1.4426950408889634 + h);
  const double n = static_cast<double>(ni);
  const double r = (x - n * 0.693147180369123816490) - n * 1.90821492927058770002e-10;
  const ExpTaylor t = exp_taylor();
  double p = 1.0 / 6227020800.0;  // 1/13!
  for (int k = 0; k < 13; ++k) p = p * r + t.c[k];
  return p * fold_bits<double>((static_cast<long long>(ni) + 1023) << 52);
}

VX_HD VX_INLINE float fold_sqrt(float x) { return sqrtf(x); }
VX_HD VX_INLINE double fold_sqrt(double x) { return sqrt(x); }

// Tap k of a sampled Gaussian row whose tap kc holds 1: r_up the ratio of tap kc + 1 to tap kc,
// q / r_up that of tap kc - 1, and each further tap's ratio q times the previous one's. The
// host's recurrence from tap kc outwards (gaussian_rows), the same products in the same order,
// recomputed from tap kc for each k rather than kept in an array: a GPU lane then has no stack
// frame for the row (issue 51), for about ndiag^2 / 4 more multiplies per row.
template <class T>
VX_HD VX_INLINE T fold_tap(int k, int kc, T r_up, T q) {
  T w = T(1);
  if (k > kc) {
    T r = r_up;
    for (int j = kc + 1; j <= k; ++j, r *= q) w = w * r;
  } else if (k < kc) {
    T r = q / r_up;
    for (int j = kc - 1; j >= k; --j, r *= q) w = w * r;
  }
  return w;
}

// A sampled Gaussian row whose sampled centroid is mu: centre c moved until the weights'
// centroid is mu within the tolerance (2e-6 px in FP32, 1e-7 px in FP64), at most 8 steps; the
// plain step (c += miss) or the Newton step (kNewton: the miss over the rate var_w / var, the
// rate within [0.1, 10], the step within 0.25 px, the centre within the taps). Weights normalised
// to s0, written to o[k * k_step]. The host's gaussian_rows (prep_slot.cpp) lane by lane.
template <class T, bool kNewton>
VX_HD VX_INLINE void fold_gaussian_row(int ndiag, double mu_d, double var_d, double s0_d, float* o,
                                       long k_step) {
  const int half = ndiag / 2;
  const T kTol = sizeof(T) == 4 ? T(kFoldTolF32) : T(kFoldTolF64);
  const T kMaxStep = T(0.25);
  const T hd = static_cast<T>(half);
  const T vr = static_cast<T>(var_d), mu = static_cast<T>(mu_d);
  const T dx = T(1) / fold_sqrt(vr);  // IEEE: the host's bits
  const T q = fold_exp(-dx * dx);     // each tap ratio over the previous one
  T c = mu, norm = T(1), r_last = T(1);
  for (int it = 0; it < 8; ++it) {
    // w_k = exp(-(x_k^2 - x_h^2) / 2), x_k = (k - half - c) dx, from the central tap outwards
    const T xh = -c * dx;
    const T r_up = fold_exp(-(xh + T(0.5) * dx) * dx);
    T nm = 0, m1 = 0, m2 = 0;
    for (int k = 0; k < ndiag; ++k) {
      const T wk = fold_tap(k, half, r_up, q);
      const T ok = static_cast<T>(k - half);
      nm += wk;
      m1 += wk * ok;
      if (kNewton) m2 += wk * (ok * ok);
    }
    T c_new;
    bool done;
    if (kNewton) {
      const T e = mu * nm - m1, lim = nm * nm * vr;
      T D = m2 * nm - m1 * m1;
      D = D > T(0.1) * lim ? D : T(0.1) * lim;
      D = D < T(10) * lim ? D : T(10) * lim;
      T dc = e * vr * nm / D;
      dc = dc < kMaxStep ? dc : kMaxStep;
      dc = dc > -kMaxStep ? dc : -kMaxStep;
      c_new = c + dc;
      c_new = c_new < hd ? c_new : hd;
      c_new = c_new > -hd ? c_new : -hd;
      done = e < kTol * nm && e > -kTol * nm;
    } else {
      const T dc = mu - m1 / nm;
      c_new = c + dc;
      done = dc < kTol && dc > -kTol;
    }
    norm = nm;
    r_last = r_up;
    if (done) break;  // these weights: the host's lane keeps its centre from here on
    c = c_new;
  }
  const T scale = static_cast<T>(s0_d) / norm;
  for (int k = 0; k < ndiag; ++k)
    o[k * k_step] = static_cast<float>(scale * fold_tap(k, half, r_last, q));
}

// One row from its fold parameters p[3] (the host's expand_rows for one row): a sampled Gaussian
// where sigma > 0.3 px and the centroid lies within the taps (FP32 with the plain step for
// sigma^2 in [0.25, 3] px^2 and |centroid| <= 2 px, FP32 with the Newton step for wider rows, FP64
// with the Newton step otherwise), the same from the nearest tap for a centroid beyond the taps,
// the row's sum alone for a one-diagonal matrix, and linear interpolation at the centroid for
// rows narrower than 0.3 px. Writes all ndiag taps, o[k * k_step].
VX_HD VX_INLINE void fold_row(const double* p, int ndiag, float* o, long k_step) {
  const int half = ndiag / 2;
  const double m = p[0], var = p[1], sum = p[2];
  const double hd = static_cast<double>(half);
  if (var > 0.09 && fabs(m) <= hd) {
    if (fabs(m) > kFoldFloatMaxMu || var < kFoldPlainMinVar)
      fold_gaussian_row<double, true>(ndiag, m, var, sum, o, k_step);
    else if (var > kFoldPlainMaxVar)
      fold_gaussian_row<float, true>(ndiag, m, var, sum, o, k_step);
    else
      fold_gaussian_row<float, false>(ndiag, m, var, sum, o, k_step);
  } else if (var > 0.09) {
    // The centroid beyond the taps: the weights from the nearest tap outwards (the recurrence
    // from the central tap could overflow).
    const double dx = 1.0 / sqrt(var), q = exp(-dx * dx);
    double c = m, norm = 1.0, r_last = 1.0;
    int kc_last = half;
    for (int it = 0; it < 8; ++it) {
      long kc = static_cast<long>(floor(c + 0.5)) + half;
      kc = kc < 0 ? 0 : kc > ndiag - 1 ? ndiag - 1 : kc;
      const double xc = (kc - half - c) * dx;
      const double r_up = exp(-(xc + 0.5 * dx) * dx);
      double nm = 0, m1 = 0;
      for (int k = 0; k < ndiag; ++k) {
        const double wk = fold_tap(k, static_cast<int>(kc), r_up, q);
        nm += wk;
        m1 += wk * (k - half);
      }
      norm = nm;
      r_last = r_up;
      kc_last = static_cast<int>(kc);
      const double dc = m - m1 / nm;
      c += dc;
      if (fabs(dc) < kFoldTolF64) break;
    }
    const double scale = sum / norm;
    for (int k = 0; k < ndiag; ++k)
      o[k * k_step] = static_cast<float>(scale * fold_tap(k, kc_last, r_last, q));
  } else if (ndiag == 1) {
    o[0] = static_cast<float>(sum);
  } else {
    const double cl = m < -hd ? -hd : m > hd ? hd : m;
    long k0 = static_cast<long>(floor(cl)) + half;
    k0 = k0 < ndiag - 2L ? k0 : ndiag - 2L;
    const double f = cl + hd - k0;
    for (int k = 0; k < ndiag; ++k) o[k * k_step] = 0.0f;
    o[k0 * k_step] = static_cast<float>(sum * (1 - f));
    o[(k0 + 1) * k_step] = static_cast<float>(sum * f);
  }
}

}  // namespace velox::kern
