#!/usr/bin/python3
"""Check that velox catalogs hold bitwise-identical /catalog (and /epochs) rows (MPI tests).

Usage: compare_catalogs.py A.h5 B.h5 [C.h5 ...] -- exits non-zero naming the first difference.
Rows are compared as raw bytes (NaN payloads included); provenance attributes are not compared.
"""
import sys

import h5py
import numpy as np


def rows(path, name):
    with h5py.File(path, "r") as f:
        return f[name][:] if name in f else None


def main(paths):
    for name in ("catalog", "epochs"):
        compare(paths, name)


def compare(paths, name):
    ref = rows(paths[0], name)
    for p in paths[1:]:
        other = rows(p, name)
        if ref is None or other is None:
            assert ref is None and other is None, f"{p}: /{name} in only one of the catalogs"
            continue
        assert other.dtype == ref.dtype, f"{p}: dtype {other.dtype} != {ref.dtype}"
        assert len(other) == len(ref), f"{p}: {len(other)} rows != {len(ref)} in {paths[0]}"
        a = ref.view(np.uint8).reshape(len(ref), -1)
        b = other.view(np.uint8).reshape(len(other), -1)
        diff = np.flatnonzero((a != b).any(axis=1))
        assert diff.size == 0, (f"{p}: {diff.size} rows differ from {paths[0]}, first row "
                                f"{diff[0]}: {ref[diff[0]]} vs {other[diff[0]]}")
    if ref is not None:
        print(f"compare_catalogs: {len(paths)} catalogs, /{name} {len(ref)} rows, bitwise identical")


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    main(sys.argv[1:])
