// The host preparation's inner loops, compiled once per instruction-set level into its own
// namespace velox::prep_isa::<level> (cmake/cpu_isa.cmake, prep_slot.cpp), like the CPU kernel
// (backend/cpu/isa/fit_slot.hpp). Only the dispatcher (fit/prep_kernels.cpp) names these;
// everyone else calls prep_kernels() (fit/prep_kernels.hpp), which gives the same results at
// every level, bit for bit (the objects are compiled with -ffp-contract=off).
#pragma once
#include <cstddef>

namespace velox::prep {

// A resolution matrix's row moments (fit/resolution.hpp, ResolutionFold): m0/m1/m2[i] = sum,
// sum o, sum o^2 of row i's weights over the offsets o = k - ndiag/2 (the rows write_rows is
// given, and those their edge rows borrow).
struct FoldMoments {
  const double *m0, *m1, *m2;
  long n;  // the arm's pixels
  int ndiag;
};

// One arm's pixels for prepare_spectrum's packing (pack_pixels): the arm's ln lambda (its grid,
// fit/ln_wave.hpp), vacuum wavelengths [A], flux and ivar; the per-arm velocity zero points as
// ln(1 + zp/c), zp_b below split_A [A] and zp_r above (the same for an arm that is not split);
// the used pixels' ln lambda span [lo, hi] for the Legendre coordinate; with has_full, full_off
// added to a pixel's index gives its index in the matrix grid.
struct PackIn {
  const double *ln_wave, *wave;
  const float *flux, *ivar;
  double split_A, zp_b, zp_r, lo, hi;
  bool has_full;
  long full_off;
};
// Where the packed pixels go (Packed's per-pixel arrays at the arm's first packed pixel).
struct PackOut {
  double *lnlam, *xleg;
  float *flux, *ivar;
  int *full_idx, *input_pixel;
};

struct Kernels {
  // The moments of rows [row_lo, row_hi) of res[ndiag * n] (desispec layout) into m0/m1/m2
  // (each row's terms added to +0.0 in the order of the offsets), one contiguous pass per
  // diagonal.
  void (*moments)(const float* res, long n, int ndiag, long row_lo, long row_hi, double* m0,
                  double* m1, double* m2);
  // ResolutionFold::write_rows (fit/resolution.hpp) on the moments `fm`.
  void (*write_rows)(const FoldMoments& fm, const size_t* rows, size_t count, const double* wave_A,
                     const double* fwhm_pp, double fwhm_fixed, float* out, ptrdiff_t row_step,
                     ptrdiff_t k_step, long offset);
  // write_rows in two halves (rows[] increasing, as for write_rows). fold_params: the rows'
  // parameters p[count][3] (the centroid [px
  // from the central tap], the Gaussian's variance [px^2] with the template's removed, the row's
  // sum); expand_rows: the rows they give, row r written to out[col[r] * row_step + k * k_step]
  // (k < ndiag), the same bits as write_rows (kern::FitData::fold: the fit folds them itself).
  void (*fold_params)(const FoldMoments& fm, const size_t* rows, size_t count, const double* wave_A,
                      const double* fwhm_pp, double fwhm_fixed, double* p);
  void (*expand_rows)(const double* p, size_t count, int ndiag, const int* col, float* out,
                      ptrdiff_t row_step, ptrdiff_t k_step);
  // The model variance of prepare_spectrum (FitConfig::model_variance): with F_k the running
  // median of flux[] over +-15 of the n used pixels, ivar[k] <- ivar / (1 + ivar (scale
  // sigma_k F_k)^2), sigma[n] the emulator's relative sigma at each pixel. flux finite.
  void (*model_ivar)(const float* flux, const double* sigma, double scale, size_t n, float* ivar);
  // prepare_spectrum's pixel classes: use[j] = range[j] (0, 1 or 2: fit_range_of) where flux[j]
  // and ivar[j] are finite, ivar[j] > 0 and mask[j] == 0 (mask null: no mask), else 0; returns
  // the count of use[j] == 2.
  size_t (*select_pixels)(const float* flux, const float* ivar, const int* mask, const char* range,
                          size_t n, char* use);
  // prepare_spectrum's packing of the used pixels j = idx[k], k < m: lnlam = ln_wave[j] - zp
  // (zp_b where wave[j] < split_A, else zp_r), xleg = 2 (ln_wave[j] - lo) / (hi - lo) - 1 (0 if
  // hi <= lo), flux and ivar copied, full_idx = j + full_off (-1 without has_full),
  // input_pixel = j.
  void (*pack_pixels)(const PackIn& in, const size_t* idx, size_t m, const PackOut& out);
  // sn[i] = flux[i] * sqrt(ivar[i]) in FP32 (ivar >= 0), i < n: the catalog's SN per pixel.
  void (*sn_values)(const float* flux, const float* ivar, size_t n, float* sn);
};

}  // namespace velox::prep

#define VELOX_DECLARE_PREP_ISA(level)      \
  namespace velox::prep_isa::level {       \
  const ::velox::prep::Kernels& kernels(); \
  }

VELOX_DECLARE_PREP_ISA(baseline)
VELOX_DECLARE_PREP_ISA(avx2)
VELOX_DECLARE_PREP_ISA(avx512)
