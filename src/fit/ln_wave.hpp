// Per-grid work on an arm's wavelength grid, computed once per distinct grid on each thread.
// The fibres of a DESI coadd share each arm's grid (B, R, Z), so the preparation of a file's
// spectra takes the logs (and what follows from the grid alone) once per arm instead of once per
// fibre and pixel.
#pragma once
#include <array>
#include <climits>
#include <cstddef>
#include <cstdint>

namespace velox {

// The grids each thread's cache keeps: a pointer from arm_grid stays valid while fewer than this
// many other grids are looked up after it.
constexpr int kArmGridCache = 8;

// What a grid alone fixes, once per distinct grid on each thread: the last kArmGridCache grids
// are kept, compared element by element, never by address.
struct ArmGrid {
  // [n] ln(wave[j]) (std::log of each element, so bitwise the values a direct call gives; NaN or
  // -inf where wave[j] is not positive or not finite)
  const double* ln = nullptr;
  // [n] the classification's bin of each pixel, floor(ln / kClassBinDlnlam) (fit/classify.hpp),
  // kNoBin where the wavelength is not finite or not positive; bin_lo .. bin_hi their range
  // (bin_lo > bin_hi: none)
  const long* class_bin = nullptr;
  long bin_lo = 0, bin_hi = -1;
  // Unique per filling of a cache entry on this thread (never 0, never reused): callers key their
  // own per-grid work on it (GridWorkCache).
  uint64_t id = 0;
  static constexpr long kNoBin = LONG_MIN;
};
// The grid of wave[n]; n == 0: an empty ArmGrid (null pointers, id 0).
ArmGrid arm_grid(const double* wave, size_t n);

// Work derived from a grid (ArmGrid::id) and a key, kept on the calling thread for the last
// kArmGridCache (grid, key) pairs: get() returns the kept Value, or fills a slot with fill(Value&)
// first. `probe` compares with Key by == and is stored as a Key on a miss (a tuple of references
// probes a tuple of values without copying them).
template <class Key, class Value>
class GridWorkCache {
 public:
  template <class Probe, class Fill>
  const Value& get(uint64_t grid, const Probe& probe, Fill&& fill) {
    for (const Slot& s : slots_)
      if (s.grid == grid && s.key == probe) return s.value;
    Slot& s = slots_[next_++ % slots_.size()];
    s.grid = 0;  // not valid until filled (a fill that throws leaves it so)
    fill(s.value);
    s.key = probe;
    s.grid = grid;
    return s.value;
  }

 private:
  struct Slot {
    uint64_t grid = 0;
    Key key{};
    Value value{};
  };
  std::array<Slot, kArmGridCache> slots_;
  size_t next_ = 0;
};

}  // namespace velox
