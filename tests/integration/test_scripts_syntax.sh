#!/usr/bin/env bash
# `bash -n` on every shell script of the repository: scripts/*.sh, slurm/*.sh, .ci/run and the
# integration tests themselves.
set -euo pipefail
cd "${VELOX_SOURCE_DIR:?VELOX_SOURCE_DIR must be set}"
shopt -s nullglob
n=0
for f in scripts/*.sh slurm/*.sh .ci/run tests/integration/*.sh; do
  bash -n "$f" || { echo "FAIL: syntax error in $f" >&2; exit 1; }
  n=$((n + 1))
done
[[ -f .ci/run ]] || { echo "FAIL: .ci/run missing" >&2; exit 1; }
echo "bash -n: $n scripts OK"
