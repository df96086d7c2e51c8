"""specutils spectra as velox.fit's arrays (``velox.fit(spectrum, library=...)``).

Recognised without importing specutils (slow to import, and optional): an object whose class
(or a base class) is ``specutils...Spectrum`` or ``Spectrum1D`` (specutils 1.x and 2.x).
"""

import numpy as np


def is_specutils(obj):
    """True for a specutils Spectrum / Spectrum1D (any version), without importing specutils."""
    return any(c.__module__.split(".")[0] == "specutils" and c.__name__ in ("Spectrum",
                                                                             "Spectrum1D")
               for c in type(obj).__mro__)


def _fail(msg):
    raise ValueError(msg)


def _ivar(spec, flux_unit):
    """Inverse variance in 1 / flux_unit^2 from the spectrum's uncertainty (InverseVariance,
    StdDevUncertainty or VarianceUncertainty); ValueError without one."""
    unc = spec.uncertainty
    if unc is None:
        _fail("spectrum: a specutils spectrum without uncertainty: velox weighs pixels by their "
              "inverse variance (give uncertainty=InverseVariance(...) or StdDevUncertainty(...))")
    kind = type(unc).__name__
    arr = np.asarray(unc.array, dtype=np.float64)
    unit = unc.unit
    with np.errstate(divide="ignore", invalid="ignore"):
        if kind == "InverseVariance":
            scale = 1.0 if unit is None else unit.to(flux_unit ** -2)
            return arr * scale
        if kind == "StdDevUncertainty":
            scale = 1.0 if unit is None else unit.to(flux_unit)
            return np.where(arr > 0, 1.0 / (arr * scale) ** 2, 0.0)
        if kind == "VarianceUncertainty":
            scale = 1.0 if unit is None else unit.to(flux_unit ** 2)
            return np.where(arr > 0, 1.0 / (arr * scale), 0.0)
    _fail("spectrum: uncertainty of type %s: expected InverseVariance, StdDevUncertainty or "
          "VarianceUncertainty" % kind)


def arrays_of(spectra):
    """(wave, flux, ivar, mask) for velox.fit from one specutils spectrum (1-D flux, or 2-D:
    spectra sharing the spectral axis) or a list of them (a list per spectrum, as velox.fit's
    list layout). Wavelengths in Angstrom (any spectral unit is converted), increasing (a
    frequency or energy axis is reversed with the data); flux in the spectrum's unit; mask
    nonzero where the spectrum's mask is True."""
    if is_specutils(spectra):
        return _arrays_one(spectra)
    parts = [_arrays_one(s) for s in spectra]
    return tuple([p[k] for p in parts] for k in range(4))


def _arrays_one(spec):
    import astropy.units as u

    wave = spec.spectral_axis.to(u.AA, equivalencies=u.spectral())
    wave = np.asarray(wave.value, dtype=np.float64)
    flux_q = spec.flux
    flux = np.asarray(flux_q.value)
    ivar = _ivar(spec, flux_q.unit)
    mask = np.zeros(flux.shape, np.int32) if spec.mask is None else \
        np.asarray(spec.mask).astype(np.int32)
    if flux.shape[-1] != wave.size:
        _fail("spectrum: flux shape %s does not end in the spectral axis' %d pixels"
              % (flux.shape, wave.size))
    if wave.size > 1 and wave[0] > wave[-1]:  # frequency / energy axes run the other way
        wave, flux, ivar, mask = wave[::-1], flux[..., ::-1], ivar[..., ::-1], mask[..., ::-1]
    return wave, flux, ivar, mask
