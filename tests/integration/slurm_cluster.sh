# shellcheck shell=bash
# A throwaway single-node Slurm cluster for integration tests (Debian packages slurmctld, slurmd,
# slurm-client, munge; tried with Slurm 22.05.8 and munge 0.5.15). Source this file, then:
#
#   slurm_cluster_start DIR   write DIR/slurm.conf, start munged, slurmctld and slurmd as root,
#                             wait until the node is idle, export SLURM_CONF. Returns 0, or 77 with
#                             a one-line reason on stderr (not root, a package missing, a daemon
#                             that does not come up); whatever it started is stopped again then.
#   slurm_cluster_stop DIR    cancel every job, stop the daemons by their pid files, wait for them,
#                             kill job processes that escaped tracking, remove the socket dir.
#                             Safe to call twice or after a failed start.
#
# Typical use:  slurm_cluster_start "$SCRATCH/slurm" || exit $?
#               trap 'slurm_cluster_stop "$SCRATCH/slurm"' EXIT
#
# SLURM_CLUSTER_EXTRA_CONF (optional): lines appended to slurm.conf; a key given again there wins
# (Slurm uses the last value), e.g. KillWait=30 or AuthInfo=... .
# Timing notes: a requeued job waits cred_expire seconds (default 120, here 10) before it may
# start again; slurmctld checks time limits every 30 s, so --signal=SIG@T comes between T and
# T+30 s before the end of the time limit, and the time-limit kill up to 30 s after it.
# Jobs run as root: mpirun needs --allow-run-as-root. srun needs no --mpi (MpiDefault=pmix).
# Works with `set -u`; does not change shell options. Safe to source twice.

# _slurm_cluster_fail DIR MSG: print the reason, undo a partial start, return 77.
_slurm_cluster_fail() {
  echo "slurm_cluster_start: $2" >&2
  slurm_cluster_stop "$1" 2>/dev/null
  return 77
}

# _slurm_cluster_wait SECONDS CMD...: retry CMD every 0.2 s until it succeeds or time runs out.
_slurm_cluster_wait() {
  local end=$((SECONDS + $1))
  shift
  until "$@" >/dev/null 2>&1; do
    [ "$SECONDS" -lt "$end" ] || return 1
    sleep 0.2
  done
}

_slurm_cluster_node_idle() {
  [ "$(sinfo -h -N -n "$1" -o %T 2>/dev/null)" = idle ]
}

slurm_cluster_start() {
  local dir=${1:?slurm_cluster_start DIR}
  local tool host run port node var tries=10
  [ "$(id -u)" = 0 ] || { echo "slurm_cluster_start: needs root (daemons run as SlurmUser=root)" >&2; return 77; }
  for tool in munged munge slurmctld slurmd sbatch srun squeue sinfo scontrol scancel; do
    command -v "$tool" >/dev/null || { echo "slurm_cluster_start: $tool not found (apt-get install slurmctld slurmd slurm-client munge)" >&2; return 77; }
  done
  mkdir -p "$dir" || return 77
  dir=$(cd "$dir" && pwd)
  rm -rf "${dir:?}/state" "$dir/log"
  mkdir -p "$dir/state" "$dir/log"
  # Unix socket paths are limited to 108 bytes: munge's socket and slurmd's spool (which holds the
  # step sockets) live in a short directory under /tmp, named in DIR/rundir.
  run=$(mktemp -d /tmp/slurm.XXXXXX) || return 77
  echo "$run" >"$dir/rundir"
  chmod 755 "$run"
  mkdir -p "$run/spool"

  # munged with its own key and socket; --force: tolerate the loose permissions of /tmp.
  dd if=/dev/urandom of="$run/munge.key" bs=1024 count=1 status=none && chmod 400 "$run/munge.key"
  munged --force --key-file="$run/munge.key" --socket="$run/munge.socket" \
    --pid-file="$dir/munged.pid" --log-file="$dir/log/munged.log" --seed-file="$run/munged.seed" \
    </dev/null >>"$dir/log/munged.out" 2>&1 ||
    { _slurm_cluster_fail "$dir" "munged did not start (see $dir/log/munged.*)"; return 77; }
  _slurm_cluster_wait 10 sh -c "munge -S '$run/munge.socket' -n | unmunge -S '$run/munge.socket'" ||
    { _slurm_cluster_fail "$dir" "munged does not answer (see $dir/log/munged.*)"; return 77; }

  # Two free TCP ports, one for slurmctld and the next for slurmd.
  # (without ss, or after 10 busy tries, take the last pick).
  while :; do
    port=$((20000 + RANDOM % 40000))
    tries=$((tries - 1))
    if [ "$tries" = 0 ] || ! command -v ss >/dev/null; then break; fi
    ss -Htln | awk '{print $4}' | grep -E ":($port|$((port + 1)))\$" >/dev/null || break
  done
  host=$(hostname -s)
  # The node line as slurmd sees the hardware (CPUs, sockets, cores, threads, RealMemory).
  node=$(slurmd -C 2>/dev/null) || node=""
  node=${node%%$'\n'*}
  case $node in NodeName=*) ;; *) node="NodeName=$host CPUs=$(nproc)" ;; esac
  cat >"$dir/slurm.conf" <<EOF
ClusterName=velox-test
# Addresses given, so that the host name needs no resolving.
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$port
SlurmdPort=$((port + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
# cred_expire (minimum 5) is also how long a requeued job waits before it may start again.
AuthInfo=socket=$run/munge.socket,cred_expire=10
StateSaveLocation=$dir/state
SlurmdSpoolDir=$run/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
MailProg=/bin/true
# No cgroups: plain process tracking, no binding, no accounting.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
# Schedule every 2 s instead of every 30-60 s, so a requeued job starts as soon as it may.
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=2,bf_interval=2
# Debian's Open MPI 4.1 starts under srun only through PMIx (srun --mpi=pmi2 or none fail in MPI_Init).
MpiDefault=pmix
ReturnToService=2
JobRequeue=1
KillWait=10
$node NodeAddr=127.0.0.1 State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
${SLURM_CLUSTER_EXTRA_CONF:-}
EOF
  # Clients and jobs must talk to this cluster only: drop inherited SLURM_*/SBATCH_*/SRUN_*
  # variables (e.g. when the test itself runs inside a Slurm job).
  for var in $(compgen -e); do
    case $var in SLURM_* | SBATCH_* | SRUN_* | SALLOC_*) unset "$var" ;; esac
  done
  export SLURM_CONF=$dir/slurm.conf

  slurmctld -f "$SLURM_CONF" </dev/null >>"$dir/log/slurmctld.out" 2>&1 ||
    { _slurm_cluster_fail "$dir" "slurmctld did not start (see $dir/log/slurmctld.*)"; return 77; }
  _slurm_cluster_wait 20 scontrol ping ||
    { _slurm_cluster_fail "$dir" "slurmctld does not answer (see $dir/log/slurmctld.*)"; return 77; }
  slurmd -f "$SLURM_CONF" </dev/null >>"$dir/log/slurmd.out" 2>&1 ||
    { _slurm_cluster_fail "$dir" "slurmd did not start (see $dir/log/slurmd.*)"; return 77; }
  _slurm_cluster_wait 30 _slurm_cluster_node_idle "$host" ||
    { _slurm_cluster_fail "$dir" "node $host not idle after 30 s (see $dir/log/slurmd.*)"; return 77; }
  return 0
}

slurm_cluster_stop() {
  local dir=${1:?slurm_cluster_stop DIR}
  local name pid pids="" run=""
  [ -d "$dir" ] || return 0
  dir=$(cd "$dir" && pwd)
  [ -f "$dir/rundir" ] && run=$(cat "$dir/rundir")
  # Cancel the jobs and wait until none is left (slurmstepd outlives slurmd otherwise); give up
  # at once if slurmctld does not answer.
  if [ -f "$dir/slurm.conf" ] && [ -f "$dir/slurmctld.pid" ]; then
    SLURM_CONF=$dir/slurm.conf scancel --user="$(id -un)" >/dev/null 2>&1
    # shellcheck disable=SC2016  # $jobs is expanded by sh -c
    SLURM_CONF=$dir/slurm.conf _slurm_cluster_wait 60 \
      sh -c 'jobs=$(squeue -h -o %i 2>/dev/null) || exit 0; [ -z "$jobs" ]'
  fi
  # The daemons remove their pid files when they exit: read them all first.
  for name in slurmd slurmctld munged; do
    [ -f "$dir/$name.pid" ] || continue
    pid=$(cat "$dir/$name.pid")
    [ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null && pids="$pids $pid"
  done
  for pid in $pids; do
    _slurm_cluster_wait 15 sh -c "! kill -0 $pid" || kill -KILL "$pid" 2>/dev/null
  done
  # proctrack/linuxproc loses a job's orphans (e.g. `cmd &` left running when the batch shell
  # exits: reparented to init). They still carry this cluster's SLURM_CONF and a SLURM_JOB_ID.
  grep -lzxF "SLURM_CONF=$dir/slurm.conf" /proc/[0-9]*/environ 2>/dev/null | while read -r name; do
    pid=${name#/proc/}
    pid=${pid%/environ}
    if [ "$pid" != $$ ] && grep -qz '^SLURM_JOB_ID=' "$name" 2>/dev/null; then
      kill -KILL "$pid" 2>/dev/null || true
    fi
  done || true  # grep fails on processes that vanish meanwhile (matters under pipefail)
  rm -f "$dir/slurmd.pid" "$dir/slurmctld.pid" "$dir/munged.pid" "$dir/rundir"
  case $run in /tmp/slurm.*) rm -rf "$run" ;; esac
  return 0
}
