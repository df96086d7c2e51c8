#!/bin/bash
# MPI scaling benchmark of `velox fit` (not a test): spectra/s with 1 and 2 ranks, 1 thread each,
# on the same inputs (the 134 LAMOST spectra), and the efficiency rate(2) / (2 * rate(1)).
#
#   scripts/bench-mpi.sh [BUILD_DIR] [REPEATS]     (defaults: build, 3)
#
# The rate is rank 0's "spectra fitted ... in T s = R spectra/s" line: from the first hand-out to the last
# result, so it leaves out the template library load (the same on every rank) and the writing.
# Runs alternate between 1 and 2 ranks (a busy spell hits both); the medians of REPEATS runs are
# reported, with the best runs beside them.
# Environment: VELOX_DATA_DIR (default ../shared/data beside the checkout), MPIRUN_ARGS.
set -euo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "${1:-$SRC/build}" && pwd)
REPEATS=${2:-3}
DATA=${VELOX_DATA_DIR:-$SRC/../shared/data}
VELOX=$BUILD/velox
TEMPLATES=$BUILD/miles.h5
MPIRUN=(mpirun --oversubscribe --bind-to core ${MPIRUN_ARGS:-})
[ "$(id -u)" = 0 ] && MPIRUN+=(--allow-run-as-root)
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
if [ ! -s "$TEMPLATES" ]; then
  (flock 9; [ -s "$TEMPLATES" ] || "$VELOX" templates build --input "$DATA/templates/miles" \
     --classes "$DATA/templates/redrock" --classes "$DATA/templates/redrock_galaxy" \
     --output "$TEMPLATES") 9>"$BUILD/miles.h5.lock"
fi
ls "$DATA"/spectra/lamost_dr10_pylasp/fits/*.fits "$DATA"/spectra/lamost_dr8/fits/*.fits.gz >"$W/inputs.txt"

run() {  # run NP: spectra/s of one run
  "${MPIRUN[@]}" -np "$1" "$VELOX" fit --templates "$TEMPLATES" --threads 1 \
    --input-list "$W/inputs.txt" --output "$W/np$1.h5" --overwrite --progress-interval 1000 2>"$W/log"
  echo "  -np $1: $(grep -oP 'fit: .*spectra/s on [0-9]+ ranks' "$W/log" | tail -1)" >&2
  grep -oP '= \K[0-9.]+(?= spectra/s on)' "$W/log"
}
median() { sort -g | awk '{ a[NR] = $1 } END { print (NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2) }'; }
echo "bench-mpi: $(wc -l <"$W/inputs.txt") LAMOST spectra, 1 thread per rank, $REPEATS runs each, $(nproc) cores" >&2
: >"$W/r1"
: >"$W/r2"
for _ in $(seq "$REPEATS"); do  # alternate, so a busy spell on the machine hits both
  run 1 >>"$W/r1"
  run 2 >>"$W/r2"
done
r1=$(median <"$W/r1")
r2=$(median <"$W/r2")
b1=$(sort -g "$W/r1" | tail -1)
b2=$(sort -g "$W/r2" | tail -1)
awk -v r1="$r1" -v r2="$r2" -v b1="$b1" -v b2="$b2" 'BEGIN {
  printf "bench-mpi: medians: 1 rank %.2f spectra/s, 2 ranks %.2f spectra/s, speed-up %.2f, efficiency %.0f%%\n",
         r1, r2, r2 / r1, 100 * r2 / (2 * r1)
  printf "bench-mpi: best runs: 1 rank %.2f, 2 ranks %.2f, efficiency %.0f%%\n", b1, b2, 100 * b2 / (2 * b1) }'
