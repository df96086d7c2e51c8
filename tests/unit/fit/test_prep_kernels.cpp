// The host preparation's inner loops per instruction-set level (fit/prep_kernels.hpp): every
// level this machine runs gives the same bits as the baseline level, and the running median equals
// a sorted copy of each window.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "fit/cpu_isa.hpp"
#include "fit/prep_kernels.hpp"
#include "fit/resolution.hpp"
#include "io/readers.hpp"
#include "test_util.hpp"

using namespace velox;

TEST_CASE("the running median's model ivar equals a sorted copy of each window, at every level",
          "[resolution][fit]") {
  // Lengths around the edges of the vector form: windows are full (15 pixels each side) only
  // from pixel 15 to n - 16, and blocks of 4-16 lanes need at least one full block. Ties (the
  // flux rounded to a few values) and negative flux included. Oracle: the window sorted, element
  // m/2 (the upper median), in the kernel's formula: equal bits are required (comparisons only).
  std::mt19937 rng(7);
  std::normal_distribution<float> noise(0.0f, 1.0f);
  for (size_t n : {1, 2, 15, 16, 30, 31, 45, 46, 47, 61, 62, 63, 100, 257, 1913}) {
    std::vector<float> flux(n), ivar0(n);
    std::vector<double> sigma(n);
    for (size_t k = 0; k < n; ++k) {
      flux[k] = 1.0f + 0.5f * noise(rng);
      if (k % 7 == 0) flux[k] = std::round(flux[k] * 4.0f) / 4.0f;  // ties
      ivar0[k] = 100.0f + 10.0f * static_cast<float>(k % 13);
      sigma[k] = 0.01 + 0.001 * static_cast<double>(k % 5);
    }
    std::vector<float> want(n);
    for (size_t k = 0; k < n; ++k) {
      std::vector<float> win(flux.begin() + (k >= 15 ? k - 15 : 0),
                             flux.begin() + std::min(n, k + 16));
      std::sort(win.begin(), win.end());
      const double sm = 2.0 * sigma[k] * std::fabs(win[win.size() / 2]);
      const double iv = ivar0[k];
      want[k] = static_cast<float>(iv / (1.0 + iv * sm * sm));
    }
    for (CpuIsa isa : supported_isas()) {
      std::vector<float> iv = ivar0;
      prep_kernels(isa).model_ivar(flux.data(), sigma.data(), 2.0, n, iv.data());
      size_t n_diff = 0;
      for (size_t k = 0; k < n; ++k) n_diff += std::memcmp(&iv[k], &want[k], sizeof(float)) != 0;
      INFO("n " << n << ", level " << isa_name(isa));
      CHECK(n_diff == 0);
    }
  }
}

TEST_CASE("every instruction-set level folds resolution rows to the same bits", "[resolution]") {
  // The fold (moments, then the rows written diagonal-major as prepare_spectrum does) of a real
  // DESI-layout arm with a template FWHM rising 0.5 -> 6 A along it, so that Gaussian rows of
  // every width (1-8 centroid steps) and sub-pixel (linear) rows both occur. The levels are
  // compiled without fused multiply-adds (cmake/cpu_isa.cmake): any difference is a defect of
  // the vector forms (a lane mixed into another, an idle lane written).
  const auto file = read_spectra(test::data("spectra/desi_lamost/coadd-lamost-dr8.fits"));
  REQUIRE(file.spectra.size() > 3);
  size_t n_rows = 0;
  for (size_t s = 0; s < 3; ++s) {
    for (const auto& arm : file.spectra[s].arms) {
      const long n = static_cast<long>(arm.size());
      const int nd = arm.ndiag;
      REQUIRE(nd > 0);
      std::vector<size_t> rows;
      std::vector<double> fwhm;
      std::vector<float> ref;
      for (CpuIsa isa : supported_isas()) {
        const prep::Kernels& k = prep_kernels(isa);
        std::vector<double> mom(3 * n, 0.0);
        k.moments(arm.resolution.data(), n, nd, 0, n, mom.data(), mom.data() + n,
                  mom.data() + 2 * n);
        const prep::FoldMoments fm{mom.data(), mom.data() + n, mom.data() + 2 * n, n, nd};
        if (rows.empty())
          for (long i = 0; i < n; ++i)
            if (std::isfinite(mom[i]) && mom[i] > 1e-6 && i % 5 != 3) {  // gaps: not all rows
              rows.push_back(i);
              fwhm.push_back(0.5 + 5.5 * static_cast<double>(i) / n);
            }
        std::vector<float> out(static_cast<size_t>(n) * nd, 0.0f);
        k.write_rows(fm, rows.data(), rows.size(), arm.wave_vac_A.data(), fwhm.data(), 0.0,
                     out.data(), 1, n, 0);
        if (ref.empty()) {
          ref = out;
          continue;
        }
        INFO("spectrum " << s << ", arm " << arm.name << ", level " << isa_name(isa));
        CHECK(std::memcmp(out.data(), ref.data(), out.size() * sizeof(float)) == 0);
      }
      n_rows += rows.size();
    }
  }
  REQUIRE(n_rows > 10000);
}

TEST_CASE("every level's pixel classes follow the data tests one pixel at a time", "[fit]") {
  // Oracle: prepare_spectrum's tests written out per pixel (std::isfinite, ivar > 0, mask == 0,
  // then the grid's range class). Every kind of bad value is mixed in at random positions, with
  // and without a mask, and lengths that are not multiples of any vector width.
  std::mt19937 rng(11);
  const float bad[] = {NAN, INFINITY, -INFINITY, 0.0f, -1.0f, -0.0f, 1e-40f, 3e38f};
  for (size_t n : {1, 7, 16, 17, 63, 64, 65, 1000, 2751}) {
    std::vector<float> flux(n), ivar(n);
    std::vector<int> mask(n);
    std::vector<char> range(n);
    for (size_t j = 0; j < n; ++j) {
      flux[j] = rng() % 5 == 0 ? bad[rng() % 8] : 1.0f + 0.001f * static_cast<float>(j);
      ivar[j] = rng() % 5 == 0 ? bad[rng() % 8] : 2.0f;
      mask[j] = rng() % 7 == 0 ? static_cast<int>(rng() % 3) : 0;
      range[j] = static_cast<char>(rng() % 3);
    }
    for (const bool with_mask : {true, false}) {
      std::vector<char> want(n);
      size_t want2 = 0;
      for (size_t j = 0; j < n; ++j) {
        const bool ok = std::isfinite(flux[j]) && std::isfinite(ivar[j]) && ivar[j] > 0 &&
                        (!with_mask || mask[j] == 0);
        want[j] = ok ? range[j] : 0;
        want2 += want[j] == 2;
      }
      for (CpuIsa isa : supported_isas()) {
        std::vector<char> use(n, 9);
        const size_t n2 = prep_kernels(isa).select_pixels(flux.data(), ivar.data(),
                                                          with_mask ? mask.data() : nullptr,
                                                          range.data(), n, use.data());
        INFO("n " << n << " mask " << with_mask << " level " << isa_name(isa));
        CHECK(n2 == want2);
        CHECK(use == want);
      }
    }
  }
}

TEST_CASE(
    "every level packs the used pixels and their S/N as prepare_spectrum's formulas, bit for bit",
    "[fit]") {
  // Oracle: the packing written out per pixel (the zero point by the split, the Legendre
  // coordinate, the copies, the matrix-grid index). Used pixels with gaps, a split arm (two zero
  // points) and an arm without one, with and without a matrix grid, lengths that are not a
  // multiple of any vector width.
  std::mt19937 rng(17);
  const size_t n = 3001;
  std::vector<double> wave(n), ln(n);
  std::vector<float> flux(n), ivar(n);
  for (size_t j = 0; j < n; ++j) {
    wave[j] = 3600.0 + 0.8 * static_cast<double>(j);
    ln[j] = std::log(wave[j]);
    flux[j] = static_cast<float>(rng() % 1000) * 0.01f;
    ivar[j] = static_cast<float>(1 + rng() % 50);
  }
  std::vector<size_t> idx;
  for (size_t j = 3; j < n - 2; ++j)
    if (rng() % 9 != 0) idx.push_back(j);
  const size_t m = idx.size();
  for (const bool split : {false, true})
    for (const bool full : {false, true}) {
      prep::PackIn in{};
      in.ln_wave = ln.data();
      in.wave = wave.data();
      in.flux = flux.data();
      in.ivar = ivar.data();
      in.split_A = split ? 4500.0 : INFINITY;
      in.zp_b = std::log1p(1.5 / 299792.458);
      in.zp_r = split ? std::log1p(-2.0 / 299792.458) : in.zp_b;
      in.lo = ln[idx.front()];
      in.hi = ln[idx.back()];
      in.has_full = full;
      in.full_off = 5 - static_cast<long>(idx.front());
      std::vector<double> w_ln(m), w_x(m);
      std::vector<float> w_f(m), w_i(m);
      std::vector<int> w_fi(m), w_ip(m);
      for (size_t k = 0; k < m; ++k) {
        const size_t j = idx[k];
        w_ln[k] = ln[j] - (wave[j] < in.split_A ? in.zp_b : in.zp_r);
        w_x[k] = 2.0 * (ln[j] - in.lo) / (in.hi - in.lo) - 1.0;
        w_f[k] = flux[j];
        w_i[k] = ivar[j];
        w_fi[k] = full ? static_cast<int>(static_cast<long>(j) + in.full_off) : -1;
        w_ip[k] = static_cast<int>(j);
      }
      for (CpuIsa isa : supported_isas()) {
        std::vector<double> o_ln(m), o_x(m);
        std::vector<float> o_f(m), o_i(m);
        std::vector<int> o_fi(m), o_ip(m);
        const prep::PackOut out{o_ln.data(), o_x.data(),  o_f.data(),
                                o_i.data(),  o_fi.data(), o_ip.data()};
        prep_kernels(isa).pack_pixels(in, idx.data(), m, out);
        INFO("split " << split << ", grid " << full << ", level " << isa_name(isa));
        CHECK(std::memcmp(o_ln.data(), w_ln.data(), m * sizeof(double)) == 0);
        CHECK(std::memcmp(o_x.data(), w_x.data(), m * sizeof(double)) == 0);
        CHECK(o_f == w_f);
        CHECK(o_i == w_i);
        CHECK(o_fi == w_fi);
        CHECK(o_ip == w_ip);
      }
    }
  // The S/N per pixel: the float formula at every level.
  std::vector<float> want_sn(n);
  for (size_t j = 0; j < n; ++j) want_sn[j] = flux[j] * std::sqrt(ivar[j]);
  for (CpuIsa isa : supported_isas()) {
    std::vector<float> sn(n);
    prep_kernels(isa).sn_values(flux.data(), ivar.data(), n, sn.data());
    INFO("level " << isa_name(isa));
    CHECK(std::memcmp(sn.data(), want_sn.data(), n * sizeof(float)) == 0);
  }
}
