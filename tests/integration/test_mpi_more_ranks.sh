# More ranks than files: `mpirun -np 3` on 2 inputs finishes, the idle rank exits cleanly, and
# the merged catalog (--output) is bitwise identical to a singleton run without mpirun (with
# --targetid of both targets and one in no input, which alone the warning names). Then
# `--merge` alone over the output dir of a -np 3 run gives the same rows.
source "$(dirname "$0")/mpi_env.sh"
W="$VELOX_BUILD_DIR/test-tmp/mpi_more_ranks"
rm -rf "$W"
mkdir -p "$W"
dr10=("$VELOX_DATA_DIR"/spectra/lamost_dr10_pylasp/fits/*.fits)
dr8=("$VELOX_DATA_DIR"/spectra/lamost_dr8/fits/*.fits.gz)
IN=("${dr10[0]}" "${dr8[0]}")

env -u OMPI_COMM_WORLD_SIZE "$VELOX" fit --templates "$TEMPLATES" --output "$W/single.h5" "${IN[@]}"
# Both targets, each in one input (read by different ranks), and 42, in none: the warning at the
# end names 42 alone (a target is unknown only when no rank's input holds it).
ids=$($PY -c "import h5py,sys; print(','.join(str(t) for t in h5py.File(sys.argv[1])['catalog']['TARGETID']))" "$W/single.h5")
timeout 300 "${MPIRUN[@]}" -np 3 "$VELOX" fit --templates "$TEMPLATES" --output "$W/np3.h5" \
  --targetid "$ids,42" "${IN[@]}" 2>"$W/np3.log"
grep -q "of the 3 TARGETIDs of --targetid/--targetid-file are in none of the inputs: 42$" "$W/np3.log" ||
  { cat "$W/np3.log"; echo "FAIL: --targetid across ranks: no warning naming 42 alone"; exit 1; }
$PY "$VELOX_SOURCE_DIR/tests/python/check_merged.py" "$W/np3.h5" 2 0
$PY "$VELOX_SOURCE_DIR/tests/python/compare_catalogs.py" "$W/single.h5" "$W/np3.h5"

timeout 300 "${MPIRUN[@]}" -np 3 "$VELOX" fit --templates "$TEMPLATES" --output-dir "$W/dir" "${IN[@]}"
[ "$(grep -cP '\tok\t1\t' "$W/dir/status.tsv")" = 2 ]
"$VELOX" fit --output-dir "$W/dir" --merge "$W/merged.h5"
$PY "$VELOX_SOURCE_DIR/tests/python/compare_catalogs.py" "$W/single.h5" "$W/merged.h5"
# Usage errors are exit code 2 on every rank, before any MPI traffic.
expect_rc 2 "${MPIRUN[@]}" -np 2 "$VELOX" fit --templates "$TEMPLATES" "${IN[@]}"
echo "PASS"
