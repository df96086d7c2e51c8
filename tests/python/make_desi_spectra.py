#!/usr/bin/python3
"""Write real LAMOST DR8 observations in the DESI spectra-file layout (used by the --epochs tests).

Usage: make_desi_spectra.py TEMPLATE_COADD OUT.fits LAMOST_FILE...

One row per LAMOST file, re-gridded as spectra/desi_lamost/coadd-lamost-dr8.fits (TEMPLATE_COADD,
../shared/data/README.md) is: the template's B/R/Z wavelength grids (0.8 A, vacuum), flux linearly
interpolated, ivar interpolated and scaled by the pixel-width ratio, pixels outside the LAMOST
coverage or bad there ivar 0 and mask 1, the template's first resolution matrices (the LAMOST
R = 1800 Gaussian LSF on DESI pixels) for every row. As a spectra file, the FIBERMAP has a row
per exposure: TARGETID from the header OBJNAME (one star, several rows), EXPID the LAMOST OBSID,
MJD the header MJD. Derived test data, never committed.
"""
import sys

import numpy as np
from astropy.io import fits


def lamost(path):
    with fits.open(path) as h:
        img = h[0].data.astype(np.float64)
        hdr = h[0].header
        return img[2], img[0], img[1], img[3] if img.shape[0] > 3 else np.zeros(img.shape[1]), hdr


def regrid(wave, flux, ivar, mask, grid):
    """Flux and ivar of one LAMOST spectrum on `grid` (as the desi_lamost files are made)."""
    f = np.interp(grid, wave, flux)
    iv = np.interp(grid, wave, ivar)
    # LAMOST pixel width at each DESI pixel over the DESI pixel width (0.8 A).
    dl = np.interp(grid, wave[1:], np.diff(wave)) / np.gradient(grid)
    iv = iv / np.maximum(dl, 1e-9)
    bad = (grid < wave[0]) | (grid > wave[-1])
    f[bad] = 0.0
    near = np.clip(np.searchsorted(wave, grid), 0, len(wave) - 1)
    bad |= (mask[near] != 0) | (ivar[near] <= 0)
    iv[bad] = 0.0
    return f.astype(np.float32), iv.astype(np.float32), bad.astype(np.int32)


def main(template, out, files):
    t = fits.open(template)
    n = len(files)
    rows = [lamost(p) for p in files]
    fm = fits.FITS_rec.from_columns(t["FIBERMAP"].columns, nrows=n)
    names = {}
    for i, (_, _, _, _, hdr) in enumerate(rows):
        for c in t["FIBERMAP"].columns.names:
            fm[c][i] = t["FIBERMAP"].data[c][0]
        obj = str(hdr["OBJNAME"]).strip()
        names.setdefault(obj, len(names))
        fm["TARGETID"][i] = 7100000000000000 + names[obj]
        fm["TARGET_RA"][i] = hdr.get("RA", np.nan)
        fm["TARGET_DEC"][i] = hdr.get("DEC", np.nan)
    cols = [fits.Column(name="EXPID", format="J", array=[int(r[4]["OBSID"]) for r in rows]),
            fits.Column(name="MJD", format="D", array=[float(r[4]["MJD"]) for r in rows])]
    cols = [fits.Column(name=c.name, format=c.format, unit=c.unit, dim=c.dim, array=fm[c.name])
            for c in t["FIBERMAP"].columns] + cols
    fmap = fits.BinTableHDU.from_columns(cols, name="FIBERMAP")
    hdus = [fits.PrimaryHDU(), fmap]
    for arm in "BRZ":
        grid = t[arm + "_WAVELENGTH"].data.astype(np.float64)
        fl, iv, mk = zip(*(regrid(w, f, v, m, grid) for w, f, v, m, _ in rows))
        res = np.repeat(t[arm + "_RESOLUTION"].data[:1], n, axis=0)
        hdus += [fits.ImageHDU(grid, name=arm + "_WAVELENGTH"),
                 fits.ImageHDU(np.array(fl), name=arm + "_FLUX"),
                 fits.ImageHDU(np.array(iv), name=arm + "_IVAR"),
                 fits.ImageHDU(np.array(mk), name=arm + "_MASK"),
                 fits.ImageHDU(res, name=arm + "_RESOLUTION")]
    fits.HDUList(hdus).writeto(out, overwrite=True)


if __name__ == "__main__":
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2], sys.argv[3:])
