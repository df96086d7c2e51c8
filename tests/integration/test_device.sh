#!/usr/bin/env bash
# --device: gpu without a device is a one-line error (exit 2); auto falls back to the CPU and
# says so; both give the same catalog as --device cpu.
set -euo pipefail
source "$VELOX_SOURCE_DIR/tests/integration/common.sh"
itest_setup device
f="$VELOX_DATA_DIR/spectra/lamost_dr10_pylasp/fits/3703110.fits"
set +e
"$VELOX" fit --templates "$LIB" --output gpu.h5 --device gpu "$f" 2>gpu.log
rc=$?
set -e
if [ $rc -eq 0 ] && grep -q "CUDA device" gpu.log; then
  echo "a GPU is present: --device gpu ran on it"; exit 0
fi
[ $rc -eq 2 ] || fail "--device gpu without a device: exit $rc, expected 2"
[ "$(grep -c '\[error\]' gpu.log)" -eq 1 ] || fail "expected exactly one error line: $(cat gpu.log)"
grep -q -- "--device gpu" gpu.log || fail "error line does not name --device gpu"
[ ! -e gpu.h5 ] || fail "no catalog may be written"
"$VELOX" fit --templates "$LIB" --output auto.h5 --device auto "$f" 2>auto.log
grep -q "device auto: CPU backend" auto.log || fail "--device auto did not log its CPU choice"
"$VELOX" fit --templates "$LIB" --output cpu.h5 --device cpu "$f" 2>/dev/null
"$PY" "$VELOX_SOURCE_DIR/tests/python/compare_catalogs.py" auto.h5 cpu.h5
echo "device selection: OK"
