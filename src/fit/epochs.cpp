#include "fit/epochs.hpp"

#include <algorithm>
#include <cmath>

#include "common/median.hpp"
#include "emulator/library.hpp"
#include "fit/fitter.hpp"
#include "fit/params.hpp"
#include "io/rvs_warn.hpp"

namespace velox {

namespace {

// ln Q(a, x), the regularized upper incomplete gamma, for a > 0, x > 0 (Numerical Recipes 3rd
// ed. 6.2: the series for P below x < a + 1, Lentz's continued fraction for Q above, whose
// prefactor exp(-x + a ln x - lnGamma(a)) is kept as a logarithm).
double log_gamma_q(double a, double x) {
  const double lpre = -x + a * std::log(x) - std::lgamma(a);
  if (x < a + 1.0) {
    double ap = a, del = 1.0 / a, sum = del;
    for (int n = 0; n < 1000; ++n) {
      ap += 1.0;
      del *= x / ap;
      sum += del;
      if (std::fabs(del) < std::fabs(sum) * 1e-15) break;
    }
    const double p = std::exp(lpre) * sum;  // P(a, x) <= 1 - Q, Q is not tiny here
    return std::log1p(-std::min(p, 1.0));
  }
  const double tiny = 1e-300;
  double b = x + 1.0 - a, c = 1.0 / tiny, d = 1.0 / b, h = d;
  for (int i = 1; i < 1000; ++i) {
    const double an = -i * (i - a);
    b += 2.0;
    d = an * d + b;
    if (std::fabs(d) < tiny) d = tiny;
    c = b + an / c;
    if (std::fabs(c) < tiny) c = tiny;
    d = 1.0 / d;
    const double del = d * c;
    h *= del;
    if (std::fabs(del - 1.0) < 1e-15) break;
  }
  return lpre + std::log(h);
}

// The row's statistical error of parameter q in theta units (NaN if none).
double stat_err_theta(const CatalogRow& r, const FitParam& q) {
  const double e = q.err_stat ? r.*q.err_stat : r.*q.err;
  const double v = r.*q.value;
  if (!(e > 0) || !std::isfinite(v)) return NAN;
  return q.log10 ? e / (std::log(10.0) * v) : e;
}

}  // namespace

double log10_chi2_sf(double x, int k) {
  if (k < 1 || std::isnan(x)) return NAN;
  if (!(x > 0)) return 0.0;
  if (std::isinf(x)) return -INFINITY;
  return log_gamma_q(0.5 * k, 0.5 * x) / std::log(10.0);
}

VelocityStats velocity_stats(const std::vector<double>& v, const std::vector<double>& e) {
  VelocityStats s;
  std::vector<std::pair<double, double>> ok;
  for (size_t i = 0; i < v.size() && i < e.size(); ++i)
    if (std::isfinite(v[i]) && std::isfinite(e[i]) && e[i] > 0) ok.emplace_back(v[i], e[i]);
  s.n = static_cast<int>(ok.size());
  if (s.n == 0) return s;
  double sw = 0.0, swv = 0.0;
  for (const auto& [x, err] : ok) sw += 1.0 / (err * err), swv += x / (err * err);
  s.mean = swv / sw;
  s.mean_err = 1.0 / std::sqrt(sw);
  if (s.n < 2) return s;
  s.chisq_const = 0.0;
  s.maxdiff_sig = 0.0;
  for (size_t i = 0; i < ok.size(); ++i) {
    const double z = (ok[i].first - s.mean) / ok[i].second;
    s.chisq_const += z * z;
    for (size_t j = i + 1; j < ok.size(); ++j) {
      const double d =
          std::fabs(ok[i].first - ok[j].first) / std::hypot(ok[i].second, ok[j].second);
      s.maxdiff_sig = std::max(s.maxdiff_sig, d);
    }
  }
  s.logp_const = log10_chi2_sf(s.chisq_const, s.n - 1);
  return s;
}

bool epoch_usable(const CatalogRow& r) {
  return r.SUCCESS && std::isfinite(r.VRAD) && r.VRAD_ERR > 0;
}

JointLabels joint_labels(const std::vector<CatalogRow>& epochs, const TemplateLibrary& lib,
                         const FitConfig& cfg) {
  JointLabels j;
  for (double& e : j.err_theta) e = NAN;
  double best_sn = -INFINITY;
  for (size_t i = 0; i < epochs.size(); ++i) {
    if (!epoch_usable(epochs[i])) continue;
    const double sn = std::isfinite(epochs[i].SN) ? epochs[i].SN : 0.0;
    if (sn > best_sn) best_sn = sn, j.base = static_cast<int>(i);
  }
  if (j.base < 0) return j;
  j.ok = true;
  j.theta[0] = epochs[j.base].VRAD;
  for (const FitParam& q : fit_params(lib, cfg)) {
    if (q.theta == 0) continue;
    double sw = 0.0, swx = 0.0;
    std::vector<std::pair<double, double>> xs;  // (theta value, its error)
    std::vector<double> values;
    for (const CatalogRow& r : epochs) {
      if (!epoch_usable(r) || !std::isfinite(r.*q.value)) continue;
      const double x = q.log10 ? std::log10(r.*q.value) : r.*q.value;
      values.push_back(x);
      const double e = stat_err_theta(r, q);
      if (!(e > 0)) continue;
      xs.emplace_back(x, e);
      sw += 1.0 / (e * e);
      swx += x / (e * e);
    }
    double x = NAN, err = NAN;
    if (sw > 0) {
      x = swx / sw;
      double chi2 = 0.0;
      for (const auto& [xi, ei] : xs) chi2 += (xi - x) * (xi - x) / (ei * ei);
      const double scale = xs.size() > 1 ? std::sqrt(std::max(1.0, chi2 / (xs.size() - 1))) : 1.0;
      err = scale / std::sqrt(sw);
    } else if (!values.empty()) {  // e.g. VSINI upper limits: no error, the median value
      x = median_upper(values);
    }
    if (q.name == "VSINI" && !std::isfinite(x)) x = 0.0;  // not fitted: no rotation
    if (!std::isfinite(x))
      x = q.log10 ? std::log10(epochs[j.base].*q.value) : epochs[j.base].*q.value;
    j.theta[q.theta] = x;
    j.err_theta[q.theta] = err;
  }
  return j;
}

CatalogRow star_row(const std::vector<CatalogRow>& epochs, const JointLabels& j,
                    const TemplateLibrary& lib, const FitConfig& cfg, const std::string& format,
                    const std::string& survey, const std::vector<double>& vsini_floor_kms) {
  if (!j.ok || epochs.empty()) {
    CatalogRow r = epochs.empty() ? CatalogRow{} : epochs.front();
    r.EPOCH = -1;
    r.N_EPOCHS = 0;
    r.MJD = NAN;
    r.SUCCESS = false;
    return r;
  }
  CatalogRow r = epochs[j.base];
  r.EPOCH = -1;
  r.MJD = NAN;
  // Labels: the joint values, their statistical errors, the format's floors.
  for (const FitParam& q : fit_params(lib, cfg)) {
    if (q.theta == 0) continue;
    const double th = j.theta[q.theta];
    const double value = q.log10 ? std::pow(10.0, th) : th;
    const double e = j.err_theta[q.theta];
    const double stat = q.log10 ? std::log(10.0) * value * e : e;
    if (q.name == "VSINI") {
      if (!(stat > 0)) continue;  // no epoch detected rotation: the base epoch's VSINI and limit
      // The detections' mean replaces the base epoch's value, limit and flags: a detection only
      // above the floor, as for one spectrum.
      double floor = 0.0;
      for (size_t i = 0; i < epochs.size() && i < vsini_floor_kms.size(); ++i)
        if (epoch_usable(epochs[i]) && vsini_floor_kms[i] > floor) floor = vsini_floor_kms[i];
      r.VSINI = value;
      r.VSINI_ERR = stat;
      r.VSINI_UPPER = NAN;
      apply_vsini_floor(r, floor, cfg);
      continue;
    }
    r.*q.value = value;
    if (q.err_stat) {
      r.*q.err_stat = stat;
      const double f = error_floor(cfg, format, q.name, survey);
      r.*q.err = std::sqrt(stat * stat + f * f);
    } else {
      r.*q.err = stat;
    }
  }
  // Velocity: the usable epochs' weighted mean and constancy statistics.
  std::vector<double> v, e, es;
  double sn2 = 0.0, chi2 = 0.0;
  int32_t npix = 0;
  for (const CatalogRow& x : epochs) {
    if (!epoch_usable(x)) continue;
    v.push_back(x.VRAD);
    e.push_back(x.VRAD_ERR);
    es.push_back(x.VRAD_ERR_STAT);
    if (std::isfinite(x.SN)) sn2 += x.SN * x.SN;
    chi2 += x.CHISQ_TOT;
    npix += x.NPIX_TOT;
  }
  const VelocityStats s = velocity_stats(v, e);
  r.N_EPOCHS = s.n;
  r.VRAD = s.mean;
  r.VRAD_ERR = s.mean_err;
  r.VRAD_ERR_STAT = velocity_stats(v, es).mean_err;
  r.VRAD_CHISQ_CONST = s.chisq_const;
  r.VRAD_LOGP_CONST = s.logp_const;
  r.VRAD_MAXDIFF_SIG = s.maxdiff_sig;
  r.SN = std::sqrt(sn2);
  r.CHISQ_TOT = chi2;
  r.NPIX_TOT = npix;
  r.VRAD_SKEW = r.VRAD_KURT = NAN;  // of one epoch's posterior: not the star's
  if (s.logp_const < cfg.rv_variable_logp) r.FIT_INFO |= info::kRvVariable;
  return r;
}

}  // namespace velox
