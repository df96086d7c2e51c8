// The real-data sample of the kernel tests (test_teams.cpp, test_batch_exec.cpp,
// test_engine.cpp): the first `cap` LAMOST DR10 files and the DESI-layout coadd of LAMOST DR10
// stars (resolution matrices), at most `cap` ready spectra per file (CI time), prepared with
// `cfg`; and the bitwise comparison of two fits' results.
#pragma once
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "fit/fitter.hpp"
#include "io/readers.hpp"
#include "test_util.hpp"

namespace velox::test {

// The files of `rel` under the data folder: a folder's files sorted, the first `cap` of them, or
// the file itself.
inline std::vector<std::string> input_paths(const std::string& rel, size_t cap) {
  std::vector<std::string> paths;
  if (std::filesystem::is_directory(data(rel))) {
    for (const auto& e : std::filesystem::directory_iterator(data(rel)))
      paths.push_back(e.path().string());
    std::sort(paths.begin(), paths.end());
    paths.resize(std::min(paths.size(), cap));
  } else {
    paths.push_back(data(rel));
  }
  return paths;
}

// f(p, ctx, path, row) for every prepared spectrum of the sample.
template <class F>
void each_real_spectrum(const TemplateLibrary& lib, ArmModelCache& cache, const FitConfig& cfg,
                        F&& f, size_t cap = 8) {
  const std::vector<std::pair<std::string, std::string>> inputs = {
      {"spectra/lamost_dr10_pylasp/fits", "lamost-dr10"},
      {"spectra/desi_lamost/coadd-lamost-dr10.fits", "desi"}};
  for (const auto& [rel, format] : inputs) {
    const FitContext ctx{lib, cache, cfg, format};
    for (const auto& path : input_paths(rel, cap)) {
      const auto file = read_spectra(path);
      size_t in_file = 0;
      for (const auto& spec : file.spectra) {
        const auto p = prepare_spectrum(spec, ctx);
        if (!p.ready || in_file >= cap) continue;
        ++in_file;
        f(p, ctx, path, spec.row_in_file);
      }
    }
  }
}

// Every ready spectrum of the shared LAMOST DR10 (25) and DR8 (109) files and the two DESI-layout
// coadds (85 fibres, resolution matrices), prepared with `cfg`, in that order; `cache` must
// outlive them. Issue 51's sample for the host executor against fit_one.
inline std::vector<PreparedSpectrum> all_real_spectra(const TemplateLibrary& lib,
                                                      ArmModelCache& cache, const FitConfig& cfg) {
  std::vector<PreparedSpectrum> out;
  const std::vector<std::pair<std::string, std::string>> inputs = {
      {"spectra/lamost_dr10_pylasp/fits", "lamost-dr10"},
      {"spectra/lamost_dr8/fits", "lamost-dr8"},
      {"spectra/desi_lamost/coadd-lamost-dr8.fits", "desi"},
      {"spectra/desi_lamost/coadd-lamost-dr10.fits", "desi"}};
  for (const auto& [rel, format] : inputs) {
    const FitContext ctx{lib, cache, cfg, format};
    for (const auto& path : input_paths(rel, SIZE_MAX))
      for (const auto& spec : read_spectra(path).spectra) {
        auto p = prepare_spectrum(spec, ctx);
        if (p.ready) out.push_back(std::move(p));
      }
  }
  return out;
}

// The sample's prepared spectra, in order (each_real_spectrum's). `cache` must outlive them: their
// arm models live there.
inline std::vector<PreparedSpectrum> real_spectra(const TemplateLibrary& lib, ArmModelCache& cache,
                                                  const FitConfig& cfg, size_t cap) {
  std::vector<PreparedSpectrum> out;
  each_real_spectrum(
      lib, cache, cfg,
      [&](const PreparedSpectrum& p, const FitContext&, const std::string&, int64_t) {
        out.push_back(p);
      },
      cap);
  return out;
}

// Every field of two results, bit for bit (NaN equals NaN; the LM covariance over np^2).
inline void require_same_fit(const kern::PipelineResult& a, const kern::PipelineResult& b) {
  auto bits = [](double x, double y) { return std::memcmp(&x, &y, sizeof x) == 0; };
  REQUIRE(a.status == b.status);
  CHECK(bits(a.v_ccf, b.v_ccf));
  if (a.status != kern::kPipeOk) return;
  REQUIRE(a.best.np == b.best.np);
  for (int q = 0; q < kern::kMaxParams; ++q) CHECK(bits(a.best.theta[q], b.best.theta[q]));
  for (int q = 0; q < a.best.np * a.best.np; ++q) CHECK(bits(a.best.cov[q], b.best.cov[q]));
  CHECK(bits(a.best.chi2, b.best.chi2));
  CHECK(a.best.niter == b.best.niter);
  CHECK(a.best.status == b.best.status);
  CHECK(a.best.hess_ok == b.best.hess_ok);
  CHECK(bits(a.chi2_c, b.chi2_c));
  for (int k = 0; k < kern::kMaxArms; ++k) {
    CHECK(bits(a.chi2_c_arm[k], b.chi2_c_arm[k]));
    CHECK(bits(a.chi2_arm[k], b.chi2_arm[k]));
    CHECK(a.npix_arm[k] == b.npix_arm[k]);
  }
  for (int k = 0; k < kern::kMaxSeg; ++k) {
    CHECK(bits(a.v_seg[k], b.v_seg[k]));
    CHECK(bits(a.v_seg_err[k], b.v_seg_err[k]));
  }
  CHECK(a.npix == b.npix);
  CHECK(a.n_clipped == b.n_clipped);
  CHECK(bits(a.vsini_upper, b.vsini_upper));
  CHECK(bits(a.dchi2_vsini0, b.dchi2_vsini0));
  CHECK(bits(a.v_skew, b.v_skew));
  CHECK(bits(a.v_kurt, b.v_kurt));
  for (int k = 0; k < 3; ++k) CHECK(a.n_eval[k] == b.n_eval[k]);
  CHECK(a.n_lm_iter == b.n_lm_iter);
}

}  // namespace velox::test
