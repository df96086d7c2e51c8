#!/usr/bin/env bash
# Check the ptxas resource report of the CUDA fitting kernels (written during the build by
# scripts/nvcc-report.sh), for every target architecture:
#  - the warp kernel fit_batch_kernel: its stack frame within STACK_BUDGET and its own spills (the
#    LM control code, run once per iteration) within ENTRY_SPILL_BUDGET;
#  - the batched engine's kernels (engine_*_kernel, src/backend/cuda/fit_kernel.cu): stack within
#    ENGINE_STACK_BUDGET and spills within ENGINE_SPILL_BUDGET each;
#  - the staged engine's stage kernels named in STAGE_KERNELS (names as printed, e.g.
#    "engine_rows_kernel<-1> engine_cont_arm_kernel<1>"): no stack frame and no spills (issue 51); a
#    named kernel missing from the report fails;
#  - the model evaluation (the hot path: every pixel of every evaluation) compiled as its own
#    functions: the two stages of `kern::evaluate`, `evaluate_template` and `evaluate_continuum`
#    (kernels/lm.hpp), both forms of each, with spills within HOT_SPILL_BUDGET (evaluate too). Out of line they
#    are one copy shared by every caller; inlined at its ~12 call sites the kernel's code grew to
#    3.0 MB and the H100 stalled on instruction fetch (docs/gpu.md "Measured").
# Prints registers / stack / spills per kernel and function and architecture.
# Usage: scripts/check-ptxas.sh REPORT [STACK_BUDGET_BYTES=4608] [ARCHS="sm_80 sm_90"]
#        [ENTRY_SPILL_BUDGET_BYTES=4096] [HOT_SPILL_BUDGET_BYTES=256]
#        [ENGINE_STACK_BUDGET_BYTES=4608] [ENGINE_SPILL_BUDGET_BYTES=4096] [STAGE_KERNELS=""]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"  # VELOX_PYTHON
report=${1:?usage: check-ptxas.sh REPORT [STACK_BUDGET] [ARCHS] [ENTRY_SPILL] [HOT_SPILL] [ENGINE_STACK] [ENGINE_SPILL] [STAGE_KERNELS]}
[ -s "$report" ] || { echo "check-ptxas: no report at $report (build the CUDA backend first)"; exit 1; }
"$VELOX_PYTHON" - "$report" "${2:-4608}" "${3:-sm_80 sm_90}" "${4:-4096}" "${5:-256}" \
  "${6:-4608}" "${7:-4096}" "${8:-}" <<'PY'
import re, sys
report, stack_budget, archs = sys.argv[1], int(sys.argv[2]), sys.argv[3].split()
entry_budget, hot_budget = int(sys.argv[4]), int(sys.argv[5])
engine_stack, engine_spill = int(sys.argv[6]), int(sys.argv[7])
stage_names = set(sys.argv[8].split())
# Every "Function properties" block, with its architecture; kernels are the entries.
rows, entries, arch, fn = [], set(), None, None
for line in open(report).read().splitlines():
    m = re.search(r"Compiling entry function '([^']+)' for '(sm_\d+)'", line)
    if m:
        arch = m.group(2)
        entries.add((arch, m.group(1)))
        continue
    m = re.search(r"Function properties for (\S+)", line)
    if m:
        fn = m.group(1)
        continue
    m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line)
    if m and arch and fn:
        rows.append(dict(arch=arch, fn=fn, stack=int(m.group(1)), st=int(m.group(2)),
                         ld=int(m.group(3)), regs=None))
        fn = None
        continue
    m = re.search(r"Used (\d+) registers", line)
    if m and rows and rows[-1]["arch"] == arch and (arch, rows[-1]["fn"]) in entries:
        rows[-1]["regs"] = int(m.group(1))

HOT = r"kern(8evaluate|17evaluate_template|18evaluate_continuum)ILb[01]E"
def name(fn):
    if "fit_batch_kernel" in fn: return "fit_batch_kernel"
    m = re.search(r"(engine_[a-z_]+?_kernel)(I((?:L[ib]n?\d+E)+)E)?", fn)
    if m:
        args = re.findall(r"L[ib](n?)(\d+)E", m.group(3) or "")
        return m.group(1) + (f"<{','.join(('-' if n else '') + v for n, v in args)}>" if args else "")
    m = re.search(r"kern\d+([a-z_]+)I(Lb([01])E)?", fn)
    return (m.group(1) + (f"<{'true' if m.group(3) == '1' else 'false'}>" if m.group(2) else "")) if m else fn[:40]

ok = True
print(f"{'function':<32} {'arch':<6} {'regs':>5} {'stack B':>8} {'spill st':>9} {'spill ld':>9}")
for a in archs:
    mine = [r for r in rows if r["arch"] == a]
    warp = [r for r in mine if "fit_batch_kernel" in r["fn"] and (a, r["fn"]) in entries]
    engine = [r for r in mine if re.search(r"engine_[a-z_]+?_kernel", r["fn"]) and (a, r["fn"]) in entries]
    stage = [r for r in engine if name(r["fn"]) in stage_names]
    missing = stage_names - {name(r["fn"]) for r in stage}
    if missing:
        print(f"check-ptxas: {a}: stage kernels {sorted(missing)} not in the report"); ok = False
    hot = [r for r in mine if re.search(HOT, r["fn"])]
    if not warp:
        print(f"check-ptxas: no report of fit_batch_kernel for {a}"); ok = False; continue
    if not engine:
        print(f"check-ptxas: no report of the batched engine's kernels for {a}"); ok = False
    # ptxas compiles an out-of-line function once per kernel that calls it (each kernel has its
    # own register budget): every copy is checked, and each form of the two stages must have one
    # (evaluate<true> has no caller left: the velocity-only requests call the stages).
    forms = {name(r["fn"]) for r in hot}
    need = {f"evaluate_{s}<{b}>" for s in ("template", "continuum") for b in ("false", "true")}
    if not need <= forms:
        print(f"check-ptxas: {a}: {sorted(need - forms)} not compiled out of line: keep "
              f"evaluate_template and evaluate_continuum VX_NOINLINE (kernels/lm.hpp)"); ok = False
    for r in mine:
        bad = False
        if r in warp: bad = r["stack"] > stack_budget or max(r["st"], r["ld"]) > entry_budget
        if r in engine: bad = r["stack"] > engine_stack or max(r["st"], r["ld"]) > engine_spill
        if r in stage: bad = r["stack"] > 0 or max(r["st"], r["ld"]) > 0
        if r in hot: bad = max(r["st"], r["ld"]) > hot_budget
        ok &= not bad
        regs = r["regs"] if r["regs"] is not None else ""
        print(f"{name(r['fn']):<32} {a:<6} {regs:>5} {r['stack']:>8} {r['st']:>9} {r['ld']:>9}"
              f"{'  FAIL' if bad else ''}")
print(f"check-ptxas: warp kernel stack budget {stack_budget} B and spill budget {entry_budget} B, "
      f"engine kernels {engine_stack} B and {engine_spill} B, {len(stage_names)} stage kernels "
      f"0 B and 0 B, evaluate spill budget {hot_budget} B: "
      f"{'PASS' if ok else 'FAIL'}")
sys.exit(0 if ok else 1)
PY
