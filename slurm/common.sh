# shellcheck shell=bash
# Shared body of the velox sbatch templates (docs/running.md "Slurm"), sourced by each template
# from this folder: slurm/ of a checkout, or PREFIX/share/velox/slurm/ after `cmake --install`.
# (sbatch runs a copy of the template from its spool folder; the template finds this file under
# $VELOX_HOME, else beside the script as submitted: scontrol's Command=.) Environment:
#   TEMPLATES    template library (HDF5)                          [required]
#   INPUT_LIST   one input FITS path per line                     [required unless VELOX_ARGS
#                                                                  holds --desi-root/--input-dir]
#   OUTPUT_DIR   per-input catalogs, status.tsv, logs/            [required]
#   VELOX_ARGS   more `velox fit` options, split like a shell command line: blanks separate,
#                '...', "..." and \ quote, nothing is expanded (xargs' rules). E.g.
#                VELOX_ARGS="--output-format fits --config '/path/my fit.yaml'"
#   VELOX        the binary (default: build/velox of the checkout, PREFIX/bin/velox when
#                installed: lib.sh VELOX_DEFAULT_BINARY)
#   MERGED       merged catalog (default: $OUTPUT_DIR/merged.h5)
#   THREADS      velox --threads (default: SLURM_CPUS_PER_TASK)
#   DRY_RUN=1    print the srun command instead of running it
# velox_srun SRUN_ARGS...: srun one velox rank per task, --threads = --cpus-per-task. Reruns
# with the same environment resume (finished inputs are skipped). Exits with velox's code:
# 0 ok, 3 completed with failures (see status.tsv), 4 interrupted (resumable), 1/2 fatal or
# usage error.
# Time limit: the templates ask Slurm for SIGTERM to the batch shell 120 s before the limit
# (#SBATCH --signal=B:TERM@120). The shell passes it to every rank with `scancel --signal=TERM`
# (velox_run_forwarding: a SIGTERM to srun would SIGKILL the tasks); velox hands out no more
# inputs, finishes the ones in flight and exits with 4, and the job is requeued (#SBATCH
# --requeue; scontrol requeue): the next run resumes. Tested under a real slurmctld/slurmd
# (tests/integration/test_slurm.sh).
VELOX_SLURM_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# VELOX_DEFAULT_BINARY, velox_run_forwarding, velox_requeue_if_interrupted
source "$VELOX_SLURM_DIR/../scripts/lib.sh"
VELOX=${VELOX:-$VELOX_DEFAULT_BINARY}

velox_fail() {
  echo "velox: $*" >&2
  exit 2
}

# velox_extra_args: VELOX_ARGS split into the array VELOX_EXTRA (see above); exit 2 if it does
# not split (an unmatched quote).
velox_extra_args() {
  VELOX_EXTRA=()
  [ -n "${VELOX_ARGS:-}" ] || return 0
  printf '%s\n' "$VELOX_ARGS" | xargs -r printf '%s\0' >/dev/null 2>&1 ||
    velox_fail "VELOX_ARGS does not split into words (an unmatched quote?): $VELOX_ARGS"
  mapfile -d '' -t VELOX_EXTRA < <(printf '%s\n' "$VELOX_ARGS" | xargs -r printf '%s\0')
}

# velox_check_binary: exit 2 with one line if VELOX is not an executable.
velox_check_binary() {
  [ -x "$VELOX" ] || velox_fail "no velox binary at $VELOX: build it, or set VELOX=/path/to/velox"
}

velox_srun() {
  : "${TEMPLATES:?set TEMPLATES}" "${OUTPUT_DIR:?set OUTPUT_DIR}"
  velox_extra_args
  local inputs=()
  if [ -n "${INPUT_LIST:-}" ]; then
    inputs=(--input-list "$INPUT_LIST")
  elif [[ " ${VELOX_EXTRA[*]} " != *" --desi-root"* && " ${VELOX_EXTRA[*]} " != *" --input-dir"* ]]; then
    velox_fail "set INPUT_LIST (or give --desi-root or --input-dir in VELOX_ARGS)"
  fi
  # Since Slurm 22.05 srun does not inherit --cpus-per-task from the allocation: pass it, or
  # every rank is bound to one core while it runs --threads threads.
  local cpt=${SLURM_CPUS_PER_TASK:-1}
  export SRUN_CPUS_PER_TASK=$cpt
  local cmd=(srun -c "$cpt" "$@"
    "$VELOX" fit --templates "$TEMPLATES" "${inputs[@]}"
    --threads "${THREADS:-$cpt}" --output-dir "$OUTPUT_DIR" --merge "${MERGED:-$OUTPUT_DIR/merged.h5}"
    --log-dir "$OUTPUT_DIR/logs/${SLURM_JOB_ID:-local}" "${VELOX_EXTRA[@]}")
  if [ -n "${DRY_RUN:-}" ]; then
    printf '%q ' "${cmd[@]}"
    echo
    return 0
  fi
  velox_check_binary
  local rc=0
  velox_run_forwarding "${cmd[@]}" || rc=$?
  if [ "$rc" = 3 ]; then echo "velox: some inputs failed, see $OUTPUT_DIR/status.tsv" >&2; fi
  velox_requeue_if_interrupted "$rc"
  return "$rc"
}
