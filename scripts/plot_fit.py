#!/usr/bin/python3
"""Plot one velox fit: data, best-fit model, residuals and masked pixels per arm.

usage: scripts/plot_fit.py CATALOG.h5 INPUT [TARGETID] [--out PNG]

CATALOG.h5 must come from `velox fit --save-models` (datasets /models/<arm>, /models/<arm>_wave
aligned with /catalog). INPUT is the file the target was read from, in any format velox reads:
LAMOST DR8 (primary image: flux, ivar, wavelength, andmask), LAMOST DR10 (COADD table), SDSS/BOSS
spec-*.fits (COADD: loglam, flux, ivar, and_mask) or a DESI coadd/spectra file (FIBERMAP and
{B,R,Z}_{WAVELENGTH,FLUX,IVAR,MASK}); the format is recognised from the content, as velox does.
TARGETID defaults to the first target of INPUT in the catalog.

A catalog of `velox fit --epochs` (dataset /epochs, no models) gives instead the star's epochs:
VRAD of every epoch against its MJD with the errors, the star's weighted mean and its error, and
N_EPOCHS, VRAD_CHISQ_CONST, VRAD_LOGP_CONST, VRAD_MAXDIFF_SIG and RV_VARIABLE in the title; the
epochs are also printed as a table (docs/epochs.md). INPUT then only picks the star (any of its
files).

The figure has one column per arm: data with the model on top (x: vacuum wavelength in
Angstrom; y: flux in the file's unit), residuals in sigma below. Pixels the fit did not use
(masked, ivar <= 0, non-finite, outside the templates) are grey, masked ones also ticked in
magenta. The title and stdout give the fitted values with their uncertainties and RVS_WARN
and FIT_INFO decoded by name (from the catalog's RVS_WARN_BITS and FIT_INFO_BITS attributes). Needs matplotlib, h5py, astropy
(Debian python3-matplotlib, python3-h5py, python3-astropy).
"""
import argparse
import os
import sys

import h5py
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from astropy.io import fits  # noqa: E402

# Flux units when the file's header has no BUNIT (the surveys' data models).
DEFAULT_FLUX_UNIT = {
    "lamost-dr8": "relative, uncalibrated",
    "lamost-dr10": "relative, uncalibrated",
    "sdss": "1e-17 erg s^-1 cm^-2 Å^-1",
    "desi": "1e-17 erg s^-1 cm^-2 Å^-1",
}


def detect_format(h):
    """velox's rule (src/io/readers.cpp detect_format): from HDU names and header keys."""
    names = [hdu.name for hdu in h]
    if "COADD" in names:
        cols = [c.lower() for c in h["COADD"].columns.names]
        if "loglam" in cols:
            return "sdss"
        if "wavelength" in cols and "flux" in cols:
            return "lamost-dr10"
    if "FIBERMAP" in names and any(f"{a}_FLUX" in names for a in "BRZ"):
        return "desi"
    if h[0].data is not None and h[0].data.ndim == 2 and "COEFF0" in h[0].header:
        return "lamost-dr8"
    sys.exit(f"unknown spectrum layout (HDUs: {', '.join(names)})")


def unit_of(hdu, fmt):
    return hdu.header.get("BUNIT", DEFAULT_FLUX_UNIT[fmt])


def read_arms(path, targetid):
    """Format and {arm: (vacuum wavelength A, flux, ivar, mask, flux unit)} of one target."""
    with fits.open(path) as h:
        fmt = detect_format(h)
        if fmt == "lamost-dr8":
            img = h[0].data.astype(float)
            mask = img[3] if img.shape[0] > 3 else np.zeros(img.shape[1])
            return fmt, {"ALL": (img[2], img[0], img[1], mask, unit_of(h[0], fmt))}
        if fmt == "lamost-dr10":
            d = h["COADD"].data
            mask = d["ANDMASK"][0] if "ANDMASK" in d.names else np.zeros(len(d["FLUX"][0]))
            return fmt, {"ALL": (d["WAVELENGTH"][0], d["FLUX"][0], d["IVAR"][0], mask,
                                 unit_of(h["COADD"], fmt))}
        if fmt == "sdss":
            d = h["COADD"].data
            mask = d["and_mask"] if "and_mask" in d.names else np.zeros(len(d))
            return fmt, {"ALL": (10.0 ** d["loglam"].astype(float), d["flux"], d["ivar"], mask,
                                 unit_of(h["COADD"], fmt))}
        fib = np.nonzero(h["FIBERMAP"].data["TARGETID"] == targetid)[0]
        if len(fib) == 0:
            sys.exit(f"{path}: TARGETID {targetid} not in FIBERMAP")
        j = fib[0]
        arms = {}
        for arm in "BRZ":
            if f"{arm}_FLUX" not in h:
                continue
            mask = h[f"{arm}_MASK"].data[j] if f"{arm}_MASK" in h else 0
            arms[arm] = (h[f"{arm}_WAVELENGTH"].data, h[f"{arm}_FLUX"].data[j],
                         h[f"{arm}_IVAR"].data[j], mask, unit_of(h[f"{arm}_FLUX"], fmt))
        return fmt, arms


def bit_names(cat_ds, attr="RVS_WARN_BITS"):
    """{bit: name} from a /catalog attribute RVS_WARN_BITS or FIT_INFO_BITS ("0:NAME,...")."""
    text = cat_ds.attrs.get(attr, b"")
    text = text.decode() if isinstance(text, bytes) else str(text)
    return {int(k): v for k, v in (item.split(":", 1) for item in text.split(",") if ":" in item)}


def decode_warn(value, names):
    bits = [b for b in range(64) if (int(value) >> b) & 1]
    return "|".join(names.get(b, f"bit{b}") for b in bits) if bits else "none"


def pm(row, col, fmt):
    v, e = row[col], row[f"{col}_ERR"]
    return f"{v:{fmt}} ± {e:{fmt}}"


def plot_epochs(f, a, source):
    """The epochs of one star of a --epochs catalog: VRAD against MJD."""
    cat, ep = f["catalog"][:], f["epochs"][:]
    info_names = bit_names(f["catalog"], "FIT_INFO_BITS")
    if a.targetid is None:
        mine = ep[np.array([s.decode() == source for s in ep["SOURCE_FILE"]])]
        if len(mine) == 0:
            sys.exit(f"{a.catalog}: no epoch from {source}")
        a.targetid = int(mine["TARGETID"][0])
    star = cat[cat["TARGETID"] == a.targetid]
    e = ep[ep["TARGETID"] == a.targetid]
    if len(star) == 0 or len(e) == 0:
        sys.exit(f"{a.catalog}: TARGETID {a.targetid} has no star row or no epochs")
    row = star[0]
    ok = e["SUCCESS"].astype(bool)
    t = e["MJD"] - np.nanmin(e["MJD"]) if np.isfinite(e["MJD"]).any() else e["EPOCH"]
    fig, ax = plt.subplots(figsize=(6.5, 4))
    ax.errorbar(t[ok], e["VRAD"][ok], e["VRAD_ERR"][ok], fmt="o", color="k", label="epochs")
    if (~ok).any():
        ax.errorbar(t[~ok], e["VRAD"][~ok], e["VRAD_ERR"][~ok], fmt="x", color="0.6",
                    label="not SUCCESS")
    ax.axhline(row["VRAD"], color="tab:blue", lw=1, label="weighted mean")
    ax.axhspan(row["VRAD"] - row["VRAD_ERR"], row["VRAD"] + row["VRAD_ERR"], color="tab:blue",
               alpha=0.2)
    ax.set_xlabel("MJD - %.3f [d]" % np.nanmin(e["MJD"]) if np.isfinite(e["MJD"]).any()
                  else "epoch")
    ax.set_ylabel("VRAD [km/s]")
    ax.legend(fontsize=8)
    flags = decode_warn(row["FIT_INFO"], info_names)
    title = (f"TARGETID {a.targetid}: N_EPOCHS {row['N_EPOCHS']}, VRAD {pm(row, 'VRAD', '.2f')} "
             f"km/s, TEFF {pm(row, 'TEFF', '.0f')} K\nchi2(const) {row['VRAD_CHISQ_CONST']:.2f}, "
             f"log10 p {row['VRAD_LOGP_CONST']:.2f}, max pair {row['VRAD_MAXDIFF_SIG']:.2f} sigma;"
             f" FIT_INFO {flags}")
    ax.set_title(title, fontsize=8)
    fig.tight_layout()
    out = a.out or f"epochs-{a.targetid}.png"
    fig.savefig(out, dpi=90)
    print(title.replace("\n", "; "))
    print("EPOCH  EXPID       MJD          VRAD     VRAD_ERR  SN     RVS_WARN  SOURCE_FILE")
    for x in e:
        print(f"{x['EPOCH']:5d}  {x['EXPID']:10d}  {x['MJD']:11.5f}  {x['VRAD']:8.2f}  "
              f"{x['VRAD_ERR']:8.2f}  {x['SN']:5.1f}  {x['RVS_WARN']:8d}  "
              f"{x['SOURCE_FILE'].decode()}")
    print(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("catalog")
    ap.add_argument("input")
    ap.add_argument("targetid", type=int, nargs="?")
    ap.add_argument("--out", default=None, help="PNG path (default fit-TARGETID.png)")
    a = ap.parse_args()
    source = os.path.basename(a.input)
    with h5py.File(a.catalog, "r") as f:
        if "epochs" in f:
            return plot_epochs(f, a, source)
        if "models" not in f:
            sys.exit(f"{a.catalog}: no /models (run velox fit with --save-models)")
        cat = f["catalog"][:]
        names = bit_names(f["catalog"])
        info_names = bit_names(f["catalog"], "FIT_INFO_BITS")
        from_file = np.array([s.decode() == source for s in cat["SOURCE_FILE"]])
        if a.targetid is None:
            if not from_file.any():
                sys.exit(f"{a.catalog}: no row from {source}")
            a.targetid = int(cat["TARGETID"][np.nonzero(from_file)[0][0]])
        idx = np.nonzero((cat["TARGETID"] == a.targetid) & from_file)[0]
        if len(idx) == 0:
            idx = np.nonzero(cat["TARGETID"] == a.targetid)[0]
        if len(idx) == 0:
            sys.exit(f"{a.catalog}: TARGETID {a.targetid} not in /catalog")
        i = idx[0]
        row = cat[i]
        model_arms = [k for k in f["models"] if not k.endswith("_wave")]
        models = {k: (f["models"][k + "_wave"][:], f["models"][k][i]) for k in model_arms}
    fmt, data = read_arms(a.input, a.targetid)
    out = a.out or f"fit-{a.targetid}.png"
    shown = [k for k in ("B", "R", "Z", "ALL") if k in data]
    warn = f"RVS_WARN {row['RVS_WARN']} = {decode_warn(row['RVS_WARN'], names)}"
    if "FIT_INFO" in row.dtype.names:
        warn += f"; FIT_INFO {decode_warn(row['FIT_INFO'], info_names)}"
    values = (f"VRAD {pm(row, 'VRAD', '.2f')} km/s, TEFF {pm(row, 'TEFF', '.0f')} K, "
              f"LOGG {pm(row, 'LOGG', '.2f')}, [Fe/H] {pm(row, 'FEH', '.2f')}")

    fig, axes = plt.subplots(2, len(shown), figsize=(4.6 * len(shown) + 1.5, 5.2), squeeze=False,
                             gridspec_kw={"height_ratios": [3, 1]}, sharex="col")
    colors = {"B": "tab:blue", "R": "tab:red", "Z": "tab:brown"}
    for c, arm in enumerate(shown):
        w, fl, iv, mk, unit = data[arm]
        w, fl, iv = (np.asarray(x, float) for x in (w, fl, iv))
        if arm in models:
            mw, mod = models[arm]
            same = len(mw) == len(w) and np.allclose(mw, w)
            mod = mod if same else np.interp(w, mw, mod, left=np.nan, right=np.nan)
        else:
            mod = np.full(len(w), np.nan)
        used = np.isfinite(mod)
        masked = np.asarray(mk) != 0
        bad = (iv <= 0) | masked | ~np.isfinite(fl)
        top, bot = axes[0, c], axes[1, c]
        top.plot(w, np.where(used, np.nan, fl), color="0.65", lw=0.5, label="data, not used")
        top.plot(w, np.where(used, fl, np.nan), color="k", lw=0.5, label="data")
        top.plot(w, mod, color=colors.get(arm, "tab:green"), lw=0.8, label="model")
        if np.any(masked & np.isfinite(fl)):
            floor = np.nanpercentile(fl[~bad], 1) if (~bad).any() else 0.0
            top.plot(w[masked], np.full(masked.sum(), floor), "|", color="m", ms=4,
                     label="masked")
        sig = np.where(iv > 0, 1 / np.sqrt(np.where(iv > 0, iv, 1)), np.nan)
        bot.plot(w, (fl - mod) / sig, color="k", lw=0.4)
        bot.axhline(0, color=colors.get(arm, "tab:green"), lw=0.6)
        bot.set_ylim(-6, 6)
        top.set_title(f"{arm} arm" + ("" if used.any() else " (not fitted)"), fontsize=9)
        top.set_ylabel(f"flux [{unit}]", fontsize=8)
        bot.set_xlabel("vacuum wavelength [Å]")
        if c == 0:
            bot.set_ylabel("(data − model) / σ")
            top.legend(fontsize=7, loc="lower right")
    fig.suptitle(f"{source} ({fmt}) TARGETID {a.targetid}, SUCCESS {bool(row['SUCCESS'])}\n"
                 f"{values}\n{warn}", fontsize=9)
    fig.tight_layout()
    fig.savefig(out, dpi=90)
    print(f"{source} ({fmt}) TARGETID {a.targetid}: {values}; {warn}; "
          f"SUCCESS {bool(row['SUCCESS'])}")
    print(out)


if __name__ == "__main__":
    main()
