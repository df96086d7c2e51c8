#!/usr/bin/env bash
# Clean stops (issue 11; docs/running.md "Stopping and requeueing"):
#  - SIGTERM to both ranks in the middle of `mpirun -np 2` over the 134 LAMOST spectra plus a
#    corrupt file: exit code 4 from mpirun, no partial (.tmp) files, status.tsv lists every
#    unfinished input as `interrupted`, no merged catalog; the rerun with the same command
#    completes the job: every input's catalog exactly once, each target once in the merge.
#  - SIGTERM to the worker rank only: it tells rank 0, and the whole job stops the same way.
#  - SIGINT (Ctrl-C) to a single process writing one --output catalog: exit 4 and a catalog of
#    what was fitted, marked interrupted.
#  - The templates' wrapper (scripts/lib.sh velox_run_forwarding) around mpirun passes a SIGTERM
#    to the ranks and exits 4. (The srun path runs under a real Slurm: test_slurm.sh.)
source "$(dirname "$0")/mpi_env.sh"
W="$VELOX_BUILD_DIR/test-tmp/signals"
rm -rf "$W"
make_lamost_inputs "$W"
N_TARGETS=134

run() {  # run NAME [extra args]: mpirun -np 2 into $W/NAME (per-input dir) and $W/NAME.h5
  local name=$1
  shift
  VELOX_SIGNAL_TEST=$name "${MPIRUN[@]}" -np 2 "$VELOX" fit --templates "$TEMPLATES" --threads 1 \
    --input-list "$W/inputs.txt" --output-dir "$W/$name" --merge "$W/$name.h5" "$@"
}
n_catalogs() { find "$W/$1" -maxdepth 1 -name '*.velox.h5' 2>/dev/null | wc -l; }
# wait_for NAME N: until NAME has N catalogs (at most 60 s)
wait_for() { for _ in $(seq 600); do [ "$(n_catalogs "$1")" -ge "$2" ] && return; sleep 0.1; done; }
# ranks_of NAME [RANK]: the velox ranks of run NAME (found by the environment mpirun gives
# them); with RANK, only that MPI rank. The test signals the ranks, as srun and Slurm do:
# mpirun itself turns SIGTERM into an abort that SIGKILLs the ranks a second later (Open MPI).
ranks_of() {
  local pid env
  for pid in $(pgrep -x velox); do
    env=$(tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null) || continue
    grep -qx "VELOX_SIGNAL_TEST=$1" <<<"$env" || continue
    if [ -z "${2:-}" ] || grep -qx "OMPI_COMM_WORLD_RANK=$2" <<<"$env"; then echo "$pid"; fi
  done
}
check_interrupted() {  # check_interrupted NAME LOG RC
  local name=$1 log=$2 rc=$3 n
  n=$(n_catalogs "$name")
  echo "$name: exit $rc, $n of $N_TARGETS catalogs"
  [ "$rc" = 4 ] || { echo "FAIL: $name: exit code $rc, expected 4"; cat "$log"; exit 1; }
  [ "$n" -lt $N_TARGETS ] || { echo "FAIL: $name: the job finished before the signal"; exit 1; }
  [ "$(find "$W/$name" -name '*.tmp' | wc -l)" = 0 ] || { echo "FAIL: $name: .tmp left"; exit 1; }
  [ ! -e "$W/$name.h5" ] || { echo "FAIL: $name: merged catalog of an unfinished job"; exit 1; }
  # One status line per input: ok (one per catalog written), failed (corrupt.fits, if it was
  # reached) or interrupted (the rest).
  local ok interrupted failed
  ok=$(grep -cP '\tok\t' "$W/$name/status.tsv" || true)
  interrupted=$(grep -cP '\tinterrupted\t' "$W/$name/status.tsv" || true)
  failed=$(grep -cP '\tfailed\t' "$W/$name/status.tsv" || true)
  echo "$name: status.tsv: $ok ok, $failed failed, $interrupted interrupted"
  [ "$ok" = "$n" ] && [ "$((ok + failed + interrupted))" = $((N_TARGETS + 1)) ] && [ "$interrupted" -gt 0 ] ||
    { echo "FAIL: $name: status.tsv"; cat "$W/$name/status.tsv"; exit 1; }
  grep -q "interrupted by SIGTERM" "$log" || grep -q "interrupted by a stop request" "$log" ||
    { echo "FAIL: $name: no interruption summary in the log"; cat "$log"; exit 1; }
}

echo "== SIGTERM to every rank of mpirun -np 2, then rerun"
run sig >"$W/sig.log" 2>&1 &
mpirun_pid=$!
wait_for sig 20
kill -TERM $(ranks_of sig)
rc=0
wait "$mpirun_pid" || rc=$?
check_interrupted sig "$W/sig.log" "$rc"
n_before=$(n_catalogs sig)
expect_rc 3 run sig  # the rerun finishes the job (3: corrupt.fits cannot be read)
[ "$(n_catalogs sig)" = $N_TARGETS ] || { echo "FAIL: rerun: catalogs"; exit 1; }
[ "$(grep -cP '\tskipped\t' "$W/sig/status.tsv")" = "$n_before" ] || { echo "FAIL: skipped"; exit 1; }
[ "$(find "$W/sig" -name '*.tmp' | wc -l)" = 0 ]
$PY "$VELOX_SOURCE_DIR/tests/python/check_merged.py" "$W/sig.h5" $N_TARGETS 1

echo "== SIGTERM to the worker rank only"
run worker >"$W/worker.log" 2>&1 &
mpirun_pid=$!
wait_for worker 20
kill -TERM $(ranks_of worker 1)
rc=0
wait "$mpirun_pid" || rc=$?
check_interrupted worker "$W/worker.log" "$rc"
grep -q "rank 1 stops" "$W/worker.log" || { echo "FAIL: the worker did not stop"; exit 1; }

echo "== SIGINT to a single process with --output"
# The 134 spectra three times over (copies under other names: velox fits a path once), 402
# inputs, several seconds even for a fast kernel, so that the signal arrives mid-run; it is sent
# 0.3 s after the job's first line.
N_SINGLE=402
grep -v corrupt "$W/inputs.txt" >"$W/many.txt"
for c in copy1 copy2; do
  mkdir -p "$W/$c"
  while read -r f; do
    cp "$f" "$W/$c/" && echo "$W/$c/$(basename "$f")"
  done < <(grep -v corrupt "$W/inputs.txt")
done >>"$W/many.txt"
VELOX_MPI=0 "$VELOX" fit --templates "$TEMPLATES" --threads 1 --input-list "$W/many.txt" \
  --output "$W/single.h5" >"$W/single.log" 2>&1 &
pid=$!
for _ in $(seq 600); do grep -q "fit: $N_SINGLE inputs" "$W/single.log" && break; sleep 0.1; done
sleep 0.3
kill -INT "$pid"
rc=0
wait "$pid" || rc=$?
cat "$W/single.log"
[ "$rc" = 4 ] || { echo "FAIL: single process: exit code $rc, expected 4"; exit 1; }
$PY - "$W/single.h5" "$N_SINGLE" <<'PY'
import sys, h5py
total = int(sys.argv[2])
with h5py.File(sys.argv[1], "r") as f:
    a, n = f.attrs, len(f["catalog"])
    assert a["interrupted"] == "true", dict(a)
    unfinished = int(a["n_inputs_unfinished"])
    assert 0 < unfinished < total and n == total - unfinished, (n, unfinished)
    print(f"single: {n} rows, {unfinished} inputs unfinished")
PY

echo "== velox_run_forwarding mpirun: SIGTERM to the wrapper shell reaches the ranks, exit 4"
# What the templates do with a single-node mpirun launcher (scripts/lib.sh): the ranks get the
# SIGTERM (not mpirun, which would abort them), and the wrapper reports 4 whatever mpirun
# returns. The srun path (scancel --signal) runs under a real Slurm in test_slurm.sh.
(
  source "$VELOX_SOURCE_DIR/scripts/lib.sh"
  VELOX_SIGNAL_TEST=fwd velox_run_forwarding "${MPIRUN[@]}" -np 2 "$VELOX" fit \
    --templates "$TEMPLATES" --threads 1 --input-list "$W/inputs.txt" --output-dir "$W/fwd"
) >"$W/fwd.log" 2>&1 &
wrapper=$!
wait_for fwd 10
kill -TERM "$wrapper"
rc=0
wait "$wrapper" || rc=$?
cat "$W/fwd.log"
[ "$rc" = 4 ] || { echo "FAIL: forwarding wrapper exit code $rc, expected 4"; exit 1; }
grep -qP '\tinterrupted\t' "$W/fwd/status.tsv" || { echo "FAIL: fwd: status.tsv"; exit 1; }
echo "PASS"
