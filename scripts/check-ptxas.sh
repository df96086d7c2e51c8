#!/usr/bin/env bash
# Check the ptxas resource report of the CUDA fitting kernel (written during the build by
# scripts/nvcc-report.sh), for every target architecture:
#  - fit_batch_kernel's stack frame within STACK_BUDGET and its own spills (the LM control code,
#    run once per iteration) within ENTRY_SPILL_BUDGET;
#  - the model evaluation `kern::evaluate` (the hot path: every pixel of every evaluation) compiled
#    as its own function, both forms, with spills within HOT_SPILL_BUDGET. Out of line it is one
#    copy shared by every caller; inlined at its ~12 call sites the kernel's code grew to 3.0 MB
#    and the H100 stalled on instruction fetch (docs/gpu.md "Measured").
# Prints registers / stack / spills per function and architecture.
# Usage: scripts/check-ptxas.sh REPORT [STACK_BUDGET_BYTES=4608] [ARCHS="sm_80 sm_90"]
#        [ENTRY_SPILL_BUDGET_BYTES=4096] [HOT_SPILL_BUDGET_BYTES=256]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"  # VELOX_PYTHON
report=${1:?usage: check-ptxas.sh REPORT [STACK_BUDGET] [ARCHS] [ENTRY_SPILL] [HOT_SPILL]}
[ -s "$report" ] || { echo "check-ptxas: no report at $report (build the CUDA backend first)"; exit 1; }
"$VELOX_PYTHON" - "$report" "${2:-4608}" "${3:-sm_80 sm_90}" "${4:-4096}" "${5:-256}" <<'PY'
import re, sys
report, stack_budget, archs = sys.argv[1], int(sys.argv[2]), sys.argv[3].split()
entry_budget, hot_budget = int(sys.argv[4]), int(sys.argv[5])
rows, arch, entry, fn = [], None, None, None
for line in open(report).read().splitlines():
    m = re.search(r"Compiling entry function '([^']+)' for '(sm_\d+)'", line)
    if m:
        arch, entry = m.group(2), m.group(1)
        continue
    m = re.search(r"Function properties for (\S+)", line)
    if m:
        fn = m.group(1)
        continue
    m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line)
    if m and arch and fn and "fit_batch_kernel" in (entry or ""):
        rows.append(dict(arch=arch, fn=fn, stack=int(m.group(1)), st=int(m.group(2)),
                         ld=int(m.group(3)), regs=None))
        fn = None
        continue
    m = re.search(r"Used (\d+) registers", line)
    if m and rows and rows[-1]["arch"] == arch and "fit_batch_kernel" in rows[-1]["fn"]:
        rows[-1]["regs"] = int(m.group(1))

def name(fn):
    if "fit_batch_kernel" in fn: return "fit_batch_kernel"
    m = re.search(r"kern\d+([a-z_]+)I(Lb([01])E)?", fn)
    return (m.group(1) + (f"<{'true' if m.group(3) == '1' else 'false'}>" if m.group(2) else "")) if m else fn[:40]

ok = True
print(f"{'function':<28} {'arch':<6} {'regs':>5} {'stack B':>8} {'spill st':>9} {'spill ld':>9}")
for a in archs:
    mine = [r for r in rows if r["arch"] == a]
    ent = [r for r in mine if "fit_batch_kernel" in r["fn"]]
    hot = [r for r in mine if re.search(r"kern8evaluateI", r["fn"])]
    if not ent:
        print(f"check-ptxas: no report of fit_batch_kernel for {a}"); ok = False; continue
    if len(hot) != 2:
        print(f"check-ptxas: {a}: kern::evaluate<false/true> not compiled out of line "
              f"({len(hot)} of 2 found): keep it VX_NOINLINE (kernels/lm.hpp)"); ok = False
    for r in mine:
        bad = False
        if r in ent: bad = r["stack"] > stack_budget or max(r["st"], r["ld"]) > entry_budget
        if r in hot: bad = max(r["st"], r["ld"]) > hot_budget
        ok &= not bad
        regs = r["regs"] if r["regs"] is not None else ""
        print(f"{name(r['fn']):<28} {a:<6} {regs:>5} {r['stack']:>8} {r['st']:>9} {r['ld']:>9}"
              f"{'  FAIL' if bad else ''}")
print(f"check-ptxas: stack budget {stack_budget} B, kernel spill budget {entry_budget} B, "
      f"evaluate spill budget {hot_budget} B: {'PASS' if ok else 'FAIL'}")
sys.exit(0 if ok else 1)
PY
