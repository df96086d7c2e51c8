// Template libraries: MILES (Sanchez-Blazquez et al. 2006; Falcon-Barroso et al. 2011) and
// PHOENIX-format grids (Husser et al. 2013). See io/readers.hpp for the directory layouts.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include "common/error.hpp"
#include "io/fits.hpp"
#include "io/readers.hpp"
#include "io/readers_detail.hpp"

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
    // A malformed row (the v9.1 table has one: "022.") is skipped; its star is then reported as
    // "not listed" by read_miles.
    if (!(row >> id_text >> l.teff_K >> l.logg >> l.feh) || !detail::parse_int64(id_text, id)) {
      spdlog::warn("{}: line {}: cannot parse '{}' as 'id Teff logg [Fe/H]', skipped",
                   path.string(), line_no, line);
      continue;
    }
    table[id] = l;
  }
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
  t.flux = flux;
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
        continue;
      }
      if (is_missing(it->second.teff_K) || is_missing(it->second.logg) ||
          is_missing(it->second.feh)) {
        set.skipped.push_back(name + ": missing label (9999/99999) in MILES_params.db");
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
  const auto wave_vac_A = wf.read_image_double();
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
      t.flux = f.read_image_double();
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

}  // namespace

TemplateSet read_templates(const std::string& dir) {
  const fs::path root(dir);
  if (!fs::is_directory(root)) throw IoError(dir + ": template directory not found");
  std::string wave_file;
  for (const auto& file : fits_files(root)) {
    if (is_wave_file(file)) wave_file = file;
  }
  TemplateSet set = wave_file.empty() ? read_miles(root) : read_phoenix(root, wave_file);
  if (set.spectra.empty()) {
    throw IoError(dir + ": no usable " + set.kind + " templates" +
                  (set.skipped.empty() ? std::string(" (no FITS files)")
                                       : " (first problem: " + set.skipped.front() + ")"));
  }
  if (!set.skipped.empty()) {
    spdlog::warn("{}: skipped {} of {} templates", dir, set.skipped.size(),
                 set.skipped.size() + set.spectra.size());
  }
  return set;
}

}  // namespace velox
