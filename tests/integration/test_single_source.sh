#!/usr/bin/env bash
# The physics has one source: both backends run kernels/fit_pipeline.hpp's fit_one on the views of
# kernels/batch.hpp, the CUDA backend contains no math of its own, and no physics function is
# defined outside kernels/. (The CPU's SIMD forms of some of the same sums, which the kernels
# select through the team interface, live in src/backend/cpu/isa/simd_forms.hpp: issue 27.)
set -euo pipefail
cd "$VELOX_SOURCE_DIR"
fail() { echo "FAIL: $*"; exit 1; }
# The CPU backend's kernel entry (compiled once per instruction set, cmake/cpu_isa.cmake).
grep -q 'kern::fit_one(team' src/backend/cpu/isa/fit_slot.cpp ||
  fail "CPU backend does not call kern::fit_one"
grep -q 'kern::batch_views(' src/backend/cpu/isa/fit_slot.cpp || fail "CPU backend: no batch_views"
grep -q 'cpu_fit_kernel()' src/backend/cpu/cpu_backend.cpp ||
  fail "CPU backend does not dispatch through cpu_fit_kernel()"
grep -qF 'fit_batch_serial({&p.packed}' src/backend/cpu/cpu_backend.cpp ||
  fail "fit_spectrum does not use the CPU backend"
grep -q 'launch_fit_batch(' src/backend/cuda/gpu_engine.cu ||
  fail "the GPU engine does not launch the fit kernel"
# The CUDA fit kernel (fit_kernel.cu) runs fit_one with the warp team on batch_views.
kfiles=src/backend/cuda/fit_kernel.cu
grep -q "kern::fit_one(team" $kfiles && grep -q "kern::WarpTeam team" $kfiles ||
  fail "CUDA kernel does not call kern::fit_one with the warp team"
grep -q 'kern::batch_views(' $kfiles || fail "CUDA kernel does not use kern::batch_views"
# Physics entry points are defined only under kernels/.
for fn in cubic_weights legendre ln_doppler emulator_coeffs cholesky template_at_pixels \
          profile_continuum lm_step fit_step cross_correlate pseudo_normalise gaussian_convolve_column; do
  defs=$(grep -rlE "(VX_INLINE|void|double|bool|int) +$fn *\(" src kernels mpi --include='*.[ch]pp' \
         --include='*.cu' --include='*.cuh' | grep -v '^kernels/' || true)
  [ -z "$defs" ] || fail "$fn defined outside kernels/: $defs"
  grep -rqE "(VX_INLINE|void|double|bool|int) +$fn *\(" kernels || fail "$fn not found in kernels/"
done
# The .cu file may not contain floating-point formulas beyond indexing: no exp/log/sqrt calls.
if grep -nE '\b(exp|log|sqrt|pow|atanh|tanh)\(' src/backend/cuda/*.cu; then
  fail "math in the CUDA backend"
fi
echo "single source: OK"
