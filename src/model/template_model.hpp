// The emulated template spectrum at given wavelengths, for overplotting (Python velox.model):
// the stellar part of the forward model (docs/design.md "Forward model") without the continuum,
//   T_i = sum_k c_k(labels) B[t(u_i)][k],   u_i = (ln lambda_i - ln D(v) - lnlam0) / dlnlam,
// evaluated by the fit's own kernel (kern::template_at_pixels, serial team: FP64 template sums,
// as the GPU's; the CPU fit's FP32 sums agree to ~1e-7 of the template's scale).
#pragma once
#include <cstddef>
#include <vector>

#include "emulator/library.hpp"
#include "model/arm_model.hpp"

namespace velox {

// Normalised template flux at the vacuum wavelengths wave_vac_A[n] (Angstrom), for the physical
// labels (log10 Teff [K], log g [dex], [Fe/H] [dex][, [alpha/Fe] [dex]]; lib.n_label of them)
// Doppler-shifted by vrad_kms (relativistic, kernels/physics.hpp) and broadened as `model` (the
// library basis convolved to an instrument resolution, ArmModelCache::get), rotated by vsini_kms
// (Gray profile, linear limb darkening limb_eps; 0 = none, as the fit's kernel does it). Returns
// [n]; NaN where the shifted wavelength falls outside the template grid or is not finite. No
// exceptions.
std::vector<double> template_model(const TemplateLibrary& lib, const ArmModel& model,
                                   const double* labels, double vrad_kms, const double* wave_vac_A,
                                   size_t n, double vsini_kms = 0.0, double limb_eps = 0.6);

}  // namespace velox
