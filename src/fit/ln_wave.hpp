// Per-grid work on an arm's wavelength grid, computed once per distinct grid on each thread.
// The fibres of a DESI coadd share each arm's grid (B, R, Z), so the preparation of a file's
// spectra takes the logs (and what follows from the grid alone) once per arm instead of once per
// fibre and pixel.
#pragma once
#include <climits>
#include <cstddef>
#include <cstdint>

namespace velox {

// ln(wave[j]) for j < n (std::log of each element, so bitwise the values a direct call gives;
// NaN or -inf where wave[j] is not positive or not finite). The pointer stays valid on this thread
// until the 8th call after this one with another grid (the cache keeps the last 8 grids, compared
// element by element, never by address). n == 0: nullptr.
const double* ln_wavelengths(const double* wave, size_t n);

// The grids each thread's cache keeps: a pointer from ln_wavelengths or arm_grid stays valid while
// fewer than this many other grids are looked up after it.
constexpr int kArmGridCache = 8;

// What a grid alone fixes, from the same cache as ln_wavelengths (valid as long as its pointers).
struct ArmGrid {
  const double* ln = nullptr;  // [n] ln(wave), as ln_wavelengths
  // [n] the classification's bin of each pixel, floor(ln / kClassBinDlnlam) (fit/classify.hpp),
  // kNoBin where the wavelength is not finite or not positive
  const long* class_bin = nullptr;
  // Unique per filling of a cache entry on this thread (never 0, never reused): callers may key
  // their own per-grid work on it.
  uint64_t id = 0;
  static constexpr long kNoBin = LONG_MIN;
};
ArmGrid arm_grid(const double* wave, size_t n);

}  // namespace velox
