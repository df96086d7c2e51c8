#include <algorithm>
#include <cmath>

#include "backend/gpu.hpp"

namespace velox {

size_t gpu_bytes_per_spectrum(size_t n_pix, size_t n_full, size_t n_fold) {
  const size_t per_pixel = 2 * sizeof(double)   // lnlam, xleg
                           + 2 * sizeof(float)  // flux, ivar
                           + sizeof(int);       // full_idx
  return n_pix * per_pixel + n_full * sizeof(double) + n_fold * 3 * sizeof(double) +
         sizeof(kern::BatchSpectrum) + sizeof(kern::PipelineResult);
}

size_t gpu_bytes_per_slot(long long slot_pix, long long slot_full, int np, int n_out, long long emu,
                          long long slot_grid, long long slot_rm, long long slot_vrows) {
  // The table the engine allocates by (kern::slot_counts).
  const kern::SlotCounts c = kern::slot_counts(
      std::max(0LL, slot_pix), std::max(0LL, slot_full), np, std::max(n_out, 7), std::max(0LL, emu),
      std::max(0LL, slot_grid), std::max(0LL, slot_rm), std::max(0LL, slot_vrows));
  // Element types of the engine's arrays (null pointers: only their types are read).
  struct {
    double *T, *dT, *fn, *wts, *frac;
    int* t0;
    double *Tf, *dTf, *Tg, *ccf, *acc, *emu, *Tv;
    float* rm;
  } elem{};
  size_t bytes = sizeof(kern::PipelineShared);
  kern::for_each_slot_array(elem, c, [&](auto* p, long long per_slot) {
    bytes += static_cast<size_t>(per_slot) * sizeof(*p);
  });
  return bytes;
}

size_t gpu_batch_size(size_t free_bytes, double safety, size_t fixed_bytes,
                      size_t bytes_per_spectrum, int n_sets, size_t max_batch) {
  if (bytes_per_spectrum == 0 || n_sets < 1) return 0;
  const double usable = static_cast<double>(free_bytes) * safety - static_cast<double>(fixed_bytes);
  if (usable <= 0) return 0;
  const double per = static_cast<double>(bytes_per_spectrum) * n_sets;
  const size_t n = static_cast<size_t>(std::floor(usable / per));
  return std::min(n, max_batch);
}

size_t gpu_target_batch(int n_slots, int waves, size_t min_batch, size_t max_batch) {
  const size_t want =
      static_cast<size_t>(std::max(1, n_slots)) * static_cast<size_t>(std::max(1, waves));
  return std::min(std::max(want, min_batch), max_batch);
}

}  // namespace velox
