#!/usr/bin/python3
"""Shared set-up of the Python API tests (tests/python/test_*.py, run by run_test.sh).

Environment (set by ctest and run_test.sh): VELOX (the CLI), VELOX_DATA_DIR, VELOX_LIBRARY
(the MILES library), PYTHONPATH (build/python). The working directory is a scratch directory.
"""
import glob
import os
import subprocess

import numpy as np
from astropy.io import fits

import velox

DATA = os.environ["VELOX_DATA_DIR"]
VELOX = os.environ["VELOX"]
LIBRARY = os.environ["VELOX_LIBRARY"]
DR10_FILES = sorted(glob.glob(os.path.join(DATA, "spectra/lamost_dr10_pylasp/fits/*.fits")))
DR8_FILES = sorted(glob.glob(os.path.join(DATA, "spectra/lamost_dr8/fits/*.fits.gz")))
DESI_DR10 = os.path.join(DATA, "spectra/desi_lamost/coadd-lamost-dr10.fits")

_lib = None


def library():
    global _lib
    if _lib is None:
        _lib = velox.Library.load(LIBRARY)
    return _lib


def read_dr10(path):
    """(obsid, wave, flux, ivar, andmask) of a LAMOST DR10 file, read with astropy."""
    with fits.open(path) as h:
        row = h["COADD"].data[0]
        return (int(h[0].header["OBSID"]), row["WAVELENGTH"], row["FLUX"], row["IVAR"],
                row["ANDMASK"])


def cli_fit(paths, out="cli.h5", *extra):
    """Rows of `velox fit` on files (catalog read back with velox.read_catalog)."""
    subprocess.run([VELOX, "fit", "--templates", LIBRARY, "--output", out, *extra, *paths],
                   check=True)
    return velox.read_catalog(out)


def assert_rows_equal(test, got, want, skip=()):
    """Every column of got equals want bitwise (NaN == NaN), except `skip`."""
    test.assertEqual(got.dtype.names, want.dtype.names)
    test.assertEqual(len(got), len(want))
    for name in got.dtype.names:
        if name in skip:
            continue
        a, b = np.asarray(got[name]), np.asarray(want[name])
        same = (a == b) | ((a != a) & (b != b)) if a.dtype.kind == "f" else a == b
        bad = np.flatnonzero(~same)
        test.assertEqual(bad.size, 0, "column %s differs in %d rows, first row %d: %r vs %r"
                         % (name, bad.size, bad[0] if bad.size else -1,
                            a[bad[0]] if bad.size else None, b[bad[0]] if bad.size else None))
