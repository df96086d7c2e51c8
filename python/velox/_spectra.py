"""velox.read_spectra: the C++ readers (LAMOST DR8/DR10, SDSS/BOSS, DESI coadd) as arrays."""

import os
from dataclasses import dataclass, field

import numpy as np

from . import _core


@dataclass
class Arm:
    """One spectrograph arm of a spectrum, as the readers give it (src/io/spectrum.hpp).

    wave: (n_pix,) float64, vacuum Angstrom (readers convert air to vacuum), increasing.
    flux: (n_pix,) float32, the file's flux units. ivar: (n_pix,) float32, 1/flux^2; <= 0 is
    unusable. mask: (n_pix,) int32, nonzero = bad pixel (DESI bits kept; LAMOST float masks
    become 0/nonzero). resolution_R: nominal R = lambda/FWHM (NaN: unknown; LAMOST 1800 from
    the data release notes). resolution: (ndiag, n_pix) float32 DESI resolution matrix in the
    desispec layout, or None.
    """

    name: str
    wave: np.ndarray
    flux: np.ndarray
    ivar: np.ndarray
    mask: np.ndarray
    resolution_R: float
    resolution: np.ndarray = None


@dataclass
class Spectrum:
    """One target of a file: identity, the reader's metadata and its arms.

    targetid: LAMOST OBSID, SDSS SPECOBJID, DESI TARGETID (docs/data-model.md). source_file:
    the file's basename. row_in_file: fibre / row index. meta: header and FIBERMAP values as
    strings (Z, Z_ERR, SUBCLASS, OBJTYPE, ...). problem: why the reader found this target
    unusable ("" if it is fine). format: the file's layout (lamost-dr8, lamost-dr10, sdss, desi).
    survey: the file's primary-header SURVEY (DESI: main, sv3, ...; "" where absent), whose own
    calibrations (``desi:lamost-regrid``, docs/rv-zero-point.md) ``fit_spectra`` applies.
    """

    targetid: int
    source_file: str
    row_in_file: int
    meta: dict
    problem: str
    format: str
    arms: list = field(default_factory=list)
    survey: str = ""

    def arm(self, name):
        """The arm called ``name`` (KeyError if absent)."""
        for a in self.arms:
            if a.name == name:
                return a
        raise KeyError("%s has no arm %r (arms: %s)" % (self.source_file, name,
                                                        [a.name for a in self.arms]))


def read_spectra(path, *, format="auto"):
    """Read every target of a spectrum file with velox's own readers.

    path: a LAMOST DR8 (``spec-*.fits.gz``) or DR10 (``COADD`` table) file, an SDSS/BOSS
    ``spec-*.fits`` or a DESI coadd/spectra file. format: "auto" (detected from the content),
    "lamost-dr8", "lamost-dr10", "sdss" or "desi". Returns a list of ``velox.Spectrum``.
    Raises OSError naming the file for unreadable or unknown files, ValueError for an unknown
    format name.
    """
    fmt, spectra = _core.read_spectra(os.fspath(path), format)
    out = []
    for s in spectra:
        arms = [Arm(**a) for a in s.pop("arms")]
        out.append(Spectrum(format=fmt, arms=arms, **s))
    return out
