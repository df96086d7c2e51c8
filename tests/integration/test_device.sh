#!/usr/bin/env bash
# --device: gpu without a device is a one-line error (exit 2); auto falls back to the CPU and
# says so in one neutral info line (the driver's detail at debug level); both give the same
# catalog as --device cpu.
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
cat auto.log
# Without a GPU: one neutral info line saying so, no driver detail (that is debug level).
n=$(grep -cE "\[info\] (no CUDA device|built without CUDA): CPU backend" auto.log || true)
[ "$n" = 1 ] || fail "--device auto: expected one 'CPU backend' info line, found $n"
[ "$(grep -ciE 'cuda|gpu' auto.log)" = 1 ] || fail "--device auto: more than one line about the GPU"
! grep -qiE "driver|error [0-9]|insufficient|\[warning\]|\[error\]" auto.log ||
  fail "--device auto without a GPU logs driver detail or warnings at info level"
"$VELOX" --log-level debug fit --templates "$LIB" --output auto.h5 --overwrite --device auto "$f" \
  2>debug.log
grep -q "\[debug\] GPU query: " debug.log || fail "the GPU query detail is not at debug level"
"$VELOX" fit --templates "$LIB" --output cpu.h5 --device cpu "$f" 2>/dev/null
"$PY" "$VELOX_SOURCE_DIR/tests/python/compare_catalogs.py" auto.h5 cpu.h5
echo "device selection: OK"
