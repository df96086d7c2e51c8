#!/usr/bin/python3
"""Checks of an --output-dir after a fault (tests/integration/test_faults.sh, issue 50).

  fault_checks.py status DIR      status.tsv lists as `ok` exactly the inputs whose per-input
                                  catalog is on disk (and every rvtab_*.fits has its catalog),
                                  every input once, and no *.tmp is left
  fault_checks.py compare A B     the same per-input catalogs in A and B, each /catalog
                                  bitwise identical (the fit is deterministic: rows, not times)
  fault_checks.py failed-with DIR ENAME   every input failed for its outputs names ENAME
  fault_checks.py merged H5 N     the merged catalog has N rows with N distinct SOURCE_FILE
Exits 1 with one line per problem.
"""
import glob
import os
import re
import sys

import h5py


def stem(path):
    name = os.path.basename(path)
    name = re.sub(r"\.(gz|fz|bz2)$", "", name)
    return re.sub(r"\.(fits|fit|fts)$", "", name)


def status(d):
    problems = []
    lines = open(os.path.join(d, "status.tsv")).read().splitlines()
    if not lines or not lines[0].startswith("input\tstatus"):
        return ["status.tsv has no header"]
    rows = [l.split("\t") for l in lines[1:]]
    inputs = [r[0] for r in rows]
    if len(set(inputs)) != len(inputs):
        problems.append(f"status.tsv lists {len(inputs) - len(set(inputs))} inputs twice")
    ok = {stem(r[0]) for r in rows if r[1] in ("ok", "skipped")}
    on_disk = {os.path.basename(p)[: -len(".velox.h5")] for p in glob.glob(d + "/*.velox.h5")}
    if ok != on_disk:
        problems.append(f"status ok but no catalog: {sorted(ok - on_disk)[:3]}; "
                        f"catalog but not ok: {sorted(on_disk - ok)[:3]}")
    for t in glob.glob(d + "/rvtab_*.fits"):
        if os.path.basename(t)[len("rvtab_"):-len(".fits")] not in on_disk:
            problems.append(f"{t}: an rvtab without its catalog")
    tmp = glob.glob(d + "/*.tmp")
    if tmp:
        problems.append(f"{len(tmp)} .tmp files left, e.g. {tmp[0]}")
    return problems


def failed_with(d, name):
    """Every input that failed for its outputs names the errno `name` (e.g. ENOSPC), and there
    is at least one."""
    rows = [l.split("\t") for l in open(os.path.join(d, "status.tsv")).read().splitlines()[1:]]
    out = [r for r in rows if r[1] == "failed" and "outputs not written" in r[5]]
    if not out:
        return [f"{d}: no input failed for its outputs"]
    return [f"{r[0]}: failed without {name}: {r[5][:160]}" for r in out if f"({name})" not in r[5]]


def compare(a, b):
    fa = sorted(os.path.basename(p) for p in glob.glob(a + "/*.velox.h5"))
    fb = sorted(os.path.basename(p) for p in glob.glob(b + "/*.velox.h5"))
    if fa != fb:
        return [f"catalog sets differ: {sorted(set(fa) ^ set(fb))[:5]}"]
    problems = []
    for f in fa:
        with h5py.File(os.path.join(a, f)) as x, h5py.File(os.path.join(b, f)) as y:
            if x["catalog"][:].tobytes() != y["catalog"][:].tobytes():
                problems.append(f"{f}: rows differ")
    return problems


def merged(path, n):
    with h5py.File(path) as f:
        c = f["catalog"][:]
    problems = []
    if len(c) != n:
        problems.append(f"{path}: {len(c)} rows, expected {n}")
    if len(set(c["SOURCE_FILE"])) != len(c):
        problems.append(f"{path}: duplicated inputs")
    return problems


def main():
    cmd = sys.argv[1]
    if cmd == "status":
        problems = status(sys.argv[2])
    elif cmd == "compare":
        problems = compare(sys.argv[2], sys.argv[3])
    elif cmd == "failed-with":
        problems = failed_with(sys.argv[2], sys.argv[3])
    elif cmd == "merged":
        problems = merged(sys.argv[2], int(sys.argv[3]))
    else:
        sys.exit(f"unknown command {cmd}")
    for p in problems:
        print("FAIL:", p)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
