// Joint fits of a star's epochs (issue 28, docs/epochs.md): the host-side statistics. A star's
// epochs (exposures, or observations on other nights) share one set of labels and each has its
// own VRAD. The fit is two-step: (1) every epoch is fitted alone (kern::fit_one); the star's
// labels are the product of the epochs' label likelihoods (inverse-variance weighted means in
// theta space, the Gaussian approximation of the joint fit); (2) each epoch's VRAD is fitted again
// with the labels held there (kern::fit_velocity_held). Then the constancy of the velocity:
// VRAD_CHISQ_CONST, VRAD_LOGP_CONST, VRAD_MAXDIFF_SIG and FIT_INFO RV_VARIABLE.
#pragma once
#include <string>
#include <vector>

#include "fit/config.hpp"
#include "io/catalog.hpp"
#include "kernels/fit_eval.hpp"

namespace velox {

class TemplateLibrary;

// log10 of the chi^2 distribution's survival function P(X > x) with k degrees of freedom
// (regularized upper incomplete gamma Q(k/2, x/2), Numerical Recipes 3rd ed. 6.2), computed in
// log space so that it stays finite far below 1e-308 (a binary's chi^2 of 1e4). 0 for x <= 0;
// NaN for k < 1 or a non-finite x.
double log10_chi2_sf(double x, int k);

// Constancy of N velocities v [km/s] with errors e [km/s] (e > 0; entries with a non-finite v or
// e are skipped). n < 2: mean and its error only, the rest NaN.
struct VelocityStats {
  int n = 0;
  double mean = NAN, mean_err = NAN;  // inverse-variance weighted mean and its error, km/s
  double chisq_const = NAN;           // sum ((v - mean) / e)^2, n - 1 degrees of freedom
  double logp_const = NAN;            // log10 P(chi^2 >= chisq_const | constant velocity)
  double maxdiff_sig = NAN;           // max over pairs |v_i - v_j| / sqrt(e_i^2 + e_j^2)
};
VelocityStats velocity_stats(const std::vector<double>& v, const std::vector<double>& e);

// Whether an epoch row enters the star's labels and statistics: fitted (SUCCESS), finite VRAD
// and VRAD_ERR.
bool epoch_usable(const CatalogRow& r);

// The star's held parameters from its epochs' pass-1 rows (step 1): theta = [VRAD of the
// highest-S/N usable epoch, labels in library order (log10 TEFF), VSINI]. Each label is the
// inverse-variance weighted mean over the usable epochs of its theta value with the statistical
// error; VSINI the weighted mean of the detections, else the median of the fitted values (0 if
// none). ok = false when no epoch is usable.
struct JointLabels {
  bool ok = false;
  double theta[kern::kMaxParams] = {};
  // Per label (fit_params order, VRAD excluded): statistical error in theta units, scaled by
  // sqrt(chi^2/dof) of the epochs about the mean when above 1; NaN when none had an error.
  double err_theta[kern::kMaxParams] = {};
  int base = -1;  // index of the highest-S/N usable epoch (the star row's identity)
};
JointLabels joint_labels(const std::vector<CatalogRow>& epochs, const TemplateLibrary& lib,
                         const FitConfig& cfg);

// The star's catalog row from its pass-2 epoch rows and the joint labels: the identity, class
// and fibermap columns of epochs[j.base]; labels from j with floors (fit.error_floor of
// `format`); VRAD and VRAD_ERR the weighted mean of the usable epochs (VelocityStats), SN their
// quadrature sum, CHISQ_TOT/NPIX_TOT their sums; N_EPOCHS, VRAD_CHISQ_CONST, VRAD_LOGP_CONST,
// VRAD_MAXDIFF_SIG; FIT_INFO RV_VARIABLE when VRAD_LOGP_CONST < cfg.rv_variable_logp.
// VSINI: when some epoch detected rotation, the detections' weighted mean with the floor rule of
// one spectrum (apply_vsini_floor) at the largest of the usable epochs' detection floors
// `vsini_floor_kms` (km/s, aligned with `epochs`; missing or NaN: 0), so VSINI_UPPER, VSINI_ERR
// and FIT_INFO VSINI_UPPER_LIMIT describe the star's value; otherwise the base epoch's VSINI and
// upper limit.
// A star without usable epochs gets the first epoch's row with SUCCESS false.
CatalogRow star_row(const std::vector<CatalogRow>& epochs, const JointLabels& j,
                    const TemplateLibrary& lib, const FitConfig& cfg, const std::string& format,
                    const std::string& survey = "",
                    const std::vector<double>& vsini_floor_kms = {});

}  // namespace velox
