// The backend seam on real spectra: HostBatch packs exactly what Packed::view() shows the
// kernels, and the CPU backend's results equal fit_spectrum's bit for bit, whatever the thread
// count.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "backend/backend.hpp"
#include "emulator/build.hpp"
#include "io/readers.hpp"
#include "test_util.hpp"
#include "thin_library.hpp"

using namespace velox;

namespace {

// A few LAMOST DR10 spectra (Gaussian LSF) and DESI-layout spectra with resolution matrices.
struct Inputs {
  std::vector<SpectrumFile> files;
  std::vector<std::string> formats;
  Inputs() {
    int n = 0;
    for (const auto& e :
         std::filesystem::directory_iterator(test::data("spectra/lamost_dr10_pylasp/fits"))) {
      if (n++ == 3) break;
      files.push_back(read_spectra(e.path().string()));
    }
    files.push_back(read_spectra(test::data("spectra/desi_lamost/coadd-lamost-dr10.fits")));
    files.back().spectra.resize(std::min<size_t>(files.back().spectra.size(), 3));
    for (const auto& f : files) formats.push_back(format_name(f.format));
  }
};

template <class T>
bool same_array(const T* a, const T* b, size_t n) {
  return n == 0 || std::memcmp(a, b, n * sizeof(T)) == 0;
}

bool same(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

}  // namespace

TEST_CASE("HostBatch packing shows each spectrum as Packed::view() does", "[backend][realdata]") {
  const auto& lib = test::thin_library();
  ArmModelCache cache(lib);
  FitConfig cfg;
  const Inputs in;
  std::vector<PreparedSpectrum> prep;
  for (size_t f = 0; f < in.files.size(); ++f) {
    const FitContext ctx{lib, cache, cfg, in.formats[f]};
    for (const auto& s : in.files[f].spectra) {
      auto p = prepare_spectrum(s, ctx);
      if (p.ready) prep.push_back(std::move(p));
    }
  }
  std::vector<const Packed*> ptrs;
  size_t n_matrix = 0;
  for (const auto& p : prep) ptrs.push_back(&p.packed);
  HostBatch hb(ptrs, lib, pipeline_config(cfg, lib));
  SlotScratch scratch;
  scratch.ensure(2, hb.sizes());
  const kern::BatchView b = hb.view(scratch);
  REQUIRE(b.n_spec == static_cast<int>(prep.size()));
  for (int s = 0; s < b.n_spec; ++s) {
    const Packed& pk = prep[s].packed;
    const kern::FitData want = pk.view();
    kern::FitData got;
    kern::PipelineScratch sc;
    const float* tmpl[kern::kMaxArms] = {};
    kern::batch_views(b, s, 1, &got, &sc, tmpl);
    REQUIRE(got.n_pix == want.n_pix);
    REQUIRE(got.n_arms == want.n_arms);
    for (int a = 0; a <= kern::kMaxArms; ++a) CHECK(got.arm_start[a] == want.arm_start[a]);
    const size_t n = static_cast<size_t>(got.n_pix);
    CHECK(same_array(got.lnlam, want.lnlam, n));
    CHECK(same_array(got.xleg, want.xleg, n));
    CHECK(same_array(got.flux, want.flux, n));
    CHECK(same_array(got.ivar, want.ivar, n));
    CHECK(same_array(got.full_idx, want.full_idx, n));
    CHECK(sc.ivar == got.ivar);  // the pipeline clips the batch's ivar in place
    for (int a = 0; a < got.n_arms; ++a) {
      CHECK(got.basis[a] == want.basis[a]);  // the same model arrays, not copies
      CHECK(tmpl[a] == pk.models[a]->ccf_templates.data());
      REQUIRE(got.n_full[a] == want.n_full[a]);
      CHECK(got.ndiag[a] == want.ndiag[a]);
      if (want.n_full[a] == 0) continue;
      ++n_matrix;
      CHECK(got.full_off[a] == want.full_off[a]);
      CHECK(same_array(got.full_lnlam[a], want.full_lnlam[a], got.n_full[a]));
    }
    // The fold parameters travel per pixel; the rows are built in the slot's scratch (slot 1's
    // begins slot_rm floats in), arms in order.
    if (!pk.fold.empty()) {
      CHECK(same_array(got.fold, pk.fold.data(), 3 * n));
      CHECK(got.rmat_w == scratch.rm.data() + scratch.sizes.slot_rm);
      long long off = 0;
      for (int a = 0; a < got.n_arms; ++a) {
        if (got.n_full[a] == 0) continue;
        CHECK(got.rmat[a] == got.rmat_w + off);
        off += static_cast<long long>(got.n_full[a]) * got.ndiag[a];
      }
      CHECK(off <= b.slot_rm);
    } else {
      CHECK(got.fold == nullptr);
    }
    // Slot 1's scratch holds the largest spectrum.
    CHECK(sc.T == scratch.T.data() + scratch.sizes.slot_pix);
    CHECK(b.slot_pix >= got.n_pix);
  }
  CHECK(n_matrix > 0);  // the DESI spectra brought resolution matrices
  // Packed on a pool of 3 threads (what the engine does): the same arrays byte for byte, every
  // spectrum reported copied once.
  {
    ThreadPool pool(3);
    std::vector<int> copied(ptrs.size(), 0);
    const HostBatch par(
        ptrs, lib, pipeline_config(cfg, lib), [&](size_t s) { ++copied[s]; }, &pool);
    for (int c : copied) CHECK(c == 1);
    auto same_vec = [](const auto& a, const auto& b) {
      return a.size() == b.size() && same_array(a.data(), b.data(), a.size());
    };
    CHECK(same_vec(par.lnlam, hb.lnlam));
    CHECK(same_vec(par.xleg, hb.xleg));
    CHECK(same_vec(par.flux, hb.flux));
    CHECK(same_vec(par.ivar, hb.ivar));
    CHECK(same_vec(par.full_idx, hb.full_idx));
    CHECK(same_vec(par.full_lnlam, hb.full_lnlam));
    CHECK(same_vec(par.fold, hb.fold));
    CHECK(!par.fold.empty());
    REQUIRE(par.spec.size() == hb.spec.size());
    CHECK(std::memcmp(par.spec.data(), hb.spec.data(), hb.spec.size() * sizeof(hb.spec[0])) == 0);
    CHECK(par.models == hb.models);
  }
  // A matrix arm without its fold parameters is refused: the fit would read its slot's scratch
  // as the rows.
  int n_refused = 0;
  for (const auto& p : prep) {
    if (p.packed.fold.empty()) continue;
    Packed bad = p.packed;
    bad.fold.clear();
    CHECK_THROWS_AS(HostBatch({&bad}, lib, pipeline_config(cfg, lib)), std::invalid_argument);
    ++n_refused;
  }
  CHECK(n_refused > 0);
}

TEST_CASE("CPU backend results equal fit_spectrum bit for bit with 1, 2 and 3 threads",
          "[backend][realdata]") {
  const auto& lib = test::thin_library();
  ArmModelCache cache(lib);
  FitConfig cfg;
  const Inputs in;
  std::vector<std::unique_ptr<FitContext>> ctxs;
  std::vector<const Spectrum*> specs;
  std::vector<const FitContext*> spec_ctx;
  for (size_t f = 0; f < in.files.size(); ++f) {
    ctxs.push_back(std::make_unique<FitContext>(FitContext{lib, cache, cfg, in.formats[f], ""}));
    for (const auto& s : in.files[f].spectra) {
      specs.push_back(&s);
      spec_ctx.push_back(ctxs.back().get());
    }
  }
  std::vector<CatalogRow> ref;
  for (size_t i = 0; i < specs.size(); ++i) ref.push_back(fit_spectrum(*specs[i], *spec_ctx[i]));
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    CpuBackend cpu(lib, pipeline_config(cfg, lib), pool);
    std::vector<PreparedSpectrum> prep;
    std::vector<const Packed*> ready;
    for (size_t i = 0; i < specs.size(); ++i)
      prep.push_back(prepare_spectrum(*specs[i], *spec_ctx[i]));
    for (const auto& p : prep)
      if (p.ready) ready.push_back(&p.packed);
    // Two batches through the same backend: scratch reused from one to the next. The second
    // frees each spectrum's arrays once the backend has copied it (on_packed; what FitEngine
    // does): the fit and finish_row, which then read the flux alone, must not change.
    const BatchOutput first = cpu.run({ready.begin(), ready.begin() + ready.size() / 2});
    const size_t half = ready.size() / 2;
    // (on_packed runs on the pool's threads: each call touches its own spectrum and counter)
    std::vector<int> packed(ready.size() - half, 0);
    cpu.submit({ready.begin() + half, ready.end()}, false, {}, [&](size_t k) {
      ++packed.at(k);
      const_cast<Packed*>(ready[half + k])->release_fit_arrays();
    });
    const BatchOutput second = cpu.collect();
    for (size_t k = 0; k < packed.size(); ++k) {
      CHECK(packed[k] == 1);  // once each
      CHECK(ready[half + k]->lnlam.empty());
      CHECK(ready[half + k]->fold.empty());
      CHECK(!ready[half + k]->flux.empty());
    }
    size_t k = 0;
    for (size_t i = 0; i < prep.size(); ++i) {
      if (!prep[i].ready) continue;
      const BatchOutput& o = k < first.results.size() ? first : second;
      const size_t j = k < first.results.size() ? k : k - first.results.size();
      ++k;
      finish_row(prep[i], o.results[j], o.ivar[j], *spec_ctx[i]);
      const CatalogRow& a = ref[i];
      const CatalogRow& b = prep[i].row;
      INFO("threads " << threads << ", spectrum " << i);
      CHECK(same(a.VRAD, b.VRAD));
      CHECK(same(a.VRAD_ERR, b.VRAD_ERR));
      CHECK(same(a.VRAD_CCF, b.VRAD_CCF));
      CHECK(same(a.TEFF, b.TEFF));
      CHECK(same(a.LOGG, b.LOGG));
      CHECK(same(a.FEH, b.FEH));
      CHECK(same(a.FEH_ERR, b.FEH_ERR));
      CHECK(same(a.CHISQ_TOT, b.CHISQ_TOT));
      CHECK(same(a.CHISQ_C, b.CHISQ_C));
      CHECK(same(a.SN, b.SN));
      CHECK(a.NITER == b.NITER);
      CHECK(a.NPIX_TOT == b.NPIX_TOT);
      CHECK(a.RVS_WARN == b.RVS_WARN);
      CHECK(a.SUCCESS == b.SUCCESS);
    }
    CHECK(k == ready.size());
  }
}

TEST_CASE("Thread pool visits every index once with a valid worker id", "[backend]") {
  for (int threads : {1, 3}) {
    ThreadPool pool(threads);
    for (int round = 0; round < 3; ++round) {
      std::vector<int> seen(1000, 0);
      std::vector<char> bad(1000, 0);
      pool.for_each(seen.size(), [&](size_t i, int w) {
        ++seen[i];
        bad[i] = w < 0 || w >= threads;
      });
      for (size_t i = 0; i < seen.size(); ++i) {
        CHECK(seen[i] == 1);
        CHECK(!bad[i]);
      }
    }
    CHECK_THROWS_AS(pool.for_each(10,
                                  [](size_t i, int) {
                                    if (i == 5) throw std::runtime_error("boom");
                                  }),
                    std::runtime_error);
  }
}
