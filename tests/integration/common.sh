# Sourced by tests/integration/test_*.sh (run by ctest with VELOX, VELOX_DATA_DIR,
# VELOX_BUILD_DIR, VELOX_SOURCE_DIR set; see tests/CMakeLists.txt).
#   itest_setup NAME   fresh scratch dir $SCRATCH = $VELOX_BUILD_DIR/itest/NAME; cd there;
#                      $LIB = $VELOX_BUILD_DIR/miles.h5, built (once, under a lock) if needed
#   fail MSG           print "FAIL: MSG" and exit 1
#   run_rc VAR CMD...  run CMD, store its exit code in VAR (set -e does not stop on it)
#   $PY                $VELOX_PYTHON (scripts/lib.sh: /usr/bin/python3, with h5py, numpy, astropy)
: "${VELOX:?VELOX (path of the velox binary) must be set}"
: "${VELOX_DATA_DIR:?VELOX_DATA_DIR must be set}"
: "${VELOX_BUILD_DIR:?VELOX_BUILD_DIR must be set}"
: "${VELOX_SOURCE_DIR:?VELOX_SOURCE_DIR must be set}"
source "$VELOX_SOURCE_DIR/scripts/lib.sh"
PY=$VELOX_PYTHON

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

run_rc() {
  local -n _rc="$1"
  shift
  _rc=0
  "$@" || _rc=$?
}

itest_setup() {
  SCRATCH="$VELOX_BUILD_DIR/itest/$1"
  rm -rf "$SCRATCH"
  mkdir -p "$SCRATCH"
  cd "$SCRATCH"
  LIB="$VELOX_BUILD_DIR/miles.h5"
  velox_ensure_library "$VELOX" "$LIB"
}
