#!/usr/bin/env bash
# The sanitizer tests of CI (.ci/run; docs/testing.md): build velox, the unit tests and the fuzz
# harnesses with clang under AddressSanitizer + UndefinedBehaviorSanitizer (CUDA off;
# velox_build_sanitize in scripts/lib.sh) into build-sanitize/, then run every unit test and one
# real-data integration test (integration.test_bad_inputs: good and broken LAMOST files through
# the readers, the fit and the catalog writer). UBSAN_OPTIONS=halt_on_error=1 makes any report
# fail its test. Exits nonzero if anything fails.
# Env: VELOX_DATA_DIR, CTEST_PARALLEL (default 2).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$VELOX_REPO"

BUILD="$VELOX_REPO/build-sanitize"
velox_build_sanitize "$BUILD"
# The MILES library of the Release tests (scripts/test.sh, same sources) if there is one: building
# it again under ASan costs minutes, and the unit tests build their own small libraries under ASan
# anyway. The copy is newer than the ASan binary, so velox_ensure_library keeps it.
if [[ -s build/miles.h5 ]]; then cp build/miles.h5 "$BUILD/miles.h5"; fi
velox_ensure_library "$BUILD/velox" "$BUILD/miles.h5"

export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
# Leak checks stay on; Open MPI is not initialised by a plain `velox fit` (mpi/comm.hpp).
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
# Leaks inside dependencies on their error paths (tests/fuzz/lsan.supp says which and why).
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$VELOX_REPO/tests/fuzz/lsan.supp:print_suppressions=0}
# The statistical studies (injection-recovery, cross-validation, detectability: many fits of
# the same code paths) run in the Release tests only: under ASan they cost 7 minutes of the CI's
# 30 and exercise no path that the other unit tests (fit_spectrum, the CPU backend, the lane
# team on real spectra) do not run under ASan too.
STATISTICAL='injection|cross-validation|detectability|broadened by 200'
# Likewise two precision studies of the same fits (FP32 template sums, later LM starts: 55 s each
# under ASan), the emulator build's thread determinism (two library builds) and cpu_isa.objects,
# which reads the compiled objects' instruction sets (the Release build's; this build has the
# baseline level alone).
STATISTICAL+='|FP32 template sums|a later LM start|cpu_isa.objects|on 1 and on 3 threads'
# And the per-arm velocity studies (injected shifts over many fits: 25-29 s each under ASan) and
# two parity studies of the kernels' sums (the CPU's register-accumulator emulator sums, the
# velocity sweep of the kept rows: 30 and 13 s): their code runs under ASan in the lane team's
# and the CPU backend's real-spectrum fits.
STATISTICAL+="|recover the injected VRAD|arm scatter keeps VRAD|register-accumulator emulator sums"
STATISTICAL+="|velocity-only evaluations reuse kept rows"
# The staged engine over every shared spectrum (49 s in Release): its small-sample twin runs the
# same row stages under ASan.
STATISTICAL+="|staged engine fits every shared"
ctest --test-dir "$BUILD" --output-on-failure -j"${CTEST_PARALLEL:-2}" -LE integration \
  -E "$STATISTICAL"
ctest --test-dir "$BUILD" --output-on-failure -R '^integration\.test_bad_inputs$'
