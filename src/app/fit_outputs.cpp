#include "app/fit_outputs.hpp"

#include <fitsio.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <stdexcept>
#include <variant>

#include "app/fit_run.hpp"
#include "common/error.hpp"
#include "io/fits.hpp"
#include "io/h5.hpp"
#include "io/redrock_z.hpp"
#include "io/rvs_warn.hpp"

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
        const auto it =
            std::lower_bound(src->wave_vac_A.begin(), src->wave_vac_A.end(), diag->wave_vac_A[i]);
        if (it != src->wave_vac_A.end() && *it == diag->wave_vac_A[i])
          full[it - src->wave_vac_A.begin()] = static_cast<float>(diag->model[i]);
      }
      Arm& a = arm(src->name, src->wave_vac_A);
      a.data.resize((n_ + 1) * a.wave.size(), NAN);
      float* dst = a.data.data() + n_ * a.wave.size();
      if (a.wave == src->wave_vac_A.vec()) {
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
FitOutputs::FitOutputs(const SelectOptions& opt, const std::string& config,
                       const OutputOptions& out) {
  if (!config.empty()) load_select_config(config, sel_);
  if (!opt.objtypes.empty()) sel_.objtypes = opt.objtypes;
  resolve_objtypes(sel_);
  sel_.targetids.insert(opt.targetids.begin(), opt.targetids.end());
  if (!opt.targetid_file.empty()) read_targetid_file(opt.targetid_file, sel_.targetids);
  if (std::isfinite(opt.min_sn)) sel_.min_sn = opt.min_sn;
  sel_.include_unselected = opt.include_unselected;
  redrock_ = opt.redrock;
  sel_.redrock = !redrock_.empty();
  if (!redrock_.empty() && redrock_ != "auto" && !fs::is_regular_file(redrock_))
    throw ConfigError("--redrock " + redrock_ + ": no such file (give auto or a redrock file)");
  save_models_ = out.save_models;
  if (out.output_format != "h5" && out.output_format != "fits")
    throw ConfigError("--output-format " + out.output_format + ": expected h5 or fits");
}

std::vector<char> FitOutputs::on_file(const std::string& path, SpectrumFile& sf) {
  std::vector<char> keep(sf.spectra.size(), 1);
  std::map<std::string, int> reasons;
  size_t n_keep = 0;
  SelectConfig sel = sel_;
  if (sel.redrock && sf.format == SpectrumFormat::DesiCoadd) {
    const std::string rr = redrock_ == "auto" ? find_redrock_file(path) : redrock_;
    try {
      if (rr.empty()) throw IoError("no redrock-*.fits (or zbest-*.fits) beside it");
      const auto z = read_redrock_z(rr);
      size_t missing = 0;
      for (auto& s : sf.spectra) {
        const auto it = z.find(s.targetid);
        if (it == z.end()) {
          ++missing;
          continue;
        }
        s.meta["RR_Z"] = fmt::format("{:.17g}", it->second.z);
        s.meta["RR_SPECTYPE"] = it->second.spectype;
      }
      if (missing)
        spdlog::warn(
            "{}: {} of {} targets are not in {} (not fitted unless --objtypes selects "
            "them)",
            path, missing, sf.spectra.size(), rr);
    } catch (const std::exception& e) {
      spdlog::warn("{}: --redrock: {}; fitted without the redrock cut (RR_Z NaN)", path, e.what());
      sel.redrock = false;
    }
  } else {
    sel.redrock = false;  // LAMOST, SDSS: no redrock files
  }
  for (size_t i = 0; i < sf.spectra.size(); ++i) {
    std::string why;
    keep[i] = select_target(sf.spectra[i], sel, &why);
    n_keep += keep[i];
    if (!keep[i]) ++reasons[why];
  }
  std::string r;
  for (const auto& [why, n] : reasons) r += fmt::format("{}{} x {}", r.empty() ? "" : ", ", n, why);
  // Per-file detail: debug level (a run over thousands of files would bury its summary).
  spdlog::debug("{}: {} of {} targets selected{}{}", fs::path(path).filename().string(), n_keep,
                sf.spectra.size(), r.empty() ? "" : "; not selected: ", r);
  return keep;
}

void check_fit_config(const std::string& config) {
  if (config.empty()) return;
  (void)load_fit_config(config);
  (void)FitOutputs(SelectOptions{}, config, OutputOptions{});
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
  row.HEALPIX = integer(get("HPXPIXEL"), -1);
  row.RR_Z = num(get("RR_Z"), NAN);
  if (const auto* s = get("RR_SPECTYPE")) row.RR_SPECTYPE = *s;
}

void FitOutputs::add_side_row(const Spectrum* spec, const FitDiagnostics* diag) {
  if (save_models_) models_.add_row(spec, diag);
}

SideTables side_tables(const std::vector<InputRows>& inputs, bool with_scores) {
  SideTables out;
  size_t n = 0;
  for (const auto& in : inputs) {
    std::shared_ptr<FitsTable> fm, sc;
    bool any = false;
    const CatalogRow* const end = in.rows + in.n;
    for (const CatalogRow* r = in.rows; r != end; ++r) any = any || r->ROW_IN_FILE >= 0;
    if (any && in.side_hdus) {
      try {
        auto f = fits::File::open_read(in.path);
        if (f.has_hdu("FIBERMAP")) {
          fm = read_fits_table(f, "FIBERMAP");
          if (with_scores && f.has_hdu("SCORES")) sc = read_fits_table(f, "SCORES");
        }
      } catch (const std::exception& e) {
        spdlog::warn("{}: FIBERMAP not copied: {}", in.path, e.what());
      }
    }
    for (const CatalogRow* r = in.rows; r != end; ++r) {
      const size_t k = r->ROW_IN_FILE >= 0 ? static_cast<size_t>(r->ROW_IN_FILE) : SIZE_MAX;
      out.fibermap.add_row(fm.get(), k);
      if (with_scores) out.scores.add_row(sc.get(), k);
    }
    n += in.n;
  }
  // Inputs without a FIBERMAP / SCORES (LAMOST, SDSS) only: no columns, n rows.
  out.fibermap.set_rows(n);
  out.scores.set_rows(with_scores ? n : 0);
  return out;
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
  }
}

void write_side_h5(h5::File& f, const SideTables& side) {
  if (side.fibermap.n_columns() > 0) side.fibermap.write_h5(f, "/fibermap");
}

void FitOutputs::write_h5(h5::File& f) const {
  if (save_models_) models_.write_h5(f);
}

std::string FitOutputs::fits_path(const std::string& h5_path) {
  fs::path p(h5_path);
  p.replace_extension(".fits");
  if (p == fs::path(h5_path)) p += ".rvtab.fits";
  return p.string();
}

namespace {

// The primary header of the rvspecfit-layout file: the keywords rvspecfit's desi_fit.py writes
// (get_prim_header: DEPNAMnn/DEPVERnn software, TMPLCONn/TMPLREVn/TMPLSVRn template library,
// RVS_CONF, RVS_CMD; the DR1 model lists all but DEP*), filled with velox's provenance, plus
// velox's own: VLXGIT (commit), VLXCFGH (fit_config_hash). Then CHECKSUM/DATASUM.
void write_rvtab_primary(fits::File& f, const Provenance& prov) {
  auto get = [&](const char* k) {
    const auto it = prov.find(k);
    return it == prov.end() ? std::string() : it->second;
  };
  f.write_image({}, {});
  float cfitsio_version = 0.0f;
  fits_get_version(&cfitsio_version);
  const std::pair<std::string, std::string> deps[] = {
      {"velox", get("velox_version")}, {"cfitsio", fmt::format("{:.2f}", cfitsio_version)}};
  int k = 0;
  for (const auto& [name, version] : deps) {
    f.write_key(fmt::format("DEPNAM{:02d}", k), name, "Software");
    f.write_key(fmt::format("DEPVER{:02d}", k), version, "Version");
    ++k;
  }
  // One library serves every arm in velox: one TMPLCON/TMPLREV/TMPLSVR triple.
  f.write_key("TMPLCON0", fs::path(get("templates_path")).filename().string(),
              "Spec template library (velox HDF5)");
  f.write_key("TMPLREV0", get("templates_checksum"), "Spec template revision (checksum)");
  f.write_key("TMPLSVR0", get("templates_velox_version"), "Spec template soft version");
  f.write_key("RVS_CONF", get("config_path").empty() ? "(velox defaults)" : get("config_path"),
              "velox fit configuration file");
  f.write_key("RVS_CMD", get("command_line"), "velox command line");
  f.write_key("VLXGIT", get("git_commit"), "velox git commit");
  f.write_key("VLXCFGH", get("fit_config_hash"), "velox fit configuration hash");
  f.write_checksum();
}

// The FITS form (FITS 4.0 section 4.3, as the DESI data model writes it) of the unit the catalog's
// column table gives the column of `field`: "km/s" -> "km s-1"; "dex", not a FITS unit, is left
// blank, as DR1's rvtab has LOGG and FEH. One table of units for HDF5 and FITS.
std::string fits_unit(double CatalogRow::*field) {
  for (const auto& c : catalog_columns()) {
    const auto* f = std::get_if<double CatalogRow::*>(&c.field);
    if (!f || *f != field) continue;
    const std::string u = c.unit;
    if (u == "km/s") return "km s-1";
    if (u == "dex") return "";
    return u;
  }
  throw std::logic_error("fits_unit: a field outside the catalog's column table");
}

}  // namespace

void write_rvtab_fits(const std::string& path, const std::vector<CatalogRow>& rows,
                      const Provenance& prov, const SideTables& side,
                      const std::vector<CatalogRow>& epochs) {
  // RVTAB: the DESI MWS DR1 data model's columns, names, TFORMs and units, in its order
  // (desimilkyway/desi-mws-dr1-datamodel rvtab_coadd; tests/data/desi_mws_dr1_rvtab_columns.csv
  // is the copy the tests check against), then velox's extras.
  RowTable t;
  t.set_rows(0);
  struct D {
    const char* name;
    double CatalogRow::*field;
  };
  const D doubles[] = {{"VRAD", &CatalogRow::VRAD},
                       {"VRAD_ERR", &CatalogRow::VRAD_ERR},
                       {"VRAD_SKEW", &CatalogRow::VRAD_SKEW},
                       {"VRAD_KURT", &CatalogRow::VRAD_KURT},
                       {"LOGG", &CatalogRow::LOGG},
                       {"TEFF", &CatalogRow::TEFF},
                       {"ALPHAFE", &CatalogRow::ALPHAFE},
                       {"FEH", &CatalogRow::FEH},
                       {"LOGG_ERR", &CatalogRow::LOGG_ERR},
                       {"TEFF_ERR", &CatalogRow::TEFF_ERR},
                       {"ALPHAFE_ERR", &CatalogRow::ALPHAFE_ERR},
                       {"FEH_ERR", &CatalogRow::FEH_ERR},
                       {"VSINI", &CatalogRow::VSINI},
                       {"CHISQ_TOT", &CatalogRow::CHISQ_TOT},
                       {"CHISQ_C_TOT", &CatalogRow::CHISQ_C},
                       {"CHISQ_B", &CatalogRow::CHISQ_B},
                       {"CHISQ_C_B", &CatalogRow::CHISQ_C_B},
                       {"CHISQ_R", &CatalogRow::CHISQ_R},
                       {"CHISQ_C_R", &CatalogRow::CHISQ_C_R},
                       {"CHISQ_Z", &CatalogRow::CHISQ_Z},
                       {"CHISQ_C_Z", &CatalogRow::CHISQ_C_Z}};
  for (const auto& d : doubles) {
    auto& c = t.column(d.name, 'f', fits_unit(d.field));
    for (const auto& r : rows) c.f.push_back(r.*(d.field));
  }
  auto& warn_c = t.column("RVS_WARN", 'i');
  auto& refid = t.column("REF_ID", 'i');
  auto& refcat = t.column("REF_CAT", 's', "", "2A");
  auto& ra = t.column("TARGET_RA", 'f', fits_unit(&CatalogRow::TARGET_RA));
  auto& dec = t.column("TARGET_DEC", 'f', fits_unit(&CatalogRow::TARGET_DEC));
  auto& tid = t.column("TARGETID", 'i');
  auto& snb = t.column("SN_B", 'f', fits_unit(&CatalogRow::SN_B), "E");
  auto& snr = t.column("SN_R", 'f', fits_unit(&CatalogRow::SN_R), "E");
  auto& snz = t.column("SN_Z", 'f', fits_unit(&CatalogRow::SN_Z), "E");
  auto& succ = t.column("SUCCESS", 'l');
  auto& rrz = t.column("RR_Z", 'f', fits_unit(&CatalogRow::RR_Z));
  auto& rrtype = t.column("RR_SPECTYPE", 's', "", "6A");
  // velox extras after the model's columns: the input's healpix (as the combined rvpix tables
  // carry it), the CCF velocity, and FIBER / EXPID with the int32 type of rvtab_spectra.
  auto& hpx = t.column("HEALPIX", 'i');
  auto& vccf = t.column("VRAD_CCF", 'f', fits_unit(&CatalogRow::VRAD_CCF));
  auto& expid = t.column("EXPID", 'i', "", "J");
  auto& fiber = t.column("FIBER", 'i', "", "J");
  // VSINI keeps the data model's meaning (the fitted value); an upper limit is told by
  // VSINI_UPPER (km/s, NaN for a detection or no fit) and FIT_INFO's VSINI_UPPER_LIMIT bit, as in
  // the HDF5 catalog (docs/vsini.md, docs/data-model.md).
  auto& vup = t.column("VSINI_UPPER", 'f', fits_unit(&CatalogRow::VSINI_UPPER));
  auto& finfo = t.column("FIT_INFO", 'i');
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
    rrz.f.push_back(r.RR_Z);
    rrtype.s.push_back(r.RR_SPECTYPE);
    hpx.i.push_back(r.HEALPIX);
    vccf.f.push_back(r.VRAD_CCF);
    expid.i.push_back(r.EXPID);
    fiber.i.push_back(r.FIBER);
    vup.f.push_back(r.VSINI_UPPER);
    finfo.i.push_back(r.FIT_INFO);
  }
  // NEXP: COADD_NUMEXP of the FIBERMAP row (aligned with the catalog), else -1.
  {
    auto& c = t.column("NEXP", 'i');
    const TableColumn* src = nullptr;
    for (const auto& fc : side.fibermap.columns())
      if (fc.name == "COADD_NUMEXP") src = &fc;
    for (size_t i = 0; i < rows.size(); ++i)
      c.i.push_back(src && i < src->size()
                        ? (src->kind == 'i' ? src->i[i] : static_cast<int64_t>(src->f[i]))
                        : -1);
  }
  // --epochs: the stars' constancy statistics, and the EPOCHS table.
  RowTable ep;
  if (!epochs.empty()) {
    const D stats[] = {{"VRAD_CHISQ_CONST", &CatalogRow::VRAD_CHISQ_CONST},
                       {"VRAD_LOGP_CONST", &CatalogRow::VRAD_LOGP_CONST},
                       {"VRAD_MAXDIFF_SIG", &CatalogRow::VRAD_MAXDIFF_SIG}};
    auto& n = t.column("N_EPOCHS", 'i', "", "J");
    for (const auto& r : rows) n.i.push_back(r.N_EPOCHS);
    for (const auto& d : stats) {
      auto& c = t.column(d.name, 'f', fits_unit(d.field));
      for (const auto& r : rows) c.f.push_back(r.*(d.field));
    }
    // Columns in this order: TARGETID, EPOCH, EXPID, MJD, VRAD, VRAD_ERR, SN, CHISQ_TOT, RCHISQ,
    // RVS_WARN, SUCCESS.
    ep.column("TARGETID", 'i');
    ep.column("EPOCH", 'i', "", "J");
    ep.column("EXPID", 'i', "", "J");
    const D e_doubles[] = {{"MJD", &CatalogRow::MJD},
                           {"VRAD", &CatalogRow::VRAD},
                           {"VRAD_ERR", &CatalogRow::VRAD_ERR},
                           {"SN", &CatalogRow::SN},
                           {"CHISQ_TOT", &CatalogRow::CHISQ_TOT},
                           {"RCHISQ", &CatalogRow::RCHISQ}};
    for (const auto& d : e_doubles) {
      auto& c = ep.column(d.name, 'f', fits_unit(d.field), std::string(d.name) == "SN" ? "E" : "");
      for (const auto& r : epochs) c.f.push_back(r.*(d.field));
    }
    ep.column("RVS_WARN", 'i');
    ep.column("SUCCESS", 'l');
    for (const auto& r : epochs) {
      ep.column("TARGETID", 'i').i.push_back(r.TARGETID);
      ep.column("EPOCH", 'i', "", "J").i.push_back(r.EPOCH);
      ep.column("EXPID", 'i', "", "J").i.push_back(r.EXPID);
      ep.column("RVS_WARN", 'i').i.push_back(r.RVS_WARN);
      ep.column("SUCCESS", 'l').i.push_back(r.SUCCESS);
    }
    ep.set_rows(epochs.size());
  }
  t.set_rows(rows.size());

  const std::string tmp = path + ".tmp";
  try {
    auto f = fits::File::create(tmp);
    write_rvtab_primary(f, prov);
    t.write_fits(f, "RVTAB");
    f.write_checksum();
    // Inputs without a FIBERMAP / SCORES (LAMOST, SDSS): tables holding TARGETID only.
    for (const auto* src : {&side.fibermap, &side.scores}) {
      const char* name = src == &side.fibermap ? "FIBERMAP" : "SCORES";
      if (src->n_columns() > 0 && src->n_rows() == rows.size()) {
        src->write_fits(f, name);
        f.write_checksum();
        continue;
      }
      RowTable ids;
      auto& c = ids.column("TARGETID", 'i');
      for (const auto& r : rows) c.i.push_back(r.TARGETID);
      ids.set_rows(rows.size());
      ids.write_fits(f, name);
      f.write_checksum();
    }
    if (!epochs.empty()) {
      ep.write_fits(f, "EPOCHS");
      f.write_checksum();
    }
    f.close();
    // Counts as written once it reads back whole: every table with its row count.
    auto back = fits::File::open_read(tmp);
    const std::pair<const char*, size_t> tables[] = {
        {"RVTAB", rows.size()}, {"EPOCHS", epochs.empty() ? 0 : epochs.size()}};
    for (const auto& [name, n] : tables) {
      if (n == 0 && std::string(name) == "EPOCHS") continue;
      back.move_to(name);
      if (back.num_rows() != static_cast<int64_t>(n))
        throw IoError(fmt::format("{}: HDU {} reads back {} rows of the {} written", tmp, name,
                                  back.num_rows(), n));
    }
  } catch (...) {
    std::remove(tmp.c_str());
    throw;
  }
  std::error_code ec;
  try {
    h5::sync_file(tmp);  // the data on disk before the name
  } catch (...) {
    std::remove(tmp.c_str());
    throw;
  }
  fs::rename(tmp, path, ec);
  if (ec) {
    std::remove(tmp.c_str());
    throw IoError(path + ": cannot rename " + tmp + ": " + ec.message(), ec.value());
  }
  h5::sync_folder_of(path);
  spdlog::info("fit: rvspecfit-layout table {}", path);
}

}  // namespace velox
