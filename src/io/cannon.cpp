#include "io/cannon.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>

#include "common/error.hpp"
#include "io/h5.hpp"
#include "io/readers.hpp"

namespace velox {

CannonModel read_cannon_h5(const std::string& path) {
  auto f = h5::File::open_read(path,
                               "no integrity seal: not a Cannon model converted by "
                               "scripts/cannon-to-h5.py (convert the pickle again)");
  // Shapes are checked before anything is read: an unsealed file may declare any size.
  std::map<std::string, std::vector<uint64_t>> shapes;
  for (const auto& d : f.list_datasets()) shapes[d.path] = d.shape;
  auto shape_of = [&](const char* name) {
    const auto it = shapes.find(std::string("/") + name);
    if (it == shapes.end()) throw IoError(path + ": not a converted Cannon model: no dataset " + name);
    return it->second;
  };
  constexpr uint64_t kMaxPix = 10'000'000, kMaxTerms = 64, kMaxTrain = 1'000'000;
  const auto sd = shape_of("dispersion"), st = shape_of("theta"), sp = shape_of("powers");
  const auto sf = shape_of("fiducials"), ss = shape_of("scales"), sl = shape_of("training_set_labels");
  const uint64_t n = sd.size() == 1 ? sd[0] : 0;
  if (n < 4 || n > kMaxPix)
    throw IoError(path + ": dispersion must be 1-D with 4.." + std::to_string(kMaxPix) + " pixels");
  if (st.size() != 2 || st[0] != n || st[1] < 1 || st[1] > kMaxTerms)
    throw IoError(path + ": theta must be [n_pix][n_terms <= 64] with n_pix = len(dispersion)");
  if (sp.size() != 2 || sp[0] != st[1] || sp[1] != 3)
    throw IoError(path + ": powers must be [n_terms][3] (labels TEFF, LOGG, FEH)");
  if (sf != std::vector<uint64_t>{3} || ss != std::vector<uint64_t>{3} || sl.size() != 2 ||
      sl[1] != 3 || sl[0] < 1 || sl[0] > kMaxTrain)
    throw IoError(path + ": fiducials, scales must be [3] and training_set_labels [n][3]");
  if (f.has_attr("/", "label_names") && f.attr_string("/", "label_names") != "TEFF,LOGG,FEH")
    throw IoError(path + ": label_names must be TEFF,LOGG,FEH, not " +
                  f.attr_string("/", "label_names"));
  CannonModel m;
  m.name = std::filesystem::path(path).stem().string();
  m.n_pix = static_cast<int>(n);
  m.n_terms = static_cast<int>(st[1]);
  m.n_label = 3;
  const auto disp = f.read_double("dispersion");
  m.theta = f.read_double("theta");
  for (int64_t p : f.read_int64("powers")) {
    if (p < 0 || p > 8) throw IoError(path + ": powers must be 0..8");
    m.powers.push_back(static_cast<int>(p));
  }
  m.fiducials = f.read_double("fiducials");
  m.scales = f.read_double("scales");
  m.train_labels = f.read_double("training_set_labels");
  auto all_finite = [](const std::vector<double>& v) {
    return std::all_of(v.begin(), v.end(), [](double x) { return std::isfinite(x); });
  };
  if (!all_finite(m.theta) || !all_finite(m.fiducials) || !all_finite(m.train_labels))
    throw IoError(path + ": theta, fiducials or training_set_labels hold non-finite values");
  for (double s : m.scales)
    if (!(s > 0) || !std::isfinite(s)) throw IoError(path + ": scales must be positive");
  if (f.has_attr("/", "lsf_fwhm_A")) {
    const double v = f.attr_double("/", "lsf_fwhm_A");
    m.lsf_fwhm_A = std::isfinite(v) && v > 0 ? v : 0.0;
  }
  // The dispersion's medium (scripts/cannon-to-h5.py writes it); air unless it says vacuum.
  const bool air = !f.has_attr("dispersion", "medium") || f.attr_string("dispersion", "medium") != "vacuum";
  m.wave_vac_A.resize(disp.size());
  for (size_t i = 0; i < disp.size(); ++i) {
    m.wave_vac_A[i] = air ? air_to_vacuum_A(disp[i]) : disp[i];
    if (!std::isfinite(m.wave_vac_A[i]) || (i && !(m.wave_vac_A[i] > m.wave_vac_A[i - 1])))
      throw IoError(path + ": dispersion is not finite and increasing");
  }
  const size_t L = m.n_label;
  m.label_min.assign(L, INFINITY);
  m.label_max.assign(L, -INFINITY);
  for (size_t r = 0; r < m.train_labels.size() / L; ++r)
    for (size_t l = 0; l < L; ++l) {
      m.label_min[l] = std::min(m.label_min[l], m.train_labels[r * L + l]);
      m.label_max[l] = std::max(m.label_max[l], m.train_labels[r * L + l]);
    }
  if (!(m.label_min[0] > 0)) throw IoError(path + ": training TEFF must be positive");
  return m;
}

std::vector<double> CannonModel::terms(const double* labels) const {
  std::vector<double> term(n_terms, 1.0);
  for (int j = 0; j < n_terms; ++j)
    for (int l = 0; l < n_label; ++l) {
      const double x = (labels[l] - fiducials[l]) / scales[l];
      for (int p = 0; p < powers[j * n_label + l]; ++p) term[j] *= x;
    }
  return term;
}

std::vector<double> CannonModel::evaluate(const double* labels, int p0, int p1) const {
  if (p1 < 0 || p1 > n_pix) p1 = n_pix;
  p0 = std::clamp(p0, 0, p1);
  const std::vector<double> term = terms(labels);
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
