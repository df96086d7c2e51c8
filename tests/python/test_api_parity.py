#!/usr/bin/python3
"""velox.fit on arrays gives the rows `velox fit` writes for the same spectra in files.

The acceptance test of the Python API (issue 10): the 25 LAMOST DR10 spectra read with astropy
and fitted as one batch (format="lamost-dr10": the survey's error floors and arm split, as the
CLI applies to its files) must give the CLI's rows bitwise: same engine, same prepare ->
backend -> finish path, and the arrays carry exactly the values the C++ reader produces
(float32 flux/ivar/wavelength widened to float64 wavelengths, ANDMASK nonzero = bad). No
tolerance is needed, so none is allowed. SOURCE_FILE and ROW_IN_FILE identify the file for the
CLI and the batch position for arrays, so they are the only columns not compared.
"""
import os
import unittest

import numpy as np

import velox
from api_common import (DESI_DR10, DR10_FILES, assert_rows_equal, cli_fit, library, read_dr10)


class LamostParity(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        assert len(DR10_FILES) == 25, DR10_FILES
        cls.cli = cli_fit(DR10_FILES, "cli.h5", "--save-models")
        # The files hold 3902 to 3909 pixels: a list batch (one 1-D array per spectrum).
        cols = list(zip(*(read_dr10(p) for p in DR10_FILES)))
        cls.ids = np.array(cols[0])
        cls.wave, cls.flux, cls.ivar, cls.mask = (list(c) for c in cols[1:])
        # The 14 spectra of 3909 pixels also as one 2-D batch.
        cls.full = [i for i, f in enumerate(cls.flux) if len(f) == 3909]

    def test_batch_of_arrays_equals_cli_rows_bitwise(self):
        rows = velox.fit(self.wave, self.flux, self.ivar, mask=self.mask, library=library(),
                         resolution=1800.0, targetid=self.ids, format="lamost-dr10")
        self.assertEqual(rows.dtype, velox.CATALOG_DTYPE)
        self.assertTrue(rows["SUCCESS"].all())
        assert_rows_equal(self, rows, self.cli, skip=("SOURCE_FILE", "ROW_IN_FILE"))
        self.assertEqual(list(rows["ROW_IN_FILE"]), list(range(25)))

    def test_two_dimensional_batch_equals_cli_rows_bitwise(self):
        pick = lambda c: np.stack([c[i] for i in self.full])
        rows = velox.fit(pick(self.wave), pick(self.flux), pick(self.ivar), mask=pick(self.mask),
                         library=library(), resolution=1800.0, targetid=self.ids[self.full],
                         format="lamost-dr10")
        assert_rows_equal(self, rows, self.cli[self.full], skip=("SOURCE_FILE", "ROW_IN_FILE"))

    def test_one_spectrum_at_a_time_equals_the_batch(self):
        batch = velox.fit(self.wave, self.flux, self.ivar, mask=self.mask, library=library(),
                          resolution=1800.0, targetid=self.ids, threads=1, format="lamost-dr10")
        for i in (0, 7, 24):
            one = velox.fit(self.wave[i], self.flux[i], self.ivar[i], mask=self.mask[i],
                            library=library(), resolution=1800.0, targetid=int(self.ids[i]),
                            format="lamost-dr10")
            self.assertEqual(one.shape, (1,))
            assert_rows_equal(self, one, batch[i:i + 1], skip=("ROW_IN_FILE",))

    def test_models_equal_the_cli_saved_models(self):
        # --save-models stores the best-fit model as float32 on each arm's grid (NaN where not
        # fitted); return_models gives it as float64 on the caller's grid: equal after rounding.
        import h5py
        _, models = velox.fit(self.wave, self.flux, self.ivar, mask=self.mask,
                              library=library(), resolution=1800.0, return_models=True,
                              format="lamost-dr10")
        self.assertEqual([m.shape for m in models], [f.shape for f in self.flux])
        with h5py.File("cli.h5", "r") as f:
            saved, saved_wave = f["models/ALL"][:], f["models/ALL_wave"][:]
        # The CLI keeps one grid per arm name (the first file's) and interpolates the others
        # onto it: compare the spectra on that grid exactly.
        same_grid = [i for i, w in enumerate(self.wave) if np.array_equal(w, saved_wave)]
        self.assertGreater(len(same_grid), 0)
        # return_models also gives the model at pixels clipped as outliers by the re-fit (5
        # sigma), where --save-models writes NaN: at most a few percent of the pixels.
        for i in same_grid:
            ours = models[i].astype(np.float32)
            cli = np.isfinite(saved[i])
            np.testing.assert_array_equal(ours[cli], saved[i][cli])
            self.assertTrue(np.isfinite(ours[cli]).all())
            self.assertLess(np.isfinite(ours[~cli]).sum(), 0.05 * cli.sum())
        self.assertGreater(np.isfinite(models[0]).mean(), 0.6)  # MILES ends at 7410 A

    def test_fit_files_and_fit_spectra_equal_cli_rows(self):
        rows = velox.fit_files(DR10_FILES[:5], library=library())
        assert_rows_equal(self, rows, self.cli[:5])
        spectra = [s for p in DR10_FILES[:5] for s in velox.read_spectra(p)]
        assert_rows_equal(self, velox.fit_spectra(spectra, library=library()), self.cli[:5])

    def test_table_has_units(self):
        t = velox.fit(self.wave[:2], self.flux[:2], self.ivar[:2], library=library(),
                      resolution=1800.0, table=True)
        self.assertEqual(t.colnames, list(velox.CATALOG_DTYPE.names))
        self.assertEqual(str(t["VRAD"].unit), "km / s")
        self.assertEqual(str(t["TEFF"].unit), "K")


class DesiParity(unittest.TestCase):
    """The multi-arm path: DESI-layout files (B/R/Z arms with resolution matrices)."""

    def test_dict_of_arms_with_matrices_equals_cli_rows(self):
        n = 6  # the first six fibres are LAMOST stars (data README): enough for three arms
        cli = cli_fit([DESI_DR10], "desi.h5", "--targetid",
                      ",".join(str(s.targetid) for s in velox.read_spectra(DESI_DR10)[:n]))
        spectra = velox.read_spectra(DESI_DR10)[:n]
        arms = ("B", "R", "Z")
        get = lambda attr: {a: np.array([getattr(s.arm(a), attr) for s in spectra]) for a in arms}
        # The file's primary header says SURVEY 'lamost-regrid' (LAMOST stars re-gridded): its
        # calibrations (zero points, VRAD from the arms) apply to arrays given that key.
        self.assertEqual({s.survey for s in spectra}, {"lamost-regrid"})
        rows = velox.fit(get("wave"), get("flux"), get("ivar"), mask=get("mask"),
                         resolution=get("resolution"), library=library(),
                         targetid=[s.targetid for s in spectra], format="desi:lamost-regrid")
        self.assertTrue(((rows["FIT_INFO"] >> 7) & 1).all())  # VRAD_FROM_ARMS
        plain = velox.fit(get("wave"), get("flux"), get("ivar"), mask=get("mask"),
                          resolution=get("resolution"), library=library(), format="desi")
        self.assertFalse(((plain["FIT_INFO"] >> 7) & 1).any())  # DESI's own: the joint VRAD
        fibermap = ("TARGET_RA", "TARGET_DEC", "REF_ID", "REF_CAT", "FIBER", "EXPID", "HEALPIX")
        assert_rows_equal(self, rows, cli, skip=("SOURCE_FILE", "ROW_IN_FILE") + fibermap)
        assert_rows_equal(self, velox.fit_spectra(spectra, library=library()), cli,
                          skip=fibermap)
        self.assertTrue((rows["NPIX_B"] > 0).all() and (rows["NPIX_R"] > 0).all())

    def test_spectra_of_several_surveys_keep_their_calibrations_and_order(self):
        # Re-gridded LAMOST stars (SURVEY lamost-regrid) between fibres of DESI EDR coadds (sv3;
        # a tile coadd without SURVEY): fitted survey by survey, rows in the input order, and
        # VRAD from the arms (FIT_INFO bit 7) only where the survey's calibration asks for it.
        edr = os.path.join(os.path.dirname(DESI_DR10), "..", "desi_edr")
        regrid = velox.read_spectra(DESI_DR10)[:3]
        sv3 = velox.read_spectra(os.path.join(edr, "coadd-sv3-dark-26065.fits"))[:2]
        tile = velox.read_spectra(os.path.join(edr, "coadd-5-169-thru20210419.fits"))[:2]
        self.assertEqual([s.survey for s in regrid + sv3 + tile],
                         ["lamost-regrid"] * 3 + ["sv3"] * 2 + [""] * 2)
        mixed = regrid[:1] + tile + regrid[1:] + sv3
        rows = velox.fit_spectra(mixed, library=library())
        self.assertEqual(list(rows["TARGETID"]), [s.targetid for s in mixed])
        self.assertEqual(list((rows["FIT_INFO"] >> 7) & 1), [1, 0, 0, 1, 1, 0, 0])
        # Each row is its survey group's fit alone.
        alone = velox.fit_spectra(regrid, library=library())
        self.assertTrue((rows["VRAD"][[0, 3, 4]] == alone["VRAD"]).all())


if __name__ == "__main__":
    unittest.main()
