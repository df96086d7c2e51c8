#!/usr/bin/python3
"""velox.fit_epochs gives the stars and epochs `velox fit --epochs` writes (issue 28).

The BOSS star spec-3586-55181-0500 (7 exposures) and the LAMOST DR8 repeat observations joined by
OBJNAME: the same engine and the same two-step fit, so the rows must be equal bitwise (no
tolerance), SOURCE_FILE included. velox.read_catalog(..., epochs=True) reads /epochs back.
"""
import collections
import csv
import os
import unittest

import numpy as np

import velox
from api_common import DATA, assert_rows_equal, cli_fit, library

SDSS = os.path.join(DATA, "spectra/sdss/spec-3586-55181-0500.fits")


def lamost_repeats():
    index = os.path.join(DATA, "spectra/lamost_dr8/header_index.csv")
    g = collections.defaultdict(list)
    for r in csv.DictReader(open(index)):
        g[r["objname"]].append(os.path.join(DATA, "spectra/lamost_dr8/fits", r["file"]))
    return [f for v in g.values() if len(v) > 1 for f in sorted(v)]


class Epochs(unittest.TestCase):
    def check(self, paths, out, *group):
        cli_fit(paths, out, "--epochs", *group)
        want_stars, want_epochs = velox.read_catalog(out, epochs=True)
        group_by = group[1] if group else "TARGETID"
        stars, epochs = velox.fit_epochs(paths, library=library(), group_by=group_by)
        self.assertGreater(len(epochs), len(stars))
        assert_rows_equal(self, stars, want_stars)
        # /epochs holds a subset of the columns: compare those.
        for name in ("TARGETID", "EPOCH", "N_EPOCHS", "EXPID", "MJD", "SOURCE_FILE", "VRAD",
                     "VRAD_ERR", "VRAD_ERR_STAT", "SN", "RCHISQ", "RVS_WARN", "FIT_INFO"):
            a, b = np.asarray(epochs[name]), np.asarray(want_epochs[name])
            same = (a == b) | ((a != a) & (b != b)) if a.dtype.kind == "f" else a == b
            self.assertTrue(same.all(), name)
        self.assertEqual(len(velox.read_catalog(out)), len(stars))  # /catalog alone by default
        return stars, epochs

    def test_sdss_exposures(self):
        stars, epochs = self.check([SDSS], "sdss.h5")
        self.assertEqual(len(stars), 1)
        self.assertEqual(list(epochs["EPOCH"]), list(range(7)))
        self.assertEqual(stars["N_EPOCHS"][0], 7)

    def test_lamost_repeats_by_objname(self):
        paths = lamost_repeats()
        stars, epochs = self.check(paths, "lamost.h5", "--group-by", "OBJNAME")
        self.assertEqual(len(epochs), len(paths))
        self.assertTrue((stars["N_EPOCHS"] >= 2).all())


if __name__ == "__main__":
    unittest.main()
