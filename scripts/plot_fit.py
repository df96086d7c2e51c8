#!/usr/bin/python3
"""Plot one velox fit: data, best-fit model, residuals and masked pixels per arm.

usage: scripts/plot_fit.py CATALOG.h5 INPUT.fits TARGETID [--out PNG]

CATALOG.h5 must come from `velox fit --save-models` (datasets /models/<arm>, /models/<arm>_wave
aligned with /catalog). INPUT.fits is the DESI coadd the target was read from; its arms
{B,R,Z}_{WAVELENGTH,FLUX,IVAR,MASK} give the data. Pixels the fit did not use (masked, ivar <= 0,
outside the templates) have a NaN model and are drawn grey. Needs matplotlib (Debian
python3-matplotlib), h5py, astropy.
"""
import argparse
import sys

import h5py
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from astropy.io import fits  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("catalog")
    ap.add_argument("input")
    ap.add_argument("targetid", type=int)
    ap.add_argument("--out", default=None, help="PNG path (default fit-TARGETID.png)")
    a = ap.parse_args()
    out = a.out or f"fit-{a.targetid}.png"
    with h5py.File(a.catalog, "r") as f:
        cat = f["catalog"][:]
        if "models" not in f:
            sys.exit(f"{a.catalog}: no /models (run velox fit with --save-models)")
        idx = np.nonzero(cat["TARGETID"] == a.targetid)[0]
        if len(idx) == 0:
            sys.exit(f"{a.catalog}: TARGETID {a.targetid} not in /catalog")
        i = idx[0]
        row = cat[i]
        arms = [k for k in f["models"] if not k.endswith("_wave")]
        models = {k: (f["models"][k + "_wave"][:], f["models"][k][i]) for k in arms}
    with fits.open(a.input) as h:
        tids = h["FIBERMAP"].data["TARGETID"]
        fib = np.nonzero(tids == a.targetid)[0]
        if len(fib) == 0:
            sys.exit(f"{a.input}: TARGETID {a.targetid} not in FIBERMAP")
        j = fib[0]
        data = {}
        for arm in arms:
            if f"{arm}_FLUX" not in h:
                continue
            mask = h[f"{arm}_MASK"].data[j] if f"{arm}_MASK" in h else 0
            data[arm] = (h[f"{arm}_WAVELENGTH"].data, h[f"{arm}_FLUX"].data[j],
                         h[f"{arm}_IVAR"].data[j], mask)
    shown = [k for k in ("B", "R", "Z") if k in data] + [k for k in data if k not in "BRZ"]
    fig, axes = plt.subplots(2, len(shown), figsize=(4.2 * len(shown), 5.0), squeeze=False,
                             gridspec_kw={"height_ratios": [3, 1]}, sharex="col")
    colors = {"B": "tab:blue", "R": "tab:red", "Z": "tab:brown"}
    for c, arm in enumerate(shown):
        w, fl, iv, mk = data[arm]
        mw, mod = models[arm]
        same = len(mw) == len(w) and np.allclose(mw, w)
        mod = mod if same else np.interp(w, mw, mod, left=np.nan, right=np.nan)
        used = np.isfinite(mod)
        bad = (iv <= 0) | (np.asarray(mk) != 0) | ~np.isfinite(fl)
        top, bot = axes[0, c], axes[1, c]
        top.plot(w, np.where(bad, np.nan, fl), color="0.6", lw=0.5, label="data (not used)")
        top.plot(w, np.where(used, fl, np.nan), color="k", lw=0.5, label="data")
        top.plot(w, mod, color=colors.get(arm, "tab:green"), lw=0.8, label="model")
        if bad.any():
            top.plot(w[bad], np.full(bad.sum(), np.nanpercentile(fl[~bad], 1) if (~bad).any() else 0),
                     "|", color="m", ms=4, label="masked")
        sig = np.where(iv > 0, 1 / np.sqrt(np.where(iv > 0, iv, 1)), np.nan)
        bot.plot(w, (fl - mod) / sig, color="k", lw=0.4)
        bot.axhline(0, color=colors.get(arm, "tab:green"), lw=0.6)
        bot.set_ylim(-6, 6)
        top.set_title(f"{arm} arm" + ("" if used.any() else " (not fitted)"), fontsize=9)
        bot.set_xlabel("vacuum wavelength [Å]")
        if c == 0:
            top.set_ylabel("flux")
            bot.set_ylabel("(data-model)/σ")
            top.legend(fontsize=7, loc="lower right")
    fig.suptitle(f"TARGETID {a.targetid}: VRAD {row['VRAD']:.1f}±{row['VRAD_ERR']:.1f} km/s, "
                 f"TEFF {row['TEFF']:.0f} K, LOGG {row['LOGG']:.2f}, [Fe/H] {row['FEH']:.2f}, "
                 f"RVS_WARN {row['RVS_WARN']}, SUCCESS {bool(row['SUCCESS'])}", fontsize=10)
    fig.tight_layout()
    fig.savefig(out, dpi=90)
    print(out)


if __name__ == "__main__":
    main()
