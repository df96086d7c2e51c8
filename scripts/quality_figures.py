#!/usr/bin/python3
"""Figures and tables of docs/quality.md from a velox catalog of the shared LAMOST spectra.

Usage:
    build/velox fit --templates build/miles.h5 --output lamost.h5 \\
        ../shared/data/spectra/lamost_dr10_pylasp/fits/*.fits \\
        ../shared/data/spectra/lamost_dr8/fits/*.fits.gz
    scripts/quality_figures.py lamost.h5 [--data-dir DIR] [--out docs/img]

Writes OUT/quality-pulls.png (repeat-pair pulls with the statistical errors alone and with the
systematic floors) and OUT/quality-vrad-teff.png (VRAD, VRAD_B and VRAD_R minus the LAMOST DR8
pipeline's velocity against TEFF), and prints the Teff-binned table. Needs numpy, h5py,
matplotlib.
"""
import argparse
import csv
import os

import h5py
import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from calibrate_floors import COLUMNS, repeat_pairs  # noqa: E402

C_KMS = 299792.458


def robust_sigma(x):
    x = x[np.isfinite(x)]
    return 1.4826 * np.median(np.abs(x - np.median(x))) if len(x) else np.nan


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("catalog")
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--data-dir", default=os.environ.get(
        "VELOX_DATA_DIR", os.path.join(here, "..", "..", "shared", "data")))
    ap.add_argument("--out", default=os.path.join(here, "..", "docs", "img"))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    rows = h5py.File(args.catalog, "r")["catalog"][:]
    index = os.path.join(args.data_dir, "spectra", "lamost_dr8", "header_index.csv")

    # Repeat-pair pulls.
    i, j = np.array(repeat_pairs(rows, index)).T
    fig, axes = plt.subplots(1, 4, figsize=(12, 3.2), sharey=True)
    for ax, col in zip(axes, COLUMNS):
        d = rows[col][i] - rows[col][j]
        for suffix, label, mk in (("_ERR_STAT", "statistical", "o"), ("_ERR", "with floor", "s")):
            p = d / np.hypot(rows[col + suffix][i], rows[col + suffix][j])
            w = 1.4826 * np.median(np.abs(p))
            ax.plot(p, np.arange(len(p)) + (0.15 if mk == "s" else -0.15), mk,
                    label=f"{label}: width {w:.2f}")
        ax.axvspan(-1, 1, color="0.9")
        ax.set_xlabel(f"pull of {col} between repeats")
        ax.legend(fontsize=7, loc="lower right")
    axes[0].set_ylabel("repeat pair")
    fig.suptitle(f"{len(i)} repeat pairs in lamost_dr8 (same OBJNAME)")
    fig.tight_layout()
    fig.savefig(os.path.join(args.out, "quality-pulls.png"), dpi=90)

    # VRAD residuals against the LAMOST DR8 pipeline, by Teff.
    ref = {r["file"]: float(r["z"]) * C_KMS for r in csv.DictReader(open(index))}
    names = [s.decode() for s in rows["SOURCE_FILE"]]
    rv = np.array([ref.get(n, np.nan) for n in names])
    m = np.isfinite(rv) & rows["SUCCESS"]
    teff = rows["TEFF"][m]
    fig, ax = plt.subplots(figsize=(7, 4))
    print("| Teff [K] | N | VRAD | VRAD_B (blue half) | VRAD_R (red half) |")
    print("|---|---|---|---|---|")
    bins = [(4000, 5000), (5000, 5500), (5500, 6000), (6000, 6500), (6500, 8000), (8000, 12000)]
    for col, mk in (("VRAD", "o"), ("VRAD_B", "^"), ("VRAD_R", "v")):
        ax.plot(teff, rows[col][m] - rv[m], mk, ms=4, label=col, alpha=0.8)
    for lo, hi in bins:
        s = (teff >= lo) & (teff < hi)
        cells = []
        for col in ("VRAD", "VRAD_B", "VRAD_R"):
            d = rows[col][m][s] - rv[m][s]
            cells.append(f"{np.nanmedian(d):+.1f} / {robust_sigma(d):.1f}")
        print(f"| {lo}-{hi} | {s.sum()} | " + " | ".join(cells) + " |")
    ax.axhline(0, color="k", lw=0.5)
    ax.set_ylim(-40, 40)
    ax.set_xlabel("TEFF [K]")
    ax.set_ylabel("velox - LAMOST DR8 pipeline [km/s]")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(args.out, "quality-vrad-teff.png"), dpi=90)


if __name__ == "__main__":
    main()
