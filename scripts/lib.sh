# Shared helpers for scripts/*.sh, slurm/common.sh, .ci/run and tests/integration/common.sh.
# Source it; do not run it. Defines VELOX_REPO (repository root; PREFIX/share/velox in an
# installed copy), VELOX_DATA_DIR (default: <repo>/../shared/data), VELOX_PYTHON and
# VELOX_DEFAULT_BINARY.

VELOX_REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# The velox binary that goes with these scripts: build/velox of a checkout, PREFIX/bin/velox of a
# `cmake --install` (which puts this file in PREFIX/share/velox/scripts/).
# shellcheck disable=SC2034  # used by the scripts that source this file
case $VELOX_REPO in
  */share/velox) VELOX_DEFAULT_BINARY=${VELOX_REPO%/share/velox}/bin/velox ;;
  *) VELOX_DEFAULT_BINARY=$VELOX_REPO/build/velox ;;
esac
VELOX_DATA_DIR="${VELOX_DATA_DIR:-$VELOX_REPO/../shared/data}"
VELOX_DATA_DIR="$(cd "$VELOX_DATA_DIR" 2>/dev/null && pwd || echo "$VELOX_DATA_DIR")"
export VELOX_DATA_DIR

# The one interpreter of every velox Python script: Debian's /usr/bin/python3, which has numpy,
# h5py, astropy and matplotlib (scripts/install-deps.sh). Python scripts start with
# `#!/usr/bin/python3`; shell scripts run them as "$VELOX_PYTHON" FILE, never a bare `python3`
# (the first one on PATH may lack h5py). Override VELOX_PYTHON only for another distribution.
VELOX_PYTHON="${VELOX_PYTHON:-/usr/bin/python3}"
export VELOX_PYTHON

# velox_build BUILD_DIR: configure with the `release` preset (CMakePresets.json: Release, Ninja,
# CUDA when nvcc is found; ccache is picked up by CMakeLists.txt when installed) in BUILD_DIR with
# this data folder, and build everything, tests included.
velox_build() {
  local build_dir="$1"
  cmake -S "$VELOX_REPO" --preset release -B "$build_dir" -DVELOX_DATA_DIR="$VELOX_DATA_DIR"
  cmake --build "$build_dir" --parallel "$(nproc)"
}

# velox_build_sanitize BUILD_DIR: the `sanitize` preset (clang, ASan+UBSan, RelWithDebInfo, CUDA
# off, no Python module: a sanitized extension cannot load into an uninstrumented interpreter)
# with the libFuzzer harnesses (-DVELOX_FUZZ=ON): velox, the unit tests and
# BUILD_DIR/fuzz/velox_fuzz_<target>. Used by scripts/test-sanitize.sh and scripts/fuzz.sh.
velox_build_sanitize() {
  local build_dir="$1"
  cmake -S "$VELOX_REPO" --preset sanitize -B "$build_dir" -DVELOX_DATA_DIR="$VELOX_DATA_DIR"
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
        --classes "$VELOX_DATA_DIR/templates/redrock" \
        --classes "$VELOX_DATA_DIR/templates/redrock_galaxy" --output "$lib"
    fi
  ) 9>"$lib.lock"
}

# velox_ensure_preset VELOX PRESET LIB: build the survey preset library PRESET (lamost, sdss,
# desi: MILES + Kesseli M dwarfs + Cannon filler, docs/templates.md) with the redrock classes
# into LIB with the binary VELOX if LIB is missing or older than VELOX; locked like
# velox_ensure_library.
velox_ensure_preset() {
  local velox="$1" preset="$2" lib="$3"
  mkdir -p "$(dirname "$lib")"
  (
    flock 9
    if [[ ! -s "$lib" || "$lib" -ot "$velox" ]]; then
      echo "building the $preset template library into $lib" >&2
      "$velox" templates build --preset "$preset" --data-dir "$VELOX_DATA_DIR" \
        --classes "$VELOX_DATA_DIR/templates/redrock" \
        --classes "$VELOX_DATA_DIR/templates/redrock_galaxy" --output "$lib" --overwrite
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

# velox_run_forwarding CMD...: run CMD as a child, pass the SIGTERM/SIGINT this shell gets on to
# velox as SIGTERM (Slurm's --signal=B:TERM@N signals only the batch shell), then return CMD's
# exit code once it has really exited. velox stops cleanly on SIGTERM with exit code 4
# (docs/running.md "Stopping and requeueing"). How the signal reaches the velox processes:
#  - CMD is srun inside a Slurm job: `scancel --signal=TERM $SLURM_JOB_ID` (every task of the
#    job's steps, not this shell). A SIGTERM to srun itself makes srun SIGKILL its tasks (Slurm
#    22.05, tests/integration/test_slurm.sh).
#  - CMD is mpirun/mpiexec: SIGTERM to its children, the ranks (single node). Open MPI's mpirun
#    turns a SIGTERM into an abort that SIGKILLs the ranks a second later.
#  - otherwise (velox, a script such as nightly.sh that forwards in turn): SIGTERM to CMD.
# After a signal, a launcher's code other than 0, 2 or 3 (mpirun may return 1 or 143 where the
# ranks returned 4) is reported as 4: the outputs are atomic, so the job is resumable.
velox_run_forwarding() {
  local pid rc=0 how launcher
  _velox_signalled=0
  launcher=$(basename -- "$1")
  "$@" &
  pid=$!
  how="kill -TERM $pid"
  if [ "$launcher" = srun ] && [ -n "${SLURM_JOB_ID:-}" ] && command -v scancel >/dev/null; then
    how="scancel --signal=TERM $SLURM_JOB_ID"
  elif [ "$launcher" = mpirun ] || [ "$launcher" = mpiexec ]; then
    how="pkill -TERM -P $pid"
  fi
  # shellcheck disable=SC2064  # expand $how now
  trap "_velox_signalled=1; echo 'velox: signal received: asking velox to stop cleanly ($how)' >&2; $how 2>/dev/null" TERM INT
  wait "$pid" || rc=$?
  # A trapped signal interrupts `wait` (status 128+N) while CMD still runs: wait for its own code.
  while kill -0 "$pid" 2>/dev/null; do
    rc=0
    wait "$pid" || rc=$?
  done
  trap - TERM INT
  if [ "$_velox_signalled" = 1 ] && [ "$rc" != 0 ] && [ "$rc" != 2 ] && [ "$rc" != 3 ] && [ "$rc" != 4 ]; then
    echo "velox: $launcher exited with $rc after the signal: reported as 4 (interrupted, resumable)" >&2
    rc=4
  fi
  return "$rc"
}

# velox_requeue_if_interrupted RC: after velox's exit code 4 (interrupted), requeue the Slurm job
# this runs in (SLURM_JOB_ID; the templates ask for --requeue) so that it resumes; outside Slurm,
# say how to resume.
velox_requeue_if_interrupted() {
  [ "$1" = 4 ] || return 0
  if [ -n "${SLURM_JOB_ID:-}" ]; then
    echo "velox: interrupted (exit 4): requeueing job $SLURM_JOB_ID to resume" >&2
    scontrol requeue "$SLURM_JOB_ID"
  else
    echo "velox: interrupted (exit 4): rerun the same command to resume" >&2
  fi
}
