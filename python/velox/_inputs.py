"""Checking and normalising the arrays handed to velox.fit.

Input layouts (``flux``; ``wave``, ``ivar`` and ``mask`` follow the same layout):

- an array: 1-D ``(n_pix,)`` is one spectrum, 2-D ``(n_spec, n_pix)`` a batch; one arm each.
  ``wave`` may be 1-D ``(n_pix,)`` for a batch sharing one wavelength grid.
- a dict ``{arm name: array}``: the arms of a multi-arm spectrograph (DESI ``"B"``, ``"R"``,
  ``"Z"``), each array 1-D (one spectrum) or 2-D (a batch) as above.
- a list with one entry per spectrum (a batch of spectra of different lengths): each entry is a
  1-D array (one arm), a list of 1-D arrays (arms ``ARM0``, ``ARM1``, ...) or a dict of arms.

Every spectrum becomes a list of arm tuples in the core's dtypes (float64 wavelengths, float32
flux and ivar, int32 mask, float32 resolution matrix): arrays already in these dtypes and
C-contiguous are passed on as views, without a copy. Problems with the caller's arrays raise
ValueError naming the argument and its shape.
"""

import math
import numbers

import numpy as np

from . import _core

# Wavelengths are Angstrom: values outside this range are a unit confusion (log10, nm, um).
WAVE_MIN_A, WAVE_MAX_A = 1000.0, 60000.0
# A resolving power below this is taken for a FWHM in Angstrom (velox wants R = lambda / FWHM).
RESOLUTION_MIN = 100.0
MAX_DIAGONALS = 31  # odd, at most src/fit/resolution.hpp kMaxResolutionDiagonals


def _shape(x):
    return tuple(np.shape(x))


def _fail(msg):
    raise ValueError(msg)


def check_vacuum(vacuum):
    """``vacuum`` must be a bool: a string such as "air" would silently read as True."""
    if not isinstance(vacuum, (bool, np.bool_)):
        _fail("vacuum=%r: expected True (wavelengths in vacuum, as LAMOST, SDSS and DESI give "
              "them) or False (in air; converted to vacuum with the IAU formula of Morton 2000)"
              % (vacuum,))
    return bool(vacuum)


def _real_array(x, what):
    a = np.asarray(x)
    if a.dtype.kind not in "fiub":
        _fail("%s: expected real numbers, got dtype %s with shape %s" % (what, a.dtype, a.shape))
    return a


# ---------------------------------------------------------------- layouts -> arm lists

class _Arm:
    """One arm of one spectrum: 1-D arrays and the labels used in messages."""

    __slots__ = ("name", "wave", "flux", "ivar", "mask", "res", "label", "shape", "problem")

    def __init__(self, name, wave, flux, ivar, mask, res, label, shape, problem):
        self.name, self.wave, self.flux, self.ivar = name, wave, flux, ivar
        self.mask, self.res, self.label, self.shape = mask, res, label, shape
        self.problem = problem  # "" or why the wavelengths cannot be used


def batch_arms(name, wave, flux, ivar, mask, res, label, vacuum):
    """Arms (one per spectrum) of one array-form arm. label: e.g. "" or "['B']".

    The arrays are converted to the core's dtypes here, once for the whole batch (no copy when
    they already are C-contiguous in those dtypes); each spectrum's arm is then a row view.
    """
    flux = _real_array(flux, "flux" + label)
    if flux.ndim not in (1, 2) or flux.shape[-1] == 0:
        _fail("flux%s: expected shape (n_pix,) or (n_spec, n_pix) with n_pix > 0, got %s"
              % (label, flux.shape))
    ivar = _real_array(ivar, "ivar" + label)
    if ivar.shape != flux.shape:
        _fail("ivar%s shape %s differs from flux%s shape %s" % (label, ivar.shape, label,
                                                              flux.shape))
    wave = _real_array(wave, "wave" + label)
    if wave.shape != flux.shape and wave.shape != flux.shape[-1:]:
        _fail("wave%s shape %s does not match flux%s shape %s: expected %s%s" % (
            label, wave.shape, label, flux.shape, flux.shape,
            " or (%d,) for a shared grid" % flux.shape[-1] if flux.ndim == 2 else ""))
    if mask is not None:
        mask = _real_array(mask, "mask" + label)
        if mask.shape != flux.shape:
            _fail("mask%s shape %s differs from flux%s shape %s" % (label, mask.shape, label,
                                                                  flux.shape))
    _check_units(wave, label)
    single = flux.ndim == 1
    n_spec = 1 if single else flux.shape[0]
    res = _resolution_per_spectrum(res, n_spec, flux.shape, label, single)
    wave = np.ascontiguousarray(wave, dtype=np.float64)
    if not vacuum:
        wave = _core.air_to_vacuum(wave)
    flux = np.ascontiguousarray(flux, dtype=np.float32)
    ivar = np.ascontiguousarray(ivar, dtype=np.float32)
    mask = _mask32(mask)
    shared = wave.ndim == 1 and not single
    shared_problem = _wave_problem(wave, label, flux.shape) if shared else None
    out = []
    for i in range(n_spec):
        def pick(a):
            return a if single or a.ndim == 1 else a[i]
        lab = label if single else "%s[%d]" % (label, i)
        problem = shared_problem if shared else _wave_problem(pick(wave), lab, flux.shape)
        out.append(_Arm(name, pick(wave), pick(flux), pick(ivar),
                        None if mask is None else pick(mask), res[i], lab, flux.shape, problem))
    return out


def _resolution_per_spectrum(res, n_spec, flux_shape, label, single):
    """None, R or a matrix ((ndiag, n_pix), or (n_spec, ndiag, n_pix) for a batch), per spectrum."""
    if res is None or isinstance(res, numbers.Real):
        return [res] * n_spec
    r = _real_array(res, "resolution" + label)
    n_pix = flux_shape[-1]
    if r.ndim == 2 and r.shape[1] == n_pix:
        return [r] * n_spec
    if not single and r.ndim == 3 and r.shape[0] == n_spec and r.shape[2] == n_pix:
        return [r[i] for i in range(n_spec)]
    _fail("resolution%s shape %s does not match flux%s shape %s: expected a resolving power R, "
          "a resolution matrix (ndiag, %d)%s" % (
              label, r.shape, label, flux_shape, n_pix,
              "" if single else " or one per spectrum (%d, ndiag, %d)" % (n_spec, n_pix)))


def _entry_arms(i, wave, flux, ivar, mask, res, vacuum):
    """Arms of list entry i (a list-form batch)."""
    lab = "[%d]" % i

    def same(kind, x, what):
        ok = isinstance(x, dict) if kind == "dict" else isinstance(x, (list, tuple))
        if not ok:
            _fail("%s%s: expected a %s like flux%s" % (what, lab, kind, lab))

    if isinstance(flux, dict):
        for x, what in ((wave, "wave"), (ivar, "ivar")):
            same("dict", x, what)
        for name, arm in flux.items():
            _one_dim(arm, "flux%s[%r]" % (lab, name))
        return _dict_arms(wave, flux, ivar, mask, res, vacuum, lab)[0]
    if isinstance(flux, (list, tuple)):
        for x, what in ((wave, "wave"), (ivar, "ivar")):
            same("list", x, what)
            if len(x) != len(flux):
                _fail("%s%s has %d arms, flux%s has %d" % (what, lab, len(x), lab, len(flux)))
        if mask is not None and len(mask) != len(flux):
            _fail("mask%s has %d arms, flux%s has %d" % (lab, len(mask), lab, len(flux)))
        if res is not None and not isinstance(res, numbers.Real) and len(res) != len(flux):
            _fail("resolution%s has %d entries, flux%s has %d arms" % (lab, len(res), lab,
                                                                     len(flux)))
        arms = []
        for a in range(len(flux)):
            r = res if res is None or isinstance(res, numbers.Real) else res[a]
            arm_lab = "%s[%d]" % (lab, a)
            _one_dim(flux[a], "flux" + arm_lab)
            arms += batch_arms("ARM%d" % a, wave[a], flux[a], ivar[a],
                                None if mask is None else mask[a], r, arm_lab, vacuum)
        return arms
    _one_dim(flux, "flux" + lab)
    return batch_arms("ALL", wave, flux, ivar, mask, res, lab, vacuum)


def _one_dim(x, what):
    if np.ndim(x) != 1:
        _fail("%s: a list entry must be a 1-D spectrum (n_pix,), got shape %s" % (what, _shape(x)))


def _dict_arms(wave, flux, ivar, mask, res, vacuum, lab=""):
    """Arms of a dict-form input, per spectrum: list (n_spec) of lists of _Arm."""
    names = list(flux)
    for x, what in ((wave, "wave"), (ivar, "ivar"), (mask, "mask")):
        if what == "mask" and x is None:
            continue
        if not isinstance(x, dict) or sorted(x) != sorted(names):
            _fail("%s%s: expected a dict with the arms of flux%s %s" % (what, lab, lab, names))
    if isinstance(res, dict) and sorted(res) != sorted(names):
        _fail("resolution%s: expected R, or a dict with the arms of flux%s %s"
              % (lab, lab, names))
    per_arm = []
    for name in names:
        if not isinstance(name, str):
            _fail("flux%s: arm names must be strings, got %r" % (lab, name))
        r = res[name] if isinstance(res, dict) else res
        per_arm.append(batch_arms(name, wave[name], flux[name], ivar[name],
                                   None if mask is None else mask[name], r,
                                   "%s[%r]" % (lab, name), vacuum))
    counts = {len(p) for p in per_arm}
    if len(counts) != 1 or len({np.ndim(flux[n]) for n in names}) != 1:
        _fail("flux%s: every arm must hold the same spectra, got shapes %s" % (
            lab, {n: _shape(flux[n]) for n in names}))
    return [list(arms) for arms in zip(*per_arm)]


def arms_of(wave, flux, ivar, mask, resolution, vacuum):
    """(per-spectrum lists of _Arm, layout) for any input layout; layout rebuilds models.

    vacuum: False converts the wavelengths from air to vacuum (check_vacuum first)."""
    if isinstance(flux, dict):
        if not flux:
            _fail("flux: empty dict of arms")
        specs = _dict_arms(wave, flux, ivar, mask, resolution, vacuum)
        return specs, ("dict", list(flux), np.ndim(next(iter(flux.values()))))
    if isinstance(flux, (list, tuple)):
        n = len(flux)
        if n == 0:
            _fail("flux: empty list of spectra")
        for x, what in ((wave, "wave"), (ivar, "ivar"), (mask, "mask")):
            if (x is not None or what != "mask") and (not isinstance(x, (list, tuple))
                                                      or len(x) != n):
                _fail("%s: expected a list of %d spectra like flux, got %s" % (
                    what, n, "a list of %d" % len(x) if isinstance(x, (list, tuple))
                    else "shape %s" % (_shape(x),)))
        if resolution is not None and not isinstance(resolution, numbers.Real) and (
                not isinstance(resolution, (list, tuple)) or len(resolution) != n):
            _fail("resolution: expected R or a list of %d entries like flux" % n)
        specs = []
        for i in range(n):
            r = (resolution if resolution is None or isinstance(resolution, numbers.Real)
                 else resolution[i])
            arms = _entry_arms(i, wave[i], flux[i], ivar[i], None if mask is None else mask[i],
                               r, vacuum)
            specs.append(arms if isinstance(flux[i], (list, tuple, dict)) else arms[:1])
        return specs, ("list", [type(f) for f in flux], [list(f) if isinstance(f, dict) else None
                                                         for f in flux])
    arms = batch_arms("ALL", wave, flux, ivar, mask, resolution, "", vacuum)
    return [[a] for a in arms], ("array", np.ndim(flux), None)


# ---------------------------------------------------------------- checks and core tuples

def _check_units(wave, label):
    finite = wave[np.isfinite(wave)]
    if finite.size == 0:
        return  # every value non-finite: reported per spectrum
    lo, hi = float(finite.min()), float(finite.max())
    if lo >= WAVE_MIN_A and hi <= WAVE_MAX_A:
        return
    hint = ""
    if hi < 10:
        hint = " (they look like log10(wavelength / A), e.g. SDSS loglam: pass 10**loglam)"
    elif hi < WAVE_MIN_A:
        hint = " (they look like nanometres or micrometres: pass Angstrom)"
    _fail("wave%s: values %.6g .. %.6g (shape %s) are not wavelengths in Angstrom (expected "
          "%g .. %g)%s" % (label, lo, hi, wave.shape, WAVE_MIN_A, WAVE_MAX_A, hint))


def _wave_problem(wave, label, shape):
    """Why a 1-D wavelength array cannot be used ("" if it can)."""
    bad = ~np.isfinite(wave)
    if bad.any():
        j = int(np.argmax(bad))
        return ("wave%s: %d non-finite wavelengths (first at pixel %d: %r); flux shape %s"
                % (label, int(bad.sum()), j, float(wave[j]), shape))
    steps = np.diff(wave)
    if (steps <= 0).any():
        j = int(np.argmax(steps <= 0)) + 1
        return ("wave%s: not strictly increasing at pixel %d (%r after %r); flux shape %s"
                % (label, j, float(wave[j]), float(wave[j - 1]), shape))
    return ""


def _all_masked(arms):
    for a in arms:
        ok = np.isfinite(a.flux) & np.isfinite(a.ivar) & (a.ivar > 0)
        if a.mask is not None:
            ok &= a.mask == 0
        if ok.any():
            return False
    return True


def _resolution_args(a):
    """(R, matrix) for the core: R NaN when not given (matrix or the config's default_R)."""
    r = a.res
    if r is None:
        return math.nan, None
    if isinstance(r, tuple):  # (R, matrix or None) from a reader (fit_spectra)
        return float(r[0]), r[1]
    if isinstance(r, numbers.Real):
        if not (math.isfinite(r) and r >= RESOLUTION_MIN):
            _fail("resolution=%r: expected a resolving power R = lambda / FWHM >= %g (LAMOST "
                  "about 1800, SDSS about 2000)%s" % (
                      r, RESOLUTION_MIN,
                      "; %r looks like a FWHM in Angstrom" % r if 0 < r < RESOLUTION_MIN else ""))
        return float(r), None
    m = np.ascontiguousarray(r, dtype=np.float32)
    nd = m.shape[0]
    if nd % 2 == 0 or nd > MAX_DIAGONALS:
        _fail("resolution%s: a resolution matrix needs an odd number of diagonals <= %d "
              "(DESI: 11), got shape %s" % (a.label, MAX_DIAGONALS, m.shape))
    return math.nan, m


def _mask32(m):
    if m is None:
        return None
    if m.dtype == np.int32:
        return np.ascontiguousarray(m)
    # Nonzero (or NaN) = bad pixel, as the readers treat LAMOST's float masks.
    return np.ascontiguousarray(m != 0, dtype=np.int32)


def core_spectra(specs, *, errors, targetid=None, objtypes=None, sources=None, rows=None,
                 problems=None):
    """Check every spectrum and build _core.fit_arrays' spectrum tuples.

    errors="raise": a spectrum whose wavelengths are not finite / not increasing or whose pixels
    are all masked raises ValueError; "flag": it gets a failure row (RVS_WARN BAD_INPUT or
    NO_PIXELS, SUCCESS False), as ``velox fit`` does for such targets in files.
    objtypes, sources, rows, problems: per spectrum (DESI OBJTYPE, SOURCE_FILE, ROW_IN_FILE, a
    reader's problem); rows defaults to the index in the batch.
    """
    if errors not in ("raise", "flag"):
        _fail("errors=%r: expected 'raise' or 'flag'" % (errors,))
    ids = _targetids(targetid, len(specs))
    out = []
    for i, arms in enumerate(specs):
        arm_problem = "; ".join(a.problem for a in arms if a.problem)
        if errors == "raise" and arm_problem:
            _fail(arm_problem)
        reader_problem = problems[i] if problems else ""
        problem = "; ".join(p for p in (reader_problem, arm_problem) if p)
        if errors == "raise" and not problem and _all_masked(arms):
            _fail("spectrum %d (flux%s, shape %s): no usable pixel: every pixel has mask != 0, "
                  "ivar <= 0 or a non-finite flux/ivar" % (i, arms[0].label, arms[0].shape))
        core_arms = [(a.name, a.wave, a.flux, a.ivar, a.mask) + _resolution_args(a)
                     for a in arms]
        out.append((core_arms, ids[i], sources[i] if sources else "",
                    rows[i] if rows else i, problem, objtypes[i] if objtypes else ""))
    return out


def _targetids(targetid, n):
    if targetid is None:
        return [-1] * n
    t = np.atleast_1d(np.asarray(targetid))
    if t.dtype.kind not in "iu" or t.ndim != 1 or len(t) != n:
        _fail("targetid: expected %d integers (one per spectrum), got dtype %s shape %s"
              % (n, t.dtype, t.shape))
    return [int(x) for x in t]


def models_like(models, layout):
    """Best-fit models (per spectrum, per arm) in the layout of the caller's flux."""
    kind, a, b = layout
    if kind == "array":
        m = np.stack([arms[0] for arms in models])
        return m[0] if a == 1 else m
    if kind == "dict":
        out = {name: np.stack([arms[k] for arms in models]) for k, name in enumerate(a)}
        return {name: m[0] for name, m in out.items()} if b == 1 else out
    result = []
    for arms, entry_type, names in zip(models, a, b):
        if names is not None:
            result.append(dict(zip(names, arms)))
        elif issubclass(entry_type, (list, tuple)):
            result.append(list(arms))
        else:
            result.append(arms[0])
    return result
