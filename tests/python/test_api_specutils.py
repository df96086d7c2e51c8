#!/usr/bin/python3
"""velox.fit takes specutils spectra (specutils.Spectrum, Spectrum1D): the same rows as the
arrays they hold, whatever their spectral unit, uncertainty kind or axis direction.

specutils is optional: where it is not installed this test prints why and exits 77, which ctest
reports as skipped (tests/CMakeLists.txt SKIP_RETURN_CODE), never as passed. Debian's
/usr/bin/python3 has no specutils; to run it, give ctest an interpreter that has it, e.g.
  python3 -m venv --system-site-packages /tmp/sp && /tmp/sp/bin/pip install specutils \
      "numpy==$(python3 -c 'import numpy; print(numpy.__version__)')"
  VELOX_PYTHON=/tmp/sp/bin/python ctest --test-dir build -R python.test_api_specutils
(numpy pinned to the system's: Debian's matplotlib and h5py are built against it).
"""
import sys
import unittest

try:
    import specutils
except ImportError as e:
    print(f"SKIP: specutils is not installed for {sys.executable} ({e})")
    sys.exit(77)

import astropy.units as u
import numpy as np
from astropy.nddata import InverseVariance, StdDevUncertainty, VarianceUncertainty

import velox
from api_common import DR10_FILES, assert_rows_equal, library, read_dr10

# specutils 2 renamed Spectrum1D to Spectrum (Spectrum1D stays as an alias); 1.x has only
# Spectrum1D.
SPECTRUM = getattr(specutils, "Spectrum", specutils.Spectrum1D)
FLUX_UNIT = u.Unit("1e-17 erg / (s cm2 Angstrom)")


class Specutils(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        print(f"specutils {specutils.__version__}")
        _, cls.wave, cls.flux, cls.ivar, cls.mask = read_dr10(DR10_FILES[0])
        cls.arrays = cls.fit(cls.wave, cls.flux, cls.ivar, mask=cls.mask)

    @staticmethod
    def fit(*args, **kw):
        return velox.fit(*args, library=library(), resolution=1800.0, format="lamost-dr10",
                         threads=1, **kw)

    def spectrum(self, cls=SPECTRUM, **kw):
        args = dict(spectral_axis=self.wave * u.AA, flux=self.flux * FLUX_UNIT,
                    uncertainty=InverseVariance(self.ivar), mask=self.mask != 0)
        args.update(kw)
        return cls(**args)

    def test_spectrum_equals_its_arrays(self):
        # float64 wavelengths, float32 flux and ivar: the very numbers of the arrays' fit
        assert_rows_equal(self, self.fit(self.spectrum()), self.arrays)

    def test_spectrum1d_alias(self):
        assert_rows_equal(self, self.fit(self.spectrum(specutils.Spectrum1D)), self.arrays)

    def test_units_uncertainty_kinds_and_frequency_axis(self):
        # The same spectrum in nm with a standard deviation, with a variance in other flux
        # units, and on a frequency axis (decreasing in wavelength): only rounding of the
        # converted wavelengths and ivar differs (relative 1e-7 of float32), which moves VRAD by
        # far less than 1e-3 km/s and the labels by far less than 0.1 K / 1e-4 dex.
        sigma = np.where(self.ivar > 0, 1 / np.sqrt(np.where(self.ivar > 0, self.ivar, 1)), 0)
        variants = {
            "nm, StdDev": self.spectrum(spectral_axis=self.wave / 10 * u.nm,
                                        uncertainty=StdDevUncertainty(sigma)),
            "erg units, Variance": self.spectrum(
                flux=self.flux * 1e-17 * u.Unit("erg / (s cm2 Angstrom)"),
                uncertainty=VarianceUncertainty(sigma ** 2 * 1e-34,
                                                unit=u.Unit("erg / (s cm2 Angstrom)") ** 2)),
            "frequency axis": self.spectrum(
                spectral_axis=(self.wave * u.AA).to(u.Hz, equivalencies=u.spectral())[::-1],
                flux=self.flux[::-1] * FLUX_UNIT, uncertainty=InverseVariance(self.ivar[::-1]),
                mask=self.mask[::-1] != 0),
        }
        for name, spec in variants.items():
            with self.subTest(name):
                rows = self.fit(spec)
                self.assertTrue(rows["SUCCESS"][0])
                self.assertEqual(rows["NPIX_TOT"][0], self.arrays["NPIX_TOT"][0])
                self.assertLess(abs(rows["VRAD"][0] - self.arrays["VRAD"][0]), 1e-3)
                self.assertLess(abs(rows["TEFF"][0] - self.arrays["TEFF"][0]), 0.1)
                self.assertLess(abs(rows["FEH"][0] - self.arrays["FEH"][0]), 1e-4)

    def test_batch_and_list(self):
        # A 2-D flux (two spectra on one axis) and a list of spectra: one row each, equal to
        # the single fits.
        two = self.spectrum(flux=np.stack([self.flux, self.flux]) * FLUX_UNIT,
                            uncertainty=InverseVariance(np.stack([self.ivar, self.ivar])),
                            mask=np.stack([self.mask, self.mask]) != 0)
        for rows in (self.fit(two), self.fit([self.spectrum(), self.spectrum()])):
            self.assertEqual(len(rows), 2)
            for k in range(2):
                assert_rows_equal(self, rows[k:k + 1], self.arrays, skip=("ROW_IN_FILE",))

    def test_errors(self):
        with self.assertRaisesRegex(ValueError, "without uncertainty"):
            self.fit(self.spectrum(uncertainty=None))
        with self.assertRaisesRegex(ValueError, "own mask"):
            self.fit(self.spectrum(), mask=self.mask)
        with self.assertRaisesRegex(ValueError, "flux and ivar are required"):
            self.fit(self.wave)


if __name__ == "__main__":
    unittest.main()
