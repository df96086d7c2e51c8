# The coordinator simulation (issue 16, docs/running.md "Coordinator capacity"): rank 0's real
# hand-out and bookkeeping with 33 ranks that sleep instead of fitting, on any machine
# (--oversubscribe). Checks that it runs to the end and accounts for every input (every one
# handed out once, one status.tsv line each); it prints its rates but asserts none (the machine
# running the tests may be loaded: the figures in the docs come from an idle one).
source "$(dirname "$0")/mpi_env.sh"
W="$VELOX_BUILD_DIR/test-tmp/coordinator_sim"
rm -rf "$W"
N=100000
out=$(timeout 300 "${MPIRUN[@]}" -np 33 "$VELOX" simulate-coordinator --inputs $N --rate 10000 \
  --status-dir "$W")
echo "$out"
grep -q "ranks=33 inputs=$N " <<<"$out" || { echo "FAIL: not every input handed out"; exit 1; }
[ "$(grep -cP '\tok\t1\t' "$W/status.tsv")" = $N ] || { echo "FAIL: status.tsv"; exit 1; }
[ "$(cut -f1 "$W/status.tsv" | sort -u | wc -l)" = $((N + 1)) ] || { echo "FAIL: duplicates"; exit 1; }
echo "PASS"
