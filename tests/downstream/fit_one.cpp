// Fit one spectrum file with an installed velox (find_package(velox), velox::velox_app) and print
// the VRAD of its first target, km/s. Usage: fit_one LIBRARY.h5 SPECTRUM.fits
#include <cstdio>

#include "app/fit_run.hpp"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: fit_one LIBRARY.h5 SPECTRUM.fits\n");
    return 2;
  }
  velox::FitOptions opt;
  opt.templates = argv[1];
  opt.inputs = {argv[2]};
  opt.threads = 1;
  opt.quiet = true;
  opt.device = "cpu";
  const velox::FitRunResult res = velox::run_fit(opt);
  if (res.rows.empty()) return 1;
  std::printf("%.17g\n", res.rows.front().VRAD);
  return 0;
}
