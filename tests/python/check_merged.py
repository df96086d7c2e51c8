#!/usr/bin/python3
"""Check a merged velox catalog after an MPI run (used by the MPI tests).

Usage: check_merged.py MERGED.h5 N_TARGETS N_BAD_FILES
  - exactly N_TARGETS target rows, each (SOURCE_FILE, ROW_IN_FILE) once (no duplicates);
  - exactly N_BAD_FILES failure rows for unreadable inputs (RVS_WARN bit BAD_INPUT, TARGETID -1).
"""
import sys
from collections import Counter

import h5py

BAD_INPUT = 1 << 8  # io/rvs_warn.hpp


def main(path, n_targets, n_bad):
    with h5py.File(path, "r") as f:
        cat = f["catalog"][:]
    bad = (cat["TARGETID"] == -1) & ((cat["RVS_WARN"] & BAD_INPUT) != 0) & (cat["ROW_IN_FILE"] == -1)
    targets = cat[~bad]
    keys = Counter(zip(targets["SOURCE_FILE"].tolist(), targets["ROW_IN_FILE"].tolist()))
    dup = [k for k, c in keys.items() if c > 1]
    assert not dup, f"{path}: duplicated targets {dup[:5]}"
    assert len(targets) == n_targets, f"{path}: {len(targets)} target rows, expected {n_targets}"
    assert bad.sum() == n_bad, f"{path}: {bad.sum()} bad-input rows, expected {n_bad}"
    print(f"check_merged: {path}: {len(targets)} targets once each, {bad.sum()} bad-input rows")


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
