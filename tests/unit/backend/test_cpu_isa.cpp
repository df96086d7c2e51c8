// The CPU kernel's instruction sets (backend/cpu/isa.hpp): every level this machine supports fits
// real LAMOST DR8 spectra and DESI-layout stars to the baseline's answer, its vector form of the
// chi^2 grid's taps equals its scalar form bit for bit, and the baseline level (what any x86-64
// CPU runs) is always there and fits. The compiled objects are checked by the test
// cpu_isa.objects.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "backend/backend.hpp"
#include "backend/cpu/isa.hpp"
#include "common/error.hpp"
#include "io/readers.hpp"
#include "kernels/fit_eval.hpp"
#include "test_util.hpp"
#include "thin_library.hpp"

using namespace velox;

namespace {

// The first n LAMOST DR8 spectra (file name order).
std::vector<SpectrumFile> dr8_files(size_t n) {
  std::vector<std::string> paths;
  for (const auto& e : std::filesystem::directory_iterator(test::data("spectra/lamost_dr8/fits")))
    paths.push_back(e.path().string());
  std::sort(paths.begin(), paths.end());
  paths.resize(std::min(n, paths.size()));
  std::vector<SpectrumFile> files;
  for (const auto& p : paths) files.push_back(read_spectra(p));
  return files;
}

// Catalog rows of every spectrum of `files`, fitted with the CPU kernel at `isa`.
std::vector<CatalogRow> fit_at(CpuIsa isa, const std::vector<SpectrumFile>& files,
                               const TemplateLibrary& lib) {
  set_active_isa(isa);
  ArmModelCache cache(lib);
  FitConfig cfg;
  std::vector<CatalogRow> rows;
  for (const auto& f : files) {
    const FitContext ctx{lib, cache, cfg, format_name(f.format), f.survey};
    for (const auto& s : f.spectra) rows.push_back(fit_spectrum(s, ctx));
  }
  return rows;
}

// Restores the process's instruction set when a test case ends.
struct KeepIsa {
  CpuIsa saved = active_isa();
  ~KeepIsa() { set_active_isa(saved); }
};

}  // namespace

TEST_CASE("Instruction-set names parse, and every supported level has its own kernel",
          "[backend][isa]") {
  const KeepIsa keep;
  for (CpuIsa isa : {CpuIsa::kBaseline, CpuIsa::kAvx2, CpuIsa::kAvx512})
    CHECK(parse_isa(isa_name(isa)) == isa);
  CHECK_THROWS_AS(parse_isa("avx9"), ConfigError);
  const auto levels = supported_isas();
  REQUIRE(!levels.empty());
  CHECK(levels.front() == CpuIsa::kBaseline);  // portability: the lowest level is always there
  CHECK(best_isa() == levels.back());
  std::vector<CpuFitKernel> kernels;
  for (CpuIsa isa : levels) {
    set_active_isa(isa);
    CHECK(active_isa() == isa);
    kernels.push_back(cpu_fit_kernel());
  }
  std::sort(kernels.begin(), kernels.end());
  CHECK(std::unique(kernels.begin(), kernels.end()) == kernels.end());
  // A level this CPU (or build) lacks is refused with a clear error.
  for (CpuIsa isa : {CpuIsa::kAvx2, CpuIsa::kAvx512})
    if (!isa_supported(isa)) CHECK_THROWS_AS(set_active_isa(isa), ConfigError);
  WARN("CPU kernel instruction sets: " << isa_summary());
}

// The chi^2 grid's template values (kern::fixed_taps) on vector lanes at every level: each lane
// must be the level's own scalar form bit for bit (the same expressions, compiled with the same
// flags; the form's last n mod kVecD stencils and a call with n = 1 take the scalar form), for
// taps as ints and as doubles, stencil counts not a multiple of any vector width, taps at both
// clamp limits of grid_stencil (1 and n_tpix - 3) and fractions 0 and 1. Against this file's own
// cubic_weights/taps4 (baseline, no FMA) the values agree to rounding only.
TEST_CASE("Every instruction set's fixed-template taps equal its scalar form bit for bit",
          "[backend][isa]") {
  const int n_tpix = 211;
  std::vector<float> t(n_tpix);
  for (int j = 0; j < n_tpix; ++j)
    t[j] = static_cast<float>(1.0 + 0.3 * std::sin(0.7 * j) + 1e-3 * j);
  for (const int n : {1, 7, 45, 64, 203}) {
    std::vector<double> frac(n), kd(n);
    std::vector<int> ki(n);
    for (int i = 0; i < n; ++i) {
      ki[i] = i % 11 == 3 ? 1 : i % 11 == 7 ? n_tpix - 3 : 1 + (i * 37) % (n_tpix - 3);
      kd[i] = ki[i];
      frac[i] = i % 13 == 0 ? 0.0 : i % 13 == 1 ? 1.0 : std::fmod(0.618 * i, 1.0);
    }
    std::vector<double> ref(n);
    for (int i = 0; i < n; ++i) {
      double wt[4], dwt[4];
      kern::cubic_weights(frac[i], wt, dwt);
      ref[i] = kern::taps4(wt, t.data() + ki[i] - 1);
    }
    for (CpuIsa isa : supported_isas()) {
      const CpuFixedTaps f = cpu_fixed_taps(isa);
      REQUIRE(f != nullptr);
      CAPTURE(isa_name(isa), n);
      std::vector<double> vec_i(n, -1.0), vec_d(n, -1.0), scalar(n, -1.0);
      f(t.data(), n, frac.data(), ki.data(), nullptr, vec_i.data());
      f(t.data(), n, frac.data(), nullptr, kd.data(), vec_d.data());
      for (int i = 0; i < n; ++i) f(t.data(), 1, &frac[i], &ki[i], nullptr, &scalar[i]);
      CHECK(std::memcmp(vec_i.data(), scalar.data(), n * sizeof(double)) == 0);
      CHECK(std::memcmp(vec_d.data(), scalar.data(), n * sizeof(double)) == 0);
      for (int i = 0; i < n; ++i) CHECK(scalar[i] == Approx(ref[i]).epsilon(1e-14));
    }
  }
}

TEST_CASE("The baseline instruction set fits real LAMOST DR8 spectra (any x86-64 CPU)",
          "[backend][isa][realdata]") {
  const KeepIsa keep;
  const auto files = dr8_files(3);
  const auto rows = fit_at(CpuIsa::kBaseline, files, test::thin_library());
  REQUIRE(rows.size() == 3);
  for (const auto& r : rows) {
    INFO(r.SOURCE_FILE);
    CHECK(r.SUCCESS);
    CHECK(std::isfinite(r.VRAD));
    CHECK(r.VRAD_ERR > 0);
    CHECK(r.TEFF > 3000);
    CHECK(r.TEFF < 20000);
  }
}

// Tolerances. The levels run the same source; they differ in rounding only: the AVX2/AVX-512
// builds contract a*b+c into FMAs (one rounding instead of two) and may reassociate nothing else
// (no -ffast-math). Rounding at 1e-16 relative moves each LM iterate by far less than its
// uncertainty, but LM stops at the first accepted step that improves chi^2 by < 0.01
// (LMConfig::dchi2_tol), and a last step of up to sqrt(2 * 0.01) = 0.14 sigma may be taken in one
// build and not the other. So parameters must agree to 0.15 of their reported error (a rounding
// difference the catalog's errors cannot see), chi^2 to 0.02 (twice the stopping step), and the
// flags exactly. Measured on this machine (AMD EPYC, 6 spectra): agreement to ~1e-9 sigma.
namespace {

// Fits `files` at every level this CPU supports and compares each with the baseline, to the
// tolerances above.
void compare_with_baseline(const std::vector<SpectrumFile>& files, const TemplateLibrary& lib,
                           size_t n_expected) {
  const auto ref = fit_at(CpuIsa::kBaseline, files, lib);
  REQUIRE(ref.size() == n_expected);
  const auto levels = supported_isas();
  if (levels.size() == 1) WARN("only the baseline instruction set on this CPU: nothing to compare");
  int n_success = 0;
  for (const auto& r : ref) n_success += r.SUCCESS ? 1 : 0;
  CHECK(n_success >= 1);  // something to compare
  for (CpuIsa isa : levels) {
    if (isa == CpuIsa::kBaseline) continue;
    const auto rows = fit_at(isa, files, lib);
    REQUIRE(rows.size() == ref.size());
    double worst = 0.0;  // largest |difference| / error over every parameter and spectrum
    for (size_t i = 0; i < ref.size(); ++i) {
      const CatalogRow& a = ref[i];
      const CatalogRow& b = rows[i];
      INFO(isa_name(isa) << ", " << a.SOURCE_FILE << " row " << a.ROW_IN_FILE);
      REQUIRE(a.SUCCESS == b.SUCCESS);
      CHECK(a.RVS_WARN == b.RVS_WARN);
      CHECK(a.NPIX_TOT == b.NPIX_TOT);
      if (!a.SUCCESS) continue;
      const double pairs[][3] = {{a.VRAD, b.VRAD, a.VRAD_ERR_STAT},
                                 {a.TEFF, b.TEFF, a.TEFF_ERR_STAT},
                                 {a.LOGG, b.LOGG, a.LOGG_ERR_STAT},
                                 {a.FEH, b.FEH, a.FEH_ERR_STAT}};
      for (const auto& p : pairs) {
        REQUIRE(p[2] > 0);
        CHECK(std::fabs(p[0] - p[1]) <= 0.15 * p[2]);
        worst = std::max(worst, std::fabs(p[0] - p[1]) / p[2]);
      }
      CHECK(std::fabs(a.VRAD_ERR - b.VRAD_ERR) <= 0.05 * a.VRAD_ERR);
      CHECK(std::fabs(a.CHISQ_TOT - b.CHISQ_TOT) <= 0.02);
    }
    WARN(isa_name(isa) << " vs baseline: largest difference " << worst << " sigma");
  }
}

}  // namespace

TEST_CASE("Every instruction set this CPU supports fits real LAMOST DR8 spectra like the baseline",
          "[backend][isa][realdata]") {
  const KeepIsa keep;
  compare_with_baseline(dr8_files(6), test::thin_library(), 6);
}

// The DESI layout's resolution matrices take forms of their own at each level, which the LAMOST
// spectra above never reach: the chi^2 grid's stencils stored per matrix arm (taps as doubles,
// kern::fixed_taps) and, with AVX-512, the Jacobian's matrix block (kern::apply_rmat_np_block).
TEST_CASE("Every instruction set fits DESI-layout stars (resolution matrices) like the baseline",
          "[backend][isa][realdata]") {
  const KeepIsa keep;
  std::vector<SpectrumFile> files{
      read_spectra(test::data("spectra/desi_lamost/coadd-lamost-dr8.fits"))};
  REQUIRE(files[0].spectra.size() >= 6);
  files[0].spectra.resize(6);
  compare_with_baseline(files, test::thin_library(), 6);
}
