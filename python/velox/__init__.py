"""velox: radial velocities and stellar parameters of survey spectra, from Python.

The same C++ core as the ``velox`` command (one fit, no second implementation): a spectrum gives
the same catalog row whether ``velox fit`` reads it from a file or ``velox.fit`` gets it as
arrays. Walk-through: docs/python.md.

    import velox
    lib = velox.Library.load("build/miles.h5")
    rows = velox.fit(wave, flux, ivar, library=lib, resolution=1800)
    rows["VRAD"], rows["TEFF"], rows["RVS_WARN"]

Functions: fit, fit_spectra, fit_files, fit_epochs, model, model_of_row, read_spectra,
read_catalog, to_table, air_to_vacuum, vacuum_to_air, set_log_level. Classes: Library, Spectrum,
Arm. Catalog columns: CATALOG_DTYPE, UNITS, DESCRIPTIONS (docs/data-model.md).

Errors: ValueError for bad arguments (naming the argument and its shape), OSError for files,
RuntimeError for device failures. The GIL is released while fitting and reading.
"""

from . import _core
from ._catalog import CATALOG_DTYPE, DESCRIPTIONS, UNITS, read_catalog, to_table
from ._fit import fit, fit_epochs, fit_files, fit_spectra, model, model_of_row
from ._library import Library
from ._spectra import Arm, Spectrum, read_spectra

__version__ = _core.__version__
git_commit = _core.git_commit


def air_to_vacuum(wave):
    """Air -> vacuum wavelengths [Angstrom], IAU / Morton (2000) as the SDSS and DESI pipelines
    (identity below 2000 A). Any array shape; returns float64."""
    return _core.air_to_vacuum(wave)


def vacuum_to_air(wave):
    """Vacuum -> air wavelengths [Angstrom], inverse of air_to_vacuum."""
    return _core.vacuum_to_air(wave)


def set_log_level(level):
    """Level of the core's log lines on stderr: trace, debug, info, warn (default), error, off."""
    _core.set_log_level(level)


__all__ = ["Arm", "CATALOG_DTYPE", "DESCRIPTIONS", "Library", "Spectrum", "UNITS",
           "air_to_vacuum", "fit", "fit_epochs", "fit_files", "fit_spectra", "git_commit",
           "model", "model_of_row",
           "read_catalog", "read_spectra", "set_log_level", "to_table", "vacuum_to_air"]
