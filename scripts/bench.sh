#!/usr/bin/env bash
# Single-thread throughput benchmark: `velox bench --threads 1 --repeat 5` on the 134 LAMOST
# spectra (25 DR10 + 109 DR8). velox bench prints the median spectra/s and the peak RSS.
# `scripts/bench.sh --python`: scripts/bench_python.py instead, Python's velox.fit on the same
# spectra beside the CLI's rates, measured in the same run (docs/python.md).
# Builds velox and the MILES library first if needed. Env: VELOX_DATA_DIR, BENCH_REPEAT (5).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$VELOX_REPO"

velox_build build
velox_ensure_library build/velox build/miles.h5
mapfile -t inputs < <(velox_lamost_inputs)
if [[ "${1:-}" == "--python" ]]; then
  PYTHONPATH="$VELOX_REPO/build/python" /usr/bin/python3 scripts/bench_python.py \
    --velox build/velox --library build/miles.h5 --repeat "${BENCH_REPEAT:-5}" "${inputs[@]}"
else
  build/velox bench --templates build/miles.h5 --threads 1 --repeat "${BENCH_REPEAT:-5}" "${inputs[@]}"
fi
