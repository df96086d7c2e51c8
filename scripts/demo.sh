#!/usr/bin/env bash
# Demo: install dependencies, build, build the MILES template library, fit the 25 LAMOST DR10 +
# 109 LAMOST DR8 spectra and the BOSS G1V star in one `velox fit` call into build/demo/catalog.h5,
# then print `velox info`, the comparison with the reference answers, and the wall time.
# Env: VELOX_DATA_DIR (default: <repo>/../shared/data).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$VELOX_REPO"
start=$(date +%s%N)
# elapsed T0_NS: seconds since T0_NS (from date +%s%N), millisecond precision.
elapsed() { local ms=$((($(date +%s%N) - $1) / 1000000)); printf '%d.%03d' $((ms / 1000)) $((ms % 1000)); }

scripts/install-deps.sh
velox_build build
velox_ensure_library build/velox build/miles.h5

mkdir -p build/demo
mapfile -t inputs < <(velox_lamost_inputs; velox_boss_star)
fit_start=$(date +%s%N)
rc=0
build/velox fit --templates build/miles.h5 --output build/demo/catalog.h5 "${inputs[@]}" || rc=$?
fit_time=$(elapsed "$fit_start")
# Exit code 3 = completed with some unreadable files: still worth showing.
if ((rc != 0 && rc != 3)); then
  echo "demo: velox fit failed with exit code $rc" >&2
  exit "$rc"
fi

echo
build/velox info build/demo/catalog.h5
echo
/usr/bin/python3 scripts/compare_reference.py build/demo/catalog.h5 --data-dir "$VELOX_DATA_DIR"
echo
echo "demo: velox fit of ${#inputs[@]} files: $fit_time s wall time; whole demo: $(elapsed "$start") s"
