// Small dense symmetric positive-definite solves for fixed maximum sizes (LM normal equations,
// continuum normal equations). Hand-written because Eigen's LLT/LU compile to nothing in CUDA
// device code. Row-major, leading dimension n.
#pragma once
#include <cmath>

#include "kernels/hd.hpp"

namespace velox::kern {

// In-place Cholesky A = L L^T of the n x n SPD matrix `a` (lower triangle overwritten by L).
// Returns false if A is not positive definite (a pivot <= tiny * max diagonal).
VX_HD VX_INLINE bool cholesky(double* a, int n) {
  double dmax = 0.0;
  for (int i = 0; i < n; ++i) dmax = fmax(dmax, fabs(a[i * n + i]));
  const double tiny = 1e-14 * (dmax > 0 ? dmax : 1.0);
  for (int j = 0; j < n; ++j) {
    double d = a[j * n + j];
    for (int k = 0; k < j; ++k) d -= a[j * n + k] * a[j * n + k];
    if (!(d > tiny)) return false;
    const double ljj = sqrt(d);
    a[j * n + j] = ljj;
    for (int i = j + 1; i < n; ++i) {
      double s = a[i * n + j];
      for (int k = 0; k < j; ++k) s -= a[i * n + k] * a[j * n + k];
      a[i * n + j] = s / ljj;
    }
  }
  return true;
}

// Solve L L^T x = b in place (b becomes x), L from cholesky().
VX_HD VX_INLINE void cholesky_solve(const double* l, int n, double* b) {
  for (int i = 0; i < n; ++i) {
    double s = b[i];
    for (int k = 0; k < i; ++k) s -= l[i * n + k] * b[k];
    b[i] = s / l[i * n + i];
  }
  for (int i = n - 1; i >= 0; --i) {
    double s = b[i];
    for (int k = i + 1; k < n; ++k) s -= l[k * n + i] * b[k];
    b[i] = s / l[i * n + i];
  }
}

// Inverse of an SPD matrix from its Cholesky factor: inv[n][n] (full, symmetric).
VX_HD VX_INLINE void cholesky_inverse(const double* l, int n, double* inv) {
  double col[32];
  for (int j = 0; j < n; ++j) {
    for (int i = 0; i < n; ++i) col[i] = (i == j) ? 1.0 : 0.0;
    cholesky_solve(l, n, col);
    for (int i = 0; i < n; ++i) inv[i * n + j] = col[i];
  }
}

}  // namespace velox::kern
