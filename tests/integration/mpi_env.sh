# Sourced by the MPI integration tests: mpirun flags, the template library and the LAMOST inputs.
# Environment (from ctest): VELOX, VELOX_DATA_DIR, VELOX_BUILD_DIR, VELOX_SOURCE_DIR.
set -euo pipefail
: "${VELOX:?}" "${VELOX_DATA_DIR:?}" "${VELOX_BUILD_DIR:?}" "${VELOX_SOURCE_DIR:?}"
source "$VELOX_SOURCE_DIR/scripts/lib.sh"
PY=$VELOX_PYTHON  # the one interpreter rule (scripts/lib.sh)

if ! command -v mpirun >/dev/null; then
  echo "SKIP: mpirun not found"
  exit 0
fi
# CI runs as root; several ranks may share a core.
MPIRUN=(mpirun --oversubscribe)
if [ "$(id -u)" = 0 ]; then MPIRUN+=(--allow-run-as-root); fi

# The MILES library, built once per build dir (concurrent tests wait on the lock).
source "$VELOX_SOURCE_DIR/scripts/lib.sh"
TEMPLATES="$VELOX_BUILD_DIR/miles.h5"
velox_ensure_library "$VELOX" "$TEMPLATES"

# make_lamost_inputs DIR: DIR/inputs.txt lists the 134 LAMOST spectra plus DIR/corrupt.fits (a
# truncated FITS file); prints nothing.
make_lamost_inputs() {
  local dir=$1
  mkdir -p "$dir"
  ls "$VELOX_DATA_DIR"/spectra/lamost_dr10_pylasp/fits/*.fits \
     "$VELOX_DATA_DIR"/spectra/lamost_dr8/fits/*.fits.gz >"$dir/inputs.txt"
  head -c 5000 "$(head -n 1 "$dir/inputs.txt")" >"$dir/corrupt.fits"
  echo "$dir/corrupt.fits" >>"$dir/inputs.txt"
}

# expect_rc WANT CMD...: run CMD and fail unless it exits with WANT.
expect_rc() {
  local want=$1 rc=0
  shift
  "$@" || rc=$?
  if [ "$rc" != "$want" ]; then
    echo "FAIL: exit code $rc, expected $want: $*" >&2
    exit 1
  fi
}
