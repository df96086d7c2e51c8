#!/usr/bin/env bash
# Runs one Python API test (tests/python/test_*.py) under /usr/bin/python3 for ctest: a fresh
# scratch directory $VELOX_BUILD_DIR/itest/python-NAME as the working directory, the MILES
# library built once (tests/integration/common.sh), and the module on PYTHONPATH (set by ctest).
set -euo pipefail
source "$VELOX_SOURCE_DIR/tests/integration/common.sh"
test_py="$1"
itest_setup "python-$(basename "$test_py" .py)"
export VELOX_LIBRARY="$LIB" MPLBACKEND=Agg
exec "$PY" "$test_py" -v
