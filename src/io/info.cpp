// `velox info`: summaries of catalogs and template libraries (see info.hpp).
#include "io/info.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <vector>

#include "common/error.hpp"
#include "io/catalog.hpp"
#include "io/fits.hpp"
#include "io/h5.hpp"
#include "io/readers.hpp"
#include "io/rvs_warn.hpp"

namespace velox {
namespace {

// Linear-interpolated quantile (numpy's default) of sorted, non-empty values; q in [0, 1].
double quantile(const std::vector<double>& sorted, double q) {
  double pos = q * static_cast<double>(sorted.size() - 1);
  size_t lo = static_cast<size_t>(std::floor(pos));
  size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (pos - static_cast<double>(lo)) * (sorted[hi] - sorted[lo]);
}

// Multi-line values (config YAML) stay readable: continuation lines get `pad`.
std::string indent(const std::string& text, const std::string& pad) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    out += text[i];
    if (text[i] == '\n' && i + 1 < text.size()) out += pad;
  }
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

std::string describe_catalog(const std::string& path) {
  Provenance prov;
  std::vector<CatalogRow> rows, epochs;
  split_epoch_rows(read_catalog(path, &prov), &rows, &epochs);
  size_t n_ok =
      std::count_if(rows.begin(), rows.end(), [](const CatalogRow& r) { return r.SUCCESS; });
  std::string out =
      fmt::format("{}: velox catalog\n  rows: {}\n  SUCCESS: {}\n", path, rows.size(), n_ok);
  if (!epochs.empty()) {
    // --epochs: the stars' epoch counts and velocity constancy (docs/epochs.md).
    std::vector<double> logp;
    size_t multi = 0, variable = 0;
    for (const auto& r : rows) {
      if (r.N_EPOCHS >= 2) ++multi;
      if (r.FIT_INFO & info::kRvVariable) ++variable;
      if (std::isfinite(r.VRAD_LOGP_CONST)) logp.push_back(r.VRAD_LOGP_CONST);
    }
    std::sort(logp.begin(), logp.end());
    out += fmt::format("  epochs: {} rows (/epochs), {} stars with 2 or more, {} RV_VARIABLE\n",
                       epochs.size(), multi, variable);
    if (!logp.empty())
      out +=
          fmt::format("    VRAD_LOGP_CONST {:.3g} [{:.3g}, {:.3g}] (N={})\n", quantile(logp, 0.5),
                      quantile(logp, 0.16), quantile(logp, 0.84), logp.size());
  }

  struct Stat {
    const char* name;
    double CatalogRow::*field;
    const char* unit;
  };
  const Stat stats[] = {{"VRAD", &CatalogRow::VRAD, "km/s"},
                        {"TEFF", &CatalogRow::TEFF, "K"},
                        {"LOGG", &CatalogRow::LOGG, "dex"},
                        {"FEH", &CatalogRow::FEH, "dex"}};
  out += "  over successful fits (median [16th, 84th percentile]):\n";
  for (const auto& s : stats) {
    std::vector<double> v;
    for (const auto& r : rows)
      if (r.SUCCESS && std::isfinite(r.*s.field)) v.push_back(r.*s.field);
    std::sort(v.begin(), v.end());
    if (v.empty()) {
      out += fmt::format("    {:<5} no finite values\n", s.name);
      continue;
    }
    out += fmt::format("    {:<5} {:.4g} [{:.4g}, {:.4g}] {} (N={})\n", s.name, quantile(v, 0.5),
                       quantile(v, 0.16), quantile(v, 0.84), s.unit, v.size());
  }

  out += "  RVS_WARN bits set:";
  bool any = false;
  for (int bit = 0; bit < 64; ++bit) {
    auto n = std::count_if(rows.begin(), rows.end(), [bit](const CatalogRow& r) {
      return (static_cast<uint64_t>(r.RVS_WARN) >> bit) & 1u;
    });
    const std::string name = bit < warn::kNumBits ? warn::kBitNames[bit] : "";
    if (n > 0) out += fmt::format("{} bit {} {}: {}", any ? "," : "", bit, name, n);
    any = any || n > 0;
  }
  out += any ? "\n" : " none\n";

  out += "  provenance:\n";
  for (const auto& [k, v] : prov) out += fmt::format("    {} = {}\n", k, indent(v, "      "));
  return out;
}

std::string describe_template_library(const h5::File& f) {
  std::string out = fmt::format("{}: velox template library\n  attributes:\n", f.path());
  for (const auto& name : f.attr_names("/"))
    out += fmt::format("    {} = {}\n", name, indent(f.attr_text("/", name), "      "));
  out += "  datasets:\n";
  for (const auto& d : f.list_datasets())
    out += fmt::format("    {} [{}] {}\n", d.path, fmt::join(d.shape, ", "), d.type);
  return out;
}

// A FITS file (gzip-compressed too, as CFITSIO reads it): "SIMPLE  =" or the gzip magic first.
// An unreadable file is not FITS here (the HDF5 open then says why).
bool looks_like_fits(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char head[9] = {};
  if (!in.read(head, sizeof head)) return false;
  if (std::string(head, 9) == "SIMPLE  =") return true;
  return head[0] == '\x1f' && head[1] == '\x8b' && path.find(".fits") != std::string::npos;
}

// Its HDUs from the headers (no data read), and whether `velox fit` reads it: the format
// read_spectra detects and the spectra it would fit (DESI: the fibres, from the headers).
std::string describe_fits(const std::string& path) {
  std::string out = fmt::format(
      "{}: FITS file (velox info summarises velox catalogs and template libraries, which are "
      "HDF5 files; a FITS file is described from its headers)\n  HDUs:\n",
      path);
  {
    auto f = fits::File::open_read(path);
    for (int i = 0; i < f.num_hdus(); ++i) {
      f.move_to(i);
      std::string what;
      if (f.is_image() && !f.is_compressed_image()) {
        const auto shape = f.image_shape();
        what = shape.empty() ? "no data" : fmt::format("image {}", fmt::join(shape, " x "));
      } else {
        what = fmt::format("table, {} rows, {} columns", f.num_rows(), f.column_names().size());
      }
      out += fmt::format("    {} {}: {}\n", i, f.current_name(), what);
    }
  }
  try {
    const SpectrumFormat format = detect_format(path);
    const size_t n = format == SpectrumFormat::DesiCoadd
                         ? count_desi_fibres(path, format)
                         : read_spectra(path, format).spectra.size();
    out += fmt::format("  velox fit input: format {}, {} spectra\n", format_name(format), n);
  } catch (const std::exception& e) {
    out += fmt::format("  not a spectra file velox fit reads: {}\n", e.what());
  }
  return out;
}

}  // namespace

std::string describe_file(const std::string& path) {
  if (looks_like_fits(path)) return describe_fits(path);
  h5::File f = [&] {
    try {
      return h5::File::open_read(path);
    } catch (const IoError& e) {
      std::error_code ec;
      if (!std::filesystem::is_regular_file(path, ec)) throw;  // no such file, a folder
      throw IoError(std::string(e.what()) +
                    " (velox info reads velox catalogs and template libraries, which are HDF5 "
                    "files, and describes FITS files)");
    }
  }();
  std::string kind = f.has_attr("/", "velox_kind") ? f.attr_text("/", "velox_kind") : "";
  if (kind == "catalog") return describe_catalog(path);
  if (kind == "template-library") return describe_template_library(f);
  throw IoError(fmt::format("{}: not a velox file (root attribute velox_kind is {})", path,
                            kind.empty() ? "missing" : "'" + kind + "'"));
}

}  // namespace velox
