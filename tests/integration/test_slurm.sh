#!/usr/bin/env bash
# The Slurm templates under a real Slurm (issue 24): a single-node cluster (Debian's slurmctld,
# slurmd, munge), started here and stopped at the end (tests/integration/slurm_cluster.sh).
#  - slurm/velox-cpu.sbatch, 2 ranks x 1 CPU over 72 DESI-layout coadds (about 54 s of work on a
#    2-core AVX-512 VM: more than the signal's latest arrival, 30 s in; 24 coadds took 18 s there
#    once DESI preparation got faster, and the job finished before the signal),
#    with a 1-minute time limit: Slurm's --signal=B:TERM sends SIGTERM, the template passes it to
#    the ranks (scancel --signal), velox stops cleanly with exit 4, the job requeues itself and
#    resumes, until done. Checked: the job restarted at least once and COMPLETED, each rank got
#    -c (SLURM_CPUS_PER_TASK in its environment matches the CPUs it may use), and the final
#    per-input catalogs and the merged catalog hold every input's rows exactly once.
#    Submitted from a folder outside the checkout (under /tmp) without VELOX_HOME: the template
#    finds slurm/common.sh from scontrol's Command=. VELOX_ARGS="--output-format fits --config
#    '<dir>/fit config.yaml'" (a quoted word with a blank) reaches velox: every input has its
#    rvtab_*.fits, merged.fits holds every row, and each catalog names that config file.
#  - slurm/velox-nightly.sbatch over 6 LAMOST spectra, submitted from the same folder by a
#    relative path: COMPLETED, merged catalog of 6 rows.
# Skips (exit 77) where a Slurm cannot run: not root, packages missing, daemons not starting.
set -euo pipefail
: "${VELOX:?}" "${VELOX_DATA_DIR:?}" "${VELOX_BUILD_DIR:?}" "${VELOX_SOURCE_DIR:?}"
source "$VELOX_SOURCE_DIR/scripts/lib.sh"
source "$VELOX_SOURCE_DIR/tests/integration/slurm_cluster.sh"
PY=$VELOX_PYTHON
W="$VELOX_BUILD_DIR/test-tmp/slurm"
rm -rf "$W"
mkdir -p "$W"
TEMPLATES="$VELOX_BUILD_DIR/miles.h5"
velox_ensure_library "$VELOX" "$TEMPLATES"
rc=0
slurm_cluster_start "$W/cluster" || rc=$?
if [ "$rc" != 0 ]; then
  echo "SKIP: no Slurm on this machine (see the line above)"
  exit 77
fi
# The submit folder, outside the checkout (sbatch runs a spool copy of the template: the
# template must find its slurm/common.sh from elsewhere).
SUB=$(mktemp -d /tmp/velox-submit.XXXXXX)
trap 'slurm_cluster_stop "$W/cluster"; rm -rf "$SUB"' EXIT
fail() {
  echo "FAIL: $*"
  for f in "$W"/*.out "$W/cluster/log/slurmctld.log"; do [ -f "$f" ] && tail -n 40 "$f"; done
  exit 1
}

# wait_job ID SECONDS: until the job has left the queue (COMPLETED, FAILED, ...).
wait_job() {
  local end=$((SECONDS + $2))
  while squeue -h -j "$1" 2>/dev/null | grep -q .; do
    [ "$SECONDS" -lt "$end" ] || fail "job $1 still queued after $2 s"
    sleep 2
  done
}
job_field() { scontrol show job "$1" | tr ' ' '\n' | sed -n "s/^$2=//p" | head -n 1; }

echo "== CPU template: time limit, SIGTERM, requeue, resume"
mkdir -p "$W/in"
for i in $(seq -w 1 72); do
  ln -s "$VELOX_DATA_DIR/spectra/desi_lamost/coadd-lamost-dr8.fits" "$W/in/coadd-copy$i.fits"
done
ls "$W"/in/*.fits >"$W/inputs.txt"
# The template's resources are for a production node: 1 node, 2 tasks x 1 CPU here. --signal
# given again: @50 with a 1-minute limit comes at slurmctld's first 30 s tick (0-30 s in).
printf 'fit:\n  vmin_kms: -900\n  vmax_kms: 900\n' >"$W/fit config.yaml"
# VELOX_ARGS travels in the environment (--export=ALL): a value in --export= ends at a comma.
job=$(cd "$SUB" && env -u VELOX_HOME VELOX_ARGS="--output-format fits --config '$W/fit config.yaml'" \
  sbatch --parsable -N1 --ntasks-per-node=2 -c1 --time=1 --signal=B:TERM@50 \
  --output="$W/cpu-%j.out" \
  --export=ALL,VELOX="$VELOX",TEMPLATES="$TEMPLATES",INPUT_LIST="$W/inputs.txt",OUTPUT_DIR="$W/cpu" \
  "$VELOX_SOURCE_DIR/slurm/velox-cpu.sbatch")
echo "submitted job $job"
wait_job "$job" 600
state=$(job_field "$job" JobState)
restarts=$(job_field "$job" Restarts)
echo "job $job: $state after $restarts restarts"
cat "$W/cpu-$job.out"
[ "$state" = COMPLETED ] || fail "job state $state"
[ "${restarts:-0}" -ge 1 ] || fail "the time limit's signal did not requeue the job"
grep -q "requeueing job $job" "$W/cpu-$job.out" || fail "no requeue line"
grep -q "interrupted by SIGTERM" "$W/cpu-$job.out" "$W"/cpu/logs/*/rank-0.log 2>/dev/null ||
  fail "velox did not stop cleanly on SIGTERM"
! grep -q "forcing job termination" "$W/cpu-$job.out" || fail "srun killed the tasks"
"$PY" - "$W/cpu" "$W/inputs.txt" "$W/fit config.yaml" <<'PY'
import collections, glob, os, sys
import h5py
from astropy.io import fits
out, inputs, config = sys.argv[1:]
n = len(open(inputs).read().split())
cats = sorted(glob.glob(out + "/coadd-copy*.velox.h5"))
assert len(cats) == n, (len(cats), n)
with h5py.File(cats[0], "r") as f:
    per_input = len(f["catalog"])
with h5py.File(out + "/merged.h5", "r") as f:
    c = f["catalog"]
    keys = collections.Counter(zip(c["SOURCE_FILE"], c["ROW_IN_FILE"]))
    assert len(c) == n * per_input and max(keys.values()) == 1, (len(c), n, per_input)
status = [l.split("\t") for l in open(out + "/status.tsv").read().splitlines()[1:]]
assert len(status) == n and all(s[1] in ("ok", "skipped") for s in status), status
print(f"merged: {n} inputs x {per_input} rows, each once")
# VELOX_ARGS: FITS tables beside the catalogs, and the config file (a path with a blank).
for cat in cats:
    stem = os.path.basename(cat)[: -len(".velox.h5")]
    with fits.open(f"{out}/rvtab_{stem}.fits") as h:
        assert len(h["RVTAB"].data) == per_input, (stem, len(h["RVTAB"].data))
    with h5py.File(cat, "r") as f:
        assert f.attrs["config_path"] == config, (cat, f.attrs["config_path"])
        assert "vmax_kms: 900" in f.attrs["config_yaml"], cat
with fits.open(out + "/merged.fits") as h:
    assert len(h["RVTAB"].data) == n * per_input, len(h["RVTAB"].data)
print(f"FITS: {n} rvtab_*.fits and merged.fits ({n * per_input} rows); config {config!r} used")
PY

echo "== nightly template"
mkdir -p "$W/night_in"
ls "$VELOX_DATA_DIR"/spectra/lamost_dr10_pylasp/fits/*.fits | head -n 6 |
  while read -r f; do ln -s "$f" "$W/night_in/"; done
job=$(cd "$SUB" && env -u VELOX_HOME -u VELOX_ARGS sbatch --parsable -N1 --ntasks-per-node=2 -c1 --time=5 \
  --output="$W/night-%j.out" \
  --export=ALL,VELOX="$VELOX",TEMPLATES="$TEMPLATES",INPUT_DIR="$W/night_in",OUTPUT_DIR="$W/night" \
  "$(realpath --relative-to="$SUB" "$VELOX_SOURCE_DIR/slurm/velox-nightly.sbatch")")
wait_job "$job" 300
state=$(job_field "$job" JobState)
cat "$W/night-$job.out"
[ "$state" = COMPLETED ] || fail "nightly job state $state"
"$PY" -c "import h5py,sys; n=len(h5py.File(sys.argv[1])['catalog']); assert n == 6, n; print('nightly merged', n)" \
  "$W/night/merged.h5"
echo "PASS"
