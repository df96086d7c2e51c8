// cuBLAS loaded at run time (cublas_rt.hpp). Host code only.
#include <cublas_v2.h>  // types and prototypes: the library itself is dlopen()ed
#include <dlfcn.h>

#include <stdexcept>
#include <string>

#include "backend/cuda/cublas_rt.hpp"

namespace velox {

namespace {

struct Cublas {
  void* lib = nullptr;
  decltype(&cublasCreate_v2) create = nullptr;
  decltype(&cublasDestroy_v2) destroy = nullptr;
  decltype(&cublasSetStream_v2) set_stream = nullptr;
  decltype(&cublasDgemm_v2) dgemm = nullptr;
};

Cublas load_cublas() {
  Cublas c;
  std::string why;
  for (const char* name : {"libcublas.so.13", "libcublas.so.12", "libcublas.so"}) {
    c.lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (c.lib) break;
    const char* e = dlerror();
    why += std::string(why.empty() ? "" : "; ") + (e ? e : name);
  }
  if (!c.lib)
    throw std::runtime_error(
        "VELOX_GPU_ENGINE=staged needs cuBLAS (libcublas.so.13 of the CUDA toolkit on the "
        "library path): " +
        why);
  auto sym = [&](const char* n) {
    void* p = dlsym(c.lib, n);
    if (!p) throw std::runtime_error(std::string("cuBLAS: no symbol ") + n);
    return p;
  };
  c.create = reinterpret_cast<decltype(c.create)>(sym("cublasCreate_v2"));
  c.destroy = reinterpret_cast<decltype(c.destroy)>(sym("cublasDestroy_v2"));
  c.set_stream = reinterpret_cast<decltype(c.set_stream)>(sym("cublasSetStream_v2"));
  c.dgemm = reinterpret_cast<decltype(c.dgemm)>(sym("cublasDgemm_v2"));
  return c;
}

const Cublas& cublas() {
  static const Cublas c = load_cublas();  // a throw leaves it for the next caller to retry
  return c;
}

void check(cublasStatus_t st, const char* what) {
  if (st != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(std::string("cuBLAS: ") + what + ": status " +
                             std::to_string(static_cast<int>(st)));
}

}  // namespace

std::string cublas_load_error() {
  try {
    cublas();
    return {};
  } catch (const std::exception& e) {
    return e.what();
  }
}

BlasHandle::BlasHandle(cudaStream_t stream) {
  const Cublas& b = cublas();
  cublasHandle_t h = nullptr;
  check(b.create(&h), "cublasCreate");
  h_ = h;
  const cublasStatus_t st = b.set_stream(h, stream);
  if (st != CUBLAS_STATUS_SUCCESS) {
    b.destroy(h);
    h_ = nullptr;
    check(st, "cublasSetStream");
  }
}

BlasHandle::~BlasHandle() {
  if (h_) cublas().destroy(static_cast<cublasHandle_t>(h_));
}

void BlasHandle::dgemm_tn(int m, int n, int k, const double* A, int lda, const double* B, int ldb,
                          double* C, int ldc) {
  const double one = 1.0, zero = 0.0;
  check(cublas().dgemm(static_cast<cublasHandle_t>(h_), CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &one, A,
                       lda, B, ldb, &zero, C, ldc),
        "cublasDgemm");
}

void BlasHandle::dgemm_nt(int m, int n, int k, const double* A, int lda, const double* B, int ldb,
                          double beta, double* C, int ldc) {
  const double one = 1.0;
  check(cublas().dgemm(static_cast<cublasHandle_t>(h_), CUBLAS_OP_N, CUBLAS_OP_T, m, n, k, &one, A,
                       lda, B, ldb, &beta, C, ldc),
        "cublasDgemm");
}

}  // namespace velox
