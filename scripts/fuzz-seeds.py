#!/usr/bin/python3
"""Seed corpora for the fuzz targets (scripts/fuzz.sh), cut from the shared real data.

usage: scripts/fuzz-seeds.py OUT_DIR [--data-dir DIR] [--library LIB.h5] [--cannon MODEL.h5]

Writes OUT_DIR/<target>/seed-*.  Each seed is a real file of the target's format cut down to a
few pixels (and, for DESI, two fibres), so that the fuzzer's mutations land on headers, table
structure and array shapes rather than deep inside pixel data; the LAMOST DR8 target also gets
one whole gzip-compressed file. miles and phoenix inputs are several files joined by the
separator of tests/fuzz/fuzz_targets.hpp. --library copies a (small) template library as the
seed of the library target; --cannon cuts a converted Cannon model to a few pixels as the seed of
the cannon target. Needs numpy and astropy (and h5py for --cannon).
"""
import argparse
import glob
import importlib.util
import gzip
import io
import os
import shutil

import numpy as np
from astropy.io import fits

SEP = b"\n@@velox-fuzz-next-file@@\n"  # fuzz::kFileSeparator
NPIX = 48  # pixels kept per spectrum / arm


def to_bytes(hdul):
    buf = io.BytesIO()
    hdul.writeto(buf, output_verify="silentfix")
    return buf.getvalue()


def save(out, target, name, data):
    os.makedirs(os.path.join(out, target), exist_ok=True)
    with open(os.path.join(out, target, name), "wb") as fh:
        fh.write(data)


def cut_table(hdu, npix, rows=None):
    """BinTableHDU with vector columns cut to npix elements and only `rows`."""
    data = hdu.data if rows is None else hdu.data[rows]
    cols = []
    for c in hdu.columns:
        a = np.asarray(data[c.name])
        if a.ndim == 2 and a.shape[1] > npix:
            a = a[:, :npix]
            fmt = f"{npix}{c.format.lstrip('0123456789')}"
        else:
            fmt = c.format
        cols.append(fits.Column(name=c.name, format=fmt, array=a, unit=c.unit))
    return fits.BinTableHDU.from_columns(cols, header=hdu.header, name=hdu.name)


def lamost_dr10(data_dir, out):
    for i, path in enumerate(sorted(glob.glob(f"{data_dir}/spectra/lamost_dr10_pylasp/fits/*.fits"))[:2]):
        with fits.open(path) as h:
            save(out, "lamost-dr10", f"seed-{i}.fits",
                 to_bytes(fits.HDUList([h[0].copy(), cut_table(h["COADD"], NPIX)])))


def lamost_dr8(data_dir, out):
    paths = sorted(glob.glob(f"{data_dir}/spectra/lamost_dr8/fits/*.fits.gz"))
    for i, path in enumerate(paths[:2]):
        with fits.open(path) as h:
            small = to_bytes(fits.HDUList([fits.PrimaryHDU(h[0].data[:, :NPIX], h[0].header)]))
        save(out, "lamost-dr8", f"seed-{i}.fits", small)
        save(out, "lamost-dr8", f"seed-{i}.fits.gz", gzip.compress(small))
    shutil.copy(paths[0], os.path.join(out, "lamost-dr8", "whole.fits.gz"))


def sdss(data_dir, out):
    for i, path in enumerate(sorted(glob.glob(f"{data_dir}/spectra/sdss/spec-*.fits"))):
        with fits.open(path) as h:
            coadd = h["COADD"]
            hdus = [h[0].copy(), fits.BinTableHDU(coadd.data[:NPIX], coadd.header, name="COADD")]
            hdus += [h[k].copy() for k in (2,)]  # SPALL (BOSS) or SPECOBJ (SDSS)
            save(out, "sdss", f"seed-{i}.fits", to_bytes(fits.HDUList(hdus)))


def desi(data_dir, out):
    files = [f"{data_dir}/spectra/desi_lamost/coadd-lamost-dr10.fits"]
    files += sorted(glob.glob(f"{data_dir}/spectra/desi_edr/*.fits"))
    for i, path in enumerate(files):
        with fits.open(path) as h:
            fib = h["FIBERMAP"]
            tids = set(np.asarray(fib.data["TARGETID"][:2]).tolist())
            hdus = [h[0].copy(), fits.BinTableHDU(fib.data[:2], fib.header, name="FIBERMAP")]
            for hdu in h[2:]:
                name = hdu.name
                if isinstance(hdu, (fits.ImageHDU, fits.CompImageHDU)):
                    img = hdu.data
                    if name.endswith("WAVELENGTH"):
                        img = img[:NPIX]
                    elif img is not None and img.ndim == 2:
                        img = img[:2, :NPIX]
                    elif img is not None and img.ndim == 3:  # RESOLUTION [fibre][diag][pix]
                        img = img[:2, :, :NPIX]
                    kind = fits.CompImageHDU if isinstance(hdu, fits.CompImageHDU) else fits.ImageHDU
                    hdus.append(kind(img, hdu.header, name=name))
                else:  # EXP_FIBERMAP, SCORES: the two fibres' rows
                    keep = np.arange(min(2, len(hdu.data)))
                    if "TARGETID" in hdu.columns.names:
                        keep = np.nonzero(np.isin(hdu.data["TARGETID"], list(tids)))[0][:4]
                    hdus.append(fits.BinTableHDU(hdu.data[keep], hdu.header, name=name))
            save(out, "desi", f"seed-{i}.fits", to_bytes(fits.HDUList(hdus)))


def miles_fits(path, keys=None):
    with fits.open(path) as h:
        hdr = h[0].header.copy()
        for k, v in (keys or {}).items():
            hdr[k] = v
        return to_bytes(fits.HDUList([fits.PrimaryHDU(h[0].data[:NPIX * 4], hdr)]))


def miles(data_dir, out):
    root = f"{data_dir}/templates/miles"
    thin = sorted(glob.glob(f"{root}/miles_thin/*.fits"))[:2]
    for i, path in enumerate(thin):  # labels in the header (MLOGT, MLOGG, MFEH)
        save(out, "miles", f"seed-thin-{i}.fits", miles_fits(path))
    with open(f"{root}/MILES_params.db", "rb") as fh:  # the table, with star 1's row kept
        lines = fh.read().splitlines(keepends=True)
    params = b"".join(ln for ln in lines if ln.startswith(b"#") or ln.split()[:1] == [b"0001"])
    params += b"".join(lines[3:8])
    save(out, "miles", "seed-params.bin",
         params + SEP + miles_fits(f"{root}/fits/MILES_res2.50_star_m0001V.fits"))


def phoenix(data_dir, out):
    root = f"{data_dir}/templates/miles"
    paths = sorted(glob.glob(f"{root}/miles_thin/*.fits"))[:2]
    with fits.open(paths[0]) as h:
        n = NPIX * 4
        hdr = h[0].header
        air = hdr["CRVAL1"] + hdr["CDELT1"] * np.arange(n)
    s2 = (1e4 / air) ** 2  # air -> vacuum (good enough for a seed)
    wave = air * (1 + 8.336624212083e-5 + 2.408926869968e-2 / (130.1065924522 - s2)
                  + 1.599740894897e-4 / (38.92568793293 - s2))
    parts = [to_bytes(fits.HDUList([fits.PrimaryHDU(wave)]))]
    for k, path in enumerate(paths):
        with fits.open(path) as h:
            flux = h[0].data[:n].astype(np.float32)
            hdr = fits.Header()
            hdr["PHXTEFF"] = round(10 ** h[0].header["MLOGT"])
            hdr["PHXLOGG"] = h[0].header["MLOGG"]
            hdr["PHXM_H"] = h[0].header["MFEH"]
            hdr["PHXALPHA"] = 0.2 * k
            parts.append(to_bytes(fits.HDUList([fits.PrimaryHDU(flux, hdr)])))
    save(out, "phoenix", "seed-0.bin", SEP.join(parts))
    save(out, "phoenix", "seed-1.bin", SEP.join(parts[:2]))


def stelib(data_dir, out):
    paths = sorted(glob.glob(f"{data_dir}/templates/stelib/STELIB_*.fits"))
    for i, path in enumerate(paths[2:4]):  # labels in the header (TEFF, LOG_G, FE_H)
        with fits.open(path) as h:
            save(out, "stelib", f"seed-{i}.fits",
                 to_bytes(fits.HDUList([fits.PrimaryHDU(h[0].data[2000:2000 + NPIX * 4],
                                                        h[0].header)])))


def kesseli(data_dir, out):
    with open(f"{data_dir}/tables/EEM_dwarf_UBVIJHK_colors_Teff.txt", "rb") as fh:
        lines = fh.read().splitlines(keepends=True)
    table = b"".join(ln for ln in lines if ln.startswith(b"#SpT") or ln.startswith(b"M4V"))[:4000]
    with fits.open(f"{data_dir}/templates/kesseli_mdwarfs/M4_+0.0_Dwarf.fits") as h:
        cut = fits.HDUList([fits.PrimaryHDU(header=h[0].header),
                            fits.BinTableHDU(h[1].data[:NPIX * 4], h[1].header)])
        body = to_bytes(cut)
    save(out, "kesseli", "seed-0.bin", table + SEP + body)
    save(out, "kesseli", "seed-1.fits", body)


def cannon(cannon_h5, out):
    """A converted Cannon model cut to a few pixels (h5py)."""
    import h5py
    dst = os.path.join(out, "cannon")
    os.makedirs(dst, exist_ok=True)
    path = os.path.join(dst, "seed-0.h5")
    with h5py.File(cannon_h5, "r") as src, h5py.File(path, "w", userblock_size=512) as o:
        for k in ("dispersion", "theta", "s2"):
            o[k] = src[k][:NPIX]
        for k in ("powers", "fiducials", "scales"):
            o[k] = src[k][()]
        o["training_set_labels"] = src["training_set_labels"][:20]
        for k, v in src.attrs.items():
            o.attrs[k] = v
    spec = importlib.util.spec_from_file_location(
        "cannon_to_h5", os.path.join(os.path.dirname(os.path.abspath(__file__)), "cannon-to-h5.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.seal(path)  # velox reads only sealed models


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--data-dir", default=os.path.join(here, "..", "..", "shared", "data"))
    ap.add_argument("--library", help="template library (HDF5) to seed the library target")
    ap.add_argument("--cannon", help="converted Cannon model (scripts/cannon-to-h5.py) to seed "
                    "the cannon target")
    a = ap.parse_args()
    for make in (lamost_dr10, lamost_dr8, sdss, desi, miles, phoenix, stelib, kesseli):
        make(a.data_dir, a.out)
    if a.cannon:
        cannon(a.cannon, a.out)
    if a.library:
        os.makedirs(os.path.join(a.out, "library"), exist_ok=True)
        shutil.copy(a.library, os.path.join(a.out, "library", "seed-0.h5"))
    for target in sorted(os.listdir(a.out)):
        sizes = [os.path.getsize(p) for p in glob.glob(os.path.join(a.out, target, "*"))]
        print(f"fuzz-seeds: {target}: {len(sizes)} seeds, largest {max(sizes)} bytes")


if __name__ == "__main__":
    main()
