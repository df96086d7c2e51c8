#!/usr/bin/env bash
# The CPU kernel's instruction set from the command line (docs/performance.md "Instruction sets"):
# --version names it; VELOX_ISA=baseline (what any x86-64 CPU runs) starts and fits real LAMOST
# DR8 spectra; --isa overrides VELOX_ISA; an unknown level is a usage error (exit 2) that names
# the variable; `velox bench` prints the isa, the evaluation counters, GFLOP/s and the host's feed
# estimate.
set -euo pipefail
source "$(dirname "$0")/common.sh"
itest_setup isa
mapfile -t inputs < <(ls -1 "$VELOX_DATA_DIR"/spectra/lamost_dr8/fits/*.fits.gz | head -3)

VELOX_ISA=baseline "$VELOX" --version | tee version.txt
grep -q "CPU kernel isa baseline (supported: baseline" version.txt || fail "--version: no isa"

VELOX_ISA=baseline "$VELOX" fit --templates "$LIB" --output base.h5 "${inputs[@]}" 2> fit.log ||
  fail "baseline fit failed: $(cat fit.log)"
"$PY" - base.h5 <<'PY' || fail "baseline fit: not every spectrum fitted"
import sys, h5py
c = h5py.File(sys.argv[1], "r")["catalog"][:]
assert len(c) == 3 and c["SUCCESS"].all(), c["SUCCESS"]
PY

run_rc rc env VELOX_ISA=avx9 "$VELOX" fit --templates "$LIB" --output bad.h5 "${inputs[@]}" 2> bad.log
[[ $rc -eq 2 ]] || fail "VELOX_ISA=avx9: exit $rc, want 2"
grep -q "VELOX_ISA: unknown instruction set 'avx9'" bad.log || fail "VELOX_ISA=avx9: $(cat bad.log)"
[[ ! -e bad.h5 ]] || fail "VELOX_ISA=avx9 wrote a catalog"

# --isa wins over VELOX_ISA; the bench names the level and prints the counters.
VELOX_ISA=avx9 "$VELOX" bench --templates "$LIB" --threads 1 --repeat 1 --device cpu \
  --isa baseline --feed-rate 5000 "${inputs[@]}" > bench.txt 2> bench.log ||
  fail "bench: $(cat bench.log)"
cat bench.txt
grep -q "CPU kernel isa baseline" bench.txt || fail "bench: no isa"
grep -qE "per spectrum [0-9.]+ model evaluations .* [0-9.]+ LM iterations, [0-9.]+ GFLOP" bench.txt ||
  fail "bench: no counters"
if grep -q "^cpu MHz" /proc/cpuinfo; then  # the peak needs the clock (backend/cpu/flop_count.hpp)
  grep -qE "GFLOP/s = [0-9.]+% of the baseline peak" bench.txt || fail "bench: no peak share"
  # The clock and its source (issue 53: an add chain a core shortcuts read 5x the real clock).
  grep -qE "x [0-9.]+ GHz x 4 FLOP/cycle; clock: (measured|cpufreq|/proc/cpuinfo)" bench.txt ||
    fail "bench: no clock source"
fi
# The host's feed estimate (issues 26, 51): one thread's read, prepare and pack rates of the
# format and the threads for --feed-rate, which must be feed x (1/read + 1/prepare + 1/pack) as
# printed (0.1 rounding; the rates are rounded to whole spectra/s).
"$PY" - bench.txt <<'PY' || fail "bench: host feed line"
import re, sys
m = re.search(r"\[host\]: lamost-dr8: 1 thread reads (\d+) spectra/s, prepares (\d+) spectra/s "
              r"and packs (\d+) spectra/s; feeding 5000 spectra/s takes ([0-9.]+) host threads",
              open(sys.argv[1]).read())
assert m, "no host line"
read, prep, pack, threads = float(m[1]), float(m[2]), float(m[3]), float(m[4])
assert read > 0 and prep > 0 and pack > 0
want = 5000 * (1 / read + 1 / prep + 1 / pack)
assert abs(threads - want) < 0.05 + 0.01 * threads, (read, prep, pack, threads)
PY
run_rc rc "$VELOX" bench --templates "$LIB" --isa avx9 "${inputs[@]}" 2> bad-bench.log
[[ $rc -eq 2 ]] || fail "bench --isa avx9: exit $rc, want 2"
echo "isa: OK"
