# Shared helpers for scripts/*.sh, .ci/run and tests/integration/common.sh. Source it; do not run it.
# Defines VELOX_REPO (repository root) and VELOX_DATA_DIR (default: <repo>/../shared/data).

VELOX_REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VELOX_DATA_DIR="${VELOX_DATA_DIR:-$VELOX_REPO/../shared/data}"
VELOX_DATA_DIR="$(cd "$VELOX_DATA_DIR" 2>/dev/null && pwd || echo "$VELOX_DATA_DIR")"
export VELOX_DATA_DIR

# velox_build BUILD_DIR: configure (Release; Ninja if available on a fresh build dir; ccache is
# picked up by CMakeLists.txt when installed) and build everything, tests included.
velox_build() {
  local build_dir="$1" gen=()
  if [[ ! -f "$build_dir/CMakeCache.txt" ]] && command -v ninja >/dev/null; then gen=(-G Ninja); fi
  cmake -S "$VELOX_REPO" -B "$build_dir" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DVELOX_DATA_DIR="$VELOX_DATA_DIR"
  cmake --build "$build_dir" --parallel "$(nproc)"
}

# velox_ensure_library VELOX LIB: build the MILES template library (with the redrock
# classification templates) into LIB with the binary
# VELOX if LIB is missing or older than VELOX. A flock on LIB.lock keeps parallel callers (ctest
# -j) from building it twice; the build itself writes LIB atomically.
velox_ensure_library() {
  local velox="$1" lib="$2"
  mkdir -p "$(dirname "$lib")"
  (
    flock 9
    if [[ ! -s "$lib" || "$lib" -ot "$velox" ]]; then
      echo "building the MILES template library into $lib" >&2
      "$velox" templates build --input "$VELOX_DATA_DIR/templates/miles" \
        --classes "$VELOX_DATA_DIR/templates/redrock" --output "$lib"
    fi
  ) 9>"$lib.lock"
}

# velox_lamost_inputs: the 25 LAMOST DR10 and 109 LAMOST DR8 spectra, one path per line.
velox_lamost_inputs() {
  ls -1 "$VELOX_DATA_DIR"/spectra/lamost_dr10_pylasp/fits/*.fits \
    "$VELOX_DATA_DIR"/spectra/lamost_dr8/fits/*.fits.gz
}

# velox_boss_star: the BOSS G1V star with a reference velocity (scripts/compare_reference.py).
velox_boss_star() { echo "$VELOX_DATA_DIR/spectra/sdss/spec-3586-55181-0500.fits"; }
