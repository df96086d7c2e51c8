// Fit one spectrum: masking → CCF initial velocity → chi^2 grid of coarse templates → LM
// refinement of (VRAD, labels) with profiled per-arm continua → Hessian errors → RVS_WARN.
// The host side of every backend: prepare_spectrum before the kernels, finish_row after.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "common/uninit_vector.hpp"
#include "emulator/library.hpp"
#include "fit/classify.hpp"
#include "fit/config.hpp"
#include "io/catalog.hpp"
#include "io/spectrum.hpp"
#include "kernels/fit_pipeline.hpp"
#include "model/arm_model.hpp"

namespace velox {

struct FitContext {
  const TemplateLibrary& lib;
  ArmModelCache& cache;
  const FitConfig& cfg;
  std::string format;  // format_name() of the input, for the default resolution
  std::string survey;  // SpectrumFile::survey: "format:survey" calibrations (format_entry)
};

// The usable pixels of one spectrum, arms contiguous, plus the views the kernels take.
struct Packed {
  // Per used pixel (UninitVector: prepare_spectrum writes every element after resizing).
  // (A pixel's vacuum wavelength is its input arm's at input_pixel, its arm slot the one whose
  // [arm_start[a], arm_start[a + 1]) holds it: neither is kept per pixel.)
  UninitVector<double> lnlam, xleg;
  UninitVector<float> flux, ivar;
  int n_arms = 0;
  int arm_start[kern::kMaxArms + 1] = {};
  std::vector<std::shared_ptr<const ArmModel>> models;  // per arm slot
  std::vector<std::string> names;
  std::vector<int> input_arm;    // per arm slot: index of the arm in the input spectrum
  UninitVector<int> input_pixel;  // per used pixel: index in its input arm
  // Resolution-matrix arms (n_full[a] > 0): full-grid ln(lambda), and for every used pixel its
  // index in its arm's full grid (-1 for Gaussian-LSF arms) and its row's fold parameters, from
  // which the fit builds the rows (kern::FitData::fold, kernels/fold.hpp; folded_rows below).
  std::vector<UninitVector<double>> full_lnlam;  // per arm slot (empty: no matrix)
  std::vector<int> ndiag;                        // per arm slot
  UninitVector<int> full_idx;                    // per used pixel
  // [n_pix][3] per used pixel: its row's centroid [px from the central tap], the Gaussian's
  // variance [px^2] (the template's line spread removed) and the row's sum; zeros for pixels of
  // arms without a matrix. Empty: no arm has a matrix.
  UninitVector<double> fold;
  // Velocity segments (kern::FitData::seg_*): one per arm, or the blue/red halves of a one-arm
  // spectrum split at FitConfig::arm_split_A; seg_names[s] is the catalog suffix (B, R, Z).
  int n_seg = 0;
  int seg_start[kern::kMaxSeg + 1] = {};
  int seg_arm[kern::kMaxSeg] = {};
  std::vector<std::string> seg_names;
  int fit_vsini = 0;  // the arms resolve rotation: VSINI fitted (FitConfig::fit_vsini, vsini_min_R)
  double vsini_R = 0.0;  // effective resolving power of the sharpest arm (is VSINI fitted)
  double vsini_floor_R = 0.0;  // the same of the broadest arm (the VSINI detection floor's R)
  // Pass 2 of a star's joint fit over its epochs (fit/epochs.hpp): the backend fits VRAD alone
  // with the labels held at held_theta (kern::fit_velocity_held; [0]: the starting VRAD, km/s).
  bool held = false;
  double held_theta[kern::kMaxParams] = {};
  size_t n_full_total() const {
    size_t n = 0;
    for (const auto& f : full_lnlam) n += f.size();
    return n;
  }
  // The floats of the folded rows: the sum over matrix arms of n_full x ndiag.
  size_t n_rm_total() const {
    size_t n = 0;
    for (size_t a = 0; a < full_lnlam.size(); ++a) n += full_lnlam[a].size() * ndiag[a];
    return n;
  }

  // Frees the arrays only the backend reads (lnlam, xleg, ivar, input_pixel, full-grid
  // ln(lambda), full_idx, fold): once a backend has packed the spectrum (HostBatch copies them),
  // finish_row needs flux (the arms' S/N), the arm slots and the segments alone. Keeps a batch
  // on the device at 4 B per pixel of host memory instead of about 40, 64 with a resolution
  // matrix (docs/gpu.md "Each batch held once"). view() is not usable afterwards.
  void release_fit_arrays() {
    UninitVector<double>().swap(lnlam);
    UninitVector<double>().swap(xleg);
    UninitVector<float>().swap(ivar);
    UninitVector<int>().swap(input_pixel);
    std::vector<UninitVector<double>>().swap(full_lnlam);
    UninitVector<int>().swap(full_idx);
    UninitVector<double>().swap(fold);
  }

  // Views for the kernels; Tf/dTf: scratch of n_full_total() and n_full_total() * np doubles;
  // rm: scratch of n_rm_total() floats, where the fit writes the matrix rows (kernels/fold.hpp).
  kern::FitData view(double* Tf = nullptr, double* dTf = nullptr, float* rm = nullptr) const {
    kern::FitData d;
    d.n_pix = static_cast<int>(flux.size());
    d.n_arms = n_arms;
    for (int a = 0; a <= n_arms; ++a) d.arm_start[a] = arm_start[a];
    d.lnlam = lnlam.data();
    d.xleg = xleg.data();
    d.flux = flux.data();
    d.ivar = ivar.data();
    for (int a = 0; a < n_arms; ++a) d.basis[a] = models[a]->basis.data();
    int off = 0;
    size_t rm_off = 0;
    for (int a = 0; a < n_arms && a < static_cast<int>(full_lnlam.size()); ++a) {
      d.n_full[a] = static_cast<int>(full_lnlam[a].size());
      if (d.n_full[a] == 0) continue;
      d.ndiag[a] = ndiag[a];
      d.full_off[a] = off;
      d.full_lnlam[a] = full_lnlam[a].data();
      d.rmat[a] = rm ? rm + rm_off : nullptr;
      off += d.n_full[a];
      rm_off += static_cast<size_t>(d.n_full[a]) * ndiag[a];
    }
    d.fold = fold.empty() || !rm ? nullptr : fold.data();
    d.rmat_w = d.fold ? rm : nullptr;
    d.full_idx = full_idx.data();
    d.n_seg = n_seg;
    for (int k = 0; k <= kern::kMaxSeg; ++k) d.seg_start[k] = seg_start[k];
    for (int k = 0; k < kern::kMaxSeg; ++k) d.seg_arm[k] = seg_arm[k];
    d.fit_vsini = fit_vsini;
    d.Tf = Tf;
    d.dTf = dTf;
    return d;
  }
};

// Arm slot a's resolution rows as the fit builds them from p.fold ([ndiag][n_full],
// diagonal-major; the columns of grid pixels that are not used are 0): the host's SIMD form
// (prep::Kernels::expand_rows). Empty for an arm without a matrix.
std::vector<float> folded_rows(const Packed& p, int a);
// p.view(Tf, dTf) with every matrix arm's rows already built into *rm (resized to
// p.n_rm_total(); FitData::fold null), for callers that evaluate the model without the
// pipeline's entry points, which build the rows themselves (tests, tools).
kern::FitData folded_view(const Packed& p, std::vector<float>* rm, double* Tf = nullptr,
                          double* dTf = nullptr);

// A spectrum after masking and packing, ready for the pipeline kernel (any backend).
struct PreparedSpectrum {
  CatalogRow row;      // identity, S/N and early flags
  bool ready = false;  // false: row is already final (bad input, not a target, no pixels)
  Packed packed;       // usable pixels and the arm models
  std::vector<std::string> notes;  // human-readable reasons (excluded arms, failures)
  ClassSpectrum cls;  // rebinned for the template classification (empty: not classified)
};

// Masking (mask, ivar, non-finite, template coverage, bands), per-arm resolution, packing.
// `spec` gives the identity (TARGETID, SOURCE_FILE, ROW_IN_FILE), the reader's problem and
// OBJTYPE; the pixels are read from `arms` (the second form: spec.arms).
PreparedSpectrum prepare_spectrum(const Spectrum& spec, const std::vector<ArmView>& arms,
                                  const FitContext& ctx);
PreparedSpectrum prepare_spectrum(const Spectrum& spec, const FitContext& ctx);

// The systematic floor of catalog column `column` (VRAD, TEFF, ..., VRAD_ARM) for input format
// `format` (fit.error_floor; 0 if none is configured).
double error_floor(const FitConfig& cfg, const std::string& format, const std::string& column,
                   const std::string& survey = "");

// One arm's velocity [km/s] and its variance [km^2/s^2] (statistical plus the format's arm
// scatter, fit.arm_rv_scatter_kms), for combine_arm_velocities.
struct ArmVelocity {
  double v, var;
};
struct ArmMean {
  bool ok = false;     // false: no arm with a finite velocity and a positive variance
  double vrad = NAN;   // km/s
  double err = NAN;    // km/s: (sum of the final weights)^(-1/2)
  int iterations = 0;  // reweighting passes (0: Gaussian weights)
};
// VRAD from the arms (FitConfig::arm_rv_t_dof): the weighted mean, weights 1 / var; with three or
// more arms and t_dof > 0, reweighted by Student-t factors capped at 1 (Lange, Little & Taylor
// 1989, JASA 84, 881): u_a / var_a with u_a = min(1, (nu + 1) / (nu + r_a^2)), r_a = (v_a - mean)
// / sqrt(var_a), until the mean moves by less than 1e-9 km/s (at most 100 passes). Arms within
// 1 sigma of the mean keep their Gaussian weights (all agreeing: the Gaussian mean); an outlier
// weighs less. The error is (sum u_a / var_a)^(-1/2): never below the Gaussian one.
ArmMean combine_arm_velocities(const std::vector<ArmVelocity>& arms, double t_dof);

// Turn the pipeline result into the catalog row (values, errors, RVS_WARN, SUCCESS).
// `ivar` is the pipeline's working ivar after clipping.
void finish_row(PreparedSpectrum& p, const kern::PipelineResult& res,
                const std::vector<float>& ivar, const FitContext& ctx);

// The VSINI detection floor [km/s] of a spectrum prepared as `pk`: the fraction
// vsini_floor_frac(cfg, format, survey, library kind) of the LSF FWHM of its broadest arm,
// c / Packed::vsini_floor_R (FitConfig::vsini_fwhm_frac); 0 when that R is unknown.
double vsini_floor_kms(const Packed& pk, const FitContext& ctx);
// The floor rule on a row whose VSINI was fitted (VSINI, VSINI_ERR in km/s; VSINI_UPPER NaN for a
// detection, else the kernel's upper limit): below `floor_kms` a detection becomes an upper limit
// max(floor, VSINI + 2 VSINI_ERR), and a limit is raised to the floor. At a limit VSINI_ERR is NaN
// and FIT_INFO VSINI_UPPER_LIMIT is set, else cleared; RVS_WARN VSINI_LARGE is set above
// cfg.vsini_max_ok_kms, else cleared. finish_row and the --epochs star row (fit/epochs.hpp).
void apply_vsini_floor(CatalogRow& row, double floor_kms, const FitConfig& cfg);

// Optional outputs for tests and plots.
struct FitDiagnostics {
  std::vector<double> wave_vac_A;  // used pixels (all arms, concatenated)
  std::vector<double> flux, ivar, model;
  std::vector<int> arm_of_pixel;
  std::vector<std::string> messages;  // human-readable notes (excluded arms, ...)
};

// The kernel pipeline's numbers from the configuration and the library's label box.
kern::PipelineConfig pipeline_config(const FitConfig& cfg, const TemplateLibrary& lib);

// Fill `diag`'s pixel arrays (used pixels with ivar > 0 after clipping) from a fit's working
// `ivar` and best-fit `model` (both [n_pix] of p.packed; an empty model adds nothing).
// `arms`: the input arms `p` was prepared from (their wavelengths), spec.arms' views when null.
void diagnostics_of(const PreparedSpectrum& p, const Spectrum& spec,
                    const std::vector<ArmView>* arms, const std::vector<float>& ivar,
                    const std::vector<double>& model, FitDiagnostics* diag);

}  // namespace velox
