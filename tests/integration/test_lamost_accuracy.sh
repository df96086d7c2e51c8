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
# BOSS star: the reference is the SDSS pipeline's own z*c = -30.35 km/s with Z_ERR = 3.22 km/s.
# SDSS stellar velocities carry a documented zero-point offset of about 7 km/s (Yanny et al. 2009,
# AJ 137, 4377, SEGUE; docs/rv-zero-point.md), so compare_reference.py asserts |dVRAD - 7| within
# 3 x the combined statistical error sqrt(Z_ERR^2 + VRAD_ERR_STAT^2) (velox's 1.3 km/s: a limit
# of about 10.5 km/s; the error floor is left out, it would only widen it). The 5 km/s
# criterion is printed by scripts/demo.sh.
"$PY" "$VELOX_SOURCE_DIR/scripts/compare_reference.py" catalog.h5 --data-dir "$VELOX_DATA_DIR" \
  --check
