#!/usr/bin/python3
"""Bad input to the Python API raises ValueError naming the argument and the shape, and never
takes the interpreter down (every case runs in this one process, then a good fit still works).
"""
import os
import unittest

import numpy as np

import velox
from api_common import DR10_FILES, library, read_dr10


class BadInputs(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        _, w, f, i, m = read_dr10(DR10_FILES[0])
        cls.w, cls.f, cls.i = (np.array(x) for x in (w, f, i))

    def fit(self, wave=None, flux=None, ivar=None, **kw):
        kw.setdefault("library", library())
        kw.setdefault("resolution", 1800.0)
        return velox.fit(self.w if wave is None else wave, self.f if flux is None else flux,
                         self.i if ivar is None else ivar, **kw)

    def raises(self, pattern, **kw):
        with self.assertRaisesRegex(ValueError, pattern):
            self.fit(**kw)

    # ---- shapes
    def test_flux_ivar_shapes_differ(self):
        self.raises(r"ivar shape \(3908,\) differs from flux shape \(3909,\)", ivar=self.i[:-1])

    def test_wave_shape_does_not_match_batch(self):
        f2 = np.stack([self.f, self.f])
        self.raises(r"wave shape \(3908,\) does not match flux shape \(2, 3909\).*\(3909,\) for "
                    r"a shared grid", wave=self.w[:-1], flux=f2, ivar=np.stack([self.i] * 2))

    def test_mask_shape(self):
        self.raises(r"mask shape \(3,\) differs from flux shape \(3909,\)", mask=np.zeros(3))

    def test_three_dimensional_flux(self):
        self.raises(r"flux: expected shape \(n_pix,\) or \(n_spec, n_pix\).*got \(1, 1, 3909\)",
                    flux=self.f[None, None], ivar=self.i[None, None], wave=self.w)

    def test_empty_arrays(self):
        e = np.zeros(0)
        self.raises(r"flux: expected shape .* n_pix > 0, got \(0,\)", wave=e, flux=e, ivar=e)

    def test_dict_arms_disagree(self):
        self.raises(r"ivar: expected a dict with the arms of flux \['B', 'R'\]",
                    wave={"B": self.w, "R": self.w}, flux={"B": self.f, "R": self.f},
                    ivar={"B": self.i})

    def test_list_lengths_disagree(self):
        self.raises(r"ivar: expected a list of 2 spectra like flux, got a list of 1",
                    wave=[self.w, self.w], flux=[self.f, self.f], ivar=[self.i])

    def test_resolution_matrix_shape(self):
        self.raises(r"resolution shape \(11, 100\) does not match flux shape \(3909,\)",
                    resolution=np.zeros((11, 100), np.float32))

    def test_resolution_matrix_too_many_diagonals(self):
        self.raises(r"odd number of diagonals <= 31 .* got shape \(41, 3909\)",
                    resolution=np.ones((41, 3909), np.float32))

    def test_complex_or_object_arrays(self):
        self.raises(r"flux: expected real numbers, got dtype complex128 with shape \(3909,\)",
                    flux=self.f.astype(complex))
        self.raises(r"wave: expected real numbers, got dtype object",
                    wave=np.array([None] * 3909, dtype=object))

    # ---- values
    def test_all_masked(self):
        self.raises(r"spectrum 0 \(flux, shape \(3909,\)\): no usable pixel",
                    mask=np.ones(3909, np.int32))
        self.raises(r"no usable pixel", ivar=np.zeros(3909))
        self.raises(r"spectrum 1 \(flux\[1\], shape \(2, 3909\)\): no usable pixel",
                    flux=np.stack([self.f, np.full(3909, np.nan)]), ivar=np.stack([self.i] * 2))

    def test_non_finite_wavelengths(self):
        w = self.w.copy()
        w[100:103] = np.nan
        self.raises(r"wave: 3 non-finite wavelengths \(first at pixel 100: nan\); flux shape "
                    r"\(3909,\)", wave=w)
        w2 = np.stack([self.w, w])
        self.raises(r"wave\[1\]: 3 non-finite", wave=w2, flux=np.stack([self.f] * 2),
                    ivar=np.stack([self.i] * 2))

    def test_non_increasing_wavelengths(self):
        self.raises(r"wave: not strictly increasing at pixel 1 ", wave=self.w[::-1].copy())

    def test_flagged_instead_of_raised(self):
        # errors="flag": the CLI's failure rows (BAD_INPUT = bit 8, NO_PIXELS = bit 5).
        w = self.w.copy()
        w[5] = np.inf
        rows = self.fit(wave=np.stack([w, self.w, self.w]), flux=np.stack([self.f] * 3),
                        ivar=np.stack([self.i, self.i, np.zeros(3909)]), errors="flag")
        self.assertEqual(list(rows["SUCCESS"]), [False, True, False])
        self.assertEqual(list(rows["RVS_WARN"] & (1 << 8) != 0), [True, False, False])
        self.assertEqual(list(rows["RVS_WARN"] & (1 << 5) != 0), [False, False, True])

    def test_wavelength_units(self):
        self.raises(r"look like log10\(wavelength / A\).*10\*\*loglam", wave=np.log10(self.w))
        self.raises(r"look like nanometres", wave=self.w / 10)

    def test_air_vacuum_confusion(self):
        for v in ("air", "vacuum", 0, None):
            self.raises(r"vacuum=.*expected True \(wavelengths in vacuum.*False \(in air",
                        vacuum=v)

    def test_resolution_is_not_a_fwhm(self):
        self.raises(r"resolution=2.5: expected a resolving power.*looks like a FWHM",
                    resolution=2.5)
        self.raises(r"resolution=nan", resolution=float("nan"))

    def test_bad_options(self):
        self.raises(r"device='tpu'", device="tpu")
        self.raises(r"threads=-1", threads=-1)
        self.raises(r"errors='ignore'", errors="ignore")
        self.raises(r"format='auto': expected None or a survey format", format="auto")
        self.raises(r"unknown spectrum format 'lamost'", format="lamost")
        self.raises(r"targetid: expected 1 integers", targetid=[1, 2])
        self.raises(r"config='/nonexistent.yaml': no such file", config="/nonexistent.yaml")
        self.raises(r"config: fit.cont_deg must be 0..15", config={"cont_deg": 99})

    def test_library_argument(self):
        with self.assertRaisesRegex(TypeError, r"expected a velox.Library"):
            self.fit(library=42)
        with self.assertRaises(OSError):
            velox.Library.load("/nonexistent/miles.h5")

    def test_model_labels_outside_library(self):
        with self.assertRaisesRegex(ValueError, r"teff=100000.0 is outside the library's range"):
            velox.model(library(), 1e5, 4.0, 0.0, 0.0, self.w, 1800.0)

    def test_file_errors(self):
        with self.assertRaisesRegex(OSError, r"/nonexistent.fits"):
            velox.read_spectra("/nonexistent.fits")
        with self.assertRaisesRegex(ValueError, r"unknown spectrum format 'fits'"):
            velox.read_spectra(DR10_FILES[0], format="fits")
        with self.assertRaisesRegex(OSError, r"not a velox catalog"):
            velox.read_catalog(os.environ["VELOX_LIBRARY"])
        with self.assertWarnsRegex(UserWarning, r"/nonexistent.fits"):
            rows = velox.fit_files(["/nonexistent.fits"], library=library())
        self.assertEqual(rows["RVS_WARN"][0], 1 << 8)

    def test_still_fits_after_all_this(self):
        rows = self.fit()
        self.assertTrue(rows["SUCCESS"][0])


if __name__ == "__main__":
    unittest.main()
