# Shared body of the velox sbatch templates (sourced; docs/running.md). Environment:
#   TEMPLATES    template library (HDF5)                          [required]
#   INPUT_LIST   one input FITS path per line                     [required]
#   OUTPUT_DIR   per-input catalogs, status.tsv, logs/            [required]
#   VELOX        the binary (default: $VELOX_HOME/build/velox)
#   MERGED       merged catalog (default: $OUTPUT_DIR/merged.h5)
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
: "${TEMPLATES:?set TEMPLATES}" "${INPUT_LIST:?set INPUT_LIST}" "${OUTPUT_DIR:?set OUTPUT_DIR}"
VELOX=${VELOX:-$VELOX_HOME/build/velox}
MERGED=${MERGED:-$OUTPUT_DIR/merged.h5}
source "$VELOX_HOME/scripts/lib.sh"

velox_srun() {
  # Since Slurm 22.05 srun does not inherit --cpus-per-task from the allocation: pass it, or
  # every rank is bound to one core while it runs --threads threads.
  local cpt=${SLURM_CPUS_PER_TASK:-1}
  export SRUN_CPUS_PER_TASK=$cpt
  local cmd=(srun -c "$cpt" "$@"
    "$VELOX" fit --templates "$TEMPLATES" --input-list "$INPUT_LIST"
    --threads "$cpt" --output-dir "$OUTPUT_DIR" --merge "$MERGED"
    --log-dir "$OUTPUT_DIR/logs/${SLURM_JOB_ID:-local}")
  if [ -n "${DRY_RUN:-}" ]; then
    printf '%q ' "${cmd[@]}"
    echo
    return 0
  fi
  local rc=0
  velox_run_forwarding "${cmd[@]}" || rc=$?
  if [ "$rc" = 3 ]; then echo "velox: some inputs failed, see $OUTPUT_DIR/status.tsv" >&2; fi
  velox_requeue_if_interrupted "$rc"
  return "$rc"
}
