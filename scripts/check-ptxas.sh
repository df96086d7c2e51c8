#!/usr/bin/env bash
# Check the ptxas resource report of the CUDA fitting kernels (written during the build by
# scripts/nvcc-report.sh): spill stores/loads and the stack frame within their budgets, for every
# target architecture. Prints registers / stack / spills per kernel and architecture.
# Usage: scripts/check-ptxas.sh REPORT [STACK_BUDGET_BYTES=2048] [ARCHS="sm_80 sm_90"]
#        [SPILL_BUDGET_BYTES=0]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"  # VELOX_PYTHON
report=${1:?usage: check-ptxas.sh REPORT [STACK_BUDGET_BYTES] [ARCHS]}
budget=${2:-2048}
archs=${3:-"sm_80 sm_90"}
[ -s "$report" ] || { echo "check-ptxas: no report at $report (build the CUDA backend first)"; exit 1; }
spill_budget=${4:-0}
"$VELOX_PYTHON" - "$report" "$budget" "$archs" "$spill_budget" <<'PY'
import re, sys
report, budget, archs = sys.argv[1], int(sys.argv[2]), sys.argv[3].split()
spill_budget = int(sys.argv[4])
text = open(report).read().splitlines()
rows, cur = [], None
for line in text:
    m = re.search(r"Compiling entry function '([^']+)' for '(sm_\d+)'", line)
    if m:
        cur = {"kernel": m.group(1), "arch": m.group(2)}
        continue
    m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line)
    if m and cur is not None:
        cur.update(stack=int(m.group(1)), spill_st=int(m.group(2)), spill_ld=int(m.group(3)))
        continue
    m = re.search(r"Used (\d+) registers", line)
    if m and cur is not None and "stack" in cur:
        cur["regs"] = int(m.group(1))
        rows.append(cur)
        cur = None
fit = [r for r in rows if "fit_batch_kernel" in r["kernel"]]
ok = True
print(f"{'kernel':<20} {'arch':<6} {'regs':>5} {'stack B':>8} {'spill st':>9} {'spill ld':>9}")
for r in fit:
    bad = r["spill_st"] > spill_budget or r["spill_ld"] > spill_budget or r["stack"] > budget
    ok &= not bad
    print(f"{'fit_batch_kernel':<20} {r['arch']:<6} {r['regs']:>5} {r['stack']:>8} "
          f"{r['spill_st']:>9} {r['spill_ld']:>9}{'  FAIL' if bad else ''}")
missing = [a for a in archs if a not in {r["arch"] for r in fit}]
if missing:
    print(f"check-ptxas: no report for {missing}")
    ok = False
print(f"check-ptxas: stack budget {budget} B, spill budget {spill_budget} B: "
      f"{'PASS' if ok else 'FAIL'}")
sys.exit(0 if ok else 1)
PY
