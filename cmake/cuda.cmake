# Optional CUDA backend (issue 4). VELOX_CUDA=AUTO builds it when nvcc is found (on PATH or
# /usr/local/cuda/bin); ON requires it; OFF skips it. The backend only launches the kernels in
# kernels/ and manages device memory. Targets: SASS for sm_80 and sm_90, plus PTX for sm_90.
if(VELOX_CUDA STREQUAL "OFF")
  return()
endif()
find_program(VELOX_NVCC nvcc HINTS /usr/local/cuda/bin)
if(NOT VELOX_NVCC)
  if(VELOX_CUDA STREQUAL "ON")
    message(FATAL_ERROR "VELOX_CUDA=ON but nvcc was not found")
  endif()
  message(STATUS "velox: nvcc not found, CUDA backend off")
  return()
endif()
set(CMAKE_CUDA_COMPILER ${VELOX_NVCC})
if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
  set(CMAKE_CUDA_ARCHITECTURES "80-real;90")  # 90 = sm_90 SASS + compute_90 PTX
endif()
enable_language(CUDA)
find_package(CUDAToolkit REQUIRED)
set(CMAKE_CUDA_STANDARD 17)
set(CMAKE_CUDA_STANDARD_REQUIRED ON)
# velox_backend_cuda: the GPU engine (gpu_engine.cu: buffers, streams, library) and the fit
# kernel's launch, over the CPU backend's host batch packing; velox_app links it.
file(GLOB VELOX_CUDA_SOURCES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/backend/cuda/*.cu)
add_library(velox_backend_cuda STATIC ${VELOX_CUDA_SOURCES})
# cuBLAS is loaded at run time (dlopen) by the staged engine only: its headers, not its library.
target_link_libraries(velox_backend_cuda PUBLIC velox_backend_cpu CUDA::cudart ${CMAKE_DL_LIBS})
set_target_properties(velox_backend_cuda PROPERTIES POSITION_INDEPENDENT_CODE ON)
list(APPEND VELOX_LAYER_TARGETS velox_backend_cuda)
# Calling host code from device code is an error: Eigen's solvers, std:: algorithms etc. would
# otherwise compile to nothing in device code. -Xptxas=-v writes the resource report.
target_compile_options(velox_backend_cuda PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:--Werror
                       cross-execution-space-call -Xptxas=-v -Xptxas=-warn-spills>)
# Keep ptxas' resource report for the spill/stack check (test cuda.ptxas_budget).
set(VELOX_PTXAS_REPORT ${CMAKE_BINARY_DIR}/ptxas-report.txt)
set_target_properties(velox_backend_cuda PROPERTIES CUDA_ARCHITECTURES "${CMAKE_CUDA_ARCHITECTURES}"
                      CUDA_COMPILER_LAUNCHER
                      "${CMAKE_SOURCE_DIR}/scripts/nvcc-report.sh;${VELOX_PTXAS_REPORT}")
target_compile_definitions(velox_backend_cuda PUBLIC VELOX_HAVE_CUDA=1)
# The stub (backend/gpu_stub.cpp) is compiled out of the CPU backend when the CUDA one exists.
target_compile_definitions(velox_backend_cpu PRIVATE VELOX_HAVE_CUDA=1)
target_link_libraries(velox_app PUBLIC velox_backend_cuda)
set(VELOX_HAVE_CUDA ON)
message(STATUS "velox: CUDA backend with ${VELOX_NVCC}, architectures ${CMAKE_CUDA_ARCHITECTURES}")
