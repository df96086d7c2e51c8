// Natural log of an arm's wavelength grid, computed once per distinct grid on each thread.
// The fibres of a DESI coadd share each arm's grid (B, R, Z), so the preparation of a file's
// spectra takes the logs once per arm instead of once per fibre and pixel.
#pragma once
#include <cstddef>

namespace velox {

// ln(wave[j]) for j < n (std::log of each element, so bitwise the values a direct call gives;
// NaN or -inf where wave[j] is not positive or not finite). The pointer stays valid on this thread
// until the 8th call after this one with another grid (the cache keeps the last 8 grids, compared
// element by element, never by address). n == 0: nullptr.
const double* ln_wavelengths(const double* wave, size_t n);

}  // namespace velox
