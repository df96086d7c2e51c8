// CUDA backend: launches kernels/fit_pipeline.hpp (the same source the CPU backend runs) with a
// thread block per spectrum, and manages device memory. No physics here.
#include <cuda_runtime.h>

#include <algorithm>
#include <map>
#include <stdexcept>
#include <string>

#include "backend/gpu.hpp"
#include "kernels/fit_pipeline.hpp"
#include "kernels/team_cuda.hpp"

namespace velox {

namespace {

constexpr int kThreadsPerBlock = 128;
// 4 resident blocks of 128 threads per SM: ptxas may use up to 128 registers per thread
// (65536 / 512), which the fit pipeline needs to avoid spills (docs/gpu.md).
constexpr int kMinBlocksPerSM = 4;

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw std::runtime_error(std::string("CUDA: ") + what + ": " + cudaGetErrorString(e));
}

// Per-spectrum offsets and arm pointers (device pointers).
struct DeviceSpectrum {
  int n_pix;
  int n_arms;
  int arm_start[kern::kMaxArms + 1];
  long long pix_off;
  const float* basis[kern::kMaxArms];
  const float* tmpl[kern::kMaxArms];
};

struct BatchView {
  kern::EmulatorView em;
  kern::GridView grid;
  kern::PipelineConfig cfg;
  int n_ccf;
  const double* ccf_labels;
  const DeviceSpectrum* spec;
  int n_spec;
  int np;
  int n_out;
  const double* lnlam;
  const double* xleg;
  const float* flux;
  float* ivar;
  double *T, *dT, *fn, *wts, *frac, *ccf, *acc;
  int* t0;
  kern::PipelineResult* results;
};

__global__ void __launch_bounds__(kThreadsPerBlock, kMinBlocksPerSM) fit_batch_kernel(BatchView b) {
  __shared__ kern::PipelineShared sh;
  // The spectrum's view lives in shared memory (written by thread 0): as a per-thread local it
  // would cost every thread ~300 bytes of stack. Raw storage: __shared__ objects cannot be
  // constructed.
  __shared__ alignas(kern::FitData) unsigned char d_raw[sizeof(kern::FitData)];
  kern::FitData& d = *reinterpret_cast<kern::FitData*>(d_raw);
  const int s = blockIdx.x;
  if (s >= b.n_spec) return;
  const DeviceSpectrum& ds = b.spec[s];
  const long long o = ds.pix_off;
  if (threadIdx.x == 0) {
    d.n_pix = ds.n_pix;
    d.n_arms = ds.n_arms;
    for (int a = 0; a <= kern::kMaxArms; ++a) d.arm_start[a] = ds.arm_start[a];
    d.lnlam = b.lnlam + o;
    d.xleg = b.xleg + o;
    d.flux = b.flux + o;
    d.ivar = b.ivar + o;
    for (int a = 0; a < kern::kMaxArms; ++a) {
      d.basis[a] = ds.basis[a];
      d.n_full[a] = 0;  // resolution matrices run on the CPU backend for now
      d.ndiag[a] = 0;
      d.full_off[a] = 0;
      d.full_lnlam[a] = nullptr;
      d.rmat[a] = nullptr;
    }
    d.full_idx = nullptr;
    d.Tf = nullptr;
    d.dTf = nullptr;
  }
  __syncthreads();
  const kern::PipelineScratch sc{b.T + o,    b.dT + o * b.np, b.fn + o,
                                 b.wts + o,  b.frac + o,      b.t0 + o,
                                 b.ivar + o, b.ccf + (long long)s * b.n_out,
                                 b.acc + (long long)s * 8 * b.n_out};
  kern::fit_one(kern::BlockTeam{}, b.em, b.grid, d, ds.tmpl, b.n_ccf, b.ccf_labels, b.cfg, sc,
                &sh, &b.results[s]);
}

// Owning device buffer.
template <class T>
struct DevBuf {
  T* p = nullptr;
  size_t n = 0;
  DevBuf() = default;
  explicit DevBuf(size_t count) : n(count) {
    if (n) check(cudaMalloc(&p, n * sizeof(T)), "cudaMalloc");
  }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
  DevBuf(DevBuf&& o) noexcept : p(o.p), n(o.n) { o.p = nullptr; }
  ~DevBuf() {
    if (p) cudaFree(p);
  }
  static DevBuf from(const T* host, size_t count) {
    DevBuf b(count);
    if (count) check(cudaMemcpy(b.p, host, count * sizeof(T), cudaMemcpyHostToDevice), "upload");
    return b;
  }
};

}  // namespace

GpuInfo query_gpus() {
  GpuInfo g;
  g.compiled = true;
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    g.message = std::string("cudaGetDeviceCount: ") + cudaGetErrorString(e) + " (error " +
                std::to_string(static_cast<int>(e)) + ")";
    return g;
  }
  g.device_count = n;
  if (n == 0) g.message = "no CUDA device";
  return g;
}

std::vector<kern::PipelineResult> fit_prepared_on_gpu(const std::vector<PreparedSpectrum*>& specs,
                                                      std::vector<std::vector<float>>* ivar_out,
                                                      const FitContext& ctx, int device) {
  check(cudaSetDevice(device), "cudaSetDevice");
  const auto& lib = ctx.lib;
  const kern::PipelineConfig pc = pipeline_config(ctx.cfg, lib);
  const auto grid = lib.grid();
  const int np = 1 + lib.n_label;
  const int n_out = std::max(kern::ccf_lags(pc, grid), 7);
  // The library stays resident for the whole call.
  auto d_train = DevBuf<double>::from(lib.train_x.data(), lib.train_x.size());
  auto d_alpha = DevBuf<double>::from(lib.alpha.data(), lib.alpha.size());
  auto d_poly = DevBuf<double>::from(lib.poly_coef.data(), lib.poly_coef.size());
  auto d_ccf_labels = DevBuf<double>::from(lib.ccf_labels.data(), lib.ccf_labels.size());
  kern::EmulatorView em = lib.view();
  em.train_x = d_train.p;
  em.alpha = d_alpha.p;
  em.poly_coef = d_poly.p;
  std::map<const ArmModel*, std::pair<DevBuf<float>, DevBuf<float>>> models;
  for (const auto* p : specs)
    for (const auto& m : p->packed.models)
      if (!models.count(m.get()))
        models.emplace(m.get(), std::make_pair(
                                    DevBuf<float>::from(m->basis.data(), m->basis.size()),
                                    DevBuf<float>::from(m->ccf_templates.data(),
                                                        m->ccf_templates.size())));
  std::vector<kern::PipelineResult> results(specs.size());
  ivar_out->assign(specs.size(), {});
  size_t max_pix = 1;
  for (const auto* p : specs) max_pix = std::max(max_pix, p->packed.flux.size());
  size_t free_b = 0, total_b = 0;
  check(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo");
  const size_t per = gpu_bytes_per_spectrum(max_pix, np, n_out);
  const size_t batch = gpu_batch_size(free_b, 0.8, per, 65536);
  if (batch == 0) throw std::runtime_error("CUDA: not enough free device memory for one spectrum");
  for (size_t b0 = 0; b0 < specs.size(); b0 += batch) {
    const size_t nb = std::min(batch, specs.size() - b0);
    std::vector<DeviceSpectrum> ds(nb);
    std::vector<double> lnlam, xleg;
    std::vector<float> flux, ivar;
    for (size_t k = 0; k < nb; ++k) {
      const Packed& pk = specs[b0 + k]->packed;
      DeviceSpectrum& s = ds[k];
      s.n_pix = static_cast<int>(pk.flux.size());
      s.n_arms = pk.n_arms;
      for (int a = 0; a <= kern::kMaxArms; ++a) s.arm_start[a] = a <= pk.n_arms ? pk.arm_start[a] : 0;
      s.pix_off = static_cast<long long>(flux.size());
      for (int a = 0; a < kern::kMaxArms; ++a) {
        s.basis[a] = a < pk.n_arms ? models.at(pk.models[a].get()).first.p : nullptr;
        s.tmpl[a] = a < pk.n_arms ? models.at(pk.models[a].get()).second.p : nullptr;
      }
      lnlam.insert(lnlam.end(), pk.lnlam.begin(), pk.lnlam.end());
      xleg.insert(xleg.end(), pk.xleg.begin(), pk.xleg.end());
      flux.insert(flux.end(), pk.flux.begin(), pk.flux.end());
      ivar.insert(ivar.end(), pk.ivar.begin(), pk.ivar.end());
    }
    const size_t n = flux.size();
    auto d_spec = DevBuf<DeviceSpectrum>::from(ds.data(), nb);
    auto d_lnlam = DevBuf<double>::from(lnlam.data(), n);
    auto d_xleg = DevBuf<double>::from(xleg.data(), n);
    auto d_flux = DevBuf<float>::from(flux.data(), n);
    auto d_ivar = DevBuf<float>::from(ivar.data(), n);
    DevBuf<double> d_T(n), d_dT(n * np), d_fn(n), d_wts(n), d_frac(n);
    DevBuf<int> d_t0(n);
    DevBuf<double> d_ccf(nb * n_out), d_acc(nb * 8 * n_out);
    DevBuf<kern::PipelineResult> d_res(nb);
    BatchView v{em,       grid,     pc,      static_cast<int>(lib.ccf_labels.size() / lib.n_label),
                d_ccf_labels.p, d_spec.p, static_cast<int>(nb), np, n_out, d_lnlam.p, d_xleg.p,
                d_flux.p, d_ivar.p, d_T.p,  d_dT.p, d_fn.p, d_wts.p, d_frac.p, d_ccf.p, d_acc.p,
                d_t0.p,   d_res.p};
    fit_batch_kernel<<<static_cast<unsigned>(nb), kThreadsPerBlock>>>(v);
    check(cudaGetLastError(), "fit_batch_kernel launch");
    check(cudaDeviceSynchronize(), "fit_batch_kernel");
    check(cudaMemcpy(results.data() + b0, d_res.p, nb * sizeof(kern::PipelineResult),
                     cudaMemcpyDeviceToHost),
          "download results");
    check(cudaMemcpy(ivar.data(), d_ivar.p, n * sizeof(float), cudaMemcpyDeviceToHost),
          "download ivar");
    for (size_t k = 0; k < nb; ++k)
      (*ivar_out)[b0 + k].assign(ivar.begin() + ds[k].pix_off,
                                 ivar.begin() + ds[k].pix_off + ds[k].n_pix);
  }
  return results;
}

}  // namespace velox
