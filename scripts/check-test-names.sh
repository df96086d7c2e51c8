#!/usr/bin/env bash
# Fails if a Catch2 test case name under tests/unit contains ';'. ctest's test list splits names
# at ';', so such a test case becomes two ctest tests that match nothing and "pass" without
# running (docs/testing.md).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
if grep -rnE 'TEST_CASE\("[^"]*;' tests/unit; then
  echo "check-test-names: a TEST_CASE name above contains ';' (ctest would never run it)"
  exit 1
fi
echo "check-test-names: no ';' in $(grep -rc 'TEST_CASE(' tests/unit | awk -F: '{s += $2} END {print s}') test case names"
