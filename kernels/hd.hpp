// The one macro that lets every kernel compile with plain g++ (CPU backend, tests) and with nvcc
// (CUDA backend) from the same source. Kernels: no allocation, no exceptions, no I/O.
#pragma once
#if defined(__CUDACC__)
#define VX_HD __host__ __device__
#define VX_INLINE __forceinline__
#define VX_NOINLINE __noinline__
#else
#define VX_HD
#define VX_INLINE inline
#define VX_NOINLINE
#endif
// VX_NOINLINE keeps a rarely run stage (e.g. segment_velocities) out of its caller on the GPU,
// so that the caller's register allocation, and its spills, stay as they were without it.
