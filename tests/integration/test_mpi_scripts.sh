# The Slurm templates and scripts/nightly.sh (docs/running.md): bash -n, dry runs that print the
# srun/velox command lines, and nightly.sh for real under mpirun on a few LAMOST files: first
# night, a night with nothing new, a new and an updated input, and resuming a pending manifest.
source "$(dirname "$0")/mpi_env.sh"
S=$VELOX_SOURCE_DIR
W="$VELOX_BUILD_DIR/test-tmp/mpi_scripts"
rm -rf "$W"
mkdir -p "$W/in"
for f in "$S"/slurm/*.sbatch "$S"/slurm/common.sh "$S"/scripts/nightly.sh "$S"/scripts/bench-mpi.sh; do
  bash -n "$f"
done

echo "== sbatch dry runs"
# From another folder, without VELOX_HOME: the template finds slurm/common.sh beside itself and
# the checkout's build/velox; VELOX_ARGS is split like a shell command line (quotes kept).
dry() {  # dry [VAR=VALUE...] TEMPLATE: the template's dry run from $W (stdout and stderr)
  (cd "$W" && env -u VELOX_HOME -u VELOX DRY_RUN=1 SLURM_CPUS_PER_TASK=8 SLURM_JOB_ID=42 \
     TEMPLATES=lib.h5 INPUT_LIST=list.txt OUTPUT_DIR=out "${@:1:$#-1}" bash "${@: -1}" 2>&1)
}
for kind in gpu cpu; do
  out=$(dry VELOX_ARGS="--output-format fits --config '$W/my fit.yaml'" "$S/slurm/velox-$kind.sbatch")
  echo "$out"
  for want in "srun -c 8 --cpu-bind=cores $S/build/velox fit --templates lib.h5 --input-list list.txt" \
              "--threads 8" "--output-dir out --merge out/merged.h5" "--log-dir out/logs/42" \
              "--output-format fits --config $W/my\\ fit.yaml"; do
    grep -qF -- "$want" <<<"$out" || { echo "FAIL: velox-$kind.sbatch lacks '$want'"; exit 1; }
  done
done
grep -q -- "--gpus-per-task=1" "$S/slurm/velox-gpu.sbatch"
# Where the templates cannot find slurm/common.sh (a script read from stdin, as sbatch runs a
# spool copy; a wrong VELOX_HOME) or VELOX_ARGS does not split: exit 2 with one line.
expect_error() {  # expect_error WANT CMD...: CMD exits 2 and says WANT
  local o rc=0
  o=$("${@:2}") || rc=$?
  [ "$rc" = 2 ] && grep -qF -- "$1" <<<"$o" || { echo "FAIL: rc $rc, '$o' lacks '$1'"; exit 1; }
}
expect_error "set VELOX_HOME" bash -c "cd '$W' && env -u VELOX_HOME DRY_RUN=1 bash <'$S/slurm/velox-cpu.sbatch' 2>&1"
expect_error "under VELOX_HOME=$W" dry VELOX_HOME="$W" "$S/slurm/velox-gpu.sbatch"
expect_error "VELOX_ARGS does not split" dry VELOX_ARGS="--config 'a b" "$S/slurm/velox-gpu.sbatch"
out=$(cd "$W" && DRY_RUN=1 VELOX_HOME="$S" TEMPLATES=lib.h5 INPUT_LIST=list.txt OUTPUT_DIR=out \
      bash -s <"$S/slurm/velox-cpu.sbatch")  # found under VELOX_HOME
grep -qF -- "$S/build/velox fit" <<<"$out" || { echo "FAIL: VELOX_HOME: $out"; exit 1; }
files=("$VELOX_DATA_DIR"/spectra/lamost_dr10_pylasp/fits/*.fits)
for f in "${files[@]:0:3}"; do ln -s "$f" "$W/in/"; done
# (nightly.sh refuses a missing or empty input folder, also in a dry run: the links come first.)
out=$(DRY_RUN=1 VELOX_HOME="$S" SLURM_CPUS_PER_TASK=8 TEMPLATES="$TEMPLATES" INPUT_DIR="$W/in" \
      OUTPUT_DIR="$W/dry" VELOX_ARGS="--output-format fits" bash "$S/slurm/velox-nightly.sbatch" 2>&1)
echo "$out"
grep -qE -- "^\+ velox_run_forwarding srun -c 8 --cpu-bind=cores $VELOX fit .* --threads 8 --output-format fits \$" <<<"$out" ||
  { echo "FAIL: the nightly template's fit line"; exit 1; }
[ ! -e "$W/dry" ] || { echo "FAIL: the nightly dry run wrote $W/dry"; exit 1; }
out=$(DRY_RUN=1 VELOX_HOME="$S" TEMPLATES="$TEMPLATES" INPUT_DIR="$W/no-such-folder" \
      OUTPUT_DIR="$W/dry" bash "$S/slurm/velox-nightly.sbatch" 2>&1) && {
  echo "FAIL: velox-nightly.sbatch accepted a missing INPUT_DIR"; exit 1; }
grep -qF "does not exist" <<<"$out"

echo "== nightly.sh"
# The links must predate the first night by a whole second: nightly.sh stamps .last-success with
# the second the night started, so links made within that second would count as updated.
touch -h -d "@$(($(date +%s) - 10))" "$W"/in/*
nightly() {
  "$S/scripts/nightly.sh" --input-dir "$W/in" --glob '*.fits' --output-dir "$W/out" \
    --templates "$TEMPLATES" --threads 1 --velox "$VELOX" \
    --launcher "${MPIRUN[*]} -np 2" "$@"
}
rows() { $PY -c "import h5py,sys; print(len(h5py.File(sys.argv[1])['catalog']))" "$W/out/merged.h5"; }
nightly --dry-run 2>&1 | tee "$W/dry.log"
[ "$(grep -c '  manifest: ' "$W/dry.log")" = 3 ] && [ ! -e "$W/out/merged.h5" ]
nightly
[ "$(rows)" = 3 ] && [ -e "$W/out/.last-success" ] && [ ! -e "$W/out/manifest.pending" ]
ls "$W"/out/manifests/*.manifest.txt >/dev/null
nightly 2>&1 | tee "$W/quiet.log"  # nothing new: no fit, merge again
grep -q "0 inputs new or missing" "$W/quiet.log" && [ "$(rows)" = 3 ]
sleep 1.1  # mtimes: one second past the stamp
ln -s "${files[3]}" "$W/in/"        # a new input
touch -h "$W/in/$(basename "${files[0]}")"  # an input updated upstream
nightly 2>&1 | tee "$W/third.log"
grep -q "2 inputs new or missing" "$W/third.log" && [ "$(rows)" = 4 ]
[ "$(grep -c . "$W/out/status.tsv")" = 3 ]  # header + the 2 refitted inputs
echo "$W/in/$(basename "${files[1]}")" >"$W/out/manifest.pending"  # a night that died
rm "$W/out/$(basename "${files[1]}" .fits).velox.h5"
nightly 2>&1 | tee "$W/resume.log"
grep -q "resuming" "$W/resume.log" && [ "$(rows)" = 4 ]
$PY "$S/tests/python/check_merged.py" "$W/out/merged.h5" 4 0
echo "PASS"
