"""velox.Library: a template library (emulator of the template spectra), loaded once."""

import collections
import json
import os
import tempfile

from . import _core

_DEVICES = ("auto", "cpu", "gpu")
_MAX_ENGINES = 4  # fit engines kept per library (thread pool, convolved bases, GPU state)


class Library:
    """A velox template library: an emulator of template flux as a function of the labels
    (Teff, log g, [Fe/H][, [alpha/Fe]]) on a grid uniform in ln(vacuum wavelength).

    Make one with ``Library.load(path)`` (a file from ``velox templates build``) or
    ``Library.build(template_dir)``. Layout and build steps: docs/data-model.md ("Template
    library") and docs/design.md.

    Attributes
    ----------
    path : str
        The file it was loaded from or saved to ("" if built without ``output``).
    checksum : str
        FNV-1a 64 checksum of the grid, basis and emulator arrays (the catalogs' provenance
        attribute ``templates_checksum``).
    label_names : list of str
        Stored labels, e.g. ``["LOG10_TEFF", "LOGG", "FEH"]``.
    label_ranges : dict
        ``{"TEFF": (min, max) [K], "LOGG": (min, max) [dex], "FEH": (min, max) [dex], ...}``:
        the box of the training labels, which bounds every fit.
    wave_range_vac_A : (float, float)
        Wavelength coverage of the template grid, vacuum Angstrom.
    fwhm_A, resolution_R : float
        Line-spread function of the templates (constant FWHM in Angstrom, e.g. 2.5 for MILES;
        or constant R); the other is NaN.
    n_train, n_components, n_tpix, dlnlam
        Training stars, principal components, grid pixels and grid step in ln(lambda).
    train_names : list of str
        Names of the training templates.
    attrs : dict
        Build parameters, validation figures and provenance stored in the file.
    """

    def __init__(self, core):
        self._core = core
        self._engines = collections.OrderedDict()

    @classmethod
    def load(cls, path):
        """Load a library file (HDF5 from ``velox templates build`` or ``Library.build``).

        Raises OSError if the file cannot be read, is not a library or fails its checksum.
        """
        return cls(_core.Library.load(os.fspath(path)))

    @classmethod
    def build(cls, template_dir, *, config=None, output=None):
        """Build a library from a template directory, as ``velox templates build``.

        template_dir: MILES layout (``fits/`` + ``MILES_params.db``; air wavelengths, converted
        to vacuum) or PHOENIX layout (docs/user-guide.md). config: YAML file with a
        ``templates:`` section, or a dict of its keys. output: write the library there too.
        Takes minutes for the 985 MILES stars (the Gaussian-process hyper-parameter search).
        Raises ValueError (configuration, too few usable templates) or OSError (reading, writing).
        """
        with config_file(config, "templates") as cfg:
            core = _core.Library.build(os.fspath(template_dir), cfg,
                                       "" if output is None else os.fspath(output))
        return cls(core)

    def info(self):
        """A dict of the library's description (the attributes above, less the name lists)."""
        keys = ("path", "checksum", "label_names", "label_ranges", "wave_range_vac_A", "fwhm_A",
                "resolution_R", "n_train", "n_components", "n_tpix", "dlnlam")
        return {k: getattr(self, k) for k in keys}

    def __repr__(self):
        lo, hi = self.wave_range_vac_A
        ranges = ", ".join("%s %.4g..%.4g" % (k, a, b) for k, (a, b) in self.label_ranges.items())
        return ("<velox.Library %s: %d training stars, %.0f-%.0f A (vacuum), %s, checksum %s>"
                % (self.path or "(in memory)", self.n_train, lo, hi, ranges, self.checksum))

    def engine(self, config=None, device="auto", threads=0, resolution_matrix=None):
        """The fit engine for these settings, made on first use and reused afterwards."""
        check_engine_args(device, threads)
        rm = -1 if resolution_matrix is None else int(bool(resolution_matrix))
        key = (_config_key(config), device, threads, rm)
        if key in self._engines:
            self._engines.move_to_end(key)
            return self._engines[key]
        with config_file(config, "fit") as cfg:
            engine = _core.Engine(self._core, cfg, device, threads, rm)
        self._engines[key] = engine
        while len(self._engines) > _MAX_ENGINES:
            self._engines.popitem(last=False)
        return engine


_ATTRIBUTES = ("path", "checksum", "label_names", "label_ranges", "n_label", "n_train",
               "n_components", "n_tpix", "dlnlam", "wave_range_vac_A", "fwhm_A", "resolution_R",
               "train_names", "attrs")
for _name in _ATTRIBUTES:
    setattr(Library, _name, property(lambda self, _n=_name: getattr(self._core, _n)))


def check_engine_args(device, threads):
    """ValueError unless device is auto/cpu/gpu and threads an integer >= 0."""
    if device not in _DEVICES:
        raise ValueError("device=%r: expected one of %s" % (device, ", ".join(_DEVICES)))
    if not isinstance(threads, int) or isinstance(threads, bool) or threads < 0:
        raise ValueError("threads=%r: expected an integer >= 0 (0: every core available)"
                         % (threads,))


def as_library(library):
    """A Library from a Library or a path (loaded once per path and modification time)."""
    if isinstance(library, Library):
        return library
    if isinstance(library, (str, os.PathLike)):
        path = os.path.abspath(os.fspath(library))
        key = (path, os.stat(path).st_mtime_ns) if os.path.exists(path) else (path, None)
        if key not in _loaded:
            _loaded.clear()
            _loaded[key] = Library.load(path)
        return _loaded[key]
    raise TypeError("library=%r: expected a velox.Library (velox.Library.load(path)) or the path "
                    "of a library file" % (library,))


_loaded = {}


def _config_key(config):
    if config is None:
        return ""
    if isinstance(config, dict):
        return json.dumps(config, sort_keys=True, default=str)
    return ("path", os.path.abspath(os.fspath(config)))


class config_file:
    """Context manager: the path of a YAML config for the core ("" for none).

    config: None, a path (str or PathLike), or a dict of the ``section`` keys (or of whole
    sections, {"fit": {...}}), written as JSON (valid YAML) to a temporary file. Errors of the
    core naming the temporary file are re-raised naming "config".
    """

    def __init__(self, config, section):
        self.config, self.section, self.tmp = config, section, None

    def __enter__(self):
        c = self.config
        if c is None:
            return ""
        if isinstance(c, dict):
            doc = c if self.section in c else {self.section: c}
            fd, self.tmp = tempfile.mkstemp(prefix="velox-config-", suffix=".yaml")
            with os.fdopen(fd, "w") as f:
                json.dump(doc, f, default=float)
            return self.tmp
        if not isinstance(c, (str, os.PathLike)):
            raise TypeError("config=%r: expected a YAML file path or a dict" % (c,))
        path = os.fspath(c)
        if not os.path.isfile(path):
            raise ValueError("config=%r: no such file" % path)
        return path

    def __exit__(self, exc_type, exc, tb):
        if self.tmp:
            os.unlink(self.tmp)
            if isinstance(exc, ValueError) and self.tmp in str(exc):
                raise ValueError(str(exc).replace(self.tmp, "config")) from None
        return False
