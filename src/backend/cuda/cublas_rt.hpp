// cuBLAS for the staged engine's row and emulator GEMMs (fit_kernel.hpp StagedEngine), loaded at
// run time (dlopen of libcublas.so.13, .12 or .so) so that velox and its other engines start
// without it. Its own translation unit: cublas_v2.h declares a global `half` that the kernels'
// headers cannot share a translation unit with. Every call throws std::runtime_error naming the
// call and the cuBLAS status (or, for the loader, what dlopen said).
#pragma once
#include <cuda_runtime.h>

#include <string>

namespace velox {

// Loads cuBLAS and resolves the functions BlasHandle calls, without a device: "" when it can,
// else why not (what dlopen or dlsym said).
std::string cublas_load_error();

class BlasHandle {
 public:
  explicit BlasHandle(cudaStream_t stream);  // cublasCreate + cublasSetStream
  ~BlasHandle();
  BlasHandle(const BlasHandle&) = delete;
  BlasHandle& operator=(const BlasHandle&) = delete;
  // C (m x n) = A^T B, column-major (cublasDgemm with op(A) = T, op(B) = N, alpha 1, beta 0):
  // A is k x m with leading dimension lda, B k x n (ldb), C m x n (ldc); FP64, on the stream.
  void dgemm_tn(int m, int n, int k, const double* A, int lda, const double* B, int ldb, double* C,
                int ldc);
  // C (m x n) = A B^T + beta C, column-major (op(A) = N, op(B) = T, alpha 1): A is m x k (lda),
  // B n x k (ldb), C m x n (ldc); FP64, on the stream.
  void dgemm_nt(int m, int n, int k, const double* A, int lda, const double* B, int ldb,
                double beta, double* C, int ldc);

 private:
  void* h_ = nullptr;  // cublasHandle_t
};

}  // namespace velox
