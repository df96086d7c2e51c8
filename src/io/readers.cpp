// Format detection, dispatch, air/vacuum conversion and the checks shared by all readers.
#include "io/readers.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <unordered_set>
#include <utility>

#include "common/error.hpp"
#include "io/fits.hpp"
#include "io/readers_detail.hpp"

namespace velox {

// ---------------------------------------------------------------- air <-> vacuum

namespace {
// IAU standard refractive index of air (Morton 2000, ApJS 130, 403, eq. 3; Ciddor 1996 for
// 15 C, 101325 Pa, 450 ppm CO2), written as a function of the VACUUM wavenumber. This is the
// conversion of the SDSS (idlutils vactoair) and DESI pipelines.
double air_index_from_vacuum(double wave_vac_A) {
  const double s2 = (1e4 / wave_vac_A) * (1e4 / wave_vac_A);  // (vacuum wavenumber, 1/um)^2
  return 1.0 + 8.34254e-5 + 2.406147e-2 / (130.0 - s2) + 1.5998e-4 / (38.9 - s2);
}
// The convention applies to wavelengths above 2000 A only; below that, air = vacuum.
constexpr double kAirVacuumMinA = 2000.0;
}  // namespace

double vacuum_to_air_A(double wave_vac_A) {
  if (!(wave_vac_A >= kAirVacuumMinA)) return wave_vac_A;
  return wave_vac_A / air_index_from_vacuum(wave_vac_A);
}

double air_to_vacuum_A(double wave_air_A) {
  if (!(wave_air_A >= kAirVacuumMinA)) return wave_air_A;
  // Start from the inverse formula of N. Piskunov (VALD; Morton 2000 web note), then solve
  // vac = air * n(vac) by fixed-point iteration so that the round trip is exact to ~1e-15.
  const double s2 = (1e4 / wave_air_A) * (1e4 / wave_air_A);
  double vac = wave_air_A * (1.0 + 8.336624212083e-5 + 2.408926869968e-2 / (130.1065924522 - s2) +
                             1.599740894897e-4 / (38.92568793293 - s2));
  for (int i = 0; i < 3; ++i) vac = wave_air_A * air_index_from_vacuum(vac);
  return vac;
}

// ---------------------------------------------------------------- format names

namespace {
// The names used on the command line and in the configuration.
const std::pair<SpectrumFormat, const char*> kFormatNames[] = {
    {SpectrumFormat::Auto, "auto"},
    {SpectrumFormat::LamostDR8, "lamost-dr8"},
    {SpectrumFormat::LamostDR10, "lamost-dr10"},
    {SpectrumFormat::SdssSpec, "sdss"},
    {SpectrumFormat::DesiCoadd, "desi"},
};
}  // namespace

SpectrumFormat parse_format(const std::string& name) {
  for (const auto& [format, text] : kFormatNames) {
    if (name == text) return format;
  }
  throw ConfigError("unknown spectrum format '" + name +
                    "' (expected auto, lamost-dr8, lamost-dr10, sdss or desi)");
}

std::string format_name(SpectrumFormat f) {
  for (const auto& [format, text] : kFormatNames) {
    if (f == format) return text;
  }
  return "unknown";
}

namespace {

SpectrumFormat detect_open(fits::File& f) {
  const auto names = f.hdu_names();
  auto has = [&](const std::string& n) {
    return std::find(names.begin(), names.end(), n) != names.end();
  };
  if (has("COADD")) {
    f.move_to("COADD");
    if (!f.is_image() && f.has_column("loglam")) return SpectrumFormat::SdssSpec;
    if (!f.is_image() && f.has_column("WAVELENGTH") && f.has_column("FLUX")) {
      return SpectrumFormat::LamostDR10;
    }
  }
  if (has("FIBERMAP") && (has("B_FLUX") || has("R_FLUX") || has("Z_FLUX"))) {
    return SpectrumFormat::DesiCoadd;
  }
  f.move_to(0);
  const auto shape = f.image_shape();
  const std::string telescope = f.key_string("TELESCOP", "");
  if (shape.size() == 2 && shape[0] >= 3 && f.has_key("COEFF0") && f.has_key("COEFF1") &&
      (telescope.empty() || telescope.find("LAMOST") != std::string::npos)) {
    return SpectrumFormat::LamostDR8;
  }
  std::string list;
  for (const auto& n : names) list += (list.empty() ? "" : ",") + n;
  throw IoError(f.path() + ": unknown spectrum layout (HDUs: " + list +
                "; expected LAMOST DR8/DR10, SDSS/BOSS spec or DESI coadd)");
}

}  // namespace

SpectrumFormat detect_format(const std::string& path) {
  auto f = fits::File::open_read(path);
  return detect_open(f);
}

SpectrumFile read_spectra(const std::string& path, SpectrumFormat fmt) {
  return read_spectra(path, fmt, 0, SIZE_MAX);
}

size_t count_desi_fibres(const std::string& path, SpectrumFormat fmt) {
  auto f = fits::File::open_read(path);
  if ((fmt == SpectrumFormat::Auto ? detect_open(f) : fmt) != SpectrumFormat::DesiCoadd) return 0;
  // The reader's fibres: the most rows of any arm's FLUX image (read_desi_coadd).
  size_t n = 0;
  const auto hdus = f.hdu_names();
  for (const char* h : {"B_FLUX", "R_FLUX", "Z_FLUX"}) {
    if (std::find(hdus.begin(), hdus.end(), h) == hdus.end()) continue;
    f.move_to(h);
    const auto shape = f.is_image() ? f.image_shape() : std::vector<int64_t>{};
    if (!shape.empty()) n = std::max(n, static_cast<size_t>(std::max<int64_t>(shape[0], 0)));
  }
  return n;
}

namespace {
SpectrumFile read_any(const std::string& path, SpectrumFormat fmt, size_t first, size_t count,
                      bool exposures);
}  // namespace

SpectrumFile read_spectra(const std::string& path, SpectrumFormat fmt, size_t first, size_t count) {
  return read_any(path, fmt, first, count, false);
}

SpectrumFile read_exposures(const std::string& path, SpectrumFormat fmt) {
  return read_any(path, fmt, 0, SIZE_MAX, true);
}

namespace {
SpectrumFile read_any(const std::string& path, SpectrumFormat fmt, size_t first, size_t count,
                      bool exposures) {
  auto f = fits::File::open_read(path);
  SpectrumFile out;
  out.path = path;
  out.format = fmt == SpectrumFormat::Auto ? detect_open(f) : fmt;
  f.move_to(0);
  switch (out.format) {
    case SpectrumFormat::LamostDR8:
      detail::read_lamost_dr8(f, out);
      break;
    case SpectrumFormat::LamostDR10:
      detail::read_lamost_dr10(f, out);
      break;
    case SpectrumFormat::SdssSpec:
      if (exposures)
        detail::read_sdss_exposures(f, out);
      else
        detail::read_sdss_spec(f, out);
      break;
    case SpectrumFormat::DesiCoadd:
      detail::read_desi_coadd(f, out, first, count);
      break;
    case SpectrumFormat::Auto:
      break;
  }
  const std::string base = detail::basename_of(path);
  // An array of wavelengths that the fibres' arms share (DESI coadds) is checked once: the
  // arrays that passed, by address (all alive while `out` holds them).
  std::unordered_set<const double*> checked;
  for (auto& s : out.spectra) {
    s.source_file = base;
    for (const auto& arm : s.arms) {
      const bool seen = checked.count(arm.wave_vac_A.data()) > 0;
      if (detail::validate_arm(arm, s.problem, seen) && !seen)
        checked.insert(arm.wave_vac_A.data());
    }
  }
  return out;
}
}  // namespace

// ---------------------------------------------------------------- shared helpers

namespace detail {

bool validate_arm(const ArmData& arm, std::string& problem, bool wave_checked) {
  auto add = [&](const std::string& why) {
    problem += (problem.empty() ? "" : "; ") + ("arm " + arm.name + ": " + why);
    return false;
  };
  const size_t n = arm.wave_vac_A.size();
  if (n == 0) return add("no pixels");
  if (arm.flux.size() != n || arm.ivar.size() != n || arm.mask.size() != n) {
    return add("length mismatch: wavelength " + std::to_string(n) + ", flux " +
               std::to_string(arm.flux.size()) + ", ivar " + std::to_string(arm.ivar.size()) +
               ", mask " + std::to_string(arm.mask.size()) + " pixels");
  }
  if (arm.ndiag > 0 && arm.resolution.size() != static_cast<size_t>(arm.ndiag) * n) {
    return add("resolution matrix has " + std::to_string(arm.resolution.size()) +
               " values, expected " + std::to_string(arm.ndiag) + " x " + std::to_string(n));
  }
  for (size_t j = 0; !wave_checked && j < n; ++j) {
    if (!std::isfinite(arm.wave_vac_A[j])) {
      return add("non-finite wavelength at pixel " + std::to_string(j));
    }
    if (j > 0 && !(arm.wave_vac_A[j] > arm.wave_vac_A[j - 1])) {
      return add("wavelengths not strictly increasing at pixel " + std::to_string(j));
    }
  }
  return true;
}

bool parse_int64(const std::string& text, int64_t& value) {
  const char* begin = text.c_str();
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(begin, &end, 10);
  if (end == begin || errno == ERANGE) return false;
  while (*end == ' ' || *end == '\'') ++end;
  if (*end != '\0') return false;
  value = v;
  return true;
}

std::string basename_of(const std::string& path) {
  const auto slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

void header_meta(const fits::File& f, const std::vector<std::string>& keys,
                 std::map<std::string, std::string>& meta) {
  for (const auto& k : keys) {
    if (f.has_key(k)) meta[k] = f.key_string(k);
  }
}

}  // namespace detail
}  // namespace velox
