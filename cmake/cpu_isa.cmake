# The CPU kernel once per instruction-set level (docs/performance.md "Instruction sets"):
# src/backend/cpu/isa/fit_slot.cpp is compiled into one object library per level, each with its
# own -march and its own namespace velox::cpu_isa::<level>, and joins velox_backend_cpu; the dispatcher
# (src/backend/cpu/isa.cpp) picks one at run time with __builtin_cpu_supports. The rest of velox
# is compiled with the build's default flags (baseline x86-64), so the binary runs on any x86-64
# CPU. Non-x86 targets, or compilers without the x86-64-v3/v4 levels (GCC < 11, clang < 12),
# get the baseline level only.
# VELOX_ISA_ONLY=baseline builds the lowest level alone: the sanitizer build does (CMakePresets.json
# "sanitize"), since the kernel source is the same at every level and its three ASan+UBSan
# compiles took 394 CPU seconds (2 cores: a third of the build); the dispatcher and the tests take a
# build without a level as a CPU without it.
set(VELOX_ISA_ONLY "" CACHE STRING "Build only these CPU kernel levels (baseline;avx2;avx512; empty: every level the compiler has)")
include(CheckCXXCompilerFlag)
set(VELOX_ISA_LEVELS baseline)
set(VELOX_ISA_FLAGS_baseline "")
if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$")
  check_cxx_compiler_flag(-march=x86-64-v3 VELOX_CXX_HAS_X86_64_V3)
  check_cxx_compiler_flag(-march=x86-64-v4 VELOX_CXX_HAS_X86_64_V4)
  if(VELOX_CXX_HAS_X86_64_V3)
    list(APPEND VELOX_ISA_LEVELS avx2)
    set(VELOX_ISA_FLAGS_avx2 -march=x86-64-v3)
  endif()
  if(VELOX_CXX_HAS_X86_64_V4)
    list(APPEND VELOX_ISA_LEVELS avx512)
    # 512-bit vectors where the compiler vectorizes (GCC's generic tuning prefers 256).
    set(VELOX_ISA_FLAGS_avx512 -march=x86-64-v4 -mprefer-vector-width=512)
  endif()
endif()

if(VELOX_ISA_ONLY)
  string(REPLACE ";" "|" _velox_isa_only "${VELOX_ISA_ONLY}")
  list(FILTER VELOX_ISA_LEVELS INCLUDE REGEX "^(${_velox_isa_only})$")
  if(NOT "baseline" IN_LIST VELOX_ISA_LEVELS)
    message(FATAL_ERROR "VELOX_ISA_ONLY must include baseline (the dispatcher's fallback): ${VELOX_ISA_ONLY}")
  endif()
endif()
foreach(level ${VELOX_ISA_LEVELS})
  add_library(velox_cpu_${level} OBJECT ${CMAKE_SOURCE_DIR}/src/backend/cpu/isa/fit_slot.cpp)
  # The CPU backend's own include root (CMakeLists.txt, velox_layer_root) and the usage
  # requirements of the layers below it.
  target_include_directories(velox_cpu_${level} PRIVATE ${CMAKE_BINARY_DIR}/layers/velox_backend_cpu)
  target_link_libraries(velox_cpu_${level} PRIVATE velox_fit)
  target_compile_definitions(velox_cpu_${level} PRIVATE VELOX_ISA_TU=1 VELOX_ISA_LEVEL=${level})
  # -fno-math-errno: sqrt(ivar) and the like inline and on vector lanes (with errno, GCC emits a
  # scalar square root and a branch to libm per element); the kernels never read errno, and the
  # results are the same (IEEE square roots are exact).
  target_compile_options(velox_cpu_${level} PRIVATE -Wall -Wextra -fno-math-errno
                                                    ${VELOX_ISA_FLAGS_${level}})
  # The Python extension links the layers, which are position-independent (python/).
  set_target_properties(velox_cpu_${level} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  target_sources(velox_backend_cpu PRIVATE $<TARGET_OBJECTS:velox_cpu_${level}>)
  # The host preparation's inner loops (src/fit/isa/prep_slot.cpp), likewise per level, in
  # velox_fit. -ffp-contract=off: no fused multiply-adds, so that every level computes the same
  # bits (the prepared spectrum does not depend on the machine).
  add_library(velox_prep_${level} OBJECT ${CMAKE_SOURCE_DIR}/src/fit/isa/prep_slot.cpp)
  target_include_directories(velox_prep_${level} PRIVATE ${CMAKE_BINARY_DIR}/layers/velox_fit)
  target_link_libraries(velox_prep_${level} PRIVATE velox_model)
  target_compile_definitions(velox_prep_${level} PRIVATE VELOX_ISA_TU=1 VELOX_ISA_LEVEL=${level})
  target_compile_options(velox_prep_${level} PRIVATE -Wall -Wextra -fno-math-errno
                                                     -ffp-contract=off ${VELOX_ISA_FLAGS_${level}})
  set_target_properties(velox_prep_${level} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  target_sources(velox_fit PRIVATE $<TARGET_OBJECTS:velox_prep_${level}>)
  string(TOUPPER ${level} LEVEL)
  if(NOT level STREQUAL "baseline")
    target_compile_definitions(velox_backend_cpu PRIVATE VELOX_HAVE_ISA_${LEVEL}=1)
    target_compile_definitions(velox_fit PRIVATE VELOX_HAVE_ISA_${LEVEL}=1)
  endif()
endforeach()
message(STATUS "velox: CPU kernel instruction sets: ${VELOX_ISA_LEVELS}")

# Arguments of the test cpu_isa.objects (tests/CMakeLists.txt, scripts/check-isa-objects.sh).
set(VELOX_ISA_OBJECT_ARGS)
foreach(level ${VELOX_ISA_LEVELS})
  list(APPEND VELOX_ISA_OBJECT_ARGS "${level}:$<TARGET_OBJECTS:velox_cpu_${level}>"
       "${level}:$<TARGET_OBJECTS:velox_prep_${level}>")
endforeach()
