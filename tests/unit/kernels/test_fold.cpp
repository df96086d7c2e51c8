// The resolution rows the fit builds from their fold parameters (kernels/fold.hpp): the
// team-generic fold_row (the GPU's lanes, LaneTeam, SerialTeam) against the host's SIMD form
// (prep::Kernels::expand_rows, which the CPU backend runs), and the GPU's decomposition of the
// rows over a warp's lanes (LaneTeam) against the serial team.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "fit/cpu_isa.hpp"
#include "fit/fitter.hpp"
#include "fit/prep_kernels.hpp"
#include "io/readers.hpp"
#include "kernels/fold.hpp"
#include "kernels/team.hpp"
#include "test_util.hpp"
#include "thin_library.hpp"

using namespace velox;

namespace {

// Centroid [px from the central tap] and sum of a row stored with stride k_step.
void row_moments(const float* o, int nd, long k_step, double* c, double* s) {
  double s0 = 0, s1 = 0;
  for (int k = 0; k < nd; ++k) {
    s0 += o[k * k_step];
    s1 += o[k * k_step] * (k - nd / 2);
  }
  *s = s0;
  *c = s1 / s0;
}

// Rows of params p[n][3] by fold_row and by every supported level's expand_rows: the worst
// weight difference, centroid difference [px] and relative sum difference over the rows.
struct Worst {
  double w = 0, c = 0, s = 0;
  int n = 0, identical = 0;
};
Worst compare_forms(const std::vector<double>& p, int nd) {
  const int n = static_cast<int>(p.size() / 3);
  std::vector<int> col(n);
  for (int r = 0; r < n; ++r) col[r] = r;
  std::vector<float> generic(static_cast<size_t>(n) * nd);
  for (int r = 0; r < n; ++r) kern::fold_row(p.data() + 3 * r, nd, generic.data() + r * nd, 1);
  Worst worst;
  for (const CpuIsa isa : {CpuIsa::kBaseline, CpuIsa::kAvx2, CpuIsa::kAvx512}) {
    if (!isa_supported(isa)) continue;
    std::vector<float> host(generic.size(), NAN);
    prep_kernels(isa).expand_rows(p.data(), n, nd, col.data(), host.data(), nd, 1);
    for (int r = 0; r < n; ++r) {
      const float* g = generic.data() + r * nd;
      const float* h = host.data() + r * nd;
      bool same = true;
      for (int k = 0; k < nd; ++k) {
        worst.w = std::max(worst.w, static_cast<double>(std::fabs(g[k] - h[k])));
        same = same && g[k] == h[k];
      }
      double cg, sg, ch, sh;
      row_moments(g, nd, 1, &cg, &sg);
      row_moments(h, nd, 1, &ch, &sh);
      worst.c = std::max(worst.c, std::fabs(cg - ch));
      worst.s = std::max(worst.s, std::fabs(sg - sh) / std::fabs(sh));
      ++worst.n;
      worst.identical += same;
    }
  }
  return worst;
}

// The bounds below (first test case): the same bits where this build fuses no multiply-adds
// (the host form is compiled without them at every level), else a weight within 1e-5, the
// centroid within 4e-6 px, the sum within 1e-6.
void check_forms(const Worst& w) {
#ifndef FP_FAST_FMA
  CHECK(w.identical == w.n);
#endif
  CHECK(w.w <= 1e-5);
  CHECK(w.c <= 4e-6);
  CHECK(w.s <= 1e-6);
}

}  // namespace

TEST_CASE("fold_row builds the rows the host's SIMD form builds, every kind of row",
          "[fold][kernels]") {
  // Centroids across and beyond the taps (the FP32 plain, FP32 Newton and FP64 Newton rows, the
  // rows centred beyond the taps, the linear rows narrower than 0.3 px) and widths from 0 to
  // 3 px. The two forms run the same operations per row; they may differ where a compiler fuses
  // a multiply-add in one and not the other (the host form is compiled without fusing, the
  // GPU's with). A centroid step then lands on the other side of the tolerance at most, so the
  // bounds: a weight within 1e-5 (a row's weights are <= its sum 1, and one step moves the
  // centroid by less than the tolerance, 2e-6 px, and a weight by at most ~w |x| / sigma^2 times
  // that), the centroid within 4e-6 px (two FP32 tolerances: 2e-4 km/s on DESI's pixels), the
  // sum within 1e-6 (FP32 rounding of 11 weights).
  std::mt19937 rng(26);
  std::uniform_real_distribution<double> mu(-6.5, 6.5), var(0.0, 9.0), s0(0.5, 1.5);
  for (const int nd : {11, 7, 1}) {
    std::vector<double> p;
    for (int r = 0; r < 4000; ++r) {
      p.push_back(r % 8 == 0 ? std::round(mu(rng)) + 0.5 : mu(rng) * (r % 3 == 0 ? 0.3 : 1.0));
      p.push_back(r % 5 == 0 ? var(rng) * 0.02 : var(rng));
      p.push_back(s0(rng));
    }
    const Worst w = compare_forms(p, nd);
    INFO("ndiag " << nd << ": " << w.identical << " of " << w.n << " rows identical; worst weight "
                  << w.w << ", centroid " << w.c << " px, sum " << w.s);
    CHECK(w.n >= 4000);
    check_forms(w);
  }
}

TEST_CASE("fold_row on real DESI fold parameters, and the rows over a warp's lanes",
          "[fold][kernels][resolution]") {
  const auto& lib = test::thin_library();
  FitConfig cfg;
  ArmModelCache cache(lib);
  const FitContext ctx{lib, cache, cfg, "desi"};
  const auto file = read_spectra(test::data("spectra/desi_lamost/coadd-lamost-dr8.fits"));
  int n_spec = 0;
  for (size_t s = 0; s < std::min<size_t>(file.spectra.size(), 6); ++s) {
    const auto prep = prepare_spectrum(file.spectra[s], ctx);
    if (!prep.ready) continue;
    const Packed& pk = prep.packed;
    REQUIRE(pk.fold.size() == 3 * pk.flux.size());
    ++n_spec;
    // The same bounds (check_forms).
    const Worst w = compare_forms(std::vector<double>(pk.fold.begin(), pk.fold.end()), 11);
    INFO("fibre " << s << ": " << w.identical << " of " << w.n << " rows identical");
    check_forms(w);
    // The warp's decomposition (LaneTeam: row i on lane i % 32) writes what the serial team
    // writes, bit for bit: a row's arithmetic is its own lane's alone. Both fill every used
    // pixel's column (checked against NaN-filled scratch).
    std::vector<float> rm_serial(pk.n_rm_total(), NAN), rm_lanes(pk.n_rm_total(), NAN);
    kern::fold_rows(kern::SerialTeam{}, pk.view(nullptr, nullptr, rm_serial.data()));
    kern::fold_rows(kern::LaneTeam{}, pk.view(nullptr, nullptr, rm_lanes.data()));
    const kern::FitData d = pk.view(nullptr, nullptr, rm_serial.data());
    int n_cols = 0;
    for (int a = 0; a < d.n_arms; ++a) {
      if (d.n_full[a] == 0) continue;
      const size_t off = static_cast<size_t>(d.rmat[a] - rm_serial.data());
      for (int i = d.arm_start[a]; i < d.arm_start[a + 1]; ++i)
        for (int k = 0; k < d.ndiag[a]; ++k) {
          const size_t at = off + static_cast<size_t>(k) * d.n_full[a] + d.full_idx[i];
          REQUIRE(std::isfinite(rm_serial[at]));
          REQUIRE(std::memcmp(&rm_serial[at], &rm_lanes[at], sizeof(float)) == 0);
          ++n_cols;
        }
    }
    CHECK(n_cols > 1000);
  }
  CHECK(n_spec >= 3);
}
