#include "io/cannon.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "common/error.hpp"
#include "io/h5.hpp"
#include "io/readers.hpp"

namespace velox {

CannonModel read_cannon_h5(const std::string& path) {
  auto f = h5::File::open_read(path);
  CannonModel m;
  m.name = std::filesystem::path(path).stem().string();
  std::vector<uint64_t> shape;
  const auto disp = f.read_double("dispersion");
  m.theta = f.read_double("theta", &shape);
  if (shape.size() != 2 || shape[0] != disp.size() || shape[1] < 1 || shape[1] > 64)
    throw IoError(path + ": theta must be [n_pix][n_terms <= 64] with n_pix = len(dispersion)");
  m.n_pix = static_cast<int>(disp.size());
  m.n_terms = static_cast<int>(shape[1]);
  const auto pw = f.read_int64("powers", &shape);
  if (shape.size() != 2 || shape[0] != static_cast<uint64_t>(m.n_terms) || shape[1] < 1 ||
      shape[1] > 8)
    throw IoError(path + ": powers must be [n_terms][n_label <= 8]");
  m.n_label = static_cast<int>(shape[1]);
  for (int64_t p : pw) {
    if (p < 0 || p > 8) throw IoError(path + ": powers must be 0..8");
    m.powers.push_back(static_cast<int>(p));
  }
  m.fiducials = f.read_double("fiducials");
  m.scales = f.read_double("scales");
  m.train_labels = f.read_double("training_set_labels");
  const size_t L = m.n_label;
  if (m.fiducials.size() != L || m.scales.size() != L || m.train_labels.size() % L != 0 ||
      m.train_labels.empty())
    throw IoError(path + ": fiducials, scales or training_set_labels do not match the labels");
  for (double s : m.scales)
    if (!(s > 0) || !std::isfinite(s)) throw IoError(path + ": scales must be positive");
  if (f.has_attr("/", "label_names") && f.attr_string("/", "label_names") != "TEFF,LOGG,FEH")
    throw IoError(path + ": label_names must be TEFF,LOGG,FEH, not " +
                  f.attr_string("/", "label_names"));
  if (f.has_attr("/", "lsf_fwhm_A")) {
    const double v = f.attr_double("/", "lsf_fwhm_A");
    m.lsf_fwhm_A = std::isfinite(v) && v > 0 ? v : 0.0;
  }
  m.wave_vac_A.resize(disp.size());
  for (size_t i = 0; i < disp.size(); ++i) {
    m.wave_vac_A[i] = air_to_vacuum_A(disp[i]);
    if (!std::isfinite(m.wave_vac_A[i]) || (i && !(m.wave_vac_A[i] > m.wave_vac_A[i - 1])))
      throw IoError(path + ": dispersion is not finite and increasing");
  }
  m.label_min.assign(L, INFINITY);
  m.label_max.assign(L, -INFINITY);
  for (size_t r = 0; r < m.train_labels.size() / L; ++r)
    for (size_t l = 0; l < L; ++l) {
      m.label_min[l] = std::min(m.label_min[l], m.train_labels[r * L + l]);
      m.label_max[l] = std::max(m.label_max[l], m.train_labels[r * L + l]);
    }
  return m;
}

std::vector<double> CannonModel::evaluate(const double* labels, int p0, int p1) const {
  if (p1 < 0 || p1 > n_pix) p1 = n_pix;
  p0 = std::clamp(p0, 0, p1);
  std::vector<double> term(n_terms, 1.0);
  for (int j = 0; j < n_terms; ++j)
    for (int l = 0; l < n_label; ++l) {
      const double x = (labels[l] - fiducials[l]) / scales[l];
      for (int p = 0; p < powers[j * n_label + l]; ++p) term[j] *= x;
    }
  std::vector<double> flux(p1 - p0);
  for (int i = p0; i < p1; ++i) {
    const double* th = theta.data() + static_cast<size_t>(i) * n_terms;
    double v = 0.0;
    for (int j = 0; j < n_terms; ++j) v += th[j] * term[j];
    // As thedoppler does (min(flux, 1)); saturated line cores can go below 0: floored there.
    flux[i - p0] = std::clamp(v, 0.0, 1.0);
  }
  return flux;
}

bool CannonModel::trained_near(const double* labels, double dlogt, double dlogg,
                               double dfeh) const {
  const size_t L = n_label;
  for (size_t r = 0; r < train_labels.size() / L; ++r) {
    const double* t = train_labels.data() + r * L;
    if (std::fabs(std::log10(t[0] / labels[0])) <= dlogt && std::fabs(t[1] - labels[1]) <= dlogg &&
        std::fabs(t[2] - labels[2]) <= dfeh)
      return true;
  }
  return false;
}

}  // namespace velox
