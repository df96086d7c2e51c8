#!/usr/bin/env bash
# Real-data acceptance test: fit the 25 LAMOST DR10 + 109 LAMOST DR8 spectra and the BOSS G1V
# star in one call, then scripts/compare_reference.py --check asserts the accuracy thresholds
# against PyLASP, the LAMOST DR8 pipeline and the BOSS star's known velocity.
set -euo pipefail
source "$VELOX_SOURCE_DIR/tests/integration/common.sh"
itest_setup lamost_accuracy

mapfile -t inputs < <(velox_lamost_inputs; velox_boss_star)
((${#inputs[@]} == 135)) || fail "expected 135 input files, found ${#inputs[@]}"
"$VELOX" fit --templates "$LIB" --output catalog.h5 "${inputs[@]}"
"$PY" "$VELOX_SOURCE_DIR/scripts/compare_reference.py" catalog.h5 --data-dir "$VELOX_DATA_DIR" \
  --check
