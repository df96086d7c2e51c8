#!/usr/bin/python3
"""Calibrate the systematic error floors (fit.error_floor) from repeat observations.

Usage:
    scripts/calibrate_floors.py CATALOG.h5 [CATALOG.h5 ...] [--data-dir DIR] [--bootstrap N]

The catalogs hold velox fits of the LAMOST DR8 spectra (`spectra/lamost_dr8`); stars observed
more than once share an OBJNAME in `header_index.csv`. For every pair of observations of the same
star and every column P in VRAD, TEFF, LOGG, FEH the script finds the floor f for which the robust
sigma (1.4826 * median |pull|) of the pulls

    (P_1 - P_2) / sqrt(P_ERR_STAT_1^2 + P_ERR_STAT_2^2 + 2 f^2)

is 1 (f = 0 if the statistical errors alone already give a pull width <= 1), and prints it with a
bootstrap interval over the pairs, and the pull widths with the statistical errors alone and with
the catalog's *_ERR (statistical + the configured floor). Leave-one-pair-out cross-validation: for
each pair the floor is solved on the other pairs and the held-out pair's pull computed with it;
`pull(LOPO)` is the robust sigma of those held-out pulls (what a floor fitted to these pairs gives
on a pair it was not fitted to) and `floor(LOPO)` the mean and standard deviation of the
per-fold floors. The floors shipped in
src/fit/config.cpp come from this script's output on the shared data (docs/quality.md).
Needs numpy and h5py.
"""
import argparse
import csv
import itertools
import os
import sys

import h5py
import numpy as np

COLUMNS = ["VRAD", "TEFF", "LOGG", "FEH"]


def robust_sigma(x):
    return 1.4826 * np.median(np.abs(x))


def solve_floor(diff, var_stat):
    """Floor f >= 0 with robust_sigma(diff / sqrt(var_stat + 2 f^2)) = 1 (bisection)."""
    if robust_sigma(diff / np.sqrt(var_stat)) <= 1.0:
        return 0.0
    lo, hi = 0.0, 10.0 * np.max(np.abs(diff))
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if robust_sigma(diff / np.sqrt(var_stat + 2 * mid * mid)) > 1.0:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def repeat_pairs(rows, index_csv):
    """Index pairs (i, j) of catalog rows that observe the same star (same OBJNAME)."""
    objname = {}
    with open(index_csv) as f:
        for r in csv.DictReader(f):
            objname[r["file"]] = r["objname"]
    by_star = {}
    for i, name in enumerate(rows["SOURCE_FILE"]):
        name = name.decode() if isinstance(name, bytes) else name
        if name in objname and rows["SUCCESS"][i]:
            by_star.setdefault(objname[name], []).append(i)
    return [p for idx in by_star.values() for p in itertools.combinations(idx, 2)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("catalogs", nargs="+")
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--data-dir", default=os.environ.get(
        "VELOX_DATA_DIR", os.path.join(here, "..", "..", "shared", "data")))
    ap.add_argument("--bootstrap", type=int, default=2000)
    ap.add_argument("--check", nargs=2, type=float, metavar=("LO", "HI"),
                    help="exit 1 unless every pull width with *_ERR lies in [LO, HI]")
    args = ap.parse_args()
    rows = np.concatenate([h5py.File(c, "r")["catalog"][:] for c in args.catalogs])
    pairs = repeat_pairs(rows, os.path.join(args.data_dir, "spectra", "lamost_dr8",
                                            "header_index.csv"))
    if not pairs:
        sys.exit("no repeat pairs among the catalogs' rows (need lamost_dr8 fits)")
    i, j = np.array(pairs).T
    rng = np.random.default_rng(1)
    print(f"{len(pairs)} repeat pairs")
    failed = []
    print(f"{'column':7s} {'robust sd diff':>15s} {'pull(stat)':>11s} {'pull(_ERR)':>11s} "
          f"{'floor':>9s} {'bootstrap 16-84%':>20s} {'pull(LOPO)':>11s} {'floor(LOPO)':>20s}")
    for col in COLUMNS:
        diff = rows[col][i] - rows[col][j]
        var_stat = rows[col + "_ERR_STAT"][i] ** 2 + rows[col + "_ERR_STAT"][j] ** 2
        var_tot = rows[col + "_ERR"][i] ** 2 + rows[col + "_ERR"][j] ** 2
        f = solve_floor(diff, var_stat)
        boot = [solve_floor(diff[k], var_stat[k])
                for k in (rng.integers(0, len(diff), len(diff)) for _ in range(args.bootstrap))]
        lo, hi = np.percentile(boot, [16, 84])
        pull = robust_sigma(diff / np.sqrt(var_tot))
        keep = np.ones(len(diff), bool)
        f_lopo, held = [], []
        for k in range(len(diff)):
            keep[k] = False
            fk = solve_floor(diff[keep], var_stat[keep])
            keep[k] = True
            f_lopo.append(fk)
            held.append(diff[k] / np.sqrt(var_stat[k] + 2 * fk * fk))
        print(f"{col:7s} {robust_sigma(diff):15.4g} {robust_sigma(diff / np.sqrt(var_stat)):11.2f} "
              f"{pull:11.2f} {f:9.4g} {lo:9.4g} - {hi:<9.4g} {robust_sigma(np.array(held)):11.2f} "
              f"{np.mean(f_lopo):9.4g} +- {np.std(f_lopo):<8.3g}")
        if args.check and not args.check[0] <= pull <= args.check[1]:
            failed.append(f"{col} pull width {pull:.2f}")
    if failed:
        sys.exit("FAIL: " + ", ".join(failed))


if __name__ == "__main__":
    main()
