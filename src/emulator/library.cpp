#include "emulator/library.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "common/error.hpp"
#include "common/fnv.hpp"
#include "common/rounding.hpp"
#include "common/version.hpp"
#include "io/h5.hpp"

namespace velox {

kern::EmulatorView TemplateLibrary::view() const {
  kern::EmulatorView v;
  v.n_train = n_train;
  v.n_comp = n_comp;
  v.n_label = n_label;
  v.n_poly = n_poly;
  v.train_x = train_x.data();
  v.alpha = alpha.data();
  v.poly_coef = poly_coef.data();
  for (int l = 0; l < n_label; ++l) {
    v.inv_len2[l] = 1.0 / (length_scale[l] * length_scale[l]);
    v.shift[l] = shift[l];
    v.scale[l] = scale[l];
  }
  return v;
}

double TemplateLibrary::wave_vac_A(int t) const { return std::exp(lnlam0 + t * dlnlam); }

long TemplateLibrary::nearest_pixel_ln(double ln_lam, size_t size) const {
  return nearest_index((ln_lam - lnlam0) / dlnlam, static_cast<long>(size) - 1);
}

double TemplateLibrary::model_sigma_at(double lam_A) const {
  if (model_sigma.empty() || !(lam_A > 0)) return 0.0;
  return model_sigma_at_ln(std::log(lam_A));
}

double TemplateLibrary::model_sigma_at_ln(double ln_lam) const {
  if (model_sigma.empty() || !(ln_lam > -INFINITY)) return 0.0;
  return model_sigma[static_cast<size_t>(nearest_pixel_ln(ln_lam, model_sigma.size()))];
}

std::string TemplateLibrary::kind() const {
  for (const char* key : {"join.preset", "build.template_kind"}) {
    const auto it = attrs.find(key);
    if (it != attrs.end() && !it->second.empty()) return it->second;
  }
  return "";
}

double TemplateLibrary::template_fwhm_A(double lam_A) const {
  if (!lsf_fwhm_A.empty() && n_tpix > 0) return template_fwhm_at_ln(std::log(lam_A));
  if (std::isfinite(fwhm_A) && fwhm_A > 0) return fwhm_A;
  if (std::isfinite(resolution_R) && resolution_R > 0) return lam_A / resolution_R;
  return 0.0;
}

double TemplateLibrary::template_fwhm_at_ln(double ln_lam) const {
  if (!lsf_fwhm_A.empty() && n_tpix > 0)
    return lsf_fwhm_A[static_cast<size_t>(nearest_pixel_ln(ln_lam, lsf_fwhm_A.size()))];
  return template_fwhm_A(std::exp(ln_lam));
}

std::vector<float> TemplateLibrary::evaluate(const double* labels, const float* basis_in) const {
  return evaluate_many(labels, 1, basis_in);
}

std::vector<float> TemplateLibrary::evaluate_many(const double* labels, int n,
                                                  const float* basis_in) const {
  const float* b = basis_in ? basis_in : basis.data();
  const size_t K1 = static_cast<size_t>(n_comp), N = static_cast<size_t>(std::max(n, 0));
  // ct[k][j]: coefficient k of template j
  std::vector<double> c(K1), dc(static_cast<size_t>(n_label) * K1), ct(K1 * N);
  const auto v = view();
  for (size_t j = 0; j < N; ++j) {
    kern::emulator_coeffs(v, labels + j * n_label, c.data(), dc.data());
    for (size_t k = 0; k < K1; ++k) ct[k * N + j] = c[k];
  }
  // Blocks of W templates (8, then single ones), their sums in local registers (a vector the
  // compiler cannot keep there is reloaded and stored at every k).
  std::vector<float> out(N * n_tpix);
  std::vector<double> cb;
  auto run_block = [&](size_t j0, auto width) {
    constexpr size_t W = decltype(width)::value;
    cb.resize(K1 * W);  // this block's coefficients, W per k
    for (size_t k = 0; k < K1; ++k)
      for (size_t j = 0; j < W; ++j) cb[k * W + j] = ct[k * N + j0 + j];
    // P pixels per pass, 2 where they remain: each sum is a chain of K1 dependent additions, so
    // two pixels' chains side by side take the time of one (the pass was latency-bound).
    auto pixels = [&](int t, auto n_px) {
      constexpr size_t P = decltype(n_px)::value;
      const float* bt = b + static_cast<size_t>(t) * K1;
      double s[P][W] = {};
      for (size_t k = 0; k < K1; ++k) {  // per template, k in order: evaluate()'s sum
        const double* ck = cb.data() + k * W;
        for (size_t p = 0; p < P; ++p) {
          const double bk = bt[p * K1 + k];
          for (size_t j = 0; j < W; ++j) s[p][j] += ck[j] * bk;
        }
      }
      for (size_t j = 0; j < W; ++j)
        for (size_t p = 0; p < P; ++p) out[(j0 + j) * n_tpix + t + p] = static_cast<float>(s[p][j]);
    };
    int t = 0;
    for (; t + 2 <= n_tpix; t += 2) pixels(t, std::integral_constant<size_t, 2>{});
    for (; t < n_tpix; ++t) pixels(t, std::integral_constant<size_t, 1>{});
  };
  size_t j0 = 0;
  for (; j0 + 8 <= N; j0 += 8) run_block(j0, std::integral_constant<size_t, 8>{});
  for (; j0 < N; ++j0) run_block(j0, std::integral_constant<size_t, 1>{});
  return out;
}

namespace {
void fnv(uint64_t& h, const void* p, size_t n) { fnv1a(h, p, n); }
template <class T>
void fnv_vec(uint64_t& h, const std::vector<T>& v) {
  fnv(h, v.data(), v.size() * sizeof(T));
}
std::vector<uint64_t> shp(size_t a) { return {a}; }
std::vector<uint64_t> shp(size_t a, size_t b) { return {a, b}; }
}  // namespace

std::string TemplateLibrary::compute_checksum() const {
  uint64_t h = kFnvOffset;
  fnv(h, &n_tpix, sizeof n_tpix);
  fnv(h, &lnlam0, sizeof lnlam0);
  fnv(h, &dlnlam, sizeof dlnlam);
  fnv_vec(h, basis);
  fnv_vec(h, train_x);
  fnv_vec(h, alpha);
  fnv_vec(h, poly_coef);
  fnv_vec(h, length_scale);
  fnv_vec(h, shift);
  fnv_vec(h, scale);
  if (!lsf_fwhm_A.empty()) fnv_vec(h, lsf_fwhm_A);  // absent: the checksum of older libraries
  if (!model_sigma.empty()) fnv_vec(h, model_sigma);  // likewise
  for (const auto& c : classes) {  // absent classes leave the checksum of older libraries
    fnv(h, c.subtype.data(), c.subtype.size());
    fnv_vec(h, c.basis);
  }
  return fmt::format("fnv1a64:{:016x}", h);
}

void TemplateLibrary::save(const std::string& path) const {
  h5::AtomicOutput out(path);
  {
    auto f = h5::File::create(out.temp_path(), /*seal_block=*/true);
    f.set_attr("/", "velox_kind", std::string("template-library"));
    f.set_attr("/", "velox_version", std::string(version()));
    f.set_attr("/", "git_commit", std::string(git_commit()));
    f.set_attr("/", "wavelength_medium", std::string("vacuum"));
    f.set_attr("/", "n_tpix", static_cast<int64_t>(n_tpix));
    f.set_attr("/", "lnlam0", lnlam0);
    f.set_attr("/", "dlnlam", dlnlam);
    f.set_attr("/", "fwhm_A", fwhm_A);
    f.set_attr("/", "resolution_R", resolution_R);
    f.set_attr("/", "n_comp", static_cast<int64_t>(n_comp));
    f.set_attr("/", "n_train", static_cast<int64_t>(n_train));
    std::string names;
    for (size_t i = 0; i < label_names.size(); ++i) names += (i ? "," : "") + label_names[i];
    f.set_attr("/", "labels", names);
    f.set_attr("/", "checksum", compute_checksum());
    for (const auto& [k, v] : attrs)
      if (k != "velox_version") f.set_attr("/", k, v);  // the writer's version, set above
    std::vector<double> wave(n_tpix);
    for (int t = 0; t < n_tpix; ++t) wave[t] = wave_vac_A(t);
    f.write("wave_vac_A", wave, shp(n_tpix));
    f.write("basis", basis, shp(n_tpix, n_comp));
    if (!lsf_fwhm_A.empty()) f.write("lsf_fwhm_A", lsf_fwhm_A, shp(n_tpix));
    if (!model_sigma.empty()) f.write("validation/model_sigma", model_sigma, shp(n_tpix));
    const size_t N = n_train, L = n_label;
    f.write("emulator/train_x", train_x, shp(N, L));
    f.write("emulator/train_labels", train_labels, shp(N, L));
    f.write("emulator/alpha", alpha, shp(N, n_comp));
    f.write("emulator/poly_coef", poly_coef, shp(n_poly, n_comp));
    f.write("emulator/length_scale", length_scale, shp(L));
    f.write("emulator/shift", shift, shp(L));
    f.write("emulator/scale", scale, shp(L));
    f.write("emulator/label_min", label_min, shp(L));
    f.write("emulator/label_max", label_max, shp(L));
    f.write("ccf/labels", ccf_labels, shp(ccf_labels.size() / L, L));
    f.write("validation/loo_rms", loo_rms, shp(loo_rms.size()));
    std::string tn;
    for (size_t i = 0; i < train_names.size(); ++i) tn += (i ? "," : "") + train_names[i];
    f.set_attr("/emulator", "train_names", tn);
    for (size_t k = 0; k < classes.size(); ++k) {
      const auto& c = classes[k];
      const std::string name = fmt::format("classes/{:02d}", k);
      f.write(name, c.basis, shp(c.n_basis, c.n_bin));
      f.set_attr(name, "spectype", c.spectype);
      f.set_attr(name, "subtype", c.subtype);
      f.set_attr(name, "lnlam0", c.lnlam0);
      f.set_attr(name, "dlnlam", c.dlnlam);
      f.set_attr(name, "z_min", c.z_min);
      f.set_attr(name, "z_max", c.z_max);
    }
  }
  out.commit();
}

TemplateLibrary TemplateLibrary::load(const std::string& path) {
  auto f = h5::File::open_read(path,
                               "no integrity seal: not a template library from this velox "
                               "(rebuild it with `velox templates build`)");
  if (!f.has_attr("/", "velox_kind") || f.attr_string("/", "velox_kind") != "template-library")
    throw IoError(path + ": not a velox template library (velox_kind attribute missing)");
  TemplateLibrary lib;
  lib.n_tpix = static_cast<int>(f.attr_int64("/", "n_tpix"));
  lib.lnlam0 = f.attr_double("/", "lnlam0");
  lib.dlnlam = f.attr_double("/", "dlnlam");
  lib.fwhm_A = f.attr_double("/", "fwhm_A");
  lib.resolution_R = f.attr_double("/", "resolution_R");
  lib.n_comp = static_cast<int>(f.attr_int64("/", "n_comp"));
  lib.n_train = static_cast<int>(f.attr_int64("/", "n_train"));
  lib.checksum = f.attr_string("/", "checksum");
  std::string names = f.attr_string("/", "labels");
  size_t pos = 0;
  while (pos <= names.size()) {
    size_t e = names.find(',', pos);
    if (e == std::string::npos) e = names.size();
    lib.label_names.push_back(names.substr(pos, e - pos));
    pos = e + 1;
  }
  lib.n_label = static_cast<int>(lib.label_names.size());
  lib.n_poly = kern::n_poly_terms(lib.n_label);
  lib.basis = f.read_float("basis");
  if (f.exists("lsf_fwhm_A")) lib.lsf_fwhm_A = f.read_float("lsf_fwhm_A");
  if (f.exists("validation/model_sigma")) lib.model_sigma = f.read_float("validation/model_sigma");
  lib.train_x = f.read_double("emulator/train_x");
  lib.train_labels = f.read_double("emulator/train_labels");
  lib.alpha = f.read_double("emulator/alpha");
  lib.poly_coef = f.read_double("emulator/poly_coef");
  lib.length_scale = f.read_double("emulator/length_scale");
  lib.shift = f.read_double("emulator/shift");
  lib.scale = f.read_double("emulator/scale");
  lib.label_min = f.read_double("emulator/label_min");
  lib.label_max = f.read_double("emulator/label_max");
  lib.ccf_labels = f.read_double("ccf/labels");
  lib.loo_rms = f.read_double("validation/loo_rms");
  for (int k = 0; f.exists(fmt::format("classes/{:02d}", k)); ++k) {
    const std::string name = fmt::format("classes/{:02d}", k);
    ClassTemplate c;
    std::vector<uint64_t> shape;
    c.basis = f.read_float(name, &shape);
    c.spectype = f.attr_string(name, "spectype");
    c.subtype = f.attr_string(name, "subtype");
    c.lnlam0 = f.attr_double(name, "lnlam0");
    c.dlnlam = f.attr_double(name, "dlnlam");
    c.z_min = f.attr_double(name, "z_min");
    c.z_max = f.attr_double(name, "z_max");
    if (shape.size() != 2 || shape[0] * shape[1] != c.basis.size() || shape[0] > 8)
      throw IoError(path + ": " + name + ": classification basis must be [n_basis <= 8][n_bin]");
    c.n_basis = static_cast<int>(shape[0]);
    c.n_bin = static_cast<int>(shape[1]);
    lib.classes.push_back(std::move(c));
  }
  for (const auto& a : f.attr_names("/")) {
    if (a.rfind("build.", 0) == 0 || a.rfind("validation.", 0) == 0 || a.rfind("join.", 0) == 0 ||
        a == "source" || a == "velox_version")
      lib.attrs[a] = f.attr_string("/", a);
  }
  const size_t N = lib.n_train, L = lib.n_label, K1 = lib.n_comp;
  if (lib.basis.size() != static_cast<size_t>(lib.n_tpix) * K1 || lib.alpha.size() != N * K1 ||
      (!lib.lsf_fwhm_A.empty() && lib.lsf_fwhm_A.size() != static_cast<size_t>(lib.n_tpix)) ||
      (!lib.model_sigma.empty() && lib.model_sigma.size() != static_cast<size_t>(lib.n_tpix)) ||
      lib.train_x.size() != N * L || lib.poly_coef.size() != static_cast<size_t>(lib.n_poly) * K1 ||
      lib.length_scale.size() != L || K1 > static_cast<size_t>(kern::kMaxComp) ||
      L > static_cast<size_t>(kern::kMaxLabels))
    throw IoError(path + ": template library arrays have inconsistent shapes");
  for (float v : lib.lsf_fwhm_A)
    if (!(v >= 0.0f) || !std::isfinite(v))
      throw IoError(path + ": lsf_fwhm_A must be finite and >= 0 at every pixel");
  for (float v : lib.model_sigma)
    if (!(v >= 0.0f) || !std::isfinite(v))
      throw IoError(path + ": validation/model_sigma must be finite and >= 0 at every pixel");
  // open_read verified the integrity seal (every byte of the file as velox wrote it, the checksum
  // attribute included), so the content checksum is not computed again (2 ms of every process's
  // start on MILES); an unsealed file, which open_read refuses, would be checked here.
  if (!f.sealed() && lib.compute_checksum() != lib.checksum)
    throw IoError(path + ": template library checksum mismatch (file corrupt or edited)");
  return lib;
}

}  // namespace velox
