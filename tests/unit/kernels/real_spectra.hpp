// The real-data sample of the kernel tests (test_teams.cpp, test_batch_exec.cpp): the first
// `cap` LAMOST DR10 files and the DESI-layout coadd of LAMOST DR10 stars (resolution matrices),
// at most `cap` ready spectra per file (CI time), prepared with `cfg`.
#pragma once
#include <algorithm>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "fit/fitter.hpp"
#include "io/readers.hpp"
#include "test_util.hpp"

namespace velox::test {

// f(p, ctx, path, row) for every prepared spectrum of the sample.
template <class F>
void each_real_spectrum(const TemplateLibrary& lib, ArmModelCache& cache, const FitConfig& cfg,
                        F&& f, size_t cap = 8) {
  const std::vector<std::pair<std::string, std::string>> inputs = {
      {"spectra/lamost_dr10_pylasp/fits", "lamost-dr10"},
      {"spectra/desi_lamost/coadd-lamost-dr10.fits", "desi"}};
  for (const auto& [rel, format] : inputs) {
    std::vector<std::string> paths;
    if (std::filesystem::is_directory(data(rel))) {
      for (const auto& e : std::filesystem::directory_iterator(data(rel)))
        paths.push_back(e.path().string());
      std::sort(paths.begin(), paths.end());
      paths.resize(std::min(paths.size(), cap));
    } else {
      paths.push_back(data(rel));
    }
    const FitContext ctx{lib, cache, cfg, format};
    for (const auto& path : paths) {
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

}  // namespace velox::test
