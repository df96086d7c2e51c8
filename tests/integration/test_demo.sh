#!/usr/bin/env bash
# scripts/demo.sh ends with exactly one verdict line that matches its exit code: "demo: PASS"
# and 0 on the real data (the BOSS row within 3 x Z_ERR, its zero-point offset explained by
# docs/rv-zero-point.md), and "demo: FAIL: ..." and 1 under the original 5 km/s BOSS criterion.
# Runs in the source tree's build/ (scripts/test.sh builds it; the demo's build step is then a
# no-op), so it is skipped for other build directories.
set -euo pipefail
source "$VELOX_SOURCE_DIR/tests/integration/common.sh"
if [[ "$(cd "$VELOX_BUILD_DIR" && pwd)" != "$(cd "$VELOX_SOURCE_DIR" && pwd)/build" ]]; then
  echo "SKIP: the demo uses build/, this is $VELOX_BUILD_DIR"
  exit 0
fi
itest_setup demo
verdict() {  # verdict LOG RC WANT_RC WANT_WORD
  local lines
  lines=$(grep -c "^demo: \(PASS\|FAIL\)" "$1" || true)
  [ "$lines" = 1 ] || { tail -5 "$1"; fail "$1: $lines verdict lines, expected 1"; }
  [[ "$(tail -n 1 "$1")" == "demo: $4"* ]] || { tail -5 "$1"; fail "$1: last line is not 'demo: $4'"; }
  [ "$2" = "$3" ] || fail "$1: exit code $2 with verdict $4, expected $3"
  echo "$(tail -n 1 "$1") (exit $2)"
}
rc=0
"$VELOX_SOURCE_DIR/scripts/demo.sh" >pass.log 2>&1 || rc=$?
verdict pass.log "$rc" 0 PASS
grep -q "expected: about +7 km/s.*docs/rv-zero-point.md" pass.log || fail "no BOSS zero-point note"
! grep -q "targets selected" pass.log || fail "per-file lines at info level"
rc=0
DEMO_CHECK_ARGS="--boss-max-abs 5" "$VELOX_SOURCE_DIR/scripts/demo.sh" >fail.log 2>&1 || rc=$?
verdict fail.log "$rc" 1 FAIL
echo "PASS"
