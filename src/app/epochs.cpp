#include "app/epochs.hpp"

#include <cstdlib>

#include "backend/backend.hpp"
#include "common/group_by.hpp"
#include "fit/epochs.hpp"
#include "io/rvs_warn.hpp"

namespace velox {

namespace {

// The columns of an epoch row that describe the target rather than the fit (pass 1's: the reader,
// the FIBERMAP, the classification), and with `arms` its per-arm velocities (step 3 does not
// measure them again unless VRAD is their weighted mean: with the labels held at the star's they
// move by a small part of their errors), copied over the step-3 row.
void copy_identity(const CatalogRow& from, CatalogRow& to, bool arms) {
  if (arms) {
    to.VRAD_B = from.VRAD_B, to.VRAD_B_ERR = from.VRAD_B_ERR;
    to.VRAD_R = from.VRAD_R, to.VRAD_R_ERR = from.VRAD_R_ERR;
    to.VRAD_Z = from.VRAD_Z, to.VRAD_Z_ERR = from.VRAD_Z_ERR;
    to.RVS_WARN = (to.RVS_WARN & ~warn::kArmRvDisagree) | (from.RVS_WARN & warn::kArmRvDisagree);
  }
  to.SPECTYPE = from.SPECTYPE;
  to.SUBTYPE = from.SUBTYPE;
  to.CLASS_DCHI2 = from.CLASS_DCHI2;
  to.CLASS_Z = from.CLASS_Z;
  to.TARGET_RA = from.TARGET_RA;
  to.TARGET_DEC = from.TARGET_DEC;
  to.REF_ID = from.REF_ID;
  to.REF_CAT = from.REF_CAT;
  to.FIBER = from.FIBER;
  to.EXPID = from.EXPID;
  to.RR_Z = from.RR_Z;
  to.RR_SPECTYPE = from.RR_SPECTYPE;
  to.HEALPIX = from.HEALPIX;
  to.VRAD_CCF = from.VRAD_CCF;
  to.RVS_WARN |= from.RVS_WARN & (warn::kNotStar | warn::kBadInput | warn::kNotFitted);
  to.FIT_INFO |= from.FIT_INFO & info::kNoClassification;
  to.SUCCESS = (to.RVS_WARN & warn::kReject) == 0;
}

double meta_number(const Spectrum& s, const char* key) {
  const auto it = s.meta.find(key);
  if (it == s.meta.end()) return NAN;
  char* end = nullptr;
  const double v = std::strtod(it->second.c_str(), &end);
  return end == it->second.c_str() ? NAN : v;
}

}  // namespace

std::string epoch_group_key(const Spectrum& s, const CatalogRow& row, const std::string& group_by) {
  if (group_by.empty() || group_by == "TARGETID")
    return row.TARGETID >= 0 ? std::to_string(row.TARGETID) : std::string();
  const auto it = s.meta.find(group_by);
  return it == s.meta.end() ? std::string() : it->second;
}

std::vector<CatalogRow> fit_epochs(const SpectrumFile& file,
                                   const std::vector<size_t>& spectrum_of_row,
                                   std::vector<CatalogRow>&& rows, const FitContext& ctx,
                                   const std::string& group_by,
                                   std::vector<PreparedSpectrum*>* prepared) {
  // Groups in order of their first row; rows without a key are stars of their own.
  std::vector<std::string> keys(rows.size());
  for (size_t k = 0; k < rows.size(); ++k) {
    const size_t si = k < spectrum_of_row.size() ? spectrum_of_row[k] : SIZE_MAX;
    if (si < file.spectra.size()) keys[k] = epoch_group_key(file.spectra[si], rows[k], group_by);
  }
  const std::vector<std::vector<size_t>> groups = group_by_key(keys);
  // Step 3 does not measure the per-arm velocities again (copy_identity), except where the
  // format's VRAD is the arms' weighted mean (fit.arm_rv_scatter_kms): there each epoch's arms
  // are measured at the star's labels and VRAD combines them, as in a fit without --epochs.
  kern::PipelineConfig pc = pipeline_config(ctx.cfg, ctx.lib);
  const bool arms_vrad = vrad_from_arms(ctx.cfg, ctx.format, ctx.survey);
  if (!arms_vrad) pc.seg_max_iter = 0;
  std::vector<CatalogRow> stars, epochs;
  for (const auto& g : groups) {
    std::vector<CatalogRow> pass1;
    for (size_t k : g) pass1.push_back(rows[k]);
    const JointLabels j = joint_labels(pass1, ctx.lib, ctx.cfg);
    std::vector<CatalogRow> pass2 = pass1;
    std::vector<double> vsini_floor(g.size(), NAN);  // km/s, per epoch (re-prepared ones)
    if (j.ok && g.size() > 1) {  // one epoch: its own fit is the joint one
      // Pass 2: every epoch's VRAD with the labels held at the star's, one batch per star.
      std::vector<PreparedSpectrum> prep;
      std::vector<size_t> member;  // index in g of each prepared epoch
      for (size_t e = 0; e < g.size(); ++e) {
        const size_t si = spectrum_of_row[g[e]];
        if (si >= file.spectra.size() || !std::isfinite(pass1[e].VRAD)) continue;
        PreparedSpectrum* kept = prepared && si < prepared->size() ? (*prepared)[si] : nullptr;
        PreparedSpectrum p = kept ? std::move(*kept) : prepare_spectrum(file.spectra[si], ctx);
        if (!p.ready) continue;
        p.packed.held = true;
        for (int q = 0; q < kern::kMaxParams; ++q) p.packed.held_theta[q] = j.theta[q];
        p.packed.held_theta[0] =
            pass1[e].VRAD;                // the epoch's own velocity: the labels move it little
        p.cls = ClassSpectrum{};          // the class is pass 1's
        vsini_floor[e] = vsini_floor_kms(p.packed, ctx);
        prep.push_back(std::move(p));
        member.push_back(e);
      }
      std::vector<const Packed*> ptrs;
      for (const auto& p : prep) ptrs.push_back(&p.packed);
      if (!ptrs.empty()) {
        // No clipped re-fit when step 1 clipped none of the star's epochs: with the labels near
        // each epoch's own, no pixel gets beyond fit.clip_sigma that did not before.
        kern::PipelineConfig pc_star = pc;
        bool clipped = false;
        for (size_t e : member) clipped = clipped || (pass1[e].FIT_INFO & info::kClipped) != 0;
        if (!clipped) pc_star.clip_sigma = 0.0;
        const BatchOutput out = fit_batch_serial(ptrs, ctx.lib, pc_star, false);
        for (size_t m = 0; m < prep.size(); ++m) {
          finish_row(prep[m], out.results[m], out.ivar[m], ctx);
          CatalogRow& r = prep[m].row;
          copy_identity(pass1[member[m]], r, !arms_vrad);
          pass2[member[m]] = std::move(r);
        }
      }
    }
    for (size_t e = 0; e < g.size(); ++e) {
      const size_t si = spectrum_of_row[g[e]];
      if (si < file.spectra.size()) pass2[e].MJD = meta_number(file.spectra[si], "MJD");
    }
    CatalogRow star = star_row(pass2, j, ctx.lib, ctx.cfg, ctx.format, ctx.survey, vsini_floor);
    for (size_t e = 0; e < g.size(); ++e) {
      CatalogRow& r = pass2[e];
      r.EPOCH = static_cast<int32_t>(e);
      r.N_EPOCHS = star.N_EPOCHS;
      r.TARGETID = star.TARGETID;
      epochs.push_back(std::move(r));
    }
    stars.push_back(std::move(star));
  }
  stars.insert(stars.end(), std::make_move_iterator(epochs.begin()),
               std::make_move_iterator(epochs.end()));
  return stars;
}

}  // namespace velox
