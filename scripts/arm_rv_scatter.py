#!/usr/bin/python3
"""Measure a survey format's per-arm velocity zero points and scatter (fit.arm_zero_point_kms,
fit.arm_rv_scatter_kms) from a velox catalog of its stars.

Usage:
    scripts/arm_rv_scatter.py CATALOG.h5 --format KEY [--arm-floor KM_S] [--folds 5] [--truth CSV]
                              [--t-dof NU]

CATALOG holds velox fits of many stars of one format (KEY as the config names it: lamost-dr8,
desi:lamost-regrid, ...). For each arm A other than the reference arm B, over the SUCCESS rows:

    zero point  = median(VRAD_A - VRAD_B)                       (add it to the format's zero point
                                                                 the catalog was fitted with)
    scatter^2   = robust_sigma(VRAD_A - VRAD_B)^2 - median(s_A^2 + s_B^2)

where robust_sigma is half the 16-84 percentile range and s the per-arm statistical errors (the
catalog's VRAD_<arm>_ERR less the format's VRAD_ARM floor in quadrature: --arm-floor, else the
catalog's config_yaml). The scatter is what the arm's wavelength calibration adds from star to
star; velox weighs the arm by 1 / (s^2 + scatter^2) in VRAD (docs/rv-zero-point.md). No reference
velocities are needed. --folds K prints the values of K folds (each left out in turn), and, with
--truth (CSV of TARGETID and a velocity column `rv`), the robust sigma of the cross-validated
VRAD (each fold combined with the other folds' values, as the fit combines them: Student-t
factors capped at 1 with --t-dof, default 4, fit.arm_rv_t_dof) against it. Needs numpy and h5py.
"""
import argparse
import csv
import sys

import h5py
import numpy as np


def robust_sigma(x):
    x = x[np.isfinite(x)]
    q = np.percentile(x, [16, 50, 84])
    return 0.5 * (q[2] - q[0]), q[1]


def arm_floor_from_catalog(f, key):
    try:
        import yaml
    except ImportError:
        sys.exit("--arm-floor is needed (PyYAML is not installed to read the catalog's config)")
    cfg = yaml.safe_load(f.attrs["config_yaml"])
    floors = cfg.get("fit", {}).get("error_floor", {})
    entry = floors.get(key) or floors.get(key.split(":")[0]) or {}
    return float(entry.get("VRAD_ARM", 0.0))


def estimate(v, s, arms, idx):
    zp, tau = {"B": 0.0}, {"B": 0.0}
    for a in arms:
        d = (v[a] - v["B"])[idx]
        sig, med = robust_sigma(d)
        var = np.nanmedian((s[a] ** 2 + s["B"] ** 2)[idx])
        zp[a], tau[a] = med, np.sqrt(max(sig * sig - var, 0.0))
    return zp, tau


def combine(v, s, zp, tau, idx, t_dof=0.0):
    """The fit's VRAD from the arms (combine_arm_velocities, fit.arm_rv_t_dof): weights
    1 / (s^2 + tau^2), with three or more arms times the Student-t factors min(1, (t_dof + 1) /
    (t_dof + r^2)), iterated (t_dof 0: Gaussian weights)."""
    vv = np.array([v[a][idx] - zp[a] for a in zp])
    var = np.array([s[a][idx] ** 2 + tau[a] ** 2 for a in zp])
    ok = np.isfinite(vv) & np.isfinite(var) & (var > 0)
    w = np.where(ok, 1.0 / np.where(ok, var, 1.0), 0.0)
    vv = np.where(ok, vv, 0.0)
    mean = (w * vv).sum(0) / w.sum(0)
    robust = (ok.sum(0) >= 3) & (t_dof > 0)
    if robust.any():
        for _ in range(100):
            u = np.where(robust, np.minimum(1.0, (t_dof + 1.0) / (t_dof + (vv - mean) ** 2 * w)), 1.0)
            m1 = (u * w * vv).sum(0) / (u * w).sum(0)
            done = np.nanmax(np.abs(m1 - mean)) < 1e-9
            mean = m1
            if done:
                break
    return mean


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("catalog")
    ap.add_argument("--format", required=True, help="config key of the format (e.g. lamost-dr8)")
    ap.add_argument("--arm-floor", type=float, help="VRAD_ARM floor of the fit [km/s]")
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--truth", help="CSV with TARGETID and rv [km/s] for the cross-validated sigma")
    ap.add_argument("--t-dof", type=float, default=4.0,
                    help="fit.arm_rv_t_dof of the fit (Student-t weights with >= 3 arms; 0: Gaussian)")
    a = ap.parse_args()
    with h5py.File(a.catalog, "r") as f:
        c = f["catalog"][:]
        floor = a.arm_floor if a.arm_floor is not None else arm_floor_from_catalog(f, a.format)
    c = c[c["SUCCESS"].astype(bool)]
    arms = [x for x in "RZ" if np.isfinite(c["VRAD_" + x]).sum() >= 10]
    v = {x: c["VRAD_" + x] for x in ["B"] + arms}
    s = {x: np.sqrt(np.maximum(c["VRAD_%s_ERR" % x] ** 2 - floor ** 2, 0.25)) for x in v}
    n = len(c)
    zp, tau = estimate(v, s, arms, np.arange(n))
    print(f"{a.catalog}: {n} SUCCESS rows, format {a.format}, VRAD_ARM floor {floor:g} km/s")
    for x in arms:
        d = v[x] - v["B"]
        sig, _ = robust_sigma(d)
        print(f"  {x}: n {np.isfinite(d).sum()}  median VRAD_{x} - VRAD_B {zp[x]:+.2f} km/s  "
              f"robust sigma {sig:.2f}  statistical part {np.sqrt(np.nanmedian(s[x]**2 + s['B']**2)):.2f}"
              f"  scatter {tau[x]:.2f} km/s")
    rng = np.random.default_rng(1)
    folds = np.array_split(rng.permutation(n), a.folds)
    truth = None
    if a.truth:
        with open(a.truth) as fh:
            t = {int(r["TARGETID"]): float(r["rv"]) for r in csv.DictReader(fh) if r["rv"]}
        truth = np.array([t.get(int(i), np.nan) for i in c["TARGETID"]])
    pred = np.full(n, np.nan)
    for k, test in enumerate(folds):
        train = np.setdiff1d(np.arange(n), test)
        zk, tk = estimate(v, s, arms, train)
        print(f"  fold {k}: " + "  ".join(f"{x} zero point {zk[x]:+.2f} scatter {tk[x]:.2f}" for x in arms))
        pred[test] = combine(v, s, zk, tk, test, a.t_dof)
    if truth is not None:
        sig, med = robust_sigma(pred - truth)
        sj, mj = robust_sigma(c["VRAD"] - truth)
        def mad(x):
            x = x[np.isfinite(x)]
            return 1.4826 * np.median(np.abs(x - np.median(x)))
        print(f"  against --truth: cross-validated VRAD robust sigma {sig:.2f} (median {med:+.2f}) km/s;"
              f" the catalog's VRAD {sj:.2f} ({mj:+.2f}); 1.4826 MAD {mad(pred - truth):.2f} and"
              f" {mad(c['VRAD'] - truth):.2f}")


if __name__ == "__main__":
    main()
