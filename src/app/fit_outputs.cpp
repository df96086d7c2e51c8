#include "app/fit_outputs.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>

#include "app/fit_run.hpp"
#include "common/error.hpp"
#include "fit/rvs_warn.hpp"
#include "io/fits.hpp"
#include "io/h5.hpp"

namespace velox {

namespace fs = std::filesystem;

// ------------------------------------------------------------------------------- ModelStore
ModelStore::Arm& ModelStore::arm(const std::string& name, const std::vector<double>& wave) {
  for (auto& a : arms_)
    if (a.name == name) return a;
  arms_.push_back({name, wave, std::vector<float>(n_ * wave.size(), NAN)});
  return arms_.back();
}

void ModelStore::add_row(const Spectrum* spec, const FitDiagnostics* diag) {
  if (spec)  // every arm of the input gets a dataset, even one never fitted (Z with MILES)
    for (const auto& a : spec->arms)
      if (!a.wave_vac_A.empty()) arm(a.name, a.wave_vac_A);
  for (auto& a : arms_) a.data.resize((n_ + 1) * a.wave.size(), NAN);
  if (spec && diag && !diag->model.empty()) {
    const size_t n = std::min(diag->model.size(), diag->wave_vac_A.size());
    // Used arm k of the fit is the k-th spectrum arm (in order) that holds its pixels.
    size_t p = 0, next_arm = 0;
    while (p < n) {
      const int k = diag->arm_of_pixel[p];
      size_t q = p;
      while (q < n && diag->arm_of_pixel[q] == k) ++q;
      const ArmData* src = nullptr;
      for (; next_arm < spec->arms.size() && !src; ++next_arm) {
        const auto& w = spec->arms[next_arm].wave_vac_A;
        if (std::binary_search(w.begin(), w.end(), diag->wave_vac_A[p]) &&
            std::binary_search(w.begin(), w.end(), diag->wave_vac_A[q - 1]))
          src = &spec->arms[next_arm];
      }
      if (!src) break;
      // Model on the spectrum's own grid, NaN at unused pixels.
      std::vector<float> full(src->size(), NAN);
      for (size_t i = p; i < q; ++i) {
        const auto it = std::lower_bound(src->wave_vac_A.begin(), src->wave_vac_A.end(),
                                         diag->wave_vac_A[i]);
        if (it != src->wave_vac_A.end() && *it == diag->wave_vac_A[i])
          full[it - src->wave_vac_A.begin()] = static_cast<float>(diag->model[i]);
      }
      Arm& a = arm(src->name, src->wave_vac_A);
      a.data.resize((n_ + 1) * a.wave.size(), NAN);
      float* dst = a.data.data() + n_ * a.wave.size();
      if (a.wave == src->wave_vac_A) {
        std::copy(full.begin(), full.end(), dst);
      } else {  // another grid: linear interpolation (NaN propagates, NaN outside)
        const auto& w = src->wave_vac_A;
        for (size_t j = 0; j < a.wave.size(); ++j) {
          const auto it = std::lower_bound(w.begin(), w.end(), a.wave[j]);
          if (it == w.end() || it == w.begin()) continue;
          const size_t r = it - w.begin();
          const double t = (a.wave[j] - w[r - 1]) / (w[r] - w[r - 1]);
          dst[j] = static_cast<float>((1 - t) * full[r - 1] + t * full[r]);
        }
      }
      p = q;
    }
  }
  ++n_;
}

void ModelStore::write_h5(h5::File& f) const {
  for (const auto& a : arms_) {
    f.write("/models/" + a.name, a.data, {n_, a.wave.size()});
    f.write("/models/" + a.name + "_wave", a.wave, {a.wave.size()});
    f.set_attr("/models/" + a.name, "unit", std::string("flux units of the input"));
    f.set_attr("/models/" + a.name + "_wave", "unit", std::string("Angstrom (vacuum)"));
  }
}

// ------------------------------------------------------------------------------- FitOutputs
FitOutputs::FitOutputs(const FitOptions& opt) {
  if (!opt.config.empty()) load_select_config(opt.config, sel_);
  if (!opt.objtypes.empty()) sel_.objtypes = opt.objtypes;
  resolve_objtypes(sel_);
  sel_.targetids.insert(opt.targetids.begin(), opt.targetids.end());
  if (!opt.targetid_file.empty()) read_targetid_file(opt.targetid_file, sel_.targetids);
  if (std::isfinite(opt.min_sn)) sel_.min_sn = opt.min_sn;
  sel_.include_unselected = opt.include_unselected;
  save_models_ = opt.save_models;
  if (opt.output_format != "h5" && opt.output_format != "fits")
    throw ConfigError("--output-format " + opt.output_format + ": expected h5 or fits");
  write_fits_ = opt.output_format == "fits";
}

std::vector<char> FitOutputs::on_file(const std::string& path, const SpectrumFile& sf) {
  std::vector<char> keep(sf.spectra.size(), 1);
  std::map<std::string, int> reasons;
  size_t n_keep = 0;
  for (size_t i = 0; i < sf.spectra.size(); ++i) {
    std::string why;
    keep[i] = select_target(sf.spectra[i], sel_, &why);
    n_keep += keep[i];
    if (!keep[i]) ++reasons[why];
  }
  if (sf.format == SpectrumFormat::DesiCoadd) {
    const std::string key = fs::path(path).filename().string();
    try {
      auto f = fits::File::open_read(path);
      fibermaps_[key] = read_fits_table(f, "FIBERMAP");
      if (write_fits_ && f.has_hdu("SCORES")) scores_[key] = read_fits_table(f, "SCORES");
    } catch (const std::exception& e) {
      spdlog::warn("{}: FIBERMAP not copied to /fibermap: {}", path, e.what());
    }
  }
  std::string r;
  for (const auto& [why, n] : reasons) r += fmt::format("{}{} x {}", r.empty() ? "" : ", ", n, why);
  // Per-file detail: debug level (a run over thousands of files would bury its summary).
  spdlog::debug("{}: {} of {} targets selected{}{}", fs::path(path).filename().string(), n_keep,
                sf.spectra.size(), r.empty() ? "" : "; not selected: ", r);
  return keep;
}

void fill_fibermap_columns(const Spectrum& spec, CatalogRow& row) {
  auto get = [&](const char* k) -> const std::string* {
    const auto it = spec.meta.find(k);
    return it == spec.meta.end() || it->second.empty() ? nullptr : &it->second;
  };
  auto num = [](const std::string* s, double dflt) {
    if (!s) return dflt;
    char* end = nullptr;
    const double v = std::strtod(s->c_str(), &end);
    return end == s->c_str() ? dflt : v;
  };
  auto integer = [](const std::string* s, int64_t dflt) {
    if (!s) return dflt;
    char* end = nullptr;
    const long long v = std::strtoll(s->c_str(), &end, 10);
    return end == s->c_str() ? dflt : static_cast<int64_t>(v);
  };
  row.TARGET_RA = num(get("TARGET_RA"), NAN);
  row.TARGET_DEC = num(get("TARGET_DEC"), NAN);
  row.REF_ID = integer(get("REF_ID"), -1);
  if (const auto* s = get("REF_CAT")) row.REF_CAT = *s;
  row.FIBER = static_cast<int32_t>(integer(get("FIBER"), -1));
  row.EXPID = static_cast<int32_t>(integer(get("EXPID"), -1));
}

void FitOutputs::add_side_row(const Spectrum* spec, const FitDiagnostics* diag) {
  const FitsTable *fm = nullptr, *sc = nullptr;
  if (spec) {
    auto it = fibermaps_.find(spec->source_file);
    if (it != fibermaps_.end()) fm = it->second.get();
    auto is = scores_.find(spec->source_file);
    if (is != scores_.end()) sc = is->second.get();
  }
  const size_t r = spec ? static_cast<size_t>(spec->row_in_file) : 0;
  fibermap_rows_.add_row(fm, r);
  if (write_fits_) scores_rows_.add_row(sc, r);
  if (save_models_) models_.add_row(spec, diag);
}

void FitOutputs::collect(const std::vector<SpectrumFile>& chunk,
                         const std::vector<std::vector<char>>& sel,
                         std::vector<CatalogRow>&& fitted, const std::vector<FitDiagnostics>& diags,
                         std::vector<CatalogRow>& out) {
  size_t k = 0;
  for (size_t f = 0; f < chunk.size(); ++f) {
    for (size_t i = 0; i < chunk[f].spectra.size(); ++i) {
      const Spectrum& s = chunk[f].spectra[i];
      CatalogRow row;
      const FitDiagnostics* d = nullptr;
      if (sel[f][i]) {
        if (k >= fitted.size()) throw std::logic_error("FitOutputs::collect: rows out of step");
        d = k < diags.size() ? &diags[k] : nullptr;
        row = std::move(fitted[k++]);
      } else if (sel_.include_unselected) {
        row.TARGETID = s.targetid;
        row.SOURCE_FILE = s.source_file;
        row.ROW_IN_FILE = s.row_in_file;
        row.RVS_WARN = warn::kNotFitted;
        row.SUCCESS = false;
      } else {
        continue;
      }
      fill_fibermap_columns(s, row);
      add_side_row(&s, d);
      out.push_back(std::move(row));
    }
    // This file's FIBERMAP/SCORES are no longer needed (other files of the read-ahead chunk
    // keep theirs until their own collect()).
    if (!chunk[f].spectra.empty()) {
      fibermaps_.erase(chunk[f].spectra.front().source_file);
      scores_.erase(chunk[f].spectra.front().source_file);
    }
  }
}

void FitOutputs::write_h5(h5::File& f) const {
  if (fibermap_rows_.n_columns() > 0) fibermap_rows_.write_h5(f, "/fibermap");
  if (save_models_) models_.write_h5(f);
}

std::string FitOutputs::fits_path(const std::string& h5_path) {
  fs::path p(h5_path);
  p.replace_extension(".fits");
  if (p == fs::path(h5_path)) p += ".rvtab.fits";
  return p.string();
}

void FitOutputs::write_fits(const std::string& h5_path, const std::vector<CatalogRow>& rows) const {
  if (!write_fits_) return;
  RowTable t;
  t.set_rows(0);
  struct D {
    const char* name;
    double CatalogRow::*field;
    const char* unit;
  };
  double CatalogRow::*none = nullptr;
  const D doubles[] = {
      {"VRAD", &CatalogRow::VRAD, "km s-1"},       {"VRAD_ERR", &CatalogRow::VRAD_ERR, "km s-1"},
      {"VRAD_SKEW", none, ""},                   {"VRAD_KURT", none, ""},
      {"LOGG", &CatalogRow::LOGG, ""},        {"TEFF", &CatalogRow::TEFF, "K"},
      {"ALPHAFE", &CatalogRow::ALPHAFE, ""},  {"FEH", &CatalogRow::FEH, ""},
      {"LOGG_ERR", &CatalogRow::LOGG_ERR, ""}, {"TEFF_ERR", &CatalogRow::TEFF_ERR, "K"},
      {"ALPHAFE_ERR", &CatalogRow::ALPHAFE_ERR, ""}, {"FEH_ERR", &CatalogRow::FEH_ERR, ""},
      {"VSINI", &CatalogRow::VSINI, "km s-1"}};
  for (const auto& d : doubles) {
    auto& c = t.column(d.name, 'f', d.unit);
    for (const auto& r : rows) c.f.push_back(d.field ? r.*(d.field) : NAN);
  }
  // NEXP: COADD_NUMEXP of the FIBERMAP row (aligned with the catalog), else -1.
  {
    auto& c = t.column("NEXP", 'i');
    const TableColumn* src = nullptr;
    for (const auto& fc : fibermap_rows_.columns())
      if (fc.name == "COADD_NUMEXP") src = &fc;
    for (size_t i = 0; i < rows.size(); ++i)
      c.i.push_back(src && i < src->size() ? (src->kind == 'i' ? src->i[i]
                                                               : static_cast<int64_t>(src->f[i]))
                                           : -1);
  }
  const D chisq[] = {{"CHISQ_TOT", &CatalogRow::CHISQ_TOT, ""}, {"CHISQ_C_TOT", &CatalogRow::CHISQ_C, ""},
                     {"CHISQ_B", &CatalogRow::CHISQ_B, ""},     {"CHISQ_C_B", none, ""},
                     {"CHISQ_R", &CatalogRow::CHISQ_R, ""},     {"CHISQ_C_R", none, ""},
                     {"CHISQ_Z", &CatalogRow::CHISQ_Z, ""},     {"CHISQ_C_Z", none, ""}};
  for (const auto& d : chisq) {
    auto& c = t.column(d.name, 'f', d.unit);
    for (const auto& r : rows) c.f.push_back(d.field ? r.*(d.field) : NAN);
  }
  auto& warn_c = t.column("RVS_WARN", 'i');
  auto& refid = t.column("REF_ID", 'i');
  auto& refcat = t.column("REF_CAT", 's');
  auto& ra = t.column("TARGET_RA", 'f', "deg");
  auto& dec = t.column("TARGET_DEC", 'f', "deg");
  auto& tid = t.column("TARGETID", 'i');
  auto& snb = t.column("SN_B", 'f');
  auto& snr = t.column("SN_R", 'f');
  auto& snz = t.column("SN_Z", 'f');
  auto& succ = t.column("SUCCESS", 'l');
  auto& vccf = t.column("VRAD_CCF", 'f', "km s-1");  // velox extras after rvspecfit's columns
  auto& expid = t.column("EXPID", 'i');
  auto& fiber = t.column("FIBER", 'i');
  for (const auto& r : rows) {
    warn_c.i.push_back(r.RVS_WARN);
    refid.i.push_back(r.REF_ID);
    refcat.s.push_back(r.REF_CAT);
    ra.f.push_back(r.TARGET_RA);
    dec.f.push_back(r.TARGET_DEC);
    tid.i.push_back(r.TARGETID);
    snb.f.push_back(r.SN_B);
    snr.f.push_back(r.SN_R);
    snz.f.push_back(r.SN_Z);
    succ.i.push_back(r.SUCCESS);
    vccf.f.push_back(r.VRAD_CCF);
    expid.i.push_back(r.EXPID);
    fiber.i.push_back(r.FIBER);
  }
  t.set_rows(rows.size());

  const std::string path = fits_path(h5_path), tmp = path + ".tmp";
  try {
    auto f = fits::File::create(tmp);
    t.write_fits(f, "RVTAB");
    // Inputs without a FIBERMAP / SCORES (LAMOST, SDSS): tables holding TARGETID only.
    for (const auto* src : {&fibermap_rows_, &scores_rows_}) {
      const char* name = src == &fibermap_rows_ ? "FIBERMAP" : "SCORES";
      if (src->n_columns() > 0 && src->n_rows() == rows.size()) {
        src->write_fits(f, name);
        continue;
      }
      RowTable ids;
      auto& c = ids.column("TARGETID", 'i');
      for (const auto& r : rows) c.i.push_back(r.TARGETID);
      ids.set_rows(rows.size());
      ids.write_fits(f, name);
    }
  } catch (...) {
    std::remove(tmp.c_str());
    throw;
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    std::remove(tmp.c_str());
    throw IoError(path + ": cannot rename " + tmp + ": " + ec.message());
  }
  spdlog::info("fit: rvspecfit-layout table {}", path);
}

}  // namespace velox
