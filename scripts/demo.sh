#!/usr/bin/env bash
# Demo: install dependencies, build, build the LAMOST preset template library (MILES + the
# Kesseli M dwarfs, docs/templates.md), fit the 25 LAMOST DR10 + 109 LAMOST DR8 spectra and the
# BOSS G1V star in one `velox fit` call into build/demo/catalog.h5 (replaced on every run),
# then print `velox info`, the comparison with the reference answers (scripts/compare_reference.py
# --check; the BOSS row shows the known SDSS zero-point offset, docs/rv-zero-point.md) and the
# wall time. Ends with one line, "demo: PASS" (exit 0) or "demo: FAIL: why" (exit 1).
# Env: VELOX_DATA_DIR (default: <repo>/../shared/data); DEMO_CHECK_ARGS: extra options of
# compare_reference.py (e.g. "--boss-max-abs 5" for the original 5 km/s BOSS criterion, which
# the SDSS zero-point offset fails).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$VELOX_REPO"
start=$(date +%s%N)
# elapsed T0_NS: seconds since T0_NS (from date +%s%N), millisecond precision.
elapsed() { local ms=$((($(date +%s%N) - $1) / 1000000)); printf '%d.%03d' $((ms / 1000)) $((ms % 1000)); }

scripts/install-deps.sh
velox_build build
velox_ensure_preset build/velox lamost build/lamost.h5

mkdir -p build/demo
mapfile -t inputs < <(velox_lamost_inputs; velox_boss_star)
fit_start=$(date +%s%N)
verdict() {  # verdict PASS|FAIL [why]: the demo's last line, and its exit code
  if [[ $1 == PASS ]]; then
    echo "demo: PASS: ${#inputs[@]} spectra fitted, every reference check within its limit"
    exit 0
  fi
  echo "demo: FAIL: $2"
  exit 1
}
rc=0
build/velox fit --templates build/lamost.h5 --output build/demo/catalog.h5 --overwrite \
  "${inputs[@]}" || rc=$?
fit_time=$(elapsed "$fit_start")
# Exit code 3 = completed with some unreadable files: still worth showing, but not a pass.
if ((rc != 0 && rc != 3)); then verdict FAIL "velox fit exited with code $rc"; fi

echo
build/velox info build/demo/catalog.h5
echo
check=0
# shellcheck disable=SC2086  # DEMO_CHECK_ARGS is a list of options, split on purpose
"$VELOX_PYTHON" scripts/compare_reference.py build/demo/catalog.h5 --data-dir "$VELOX_DATA_DIR" \
  --check ${DEMO_CHECK_ARGS:-} || check=$?
echo
echo "demo: velox fit of ${#inputs[@]} files: $fit_time s wall time; whole demo: $(elapsed "$start") s"
((rc == 0)) || verdict FAIL "velox fit exited with code $rc (some inputs could not be read)"
((check == 0)) || verdict FAIL "a reference check is out of its limit (FAILED line above)"
verdict PASS
