#include "io/redrock.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "common/error.hpp"
#include "io/fits.hpp"

namespace velox {

namespace {

ClassTemplate read_one(const std::string& path, double dlnlam) {
  auto f = fits::File::open_read(path);
  f.move_to(f.has_hdu("BASIS_VECTORS") ? std::string("BASIS_VECTORS") : std::string("PRIMARY"));
  const auto shape = f.image_shape();
  if (shape.size() != 2 || shape[0] < 1 || shape[0] > 8 || shape[1] < 10)
    throw IoError(path + ": " + f.current_name() + ": expected a [n_basis <= 8][n_pix] image");
  const auto flux = f.read_image_double();
  const double crval = f.key_double("CRVAL1"), cdelt = f.key_double("CDELT1");
  const bool loglam = f.key_long("LOGLAM", 0) == 1;
  ClassTemplate c;
  c.spectype = f.key_string("RRTYPE");
  c.subtype = f.key_string("RRSUBTYP", "");
  c.n_basis = static_cast<int>(shape[0]);
  const int64_t n_pix = shape[1];
  auto ln_wave = [&](int64_t j) {
    const double x = crval + cdelt * static_cast<double>(j);
    return loglam ? x * std::log(10.0) : std::log(x);
  };
  c.dlnlam = dlnlam;
  c.lnlam0 = std::floor(ln_wave(0) / dlnlam) * dlnlam;
  c.n_bin = static_cast<int>(std::floor((ln_wave(n_pix - 1) - c.lnlam0) / dlnlam)) + 1;
  // Box average of the fine samples falling in each bin (bins with no sample: neighbours').
  std::vector<double> sum(static_cast<size_t>(c.n_basis) * c.n_bin, 0.0);
  std::vector<int> count(c.n_bin, 0);
  for (int64_t j = 0; j < n_pix; ++j) {
    const int k = std::clamp(static_cast<int>((ln_wave(j) - c.lnlam0) / dlnlam), 0, c.n_bin - 1);
    ++count[k];
    for (int b = 0; b < c.n_basis; ++b) sum[b * c.n_bin + k] += flux[b * n_pix + j];
  }
  c.basis.resize(sum.size());
  int last = -1;
  for (int k = 0; k < c.n_bin; ++k) {
    const int src = count[k] > 0 ? k : last;
    if (count[k] > 0) last = k;
    for (int b = 0; b < c.n_basis; ++b)
      c.basis[b * c.n_bin + k] =
          src < 0 ? 0.0f : static_cast<float>(sum[b * c.n_bin + src] / count[src]);
  }
  if (f.has_hdu("REDSHIFTS")) {
    f.move_to("REDSHIFTS");
    const auto z = f.read_image_double();
    if (z.empty()) throw IoError(path + ": REDSHIFTS: empty");
    c.z_min = *std::min_element(z.begin(), z.end());
    c.z_max = *std::max_element(z.begin(), z.end());
  } else if (c.spectype == "GALAXY") {
    // redrock's own range for a GALAXY template without REDSHIFTS (redrock/templates.py:
    // 10**arange(log10(1 - 0.005), log10(1 + 1.7), 3e-4) - 1).
    c.z_min = -0.005;
    c.z_max = 1.7;
  }
  return c;
}

}  // namespace

std::vector<std::string> redrock_template_files(const std::string& dir, std::error_code* ec) {
  std::vector<std::string> paths;
  std::error_code err;
  for (const auto& e : std::filesystem::directory_iterator(dir, err)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("rrtemplate-", 0) == 0 && e.path().extension() == ".fits")
      paths.push_back(e.path().string());
  }
  if (ec) *ec = err;
  std::sort(paths.begin(), paths.end());
  return paths;
}

std::vector<ClassTemplate> read_redrock_templates(const std::string& dir, double dlnlam) {
  std::error_code ec;
  const std::vector<std::string> paths = redrock_template_files(dir, &ec);
  if (ec) throw ConfigError(dir + ": cannot list the redrock template directory: " + ec.message());
  if (paths.empty()) throw ConfigError(dir + ": no rrtemplate-*.fits (redrock templates) found");
  std::vector<ClassTemplate> out;
  for (const auto& p : paths) out.push_back(read_one(p, dlnlam));
  return out;
}

}  // namespace velox
