// Template libraries: MILES (Sanchez-Blazquez et al. 2006; Falcon-Barroso et al. 2011),
// PHOENIX-format grids (Husser et al. 2013), STELIB (Le Borgne et al. 2003) and the Kesseli et
// al. (2017) M-dwarf templates. See io/readers.hpp for the directory layouts.
#include <cerrno>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <cstdlib>

#include "common/error.hpp"
#include "io/fits.hpp"
#include "io/readers.hpp"
#include "io/readers_detail.hpp"
#include "kernels/physics.hpp"

namespace velox {
namespace {

namespace fs = std::filesystem;

// MILES FWHM when the header has none (Falcon-Barroso et al. 2011: 2.51 A, files say 2.5).
constexpr double kMilesDefaultFwhmA = 2.5;

struct Labels {
  double teff_K = NAN, logg = NAN, feh = NAN;
};

bool is_fits_name(const std::string& name) {
  auto ends = [&](const std::string& suffix) {
    return name.size() >= suffix.size() &&
           name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  return ends(".fits") || ends(".fits.gz") || ends(".fit");
}

std::string strip_fits_suffix(std::string name) {
  for (const std::string suffix : {".fits.gz", ".fits", ".fit"}) {
    if (name.size() > suffix.size() &&
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
      return name.substr(0, name.size() - suffix.size());
    }
  }
  return name;
}

bool is_wave_file(const std::string& name) {
  std::string upper = name;
  std::transform(upper.begin(), upper.end(), upper.begin(), ::toupper);
  return upper.rfind("WAVE", 0) == 0 && is_fits_name(name);
}

// Sorted FITS file names (not paths) in `dir`.
std::vector<std::string> fits_files(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.is_regular_file() && is_fits_name(e.path().filename().string())) {
      names.push_back(e.path().filename().string());
    }
  }
  std::sort(names.begin(), names.end());
  return names;
}

// MILES_params.db: whitespace table "id Teff logg [Fe/H]", '#' comments; 99999/9999 = missing.
std::map<int64_t, Labels> read_miles_params(const fs::path& path) {
  std::ifstream in(path);
  if (!in) throw IoError(path.string() + ": cannot open");
  std::map<int64_t, Labels> table;
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    const auto first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos || line[first] == '#') continue;
    std::istringstream row(line);
    std::string id_text;
    Labels l;
    int64_t id = 0;
    // A malformed row is skipped; its star is then "not listed" (a catalogue gap) in read_miles.
    // The v9.1 table has one, line 254 "022.  7950 3.95 0.35": paramsMILES_v9.1.txt gives the
    // same truncated id for HD044691A. It is most likely m0221V (the one file without a row), but
    // the table does not say so, so velox does not guess: a debug line, not a warning every
    // build repeats to users who cannot act on it.
    if (!(row >> id_text >> l.teff_K >> l.logg >> l.feh) || !detail::parse_int64(id_text, id)) {
      spdlog::debug("{}: line {}: cannot parse '{}' as 'id Teff logg [Fe/H]', skipped",
                    path.string(), line_no, line);
      continue;
    }
    table[id] = l;
  }
  if (in.bad()) throw IoError(path.string() + ": read error", errno);
  return table;
}

bool is_missing(double v) { return !std::isfinite(v) || v == 9999.0 || v == 99999.0; }

// Reads one MILES file; throws IoError on a broken file. `labels` may be null (use header keys).
TemplateSpectrum read_miles_file(const fs::path& path, const std::string& name,
                                 const Labels* labels, double& fwhm_A) {
  auto f = fits::File::open_read(path.string());
  TemplateSpectrum t;
  t.name = name;
  if (labels) {
    t.teff_K = labels->teff_K;
    t.logg = labels->logg;
    t.feh = labels->feh;
  } else {
    t.teff_K = std::pow(10.0, f.key_double("MLOGT"));
    t.logg = f.key_double("MLOGG");
    t.feh = f.key_double("MFEH");
  }
  const double crval = f.key_double("CRVAL1"), cdelt = f.key_double("CDELT1");
  const double crpix = f.key_double("CRPIX1", 1.0);
  fwhm_A = f.key_double("FWHM", kMilesDefaultFwhmA);
  const auto flux = f.read_image_double();
  t.flux.assign(flux.begin(), flux.end());
  t.wave_vac_A.resize(flux.size());
  for (size_t i = 0; i < flux.size(); ++i) {
    const double wave_air_A = crval + (static_cast<double>(i) + 1.0 - crpix) * cdelt;
    t.wave_vac_A[i] = air_to_vacuum_A(wave_air_A);
  }
  return t;
}

TemplateSet read_miles(const fs::path& dir) {
  TemplateSet set;
  set.kind = "miles";
  set.medium = "air";
  const fs::path fits_dir = fs::is_directory(dir / "fits") ? dir / "fits" : dir;
  const fs::path params = dir / "MILES_params.db";
  const bool have_params = fs::exists(params);
  const auto table = have_params ? read_miles_params(params) : std::map<int64_t, Labels>{};
  static const std::regex miles_id("m(\\d{4})V");

  for (const auto& file : fits_files(fits_dir)) {
    std::string name = strip_fits_suffix(file);
    for (const std::string prefix : {"MILES_res2.50_star_", "MILES_res2.50_"}) {
      if (name.rfind(prefix, 0) == 0) {
        name = name.substr(prefix.size());
        break;
      }
    }
    const Labels* labels = nullptr;
    if (have_params) {
      std::smatch m;
      if (!std::regex_search(name, m, miles_id)) {
        set.skipped.push_back(name + ": file name has no MILES id mNNNNV");
        continue;
      }
      const auto it = table.find(std::stoi(m[1].str()));
      if (it == table.end()) {
        set.skipped.push_back(name + ": not listed in MILES_params.db");
        ++set.n_unlabelled;
        continue;
      }
      if (is_missing(it->second.teff_K) || is_missing(it->second.logg) ||
          is_missing(it->second.feh)) {
        set.skipped.push_back(name + ": missing label (9999/99999) in MILES_params.db");
        ++set.n_unlabelled;
        continue;
      }
      labels = &it->second;
    }
    try {
      double fwhm_A = NAN;
      auto t = read_miles_file(fits_dir / file, name, labels, fwhm_A);
      if (std::isnan(set.fwhm_A)) set.fwhm_A = fwhm_A;
      if (fwhm_A != set.fwhm_A) {
        set.skipped.push_back(name + ": FWHM " + std::to_string(fwhm_A) + " A differs from " +
                              std::to_string(set.fwhm_A) + " A of the library");
        continue;
      }
      set.spectra.push_back(std::move(t));
    } catch (const IoError& e) {
      set.skipped.push_back(name + ": " + e.what());
    }
  }
  return set;
}

TemplateSet read_phoenix(const fs::path& dir, const std::string& wave_file) {
  TemplateSet set;
  set.kind = "phoenix";
  auto wf = fits::File::open_read((dir / wave_file).string());
  const auto wave_read = wf.read_image_double();
  const std::vector<double> wave_vac_A(wave_read.begin(), wave_read.end());
  if (wave_vac_A.empty()) wf.fail("empty wavelength image");
  for (const auto& file : fits_files(dir)) {
    if (is_wave_file(file)) continue;
    const std::string name = strip_fits_suffix(file);
    try {
      auto f = fits::File::open_read((dir / file).string());
      TemplateSpectrum t;
      t.name = name;
      t.teff_K = f.key_double("PHXTEFF");
      t.logg = f.key_double("PHXLOGG");
      t.feh = f.key_double("PHXM_H");
      t.alphafe = f.key_double("PHXALPHA", 0.0);
      const auto flux = f.read_image_double();
      t.flux.assign(flux.begin(), flux.end());
      if (t.flux.size() != wave_vac_A.size()) {
        f.fail("flux has " + std::to_string(t.flux.size()) + " pixels, " + wave_file + " has " +
               std::to_string(wave_vac_A.size()));
      }
      t.wave_vac_A = wave_vac_A;
      set.has_alpha = set.has_alpha || t.alphafe != 0.0;
      set.spectra.push_back(std::move(t));
    } catch (const IoError& e) {
      set.skipped.push_back(name + ": " + e.what());
    }
  }
  return set;
}

// STELIB's FWHM (mangadap's configuration of STELIB v3.2).
constexpr double kStelibFwhmA = 3.4;

// The finite number `text` holds (trailing blanks allowed); anything else ('-', '...', blank): NaN.
double number_or_nan(const std::string& text) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end == text.c_str()) return NAN;
  while (*end == ' ') ++end;
  return *end == '\0' && std::isfinite(v) ? v : NAN;
}

// A header label: a number, or a string holding one; '-', blank or absent: NaN.
double header_label(const fits::File& f, const std::string& key) {
  return f.has_key(key) ? number_or_nan(f.key_string(key)) : NAN;
}

// Trims runs of flux <= 0 or non-finite at both ends; interior gaps become NaN. Returns
// false (with `why`) if fewer than 100 good pixels remain.
bool trim_bad_ends(TemplateSpectrum& t, std::string* why) {
  auto good = [&](size_t i) { return std::isfinite(t.flux[i]) && t.flux[i] > 0; };
  size_t a = 0, b = t.flux.size();
  while (a < b && !good(a)) ++a;
  while (b > a && !good(b - 1)) --b;
  if (b - a < 100) {
    *why = "fewer than 100 pixels with positive flux";
    return false;
  }
  t.flux = std::vector<double>(t.flux.begin() + a, t.flux.begin() + b);
  t.wave_vac_A = std::vector<double>(t.wave_vac_A.begin() + a, t.wave_vac_A.begin() + b);
  // Interior gaps: exact zeros (STELIB) and non-finite values. Small negative values are noise
  // around zero flux (the blue end of M-dwarf averages) and stay.
  for (double& v : t.flux)
    if (!std::isfinite(v) || v == 0.0) v = NAN;
  return true;
}

// Adds t to the set with its bad ends trimmed, or lists it as skipped.
void add_trimmed(TemplateSet& set, TemplateSpectrum&& t) {
  std::string why;
  if (trim_bad_ends(t, &why))
    set.spectra.push_back(std::move(t));
  else
    set.skipped.push_back(t.name + ": " + why);
}

TemplateSet read_stelib(const fs::path& dir) {
  TemplateSet set;
  set.kind = "stelib";
  set.medium = "air";
  set.fwhm_A = kStelibFwhmA;
  for (const auto& file : fits_files(dir)) {
    std::string name = strip_fits_suffix(file);
    if (name.rfind("STELIB_v3.2_", 0) == 0) name = name.substr(12);
    try {
      auto f = fits::File::open_read((dir / file).string());
      TemplateSpectrum t;
      t.name = name;
      t.teff_K = header_label(f, "TEFF");
      t.logg = header_label(f, "LOG_G");
      t.feh = header_label(f, "FE_H");
      if (!std::isfinite(t.teff_K) || !std::isfinite(t.logg) || !std::isfinite(t.feh)) {
        set.skipped.push_back(name + ": TEFF, LOG_G or FE_H missing in the header");
        ++set.n_unlabelled;
        continue;
      }
      const double crval = f.key_double("CRVAL1"), cdelt = f.key_double("CDELT1");
      const double crpix = f.key_double("CRPIX1", 1.0);
      if (!(cdelt > 0) || !std::isfinite(crval)) f.fail("CRVAL1/CDELT1 do not give a wavelength axis");
      const auto flux = f.read_image_double();
      t.flux.assign(flux.begin(), flux.end());
      t.wave_vac_A.resize(t.flux.size());
      for (size_t i = 0; i < t.flux.size(); ++i)
        t.wave_vac_A[i] = air_to_vacuum_A(crval + (static_cast<double>(i) + 1.0 - crpix) * cdelt);
      if (t.wave_vac_A.empty() || !std::isfinite(t.wave_vac_A.front()) ||
          !std::isfinite(t.wave_vac_A.back()) ||
          (t.wave_vac_A.size() > 1 && !(t.wave_vac_A[1] > t.wave_vac_A[0])))
        f.fail("the wavelength axis (CRVAL1, CDELT1, CRPIX1) is not finite and increasing");
      add_trimmed(set, std::move(t));
    } catch (const IoError& e) {
      set.skipped.push_back(name + ": " + e.what());
    }
  }
  return set;
}

// Pecaut & Mamajek (2013) dwarf sequence: SpT -> Teff [K], logg [dex] from Msun and R_Rsun
// (logg_sun = 4.438). Reads the first block (up to the second '#SpT' header).
struct DwarfRow {
  double teff_K = NAN, logg = NAN;
};
std::map<std::string, DwarfRow> read_dwarf_table(const fs::path& path) {
  std::ifstream in(path);
  if (!in) throw IoError(path.string() + ": cannot open the dwarf Teff table");
  std::map<std::string, DwarfRow> rows;
  std::vector<std::string> cols;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ss(line);
    std::vector<std::string> words;
    for (std::string w; ss >> w;) words.push_back(w);
    if (words.empty()) continue;
    if (words[0] == "#SpT") {
      if (!cols.empty()) break;  // the second block (other columns)
      cols = words;
      continue;
    }
    if (cols.empty() || words[0][0] == '#' || words.size() < cols.size() - 1) continue;
    auto col = [&](const char* name) {
      for (size_t i = 0; i < cols.size() && i < words.size(); ++i)
        if (cols[i] == name) return number_or_nan(words[i]);
      return static_cast<double>(NAN);
    };
    DwarfRow r;
    r.teff_K = col("Teff");
    const double m = col("Msun"), rad = col("R_Rsun");
    r.logg = m > 0 && rad > 0 ? 4.438 + std::log10(m) - 2.0 * std::log10(rad) : NAN;
    rows[words[0]] = r;
  }
  if (in.bad()) throw IoError(path.string() + ": read error", errno);
  if (rows.empty()) throw IoError(path.string() + ": no '#SpT' table found");
  return rows;
}

// BOSS resolving power (Smee et al. 2013): 1560 at 3650 A to 2650 at 10000 A, linear.
constexpr double kBossR0 = 1560.0, kBossR1 = 2650.0, kBossLam0 = 3650.0, kBossLam1 = 10000.0;

// The Kesseli templates' velocity frame against the redrock STAR archetypes and the Cannon
// models (both synthetic: exact rest frames, and the same to 0.2 km/s from M2 to A), per subtype
// M0..M9 [km/s]: what a fit with the raw template reports minus what the exact frame gives
// (positive: its lines sit blueward of rest). Each template is an average of SDSS spectra shifted
// by SDSS pipeline velocities. Measured by scripts/template_frames.py (chi^2 over shift in 7
// windows, 3900-8800 A, both at the broader resolution; 2026-11-29, docs/rv-zero-point.md):
// joint fit over Kesseli-Cannon and Kesseli-redrock, median of the 4-5 [Fe/H] bins, error of
// the median 0.3-1.1 km/s. M4 (2 templates matched) is the mean of M3 and M5; M7-M9 take their
// pooled value against redrock, +2.9 +- 2.9 (per subtype +0.1, +9.1 and -1.2 km/s: the
// synthetic models' late-M mismatch dominates). On reading, each template's wavelengths are
// multiplied by (1 + v/c): its fits then report the exact frame's velocity.
constexpr double kKesseliFrameKms[10] = {3.6, 3.4, 0.7, 4.7, 4.9, 5.1, 5.0, 2.9, 2.9, 2.9};

TemplateSet read_kesseli(const fs::path& dir, const fs::path& table) {
  TemplateSet set;
  set.kind = "kesseli";
  set.medium = "vacuum";
  set.frame = "redrock/Cannon frame: wavelengths x (1 + v/c), v per subtype M0..M9 =";
  for (double v : kKesseliFrameKms) set.frame += fmt::format(" {:+.1f}", v);
  set.frame += " km/s";
  set.curated = true;  // averages of many BOSS spectra
  for (double lam = 3000.0; lam <= 11000.0; lam += 50.0) {  // tabulated; linear in between
    const double R = kBossR0 + (kBossR1 - kBossR0) * (lam - kBossLam0) / (kBossLam1 - kBossLam0);
    set.lsf_wave_A.push_back(lam);
    set.lsf_fwhm_A.push_back(lam / R);
  }
  const auto dwarfs = read_dwarf_table(table);
  static const std::regex pat(R"(^M(\d)(?:_([+-]\d\.\d))?_?(?:Dwarf)?$)");
  for (const auto& file : fits_files(dir)) {
    const std::string name = strip_fits_suffix(file);
    std::smatch m;
    if (!std::regex_match(name, m, pat)) {
      set.skipped.push_back(name + ": not a Kesseli M-dwarf name (M<n>_<feh>_Dwarf)");
      continue;
    }
    const auto it = dwarfs.find("M" + m[1].str() + "V");
    if (it == dwarfs.end() || !std::isfinite(it->second.teff_K)) {
      set.skipped.push_back(name + ": no Teff for M" + m[1].str() + "V in " + table.string());
      ++set.n_unlabelled;
      continue;
    }
    try {
      auto f = fits::File::open_read((dir / file).string());
      f.move_to(1);
      TemplateSpectrum t;
      t.name = name;
      t.teff_K = it->second.teff_K;
      t.logg = it->second.logg;
      t.feh = m[2].matched ? std::stod(m[2].str()) - 0.25 : 0.0;
      t.curated = true;
      const auto loglam = f.read_column_double("LogLam");
      t.flux = f.read_column_double("Flux");
      if (loglam.size() != t.flux.size()) f.fail("LogLam and Flux differ in length");
      t.wave_vac_A.resize(loglam.size());
      const double frame = 1.0 + kKesseliFrameKms[std::stoi(m[1].str())] / kern::kSpeedOfLight_kms;
      for (size_t i = 0; i < loglam.size(); ++i) {
        t.wave_vac_A[i] = std::pow(10.0, loglam[i]) * frame;
        if (!(t.wave_vac_A[i] > (i ? t.wave_vac_A[i - 1] : 0.0)) || !std::isfinite(t.wave_vac_A[i]))
          f.fail("LogLam is not finite and increasing");
      }
      add_trimmed(set, std::move(t));
    } catch (const IoError& e) {
      set.skipped.push_back(name + ": " + e.what());
    }
  }
  return set;
}

// What a folder without usable templates holds, for the error: its FITS files and, when the
// first is a spectrum that velox fit reads, its format; else the first template's problem.
std::string found_instead(const fs::path& root, const TemplateSet& set) {
  const fs::path dir = fs::is_directory(root / "fits") ? root / "fits" : root;
  const auto files = fits_files(dir);
  if (files.empty()) return "no FITS files";
  const std::string n = fmt::format("{} FITS files", files.size());
  try {
    const SpectrumFormat format = detect_format((dir / files.front()).string());
    return fmt::format("{}, e.g. {}: a {} spectrum (an input of velox fit, not a template)", n,
                       files.front(), format_name(format));
  } catch (const std::exception&) {
    // not a spectrum either: the template reader's own reason below
  }
  return set.skipped.empty() ? n
                             : fmt::format("{}, none usable (first: {})", n, set.skipped.front());
}

}  // namespace

double TemplateSet::fwhm_at(double lam_A) const {
  if (!lsf_wave_A.empty() && lsf_wave_A.size() == lsf_fwhm_A.size()) {
    const size_t n = lsf_wave_A.size();
    if (!std::isfinite(lam_A)) return NAN;
    if (lam_A <= lsf_wave_A.front() || n == 1) return lsf_fwhm_A.front();
    if (lam_A >= lsf_wave_A.back()) return lsf_fwhm_A.back();
    const size_t hi = std::upper_bound(lsf_wave_A.begin(), lsf_wave_A.end(), lam_A) - lsf_wave_A.begin();
    const double f = (lam_A - lsf_wave_A[hi - 1]) / (lsf_wave_A[hi] - lsf_wave_A[hi - 1]);
    return (1 - f) * lsf_fwhm_A[hi - 1] + f * lsf_fwhm_A[hi];
  }
  if (std::isfinite(fwhm_A)) return fwhm_A;
  if (std::isfinite(resolution_R) && resolution_R > 0) return lam_A / resolution_R;
  return NAN;
}

TemplateSet read_templates(const std::string& dir, const std::string& teff_table) {
  const fs::path root(dir);
  if (!fs::is_directory(root)) throw IoError(dir + ": template directory not found");
  std::string wave_file;
  bool stelib = false, kesseli = false;
  for (const auto& file : fits_files(root)) {
    if (is_wave_file(file)) wave_file = file;
    if (file.rfind("STELIB_", 0) == 0) stelib = true;
    if (file.find("_Dwarf.fits") != std::string::npos) kesseli = true;
  }
  TemplateSet set;
  if (!wave_file.empty()) {
    set = read_phoenix(root, wave_file);
  } else if (stelib) {
    set = read_stelib(root);
  } else if (kesseli) {
    fs::path table = teff_table.empty()
                         ? root / ".." / ".." / "tables" / "EEM_dwarf_UBVIJHK_colors_Teff.txt"
                         : fs::path(teff_table);
    set = read_kesseli(root, table);
  } else {
    set = read_miles(root);
  }
  if (set.spectra.empty()) {
    throw IoError(dir + ": no usable templates: found " + found_instead(root, set) +
                  ". A template folder holds MILES (MILES_params.db beside fits/, or FITS files "
                  "with MLOGT/MLOGG/MFEH header labels), PHOENIX (a WAVE_*.fits beside files with "
                  "PHXTEFF/PHXLOGG/PHXM_H), STELIB (STELIB_*.fits) or Kesseli M-dwarf "
                  "(M<n>_<feh>_Dwarf.fits) templates; or use --preset lamost|sdss|desi");
  }
  // Stars without labels are what the catalogue is (MILES: 39 unmeasured and one damaged row):
  // one info line. Unreadable or inconsistent files warn. Each one: --log-level debug.
  for (const auto& s : set.skipped) spdlog::debug("{}: skipped {}", dir, s);
  const size_t n_all = set.skipped.size() + set.spectra.size();
  const size_t n_bad = set.skipped.size() - set.n_unlabelled;
  if (n_bad > 0)
    spdlog::warn(
        "{}: skipped {} of {} templates as unreadable or inconsistent{} (--log-level debug "
        "lists each)",
        dir, n_bad, n_all,
        set.n_unlabelled ? fmt::format(", and {} without labels", set.n_unlabelled) : "");
  else if (set.n_unlabelled > 0)
    spdlog::info(
        "{}: {} of {} templates left out: their source gives them no labels (--log-level debug "
        "lists each)",
        dir, set.n_unlabelled, n_all);
  return set;
}

}  // namespace velox
