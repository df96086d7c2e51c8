#include "app/validate_library.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "backend/backend.hpp"
#include "common/error.hpp"
#include "common/median.hpp"
#include "fit/fitter.hpp"
#include "io/rvs_warn.hpp"
#include "kernels/physics.hpp"
#include "model/arm_model.hpp"

namespace velox {

namespace {
// Cross-validation measures the fit itself: a held-out star at the edge of its fold's label box
// is a valid fit (LABEL_EDGE rejects it for science, not here); only a fit that broke down counts.
bool fitted(const CatalogRow& r) { return (r.RVS_WARN & warn::kFatal) == 0; }
}  // namespace

namespace {

// Uniform double in [0, 1) from the top 53 bits: the same sequence on every platform (the
// standard distributions are implementation-defined).
double unit_uniform(std::mt19937_64& rng) { return (rng() >> 11) * 0x1.0p-53; }

}  // namespace

Spectrum validation_observation(const TemplateSpectrum& t, double v_kms, int64_t targetid) {
  // Observed wavelength = rest * D, so the observed flux at w is the template flux at w / D:
  // shift the template's wavelengths and resample onto the observed grid.
  const double dop = std::exp(kern::ln_doppler(v_kms));
  std::vector<double> wave_shifted(t.wave_vac_A.size());
  for (size_t i = 0; i < wave_shifted.size(); ++i) wave_shifted[i] = t.wave_vac_A[i] * dop;
  ArmData a;
  a.name = "ALL";
  a.resolution_R = kValidationObsR;
  const double dlog10 = 1e-4;  // LAMOST pixel
  // 3700-7400 A; a template that reaches further red (a joined library) to its own end (at most
  // 10500 A), so that the red range and the Ca II triplet are validated too.
  const double hi = t.wave_vac_A.back() > 7500.0 ? std::min(t.wave_vac_A.back(), 10500.0) : 7400.0;
  const int n = static_cast<int>(std::floor((std::log10(hi) - std::log10(3700.0)) / dlog10)) + 1;
  for (int i = 0; i < n; ++i)
    a.wave_vac_A.push_back(std::pow(10.0, std::log10(3700.0) + i * dlog10));
  const auto f = resample(wave_shifted, t.flux, a.wave_vac_A);
  std::vector<double> finite;
  for (double v : f)
    if (std::isfinite(v)) finite.push_back(v);
  // Scale to median 1 so that ivar stays well inside float range whatever the flux units
  // (the fit's multiplicative continuum absorbs any constant factor).
  const double med = median_upper(finite);
  const double scale = std::isfinite(med) && med > 0 ? 1.0 / med : 1.0;
  const float ivar = static_cast<float>(kValidationSnPerPixel * kValidationSnPerPixel);
  for (double v : f) {
    const bool ok = std::isfinite(v);
    a.flux.push_back(ok ? static_cast<float>(v * scale) : 0.0f);
    a.ivar.push_back(ok ? ivar : 0.0f);
    a.mask.push_back(ok ? 0 : 1);
  }
  Spectrum s;
  s.targetid = targetid;
  s.source_file = t.name;
  s.arms.push_back(std::move(a));
  return s;
}

std::vector<ValidationStat> validation_stats(const std::vector<ValidationStar>& stars,
                                             const std::vector<char>& use) {
  const char* names[4] = {"dTEFF", "dLOGG", "dFEH", "dVRAD"};
  std::vector<ValidationStat> out;
  for (int q = 0; q < 4; ++q) {
    std::vector<double> d;
    for (size_t i = 0; i < stars.size(); ++i) {
      const auto& s = stars[i];
      if (!use[i] || !fitted(s.fit)) continue;
      const double v = q == 0   ? s.fit.TEFF - s.teff_K
                       : q == 1 ? s.fit.LOGG - s.logg
                       : q == 2 ? s.fit.FEH - s.feh
                                : s.fit.VRAD - s.vrad_kms;
      if (std::isfinite(v)) d.push_back(v);
    }
    ValidationStat st;
    st.quantity = names[q];
    st.n = d.size();
    st.bias = median_upper(d);
    for (auto& x : d) x = std::fabs(x - st.bias);
    st.robust_sigma = 1.4826 * median_upper(d);
    out.push_back(st);
  }
  return out;
}

ValidationResult cross_validate(const TemplateSet& set, const BuildConfig& bc, const FitConfig& fc,
                                int n_folds, uint64_t seed, int threads,
                                const std::string& holdout_prefix) {
  std::vector<size_t> usable;
  for (size_t i = 0; i < set.spectra.size(); ++i) {
    const auto& s = set.spectra[i];
    if (std::find(bc.exclude.begin(), bc.exclude.end(), i) != bc.exclude.end()) continue;
    if (!usable_template(s, bc)) continue;
    if (!holdout_prefix.empty() && s.name.rfind(holdout_prefix, 0) != 0) continue;
    usable.push_back(i);
  }
  // Leave-one-out of a subset: every named star is a fold of its own.
  if (!holdout_prefix.empty()) {
    if (usable.size() < 2)
      throw ConfigError(fmt::format("validate: --holdout {}: {} usable templates match (need 2)",
                                    holdout_prefix, usable.size()));
    n_folds = static_cast<int>(usable.size());
  }
  if (n_folds < 2)
    throw ConfigError(fmt::format("validate: --folds must be >= 2 (got {})", n_folds));
  if (usable.size() < static_cast<size_t>(n_folds))
    throw ConfigError(
        fmt::format("validate: {} usable templates for {} folds", usable.size(), n_folds));

  // Fisher-Yates with the raw generator (portable), fold = position mod n_folds, then one
  // velocity per star in template order.
  std::mt19937_64 rng(seed);
  std::vector<size_t> order = usable;
  for (size_t i = order.size() - 1; i > 0; --i) std::swap(order[i], order[rng() % (i + 1)]);
  std::map<size_t, int> fold_of;
  for (size_t p = 0; p < order.size(); ++p) fold_of[order[p]] = static_cast<int>(p % n_folds);

  ValidationResult res;
  res.n_folds = n_folds;
  res.seed = seed;
  for (size_t i : usable) {
    ValidationStar st;
    const auto& t = set.spectra[i];
    st.name = t.name;
    st.index = i;
    st.fold = fold_of[i];
    st.teff_K = t.teff_K;
    st.logg = t.logg;
    st.feh = t.feh;
    st.vrad_kms = kValidationMaxVelocityKms * (2.0 * unit_uniform(rng) - 1.0);
    res.stars.push_back(std::move(st));
  }

  // Jobs 0..n_folds-1: one fold each; job n_folds: the full library (LOO reference).
  std::atomic<int> next{0};
  std::mutex mu;
  std::exception_ptr error;
  std::map<std::string, double> full_loo;
  auto run_job = [&](int job) {
    BuildConfig fold_bc = bc;
    // The folds already run side by side: each build gets its share of the threads.
    fold_bc.threads = std::max(1, threads / std::clamp(threads, 1, n_folds + 1));
    if (job < n_folds)
      for (const auto& s : res.stars)
        if (s.fold == job) fold_bc.exclude.push_back(s.index);
    const TemplateLibrary lib = build_library(set, fold_bc);
    if (job == n_folds) {
      std::lock_guard<std::mutex> lock(mu);
      res.loo_rms_median = std::stod(lib.attrs.at("validation.loo_rms_median"));
      for (int r = 0; r < lib.n_train; ++r) full_loo[lib.train_names[r]] = lib.loo_rms[r];
      const auto& dropped = lib.attrs.at("validation.dropped_outliers");
      for (size_t a = 0, b; a < dropped.size(); a = b + 1) {
        b = std::min(dropped.find(',', a), dropped.size());
        res.full_dropped.push_back(dropped.substr(a, b - a));
      }
      return;
    }
    ArmModelCache cache(lib);
    const FitContext ctx{lib, cache, fc, "validation", ""};
    size_t n_done = 0;
    for (auto& s : res.stars) {
      if (s.fold != job) continue;
      s.fit = fit_spectrum(
          validation_observation(set.spectra[s.index], s.vrad_kms, static_cast<int64_t>(s.index)),
          ctx);
      ++n_done;
    }
    spdlog::info("validate: fold {}/{} done ({} held-out stars, library of {})", job + 1, n_folds,
                 n_done, lib.n_train);
  };
  auto worker = [&] {
    for (int job = next++; job <= n_folds; job = next++) {
      try {
        run_job(job);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        if (!error) error = std::current_exception();
      }
    }
  };
  const int n_workers = std::clamp(threads, 1, n_folds + 1);
  std::vector<std::thread> pool;
  for (int w = 0; w < n_workers; ++w) pool.emplace_back(worker);
  for (auto& t : pool) t.join();
  if (error) std::rethrow_exception(error);

  std::vector<char> core(res.stars.size()), all(res.stars.size(), 1);
  for (size_t i = 0; i < res.stars.size(); ++i) {
    auto& s = res.stars[i];
    auto it = full_loo.find(s.name);
    if (it != full_loo.end()) s.loo_rms_full = it->second;
    core[i] = s.teff_K >= res.core_teff_min_K && s.teff_K <= res.core_teff_max_K;
    if (!fitted(s.fit)) ++res.n_failed;
  }
  res.core = validation_stats(res.stars, core);
  res.all = validation_stats(res.stars, all);
  return res;
}

void write_validation_csv(const std::string& path, const ValidationResult& r) {
  std::ofstream out(path);
  if (!out) throw IoError(path + ": cannot open for writing");
  out << "name,index,fold,teff_true,logg_true,feh_true,vrad_true,teff_fit,teff_err,logg_fit,"
         "logg_err,feh_fit,feh_err,vrad_fit,vrad_err,vrad_ccf,chisq_tot,npix,niter,rvs_warn,"
         "success,loo_rms_full\n";
  for (const auto& s : r.stars) {
    const auto& f = s.fit;
    out << fmt::format(
        "{},{},{},{:.1f},{:.3f},{:.3f},{:.4f},{:.2f},{:.2f},{:.4f},{:.4f},{:.4f},"
        "{:.4f},{:.4f},{:.4f},{:.4f},{:.2f},{},{},{},{},{:.5f}\n",
        s.name, s.index, s.fold, s.teff_K, s.logg, s.feh, s.vrad_kms, f.TEFF, f.TEFF_ERR, f.LOGG,
        f.LOGG_ERR, f.FEH, f.FEH_ERR, f.VRAD, f.VRAD_ERR, f.VRAD_CCF, f.CHISQ_TOT, f.NPIX_TOT,
        f.NITER, f.RVS_WARN, f.SUCCESS ? 1 : 0, s.loo_rms_full);
  }
  if (!out) throw IoError(path + ": write failed");
}

void write_validation_summary_csv(const std::string& path, const ValidationResult& r) {
  std::ofstream out(path);
  if (!out) throw IoError(path + ": cannot open for writing");
  out << "subset,quantity,n,bias,robust_sigma\n";
  const std::string core = fmt::format("teff_{:.0f}_{:.0f}", r.core_teff_min_K, r.core_teff_max_K);
  for (const auto* set : {&r.core, &r.all})
    for (const auto& s : *set)
      out << fmt::format("{},{},{},{:.5g},{:.5g}\n", set == &r.core ? core : "all", s.quantity, s.n,
                         s.bias, s.robust_sigma);
  out << fmt::format("full_library,loo_rms_median,1,{:.5f},nan\n", r.loo_rms_median);
  out << fmt::format("all,n_failed,{},nan,nan\n", r.n_failed);
  if (!out) throw IoError(path + ": write failed");
}

std::string format_validation_summary(const ValidationResult& r) {
  std::string s = fmt::format(
      "velox templates validate: {}-fold cross-validation (seed {}), {} held-out stars, {} failed "
      "fits\n",
      r.n_folds, r.seed, r.stars.size(), r.n_failed);
  s +=
      fmt::format("{:<28} {:>6} {:>10} {:>12}\n", "subset / quantity", "n", "bias", "robust_sigma");
  const std::string core = fmt::format("{:.0f}-{:.0f} K", r.core_teff_min_K, r.core_teff_max_K);
  for (const auto* set : {&r.core, &r.all})
    for (const auto& st : *set)
      s += fmt::format("{:<28} {:>6} {:>10.4g} {:>12.4g}\n",
                       (set == &r.core ? core : std::string("all")) + " " + st.quantity, st.n,
                       st.bias, st.robust_sigma);
  s += fmt::format("emulator LOO rms (full library, median): {:.5f} of normalised flux\n",
                   r.loo_rms_median);
  return s;
}

}  // namespace velox
