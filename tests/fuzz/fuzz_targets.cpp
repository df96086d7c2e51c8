#include "fuzz/fuzz_targets.hpp"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <typeinfo>

#include "common/error.hpp"
#include "emulator/library.hpp"
#include "fit/fitter.hpp"
#include "fit/select.hpp"
#include "io/cannon.hpp"
#include "io/fits.hpp"
#include "io/h5.hpp"
#include "io/readers.hpp"
#include "io/row_table.hpp"

namespace velox::fuzz {

namespace fs = std::filesystem;

namespace {

// A scratch directory for this process (in /dev/shm when there is one: files there never touch
// a disk), emptied before every input and removed at exit.
class Scratch {
 public:
  Scratch() {
    const char* tmp = std::getenv("TMPDIR");
    const fs::path base = fs::is_directory("/dev/shm") ? "/dev/shm" : (tmp ? tmp : "/tmp");
    dir_ = base / ("velox-fuzz-" + std::to_string(getpid()));
    fs::create_directories(dir_);
  }
  ~Scratch() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  // A fresh, empty directory for one input.
  const fs::path& fresh() {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir_, ec)) fs::remove_all(e.path(), ec);
    return dir_;
  }

 private:
  fs::path dir_;
};

Scratch& scratch() {
  static Scratch s;
  return s;
}

void write_file(const fs::path& path, const char* data, size_t size) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(data, static_cast<std::streamsize>(size));
  if (!out.flush()) throw std::runtime_error(path.string() + ": cannot write scratch file");
}

// The input cut at kFileSeparator.
std::vector<std::string> split_files(const uint8_t* data, size_t size) {
  const std::string all(reinterpret_cast<const char*>(data), size), sep(kFileSeparator);
  std::vector<std::string> parts;
  size_t pos = 0;
  for (size_t hit; (hit = all.find(sep, pos)) != std::string::npos; pos = hit + sep.size())
    parts.push_back(all.substr(pos, hit - pos));
  parts.push_back(all.substr(pos));
  return parts;
}

std::unique_ptr<TemplateLibrary>& fit_library() {
  static std::unique_ptr<TemplateLibrary> lib;
  return lib;
}

// What `velox fit` does with a file after reading it: select targets (S/N from every arm),
// prepare them for the fit when a library is set, and, for DESI files, copy the FIBERMAP and
// SCORES tables (app/fit_outputs.cpp).
void after_read(const std::string& path, const SpectrumFile& sf) {
  const SelectConfig sel;
  std::string why;
  for (const auto& s : sf.spectra) {
    (void)selection_sn(s);
    (void)select_target(s, sel, &why);
  }
  if (const auto& lib = fit_library()) {
    const FitConfig cfg;
    ArmModelCache cache(*lib);  // fresh: fuzzed resolutions must not pile up models
    const FitContext ctx{*lib, cache, cfg, format_name(sf.format)};
    for (const auto& s : sf.spectra) (void)prepare_spectrum(s, ctx);
  }
  if (sf.format != SpectrumFormat::DesiCoadd) return;
  auto f = fits::File::open_read(path);
  (void)read_fits_table(f, "FIBERMAP");
  if (f.has_hdu("SCORES")) (void)read_fits_table(f, "SCORES");
}

void survey_file(SpectrumFormat format, const uint8_t* data, size_t size) {
  const fs::path path = scratch().fresh() / "input.fits";
  write_file(path, reinterpret_cast<const char*>(data), size);
  try {
    (void)detect_format(path.string());
  } catch (const IoError&) {
  }
  if (format == SpectrumFormat::SdssSpec) {  // --epochs: the per-exposure frames too
    try {
      after_read(path.string(), read_exposures(path.string(), format));
    } catch (const IoError&) {
    }
  }
  after_read(path.string(), read_spectra(path.string(), format));
}

void miles_dir(const uint8_t* data, size_t size) {
  const auto parts = split_files(data, size);
  const fs::path& dir = scratch().fresh();
  if (parts.size() > 1) write_file(dir / "MILES_params.db", parts[0].data(), parts[0].size());
  const std::string& fits = parts.back();
  write_file(dir / "MILES_res2.50_star_m0001V.fits", fits.data(), fits.size());
  (void)read_templates(dir.string());
}

void phoenix_dir(const uint8_t* data, size_t size) {
  const auto parts = split_files(data, size);
  const fs::path& dir = scratch().fresh();
  write_file(dir / "WAVE_PHOENIX-ACES-AGSS-COND-2011.fits", parts[0].data(), parts[0].size());
  for (size_t i = 1; i < parts.size(); ++i) {
    const std::string name = "lte0" + std::to_string(i) + ".PHOENIX-ACES.fits";
    write_file(dir / name, parts[i].data(), parts[i].size());
  }
  (void)read_templates(dir.string());
}

// STELIB: one file in a folder, named as the library names it.
void stelib_dir(const uint8_t* data, size_t size) {
  const fs::path& dir = scratch().fresh();
  write_file(dir / "STELIB_v3.2_HD000001.fits", reinterpret_cast<const char*>(data), size);
  (void)read_templates(dir.string());
}

// Kesseli M dwarfs: [the dwarf Teff table text, marker,] one template file.
void kesseli_dir(const uint8_t* data, size_t size) {
  const auto parts = split_files(data, size);
  const fs::path& dir = scratch().fresh();
  const fs::path table = dir / "EEM_dwarf_UBVIJHK_colors_Teff.txt";
  const std::string text = parts.size() > 1 ? parts[0] : std::string("#SpT Teff R_Rsun Msun\nM4V 3210 0.274 0.24\n");
  write_file(table, text.data(), text.size());
  const fs::path sub = dir / "kesseli";
  fs::create_directories(sub);
  const std::string& file = parts.back();
  write_file(sub / "M4_+0.0_Dwarf.fits", file.data(), file.size());
  (void)read_templates(sub.string(), table.string());
}

// A converted Cannon model (scripts/cannon-to-h5.py), then one evaluation at the middle of its
// training labels, as the joined build does.
void cannon_file(const uint8_t* data, size_t size) {
  const fs::path path = scratch().fresh() / "coolstars.h5";
  write_file(path, reinterpret_cast<const char*>(data), size);
  const CannonModel m = read_cannon_h5(path.string());
  std::vector<double> mid(m.n_label);
  for (int l = 0; l < m.n_label; ++l) mid[l] = 0.5 * (m.label_min[l] + m.label_max[l]);
  (void)m.evaluate(mid.data());
  (void)m.trained_near(mid.data(), 0.03, 0.75, 0.75);
}

// The library loader, then one model evaluation at the centre of the label box (what the fit
// does first with a library).
void library_file(const uint8_t* data, size_t size) {
  const fs::path path = scratch().fresh() / "library.h5";
  write_file(path, reinterpret_cast<const char*>(data), size);
  const TemplateLibrary lib = TemplateLibrary::load(path.string());
  std::vector<double> mid(lib.n_label);
  for (int l = 0; l < lib.n_label; ++l) mid[l] = 0.5 * (lib.label_min[l] + lib.label_max[l]);
  (void)lib.evaluate(mid.data());
}

}  // namespace

void set_fit_library(const std::string& path) {
  fit_library() = std::make_unique<TemplateLibrary>(TemplateLibrary::load(path));
}

const std::vector<std::string>& target_names() {
  static const std::vector<std::string> names = {
      "lamost-dr8", "lamost-dr10", "sdss",    "desi",   "miles",
      "phoenix",    "stelib",      "kesseli", "cannon", "library"};
  return names;
}

void run_target(const std::string& name, const uint8_t* data, size_t size) {
  const auto& names = target_names();
  if (std::find(names.begin(), names.end(), name) == names.end())
    throw std::invalid_argument("unknown fuzz target '" + name + "'");
  try {
    if (name == "miles")
      miles_dir(data, size);
    else if (name == "phoenix")
      phoenix_dir(data, size);
    else if (name == "stelib")
      stelib_dir(data, size);
    else if (name == "kesseli")
      kesseli_dir(data, size);
    else if (name == "cannon")
      cannon_file(data, size);
    else if (name == "library")
      library_file(data, size);
    else
      survey_file(parse_format(name), data, size);
  } catch (const IoError&) {
    // rejected with a message naming the file: the expected outcome for bad bytes
  } catch (const ConfigError&) {
  } catch (const std::exception& e) {
    std::fprintf(stderr, "velox fuzz %s: unexpected %s: %s\n", name.c_str(), typeid(e).name(),
                 e.what());
    std::abort();
  }
  // Whatever happened, no HDF5 handle may stay open (lsan.supp hides leaks inside libhdf5).
  if (const size_t n = h5::open_object_count(); n != 0) {
    std::fprintf(stderr, "velox fuzz %s: %zu HDF5 objects left open\n", name.c_str(), n);
    std::abort();
  }
}

}  // namespace velox::fuzz
