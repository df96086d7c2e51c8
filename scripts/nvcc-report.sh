#!/usr/bin/env bash
# CMake compiler launcher for the CUDA backend: runs the nvcc command line ("$@" after the report
# path) and keeps its stderr (ptxas -v resource usage) in REPORT for scripts/check-ptxas.sh.
set -uo pipefail
report=$1
shift
tmp=$(mktemp)
"$@" 2>"$tmp"
rc=$?
cat "$tmp" >&2
# Only a translation unit with kernels replaces the report (others have no entry functions).
if grep -q "Compiling entry function" "$tmp"; then cp "$tmp" "$report"; fi
rm -f "$tmp"
exit $rc
