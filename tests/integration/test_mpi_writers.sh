# Distributed writing (issue 16): in `mpirun -np 2 velox fit --output-dir`, both rank processes
# write and rename per-input catalogs (seen with strace when it is installed, and in each
# catalog's mpi_rank attribute); the rows are bitwise identical to a single process's; rank 0
# reports how many requests it answered; a --merge of the same job holds every row once.
source "$(dirname "$0")/mpi_env.sh"
W="$VELOX_BUILD_DIR/test-tmp/mpi_writers"
rm -rf "$W"
mkdir -p "$W"
ls "$VELOX_DATA_DIR"/spectra/lamost_dr10_pylasp/fits/*.fits | head -n 20 >"$W/inputs.txt"
N=20

VELOX_MPI=0 "$VELOX" fit --templates "$TEMPLATES" --threads 1 --input-list "$W/inputs.txt" \
  --output "$W/single.h5"
run2() {  # run2 [PREFIX...]: the 2-rank job, started through PREFIX (e.g. strace)
  "$@" "${MPIRUN[@]}" -np 2 "$VELOX" fit --templates "$TEMPLATES" --threads 1 \
    --input-list "$W/inputs.txt" --output-dir "$W/np2" --merge "$W/np2.h5" 2>"$W/np2.log"
}
if command -v strace >/dev/null && strace -f -e trace=rename,renameat,renameat2 -o /dev/null true 2>/dev/null; then
  run2 strace -f -e trace=rename,renameat,renameat2 -o "$W/renames"
  # One line per rename, "PID rename(...velox.h5.tmp", ...velox.h5")"; count the processes.
  writers=$(grep 'velox\.h5\.tmp' "$W/renames" | awk '{print $1}' | sort -u | wc -l)
  renamed=$(grep -c 'velox\.h5\.tmp' "$W/renames")
  echo "strace: $renamed catalogs renamed by $writers processes"
  [ "$renamed" = $N ] && [ "$writers" = 2 ] || { echo "FAIL: renames"; cat "$W/renames"; exit 1; }
else
  echo "strace not usable here: checking the mpi_rank attributes only"
  run2
fi
cat "$W/np2.log"
grep -q "rank 0 handled [0-9]* requests for $N inputs" "$W/np2.log" || { echo "FAIL: no hand-out summary"; exit 1; }
[ "$(grep -cP '\tok\t1\t' "$W/np2/status.tsv")" = $N ] || { echo "FAIL: status.tsv"; exit 1; }
$PY - "$W/np2" <<'PY'
import glob, sys, h5py
ranks = sorted({h5py.File(f, "r").attrs["mpi_rank"] for f in glob.glob(sys.argv[1] + "/*.velox.h5")})
print("per-input catalogs written by ranks", ranks)
assert ranks == ["0", "1"], ranks
PY
$PY "$VELOX_SOURCE_DIR/tests/python/compare_catalogs.py" "$W/single.h5" "$W/np2.h5"
echo "PASS"
