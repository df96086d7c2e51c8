#!/usr/bin/env bash
# Build velox (Release) into build/, build the MILES template library once into build/miles.h5,
# then run every ctest test (unit and integration). Exits nonzero if anything fails.
# Env: VELOX_DATA_DIR (default: <repo>/../shared/data), CTEST_PARALLEL (default 2).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$VELOX_REPO"

BUILD="$VELOX_REPO/build"
velox_build "$BUILD"
velox_ensure_library "$BUILD/velox" "$BUILD/miles.h5"
ctest --test-dir "$BUILD" --output-on-failure -j"${CTEST_PARALLEL:-2}"
