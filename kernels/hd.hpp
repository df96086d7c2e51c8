// The one macro that lets every kernel compile with plain g++ (CPU backend, tests) and with nvcc
// (CUDA backend) from the same source. Kernels: no allocation, no exceptions, no I/O.
#pragma once
#if defined(__CUDACC__)
#define VX_HD __host__ __device__
#define VX_INLINE __forceinline__
#else
#define VX_HD
#define VX_INLINE inline
#endif

// The resolution-matrix forward model (FitData::n_full > 0) is not compiled into the device
// kernels yet: the CUDA backend never receives matrices (the host keeps those chunks on the CPU),
// and leaving the path out keeps the fitting kernel free of spills (docs/gpu.md).
#if defined(__CUDA_ARCH__)
#define VX_RESOLUTION_MATRIX 0
#else
#define VX_RESOLUTION_MATRIX 1
#endif
