#!/usr/bin/python3
"""Compare two velox HDF5 catalogs of the same inputs fitted on two devices (or builds).

usage: compare_devices.py A.h5 B.h5

Rows are matched on (SOURCE_FILE, ROW_IN_FILE). Prints how many rows agree on SUCCESS,
RVS_WARN, FIT_INFO and NPIX_TOT and, over the SUCCESS rows of A that kept the same pixels in
both (the clipped re-fit can keep 1-4 other pixels on another device, docs/gpu.md), the largest
and median |A - B| / A's error for VRAD, TEFF, LOGG, FEH and VSINI, and the largest chi^2
difference; then each row whose NPIX_TOT differs. gpu.parity's bound is 0.2 sigma
(tests/gpu/test_gpu_parity.cpp). Exit status 1 when the row sets differ.
"""
import sys

import h5py
import numpy as np


def main(argv):
    if len(argv) != 3:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    cats = [h5py.File(p, "r")["catalog"][:] for p in argv[1:]]
    key = lambda r: (r["SOURCE_FILE"], int(r["ROW_IN_FILE"]))  # noqa: E731
    a, b = ({key(r): r for r in c} for c in cats)
    print(f"rows: {len(a)} and {len(b)}" + ("" if a.keys() == b.keys() else " (DIFFERENT SETS)"))
    if a.keys() != b.keys():
        return 1
    for col in ("SUCCESS", "RVS_WARN", "FIT_INFO", "NPIX_TOT"):
        print(f"{col} equal: {sum(a[k][col] == b[k][col] for k in a)} of {len(a)}")
    same = [k for k in a if a[k]["NPIX_TOT"] == b[k]["NPIX_TOT"] and a[k]["SUCCESS"]]
    for col in ("VRAD", "TEFF", "LOGG", "FEH", "VSINI"):
        d = [abs(a[k][col] - b[k][col]) / a[k][col + "_ERR"] for k in same
             if a[k][col + "_ERR"] > 0 and np.isfinite(a[k][col]) and np.isfinite(b[k][col])]
        if d:
            print(f"{col}: max |dA-B|/err {max(d):.4f}, median {np.median(d):.2e} ({len(d)} rows)")
    if same:
        print(f"chi2: max |d| {max(abs(a[k]['CHISQ_TOT'] - b[k]['CHISQ_TOT']) for k in same):.4f}")
    for k in a:
        if a[k]["NPIX_TOT"] != b[k]["NPIX_TOT"]:
            r, s = a[k], b[k]
            sig = " ".join(f"{c} {abs(r[c] - s[c]) / r[c + '_ERR']:.2f}" for c in
                           ("VRAD", "TEFF", "LOGG", "FEH", "VSINI") if r[c + "_ERR"] > 0)
            print(f"pixels differ: {k[0].decode()} row {k[1]}: NPIX_TOT {r['NPIX_TOT']} / "
                  f"{s['NPIX_TOT']}, dchi2 {r['CHISQ_TOT'] - s['CHISQ_TOT']:.2f}, sigma: {sig}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
