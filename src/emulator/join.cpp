#include "emulator/join.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>

#include "common/error.hpp"
#include "emulator/build.hpp"
#include "io/cannon.hpp"
#include "kernels/convolve.hpp"

namespace velox {
namespace {

constexpr double kFwhmToSigma = 0.42466090014400953;  // 1 / sqrt(8 ln 2)

// The joined grid: ln(lambda_vac) = lnlam0 + t * dlnlam.
struct Grid {
  double lnlam0 = 0.0, dlnlam = 0.0;
  int n = 0;
  std::vector<double> wave;    // [n] vacuum A
  std::vector<double> fwhm_A;  // [n] target line spread
  double fwhm_near(double lam) const {
    const long t = std::lround((std::log(lam) - lnlam0) / dlnlam);
    return fwhm_A[std::clamp<long>(t, 0, n - 1)];
  }
};

// Brings (wave, flux) with line spread own_fwhm(lambda) to the grid's line spread (Gaussian of
// the quadrature difference on the input's own pixels; NaN pixels are gaps, skipped with
// renormalised weights) and resamples it onto the grid. Grid pixels outside the input or next
// to a gap are NaN.
template <typename OwnFwhm>
std::vector<double> to_grid(const std::vector<double>& wave, const std::vector<double>& flux,
                            OwnFwhm own_fwhm, const Grid& g) {
  // Only the input pixels the grid needs (with a margin for the kernel).
  const double lo = g.wave.front() * 0.99, hi = g.wave.back() * 1.01;
  const size_t a = std::lower_bound(wave.begin(), wave.end(), lo) - wave.begin();
  const size_t b = std::upper_bound(wave.begin(), wave.end(), hi) - wave.begin();
  std::vector<double> out(g.n, NAN);
  if (b < a + 4) return out;
  const int n = static_cast<int>(b - a);
  std::vector<float> fw(n), w(n), cfw(n), cw(n);
  std::vector<double> sig(n);
  for (int i = 0; i < n; ++i) {
    const size_t j = a + i;
    const bool ok = std::isfinite(flux[j]);
    fw[i] = ok ? static_cast<float>(flux[j]) : 0.0f;
    w[i] = ok ? 1.0f : 0.0f;
    const size_t j0 = j > 0 ? j - 1 : j, j1 = j + 1 < wave.size() ? j + 1 : j;
    const double dlam = (wave[j1] - wave[j0]) / std::max<size_t>(1, j1 - j0);
    const double ft = g.fwhm_near(wave[j]), fo = own_fwhm(wave[j]);
    const double d2 = ft * ft - fo * fo;
    // Capped at the input's length: nearly equal neighbouring wavelengths (a damaged file) must
    // not make the kernel's width overflow.
    sig[i] = d2 > 0 && dlam > 0 ? std::min(std::sqrt(d2) * kFwhmToSigma / dlam, double(n)) : 0.0;
  }
  kern::gaussian_convolve_column(fw.data(), cfw.data(), n, 1, sig.data());
  kern::gaussian_convolve_column(w.data(), cw.data(), n, 1, sig.data());
  std::vector<double> wsub(wave.begin() + a, wave.begin() + b), fsub(n);
  for (int i = 0; i < n; ++i) fsub[i] = cw[i] > 0.98f ? cfw[i] / cw[i] : NAN;
  return resample(wsub, fsub, g.wave);
}

// Divides the finite pixels of f by their upper-envelope continuum (degree scaled
// with the span: 6 over MILES' 3540-7410 A, as build_library uses). False if it is not positive.
bool normalise(std::vector<double>& f, const Grid& g) {
  std::vector<int> idx;
  for (int t = 0; t < g.n; ++t)
    if (std::isfinite(f[t])) idx.push_back(t);
  if (idx.size() < 200) return false;
  const double span =
      std::log(g.wave[idx.back()] / g.wave[idx.front()]) / std::log(7410.0 / 3540.0);
  const int deg = std::clamp(static_cast<int>(std::lround(6.0 * span)), 3, 12);
  std::vector<double> v(idx.size());
  for (size_t k = 0; k < idx.size(); ++k) v[k] = f[idx[k]];
  auto c = envelope_continuum(v, deg, 6);
  // Where the flux is near zero (the blue end of an M dwarf) the envelope polynomial can dip to
  // or below zero: it is floored at 2% of its maximum (the fit's own continuum absorbs the scale).
  const double cmax = *std::max_element(c.begin(), c.end());
  if (!(cmax > 0)) return false;
  for (size_t k = 0; k < idx.size(); ++k) f[idx[k]] = v[k] / std::max(c[k], 0.02 * cmax);
  return true;
}

struct Filler {
  std::vector<CannonModel> models;
  // Each model's coefficient columns brought to the grid's line spread and resampled onto the
  // grid once ([n_terms][g.n]): the flux is linear in them, so a star's filler costs one
  // n_terms x n_pix sum instead of a convolution of the model's 150,001 pixels.
  std::vector<std::vector<double>> theta_g;
  double near_dlogt, near_dlogg, near_dfeh;

  void prepare(const Grid& g) {
    for (const auto& m : models) {
      const auto lo =
          std::lower_bound(m.wave_vac_A.begin(), m.wave_vac_A.end(), g.wave.front() * 0.99);
      const auto hi =
          std::upper_bound(m.wave_vac_A.begin(), m.wave_vac_A.end(), g.wave.back() * 1.01);
      const size_t p0 = lo - m.wave_vac_A.begin(), p1 = hi - m.wave_vac_A.begin();
      const std::vector<double> wave(lo, hi);
      const double own = m.lsf_fwhm_A;
      std::vector<double> tg(static_cast<size_t>(m.n_terms) * g.n);
      std::vector<double> col(p1 - p0);
      for (int j = 0; j < m.n_terms; ++j) {
        for (size_t i = p0; i < p1; ++i) col[i - p0] = m.theta[i * m.n_terms + j];
        const auto cg = to_grid(
            wave, col, [own](double) { return own; }, g);
        std::copy(cg.begin(), cg.end(), tg.begin() + static_cast<size_t>(j) * g.n);
      }
      theta_g.push_back(std::move(tg));
    }
  }
  // The model trained nearest these labels (TEFF K, LOGG, FEH); null if none is trained near.
  const CannonModel* pick(const double* lab) const {
    for (const auto& m : models)
      if (m.trained_near(lab, near_dlogt, near_dlogg, near_dfeh)) return &m;
    return nullptr;
  }
  // Normalised filler spectrum on the grid at labels (clamped into the model's box), clipped
  // to [0, 1] as CannonModel::evaluate does.
  std::vector<double> spectrum(const CannonModel& m, const double* lab, const Grid& g) const {
    const size_t k = &m - models.data();
    double x[3];
    for (int l = 0; l < 3; ++l) x[l] = std::clamp(lab[l], m.label_min[l], m.label_max[l]);
    const std::vector<double> term = m.terms(x);
    std::vector<double> f(g.n, 0.0);
    for (int j = 0; j < m.n_terms; ++j) {
      const double* c = theta_g[k].data() + static_cast<size_t>(j) * g.n;
      for (int t = 0; t < g.n; ++t) f[t] += term[j] * c[t];
    }
    for (double& v : f) v = std::isfinite(v) ? std::clamp(v, 0.0, 1.0) : v;
    if (!normalise(f, g)) f.assign(g.n, NAN);
    return f;
  }
};

std::string range_text(double lo, double hi) { return fmt::format("{:.0f}-{:.0f} A", lo, hi); }

}  // namespace

TemplateSet join_sources(const JoinConfig& cfg, JoinReport* report) {
  if (cfg.sources.empty()) throw ConfigError("joined library: no template sources");
  if (!(cfg.wave_min_A > 0 && cfg.wave_max_A > cfg.wave_min_A))
    throw ConfigError("joined library: wave_min_A/wave_max_A must give a range");
  JoinReport rep;
  Filler filler{{}, {}, cfg.near_dlogt, cfg.near_dlogg, cfg.near_dfeh};
  for (const auto& p : cfg.filler) filler.models.push_back(read_cannon_h5(p));

  // 1. Sources, each restricted to its Teff range and wavelength window.
  struct Src {
    JoinSource cfg;
    TemplateSet set;
    double lo = 0, hi = 0;  // served vacuum range
  };
  std::vector<Src> srcs;
  for (const auto& sc : cfg.sources) {
    Src s{sc, read_templates(sc.path, sc.teff_table), 0, 0};
    double cover_lo = INFINITY, cover_hi = 0;
    for (const auto& t : s.set.spectra) {
      cover_lo = std::min(cover_lo, t.wave_vac_A.front());
      cover_hi = std::max(cover_hi, t.wave_vac_A.back());
    }
    s.lo = std::max(cover_lo, sc.wave_min_A > 0 ? sc.wave_min_A : 0.0);
    s.hi = std::min(cover_hi, sc.wave_max_A > 0 ? sc.wave_max_A : INFINITY);
    for (const auto& why : s.set.skipped) rep.dropped.push_back(sc.name + ":" + why);
    srcs.push_back(std::move(s));
  }

  // 2. The grid and its line spread (JoinConfig::lsf_broadest).
  Grid g;
  g.dlnlam = cfg.dlnlam;
  g.lnlam0 = std::log(cfg.wave_min_A) - 4 * cfg.dlnlam;
  g.n = static_cast<int>(
            std::ceil((std::log(cfg.wave_max_A) + 4 * cfg.dlnlam - g.lnlam0) / cfg.dlnlam)) +
        1;
  g.wave.resize(g.n);
  g.fwhm_A.assign(g.n, 0.0);
  for (int t = 0; t < g.n; ++t) {
    const double lam = std::exp(g.lnlam0 + t * g.dlnlam);
    g.wave[t] = lam;
    double f = 0.0;
    for (const auto& m : filler.models) f = std::max(f, m.lsf_fwhm_A);
    if (cfg.lsf_broadest) {
      for (const auto& s : srcs)
        if (lam >= s.lo && lam <= s.hi) f = std::max(f, s.set.fwhm_at(lam));
    } else {
      // The line spread of what serves the most stars at this wavelength: a source's own
      // spectra, or the filler (for every star whose source does not reach here).
      size_t most = 0, n_own = 0, n_all = 0;
      double fm = 0.0;
      for (const auto& s : srcs) {
        n_all += s.set.spectra.size();
        if (lam >= s.lo && lam <= s.hi) {
          n_own += s.set.spectra.size();
          if (s.set.spectra.size() > most) {
            most = s.set.spectra.size();
            fm = s.set.fwhm_at(lam);
          }
        }
      }
      f = filler.models.empty() || most >= n_all - n_own ? std::max(f, fm) : f;
    }
    // Never sharper than 2.5 grid pixels (1.1 A at 9000 A): an unresolved synthetic spectrum
    // sampled at single grid points would alias its lines.
    g.fwhm_A[t] = std::max(f, 2.5 * lam * g.dlnlam);
  }
  // A running maximum over +-seam_A: at a source's edge the broader line spread extends over the
  // blend, so that no blended pixel is sharper than either of its parts.
  {
    std::vector<double> m(g.n);
    for (int t = 0; t < g.n; ++t) {
      const int h = static_cast<int>(std::ceil(cfg.seam_A / (g.wave[t] * g.dlnlam)));
      double v = 0;
      for (int k = std::max(0, t - h); k <= std::min(g.n - 1, t + h); ++k)
        v = std::max(v, g.fwhm_A[k]);
      m[t] = v;
    }
    g.fwhm_A = m;
  }

  filler.prepare(g);

  // 3. Each star: own spectrum in its window, filler elsewhere.
  TemplateSet out;
  out.kind = "joined";
  out.medium = "vacuum";
  std::vector<std::array<double, 3>> real_labels;
  for (const auto& s : srcs) {
    size_t used = 0, dropped = 0;
    double own_sum = 0;
    for (const auto& t : s.set.spectra) {
      if (!(t.teff_K >= s.cfg.teff_min_K && t.teff_K <= s.cfg.teff_max_K)) {
        rep.dropped.push_back(fmt::format("{}:{}: Teff {:.0f} K outside the source's range",
                                          s.cfg.name, t.name, t.teff_K));
        ++dropped;
        continue;
      }
      const double lab[3] = {t.teff_K, t.logg, t.feh};
      if (!std::isfinite(lab[0]) || !std::isfinite(lab[1]) || !std::isfinite(lab[2])) continue;
      std::vector<double> wv, fl;
      for (size_t i = 0; i < t.wave_vac_A.size(); ++i)
        if (t.wave_vac_A[i] >= s.lo && t.wave_vac_A[i] <= s.hi) {
          wv.push_back(t.wave_vac_A[i]);
          fl.push_back(t.flux[i]);
        }
      auto own = to_grid(
          wv, fl, [&](double lam) { return s.set.fwhm_at(lam); }, g);
      if (!normalise(own, g)) {
        rep.dropped.push_back(s.cfg.name + ":" + t.name + ": too few usable pixels in the range");
        ++dropped;
        continue;
      }
      size_t n_own = 0;
      for (double v : own) n_own += std::isfinite(v);
      const double frac = static_cast<double>(n_own) / g.n;
      std::vector<double> joined = own;
      if (n_own < static_cast<size_t>(g.n)) {
        if (filler.models.empty()) {
          rep.dropped.push_back(fmt::format(
              "{}:{}: covers {:.0f}% of the range and no filler is configured", s.cfg.name,
              t.name, 100 * frac));
          ++dropped;
          continue;
        }
        const CannonModel* m = filler.pick(lab);
        if (!m && frac < cfg.min_own_fraction) {
          rep.dropped.push_back(
              fmt::format("{}:{}: covers {:.0f}% of the range and the filler is "
                          "not trained near its labels",
                          s.cfg.name, t.name, 100 * frac));
          ++dropped;
          continue;
        }
        if (!m) {  // nearly complete: the nearest model fills the rest
          m = &filler.models.front();
          for (const auto& mm : filler.models)
            if (lab[0] >= mm.label_min[0] && lab[0] <= mm.label_max[0]) m = &mm;
        }
        const auto fill = filler.spectrum(*m, lab, g);
        // Weight of the own spectrum: 1 inside, falling linearly to 0 over seam_A at its edges.
        std::vector<double> dist(g.n, 0.0);
        double d = cfg.seam_A;  // the grid's ends are not seams: full weight there
        for (int k = 0; k < g.n; ++k) {
          d = std::isfinite(own[k]) ? d + g.wave[k] * g.dlnlam : 0.0;
          dist[k] = d;
        }
        d = cfg.seam_A;
        for (int k = g.n - 1; k >= 0; --k) {
          d = std::isfinite(own[k]) ? d + g.wave[k] * g.dlnlam : 0.0;
          dist[k] = std::min(dist[k], d);
        }
        bool ok = true;
        for (int k = 0; k < g.n; ++k) {
          const double w = std::isfinite(own[k]) ? std::min(1.0, dist[k] / cfg.seam_A) : 0.0;
          joined[k] =
              w >= 1.0 ? own[k] : w * (std::isfinite(own[k]) ? own[k] : 0.0) + (1 - w) * fill[k];
          ok = ok && std::isfinite(joined[k]);
        }
        if (!ok) {
          rep.dropped.push_back(s.cfg.name + ":" + t.name + ": the filler does not cover the gap");
          ++dropped;
          continue;
        }
      }
      TemplateSpectrum j;
      j.name = s.cfg.name + ":" + t.name;
      j.teff_K = t.teff_K;
      j.logg = t.logg;
      j.feh = t.feh;
      j.wave_vac_A = g.wave;
      j.flux = std::move(joined);
      j.curated = s.set.curated;
      out.spectra.push_back(std::move(j));
      real_labels.push_back({std::log10(t.teff_K), t.logg, t.feh});
      own_sum += frac;
      ++used;
    }
    rep.attrs["join.source." + s.cfg.name] = fmt::format(
        "{}; {} stars used, {} dropped; own spectrum over {} (vacuum), {:.0f}% of the range on "
        "average; {}",
        s.cfg.path, used, dropped, range_text(s.lo, s.hi), used ? 100 * own_sum / used : 0.0,
        std::isfinite(s.cfg.teff_max_K)
            ? fmt::format("stars of Teff {:.0f}-{:.0f} K", s.cfg.teff_min_K, s.cfg.teff_max_K)
            : std::string("stars of any Teff"));
    if (!s.set.frame.empty()) rep.attrs["join.frame." + s.cfg.name] = s.set.frame;
    spdlog::info("join: {}: {} stars over {} (vacuum), {} dropped", s.cfg.name, used,
                 range_text(s.lo, s.hi), dropped);
  }

  // 4. Filler grid points where no real star is near.
  size_t n_grid = 0;
  if (cfg.grid && !filler.models.empty()) {
    for (double lt = std::log10(cfg.grid_teff_min_K); lt <= std::log10(cfg.grid_teff_max_K) + 1e-9;
         lt += cfg.grid_dlogt)
      for (double lg = 0.0; lg <= 5.0 + 1e-9; lg += cfg.grid_dlogg)
        for (double fe = -2.5; fe <= 0.5 + 1e-9; fe += cfg.grid_dfeh) {
          const double lab[3] = {std::pow(10.0, lt), lg, fe};
          const CannonModel* m = filler.pick(lab);
          if (!m) continue;
          bool near = false;
          for (const auto& r : real_labels)
            near = near || (std::fabs(r[0] - lt) <= cfg.grid_gap_dlogt &&
                            std::fabs(r[1] - lg) <= cfg.grid_gap_dlogg &&
                            std::fabs(r[2] - fe) <= cfg.grid_gap_dfeh);
          if (near) continue;
          auto f = filler.spectrum(*m, lab, g);
          bool ok = true;
          for (double v : f) ok = ok && std::isfinite(v);
          if (!ok) continue;
          TemplateSpectrum j;
          j.name = fmt::format("{}:T{:.0f}_g{:.1f}_m{:+.1f}", m->name, lab[0], lg, fe);
          j.teff_K = lab[0];
          j.logg = lg;
          j.feh = fe;
          j.wave_vac_A = g.wave;
          j.flux = std::move(f);
          j.curated = true;
          out.spectra.push_back(std::move(j));
          ++n_grid;
        }
  }
  std::vector<std::string> fnames;
  for (const auto& p : cfg.filler) fnames.push_back(std::filesystem::path(p).filename().string());
  rep.attrs["join.filler"] =
      filler.models.empty()
          ? std::string("none")
          : fmt::format(
                "Cannon models {} (thedoppler 1.1.32, synthetic, air converted to vacuum): "
                "each star's range outside its own spectrum{}",
                fmt::join(fnames, ","),
                cfg.grid ? fmt::format(", and {} grid points (Teff {:.0f}-{:.0f} K) where "
                                       "no real star is within dlog10Teff {} dlogg {} "
                                       "dFeH {}",
                                       n_grid, cfg.grid_teff_min_K, cfg.grid_teff_max_K,
                                       cfg.grid_gap_dlogt, cfg.grid_gap_dlogg, cfg.grid_gap_dfeh)
                         : std::string());
  rep.attrs["join.range"] = range_text(cfg.wave_min_A, cfg.wave_max_A) + " (vacuum)";
  rep.attrs["join.lsf_fwhm_A"] =
      fmt::format("{:.2f} at 4000 A, {:.2f} at 6000 A, {:.2f} at 8500 A", g.fwhm_near(4000),
                  g.fwhm_near(6000), g.fwhm_near(8500));
  rep.attrs["join.seam_A"] = fmt::format("{}", cfg.seam_A);
  spdlog::info("join: {} training spectra ({} from the filler grid), line spread FWHM {}",
               out.spectra.size(), n_grid, rep.attrs["join.lsf_fwhm_A"]);
  // The line spread curve, every 20th grid pixel (it varies over hundreds of pixels).
  for (int t = 0; t < g.n; t += 20) {
    out.lsf_wave_A.push_back(g.wave[t]);
    out.lsf_fwhm_A.push_back(g.fwhm_A[t]);
  }
  if (out.lsf_wave_A.back() < g.wave.back()) {
    out.lsf_wave_A.push_back(g.wave.back());
    out.lsf_fwhm_A.push_back(g.fwhm_A.back());
  }
  if (report) *report = std::move(rep);
  return out;
}

JoinConfig preset_join(const std::string& preset, const std::string& data_dir,
                       const std::string& cannon_dir) {
  JoinConfig c;
  const std::string t = data_dir + "/templates/";
  JoinSource miles{"miles", t + "miles", 0.0, 0.0, 0.0, INFINITY, ""};
  JoinSource kesseli{"kesseli",
                     t + "kesseli_mdwarfs",
                     0.0,
                     0.0,
                     0.0,
                     INFINITY,
                     data_dir + "/tables/EEM_dwarf_UBVIJHK_colors_Teff.txt"};
  c.filler = {cannon_dir + "/coolstars.h5", cannon_dir + "/hotdwarfs.h5"};
  if (preset == "desi") {
    c.wave_min_A = 3600.0;
    c.wave_max_A = 9830.0;
  } else if (preset == "lamost") {
    // LAMOST's red half reads +7 to +19 km/s against its blue half (docs/rv-zero-point.md);
    // fitted to 9110 A, DR10's VRAD robust sigma against PyLASP went from 4.6 to 8.0 km/s
    // (docs/templates.md). The LAMOST preset therefore stops at MILES' red end and adds the M
    // dwarfs and the Teff range.
    c.wave_min_A = 3690.0;
    c.wave_max_A = 7410.0;
  } else if (preset == "sdss") {
    c.wave_min_A = 3600.0;
    c.wave_max_A = 10200.0;
  } else {
    throw ConfigError("templates build --preset: unknown preset '" + preset +
                      "' (lamost, sdss or desi)");
  }
  c.sources = {miles, kesseli};
  return c;
}

}  // namespace velox
