#!/bin/bash
# Nightly reprocessing with velox (docs/running.md "Nightly reprocessing").
#
#   scripts/nightly.sh --input-dir DIR --output-dir OUT --templates LIB [--glob '*.fits*']
#                      [--launcher 'mpirun -np 4'] [--threads N] [--velox BIN] [--merged FILE]
#                      [--allow-empty] [--dry-run] [-- VELOX_FIT_OPTIONS...]
#
# 0. Input check. The script stops with exit 2 (nothing fitted, no manifest written,
#    .last-success untouched) if DIR does not exist (not mounted?), is not a folder, cannot be
#    listed, or holds no file matching GLOB, or if listing it fails (find's exit status), also
#    when resuming a pending manifest. --allow-empty: a DIR with no matching file is expected
#    (nothing to fit; the night completes and .last-success moves).
# 1. Manifest. If OUT/manifest.pending exists (an earlier night failed or was killed), resume it.
#    Otherwise list the inputs in DIR matching GLOB that are newer than OUT/.last-success or have
#    no catalog OUT/<stem>.velox.h5, into OUT/manifest.pending. Inputs newer than the last
#    success that already have a catalog were updated upstream: their stale catalog is removed.
# 2. Fit the manifest: LAUNCHER velox fit --input-list OUT/manifest.pending --output-dir OUT
#    VELOX_FIT_OPTIONS (finished inputs are skipped, so a rerun resumes). The options after `--`
#    (e.g. --output-format fits, --config FILE) go to this fit, not to the merge.
#    SIGTERM/SIGINT to this script are passed on to velox, which stops cleanly with exit 4
#    (interrupted): the manifest stays pending and the next run resumes it.
# 3. If velox completed (exit 0, or 3 = some inputs failed; see OUT/status.tsv): merge every
#    catalog of OUT into MERGED (default OUT/merged.h5), set OUT/.last-success to the time this
#    night started, and move the manifest (and a copy of status.tsv) to OUT/manifests/.
#    Exit with velox's code. Inputs that failed have no catalog, so the next night retries them.
# --dry-run prints the manifest and the commands, and changes nothing.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"  # velox_run_forwarding

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 2; }
INPUT_DIR= OUTPUT_DIR= TEMPLATES= GLOB='*.fits*' LAUNCHER= THREADS= MERGED= DRY_RUN= ALLOW_EMPTY=
VELOX=${VELOX:-$VELOX_DEFAULT_BINARY}
EXTRA=()
while [ $# -gt 0 ]; do
  case $1 in
    --input-dir) INPUT_DIR=$2; shift 2 ;;
    --output-dir) OUTPUT_DIR=$2; shift 2 ;;
    --templates) TEMPLATES=$2; shift 2 ;;
    --glob) GLOB=$2; shift 2 ;;
    --launcher) LAUNCHER=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    --velox) VELOX=$2; shift 2 ;;
    --merged) MERGED=$2; shift 2 ;;
    --dry-run) DRY_RUN=1; shift ;;
    --allow-empty) ALLOW_EMPTY=1; shift ;;
    --) shift; EXTRA=("$@"); break ;;
    -h|--help) usage ;;
    *) echo "nightly.sh: unknown argument $1" >&2; usage ;;
  esac
done
[ -n "$INPUT_DIR" ] && [ -n "$OUTPUT_DIR" ] && [ -n "$TEMPLATES" ] || usage
MERGED=${MERGED:-$OUTPUT_DIR/merged.h5}
STAMP=$OUTPUT_DIR/.last-success
MANIFEST=$OUTPUT_DIR/manifest.pending
started=$(date +%s)
log() { echo "nightly.sh: $*" >&2; }
run() {  # run CMD...: print it; run it unless --dry-run
  printf '+ '; printf '%q ' "$@"; echo
  [ -n "$DRY_RUN" ] || "$@"
}

# velox's per-input catalog of an input (mpi/../app/job_outputs.cpp input_stem).
catalog_of() {
  local name=${1##*/}
  for s in .gz .fz .bz2; do name=${name%"$s"}; done
  for s in .fits .fit .fts; do name=${name%"$s"}; done
  echo "$OUTPUT_DIR/$name.velox.h5"
}

# 0. The input folder, before anything is written. An unmounted or vanished DIR must not count as
# "nothing new": that would move .last-success past inputs updated upstream, never refitted.
config_error() { log "$*"; exit 2; }
[ -e "$INPUT_DIR" ] || config_error "input folder $INPUT_DIR does not exist (not mounted?)"
[ -d "$INPUT_DIR" ] || config_error "input folder $INPUT_DIR is not a folder"
if [ ! -r "$INPUT_DIR" ] || [ ! -x "$INPUT_DIR" ]; then
  config_error "input folder $INPUT_DIR cannot be listed (permission denied)"
fi
listing=$(mktemp)
# find writes the list to a file (not a process substitution) so that its exit status counts.
if ! find_err=$(find "$INPUT_DIR" -maxdepth 1 \( -type f -o -type l \) -name "$GLOB" -print0 \
                  2>&1 >"$listing"); then
  rm -f "$listing"
  config_error "listing input folder $INPUT_DIR failed: ${find_err%%$'\n'*}"
fi
sort -z -o "$listing" "$listing"
mapfile -d '' -t inputs <"$listing"
rm -f "$listing"
if [ ${#inputs[@]} = 0 ] && [ -z "$ALLOW_EMPTY" ]; then
  config_error "input folder $INPUT_DIR holds no file matching '$GLOB' (unexpectedly empty;" \
               "pass --allow-empty if that is expected)"
fi

[ -n "$DRY_RUN" ] || mkdir -p "$OUTPUT_DIR/manifests"
manifest=$MANIFEST
if [ -s "$MANIFEST" ]; then
  log "resuming $MANIFEST ($(wc -l <"$MANIFEST") inputs)"
else
  [ -n "$DRY_RUN" ] && manifest=$(mktemp)
  : >"$manifest"
  newer=()
  [ -e "$STAMP" ] && newer=(-newer "$STAMP")
  for f in "${inputs[@]}"; do
    cat=$(catalog_of "$f")
    if [ ! -e "$cat" ]; then
      echo "$f" >>"$manifest"
    elif [ ${#newer[@]} -gt 0 ] && [ -n "$(find "$f" -maxdepth 0 "${newer[@]}")" ]; then
      echo "$f" >>"$manifest"
      log "input updated since the last success, refitting: $f"
      [ -n "$DRY_RUN" ] || rm -f "$cat"
    fi
  done
  log "$(wc -l <"$manifest") inputs new or missing since ${STAMP} ($( [ -e "$STAMP" ] && date -r "$STAMP" -u +%FT%TZ || echo never))"
fi
if [ -n "$DRY_RUN" ]; then
  sed 's/^/  manifest: /' "$manifest" >&2
fi

rc=0
if [ -s "$manifest" ]; then
  fit=("$VELOX" fit --templates "$TEMPLATES" --input-list "$manifest" --output-dir "$OUTPUT_DIR"
       --log-dir "$OUTPUT_DIR/logs/$(date -u -d "@$started" +%Y%m%dT%H%M%SZ)")
  [ -n "$THREADS" ] && fit+=(--threads "$THREADS")
  fit+=("${EXTRA[@]}")
  # shellcheck disable=SC2086  # LAUNCHER is a command line, split on purpose
  run velox_run_forwarding $LAUNCHER "${fit[@]}" || rc=$?
fi
if [ "$rc" = 4 ]; then
  log "velox was interrupted (exit 4): the manifest stays pending; rerun to resume"
  exit "$rc"
fi
if [ "$rc" != 0 ] && [ "$rc" != 3 ]; then
  log "velox failed (exit $rc): the manifest stays pending; rerun to resume"
  exit "$rc"
fi
if [ -n "$(find "$OUTPUT_DIR" -maxdepth 1 -name '*.velox.h5' -print -quit 2>/dev/null)" ] || [ -n "$DRY_RUN" ]; then
  run "$VELOX" fit --output-dir "$OUTPUT_DIR" --merge "$MERGED"
fi
if [ -z "$DRY_RUN" ]; then
  touch -d "@$started" "$STAMP"
  night=$OUTPUT_DIR/manifests/$(date -u -d "@$started" +%Y%m%dT%H%M%SZ)
  if [ -s "$MANIFEST" ] && [ -e "$OUTPUT_DIR/status.tsv" ]; then
    cp "$OUTPUT_DIR/status.tsv" "$night.status.tsv"
  fi
  if [ -e "$MANIFEST" ]; then mv "$MANIFEST" "$night.manifest.txt"; fi
else
  rm -f "$manifest"
fi
[ "$rc" = 3 ] && log "completed with failures: see $OUTPUT_DIR/status.tsv"
exit "$rc"
