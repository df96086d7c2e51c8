// The one macro that lets every kernel compile with plain g++ (CPU backend, tests) and with nvcc
// (CUDA backend) from the same source. Kernels: no allocation, no exceptions, no I/O.
#pragma once
#if defined(__CUDACC__)
#define VX_HD __host__ __device__
#define VX_INLINE __forceinline__
#define VX_NOINLINE __noinline__
#define VX_UNROLL _Pragma("unroll")
#elif defined(VELOX_ISA_TU)
// A per-ISA CPU kernel translation unit (src/backend/cpu/isa/fit_slot.cpp, compiled once per
// instruction-set level): internal linkage, so that the linker never merges the AVX2/AVX-512
// copy of a helper with the baseline one (the one-definition rule; docs/performance.md).
#define VX_HD
#define VX_INLINE static inline __attribute__((always_inline))
#define VX_NOINLINE
#define VX_UNROLL
#else
#define VX_HD
#define VX_INLINE inline
#define VX_NOINLINE
#define VX_UNROLL
#endif
// VX_UNROLL before a loop of constant bound: unrolled on the GPU, so that the small arrays it
// indexes (label derivatives, kMaxLabels) stay in registers instead of a stack frame.
// VX_NOINLINE keeps a rarely run stage (e.g. segment_velocities) out of its caller on the GPU,
// so that the caller's register allocation, and its spills, stay as they were without it.
