#!/usr/bin/python3
"""Injection-recovery and false alarms of `velox fit --epochs` on real repeat observations
(issue 28, docs/epochs.md).

Real stars observed more than once: the LAMOST DR8 files that share an OBJNAME
(spectra/lamost_dr8/header_index.csv) and the 7 exposures of the BOSS star
spec-3586-55181-0500. For each velocity difference DV (km/s) and each epoch k of each star, a
copy of the star's files is written with epoch k Doppler-shifted by DV (its vacuum wavelengths
times 1 + DV/c; the other epochs untouched), then fitted with --epochs. DV = 0 gives the false
alarms (each star once). Prints, per DV, the fraction of variants flagged RV_VARIABLE
(FIT_INFO bit 6: VRAD_LOGP_CONST < fit.rv_variable_logp), the median VRAD_LOGP_CONST and the
recovered shift (epoch k's VRAD minus the mean of the other epochs), and the per-epoch pulls of the
unshifted stars: (v_k - mean of the others) / sqrt(e_k^2 + error of that mean^2).

Usage: epochs_injection.py VELOX TEMPLATES WORKDIR [--data-dir DIR] [--dv 5 10 20 50]
"""
import argparse
import collections
import csv
import os
import shutil
import subprocess

import h5py
import numpy as np
from astropy.io import fits

C_KMS = 299792.458


def lamost_groups(data_dir):
    index = os.path.join(data_dir, "spectra", "lamost_dr8", "header_index.csv")
    groups = collections.defaultdict(list)
    for r in csv.DictReader(open(index)):
        groups[r["objname"]].append(os.path.join(data_dir, "spectra", "lamost_dr8", "fits",
                                                 r["file"]))
    return {k: sorted(v) for k, v in groups.items() if len(v) > 1}


def write_lamost(src, dst, objname, dv):
    with fits.open(src) as h:
        h[0].header["OBJNAME"] = objname
        if dv:
            data = h[0].data.astype(np.float64)
            data[2] *= 1.0 + dv / C_KMS  # row 2: the vacuum wavelengths
            h[0].data = data.astype(np.float32)
        h.writeto(dst, overwrite=True)


def write_sdss(src, dst, k, dv):
    with fits.open(src) as h:
        frames = [i for i in range(len(h)) if h[i].name[:1] in "BR" and h[i].name[2:3] == "-"]
        expos = sorted({h[i].name[3:11] for i in frames})
        for i in frames:
            if dv and h[i].name[3:11] == expos[k]:
                h[i].data["loglam"] = h[i].data["loglam"] + np.log10(1.0 + dv / C_KMS)
        h.writeto(dst, overwrite=True)


def fit(velox, templates, inputs, out, group_by):
    subprocess.run([velox, "fit", "--templates", templates, "--epochs", "--group-by", group_by,
                    "--output", out, "--overwrite", "--threads", "2"]
                   + inputs, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with h5py.File(out, "r") as f:
        return f["catalog"][:], f["epochs"][:]


def shift_of(epochs, prefix, k):
    """Epoch k's VRAD minus the weighted mean of the star's other epochs, and that over its
    error; the star's epochs are those whose SOURCE_FILE starts with `prefix` (the variants of
    one star share their TARGETIDs)."""
    files = np.char.decode(epochs["SOURCE_FILE"].astype("S128"))
    e = epochs[np.char.startswith(files, prefix)]
    e = e[e["SUCCESS"].astype(bool)]
    this = e[e["EPOCH"] == k]
    rest = e[e["EPOCH"] != k]
    if len(this) != 1 or len(rest) == 0:
        return np.nan, np.nan
    w = 1.0 / rest["VRAD_ERR"] ** 2
    m = (w * rest["VRAD"]).sum() / w.sum()
    d = this["VRAD"][0] - m
    return d, d / np.hypot(this["VRAD_ERR"][0], 1.0 / np.sqrt(w.sum()))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("velox")
    ap.add_argument("templates")
    ap.add_argument("workdir")
    ap.add_argument("--data-dir", default=os.path.join(os.path.dirname(__file__), "..", "..",
                                                       "shared", "data"))
    ap.add_argument("--dv", type=float, nargs="+", default=[5, 10, 20, 50])
    args = ap.parse_args()
    groups = lamost_groups(args.data_dir)
    sdss = os.path.join(args.data_dir, "spectra", "sdss", "spec-3586-55181-0500.fits")
    n_sdss = 7
    pulls = []
    print(f"{len(groups)} LAMOST DR8 stars with repeats ({sum(map(len, groups.values()))} "
          f"files), 1 BOSS star with {n_sdss} exposures")
    print("DV_kms  variants  flagged  frac   median_logp  median_recovered_DV  (LAMOST + BOSS)")
    for dv in [0.0] + list(args.dv):
        d = os.path.join(args.workdir, f"dv{dv:g}")
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        lam, expect = [], []  # LAMOST inputs; (objname tag, k) of every variant
        for g, (name, files) in enumerate(sorted(groups.items())):
            for k in range(len(files) if dv else 1):
                tag = f"{name}-k{k}"
                for j, src in enumerate(files):
                    dst = os.path.join(d, f"s{g}k{k}e{j}.fits")
                    write_lamost(src, dst, tag, dv if j == k else 0.0)
                    lam.append(dst)
                expect.append((tag, k))
        cat, ep = fit(args.velox, args.templates, lam, os.path.join(d, "lamost.h5"), "OBJNAME")
        sd_inputs = []
        for k in range(n_sdss if dv else 1):
            dst = os.path.join(d, f"sdss-k{k}.fits")
            write_sdss(sdss, dst, k, dv)
            sd_inputs.append(dst)
        scat, sep = fit(args.velox, args.templates, sd_inputs, os.path.join(d, "sdss.h5"),
                        "TARGETID")
        flagged, logp, rec = [], [], []
        # LAMOST stars: one star row per variant, in input order (the tag's first file).
        for row in cat:
            if row["N_EPOCHS"] < 2:
                continue
            src = row["SOURCE_FILE"].decode()
            k = int(src.split("k")[1].split("e")[0])
            prefix = src.split("e")[0] + "e"
            flagged.append(bool(row["FIT_INFO"] & (1 << 6)))
            logp.append(row["VRAD_LOGP_CONST"])
            shift, pull = shift_of(ep, prefix, k)
            rec.append(shift)
            if not dv:
                for kk in range(row["N_EPOCHS"]):
                    pulls.append(("LAMOST", shift_of(ep, prefix, kk)[1]))
        for row, k in zip(scat, range(len(scat))):
            flagged.append(bool(row["FIT_INFO"] & (1 << 6)))
            logp.append(row["VRAD_LOGP_CONST"])
            rec.append(shift_of(sep, f"sdss-k{k}.", k)[0])
            if not dv:
                for kk in range(row["N_EPOCHS"]):
                    pulls.append(("BOSS", shift_of(sep, f"sdss-k{k}.", kk)[1]))
        n = len(flagged)
        print(f"{dv:6g}  {n:8d}  {sum(flagged):7d}  {sum(flagged) / max(n, 1):.2f}   "
              f"{np.nanmedian(logp):11.2f}  {np.nanmedian(rec):19.2f}")
    for which in ("LAMOST", "BOSS", None):
        p = np.array([x for w, x in pulls if which in (None, w)])
        p = p[np.isfinite(p)]
        mad = 1.4826 * np.median(np.abs(p - np.median(p)))
        print(f"per-epoch pulls of the unshifted stars ({which or 'all'}): N={len(p)} "
              f"robust sigma {mad:.2f} std {p.std():.2f}")


if __name__ == "__main__":
    main()
