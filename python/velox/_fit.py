"""velox.fit, fit_spectra, fit_files and model: the CLI's fit (FitEngine) on arrays and files."""

import math
import os
import warnings

import numpy as np

from . import _core
from ._catalog import as_output, records_to_rows
from ._inputs import arms_of, batch_arms, check_vacuum, core_spectra, models_like
from ._library import as_library, check_engine_args, config_file
from ._specutils import arrays_of as specutils_arrays
from ._specutils import is_specutils

_GPU_CHUNK = 2048  # spectra per GPU batch (velox fit's --device auto minimum, FitOptions)


def _chunk(engine):
    return _GPU_CHUNK if engine.uses_gpu else max(64, 4 * engine.threads)


def _fit_rows(engine, spectra, fmt, return_models):
    """The catalog rows (structured array) and models of _core.fit_arrays on one engine."""
    records, models = _core.fit_arrays(engine, spectra, fmt, bool(return_models),
                                       _chunk(engine))
    return records_to_rows(records), models


def _run(library, spectra, fmt, *, config, device, threads, resolution_matrix, return_models,
         table):
    engine = library.engine(config, device, threads, resolution_matrix)
    rows, models = _fit_rows(engine, spectra, fmt, return_models)
    return as_output(rows, table), models


def fit(wave, flux=None, ivar=None, *, library, mask=None, resolution=None, vacuum=True,
        format=None, device="auto", threads=0, config=None, targetid=None, return_models=False,
        table=False, errors="raise"):
    """Fit radial velocity and stellar labels of spectra held in arrays.

    The same fit as ``velox fit`` (masking, CCF, chi^2 grid, Levenberg-Marquardt with profiled
    Legendre continua, Hessian errors; docs/design.md), through the same engine: a spectrum gives
    the same catalog row, bit for bit, whether it is read from a file or passed here.

    Parameters
    ----------
    wave, flux, ivar : array, dict of arrays or list; or a specutils spectrum
        Wavelength [Angstrom; vacuum unless ``vacuum=False``], flux [any units] and inverse
        variance [1/flux^2; <= 0 marks unusable pixels]. Or, where specutils is installed, a
        ``specutils.Spectrum`` (``Spectrum1D``; 1-D flux, or 2-D for spectra sharing the
        spectral axis) or a list of them as ``wave``, without flux and ivar: any spectral unit
        (converted to Angstrom), flux in its unit, ivar from its uncertainty (InverseVariance,
        StdDevUncertainty or VarianceUncertainty; required), mask from its mask (True = bad).
        specutils does not record air or vacuum: ``vacuum`` says it, as for arrays. Layouts:

        - 1-D arrays ``(n_pix,)``: one spectrum;
        - 2-D arrays ``(n_spec, n_pix)``: a batch; ``wave`` may be ``(n_pix,)`` (shared grid);
        - a dict ``{"B": ..., "R": ..., "Z": ...}`` of such arrays: a multi-arm spectrograph
          (arm names B/R/Z fill the per-arm CHISQ_/NPIX_/SN_ columns);
        - a list, one entry per spectrum (spectra of different lengths): each a 1-D array, a
          list of 1-D arrays (arms) or a dict of 1-D arrays.

        Arrays of dtype float64 (wave), float32 (flux, ivar) and int32 (mask), C-contiguous, are
        read in place; others are converted (flux and ivar are fitted in float32, as the readers
        store them).
    library : velox.Library or path
        Template library (``velox.Library.load``).
    mask : same layout as flux, optional
        Nonzero (or NaN) = bad pixel. Pixels with non-finite flux/ivar or ivar <= 0 are always
        left out, and so are pixels outside the library's coverage and the config's telluric
        bands (fit.mask_bands_A).
    resolution : None, float, array or dict
        Instrument resolution: a resolving power R = lambda / FWHM for every arm (LAMOST about
        1800); a DESI resolution matrix (desispec layout, ``(ndiag, n_pix)``, or
        ``(n_spec, ndiag, n_pix)`` for a batch); or a dict per arm of these. None: the
        format's ``default_R`` (config), else R = 2000.
    vacuum : bool
        True: wavelengths are in vacuum (LAMOST, SDSS, DESI). False: in air; converted with the
        IAU formula (Morton 2000). Must be a bool.
    format : None or "lamost-dr8", "lamost-dr10", "sdss", "desi"
        The survey the arrays come from: its configured defaults apply as for its files, i.e.
        the systematic error floors added to the errors (``*_ERR`` vs ``*_ERR_STAT``,
        docs/quality.md), the split of one-arm spectra for VRAD_B/VRAD_R, the per-arm zero
        points and scatter (docs/rv-zero-point.md) and ``default_R``. "FORMAT:SURVEY" (e.g.
        "desi:lamost-regrid"): the survey's own calibrations of the format, as for a file whose
        primary header says SURVEY. None: no floors, no split (the config's entries for
        "arrays" if it has any).
    device : "auto", "cpu" or "gpu"
        auto uses a CUDA device when one exists and the batch is large enough (docs/gpu.md).
    threads : int
        CPU threads; 0 = every core available. Results do not depend on it.
    config : None, path or dict
        Fit configuration: a YAML file with a ``fit:`` section or a dict of its keys
        (docs/user-guide.md), e.g. ``{"vmin_kms": -500, "vmax_kms": 500}``.
    targetid : int or sequence of int, optional
        TARGETID of each spectrum (default -1). ROW_IN_FILE is the index in the batch;
        SOURCE_FILE is empty.
    return_models : bool
        Also return the best-fit model (continuum x template) in the layout of ``flux``:
        float64, NaN at pixels the fit did not use or for failed fits.
    table : bool
        Return an ``astropy.table.Table`` (units, descriptions) instead of the array.
    errors : "raise" or "flag"
        What a spectrum with non-finite or non-increasing wavelengths, or with every pixel
        masked, does: raise ValueError, or get a failure row (RVS_WARN BAD_INPUT / NO_PIXELS,
        SUCCESS False), as ``velox fit`` writes for such targets.

    Returns
    -------
    rows : numpy structured array, shape (n_spec,) (also for one spectrum)
        Exactly the catalog's columns (docs/data-model.md), dtype ``velox.CATALOG_DTYPE``:
        VRAD [km/s] in the input's frame, TEFF [K], LOGG, FEH [dex], their errors, CHISQ_*,
        RVS_WARN, SUCCESS, ... Units: ``velox.UNITS`` and ``rows.dtype.metadata["units"]``.
        An astropy Table when ``table=True``.
    models : only with ``return_models=True``; see above.

    Raises
    ------
    ValueError
        Shapes that do not match (naming the argument and its shape), wavelengths not in
        Angstrom, non-finite or non-increasing wavelengths, all pixels masked (errors="raise"),
        ``vacuum`` not a bool, R not a resolving power, a bad format / config / device /
        threads.
    TypeError
        ``library`` is not a Library or a path.
    """
    vacuum = check_vacuum(vacuum)
    if flux is None and ivar is None and (is_specutils(wave) or (
            isinstance(wave, (list, tuple)) and wave and all(map(is_specutils, wave)))):
        if mask is not None:
            raise ValueError("mask: a specutils spectrum carries its own mask; give it there")
        wave, flux, ivar, mask = specutils_arrays(wave)
    elif flux is None or ivar is None:
        raise ValueError("flux and ivar are required (or a specutils Spectrum as the only "
                         "positional argument)")
    if format == "auto" or not isinstance(format, (str, type(None))):
        raise ValueError("format=%r: expected None or a survey format: lamost-dr8, lamost-dr10, "
                         "sdss, desi" % (format,))
    lib = as_library(library)
    specs, layout = arms_of(wave, flux, ivar, mask, resolution, vacuum)
    spectra = core_spectra(specs, errors=errors, targetid=targetid)
    rows, models = _run(lib, spectra, format or "arrays", config=config, device=device,
                        threads=threads,
                        resolution_matrix=None, return_models=return_models, table=table)
    return (rows, models_like(models, layout)) if return_models else rows


def fit_spectra(spectra, *, library, device="auto", threads=0, config=None,
                resolution_matrix=None, return_models=False, table=False, errors="flag"):
    """Fit ``velox.Spectrum`` objects (from ``velox.read_spectra``) held in memory.

    Identity (TARGETID, SOURCE_FILE, ROW_IN_FILE), each arm's R or resolution matrix and the
    reader's problems are kept, and non-stellar DESI targets (OBJTYPE != TGT) get a NOT_FITTED
    row: a fitted spectrum's row equals ``velox fit``'s on its file except for the FIBERMAP
    columns (TARGET_RA, ..., EXPID). There is no target selection (config ``select:``,
    ``--objtypes``, COADD_FIBERSTATUS): ``fit_files`` applies it. resolution_matrix: None (config), True
    or False (DESI: matrix forward model or a Gaussian LSF per arm). Other arguments as in
    ``velox.fit``; errors defaults to "flag" (as the CLI). return_models: the models per
    spectrum, a list of arrays (one per arm, on the arm's pixels).
    """
    lib = as_library(library)
    if isinstance(spectra, (list, tuple)) and not spectra:
        return as_output(records_to_rows(np.zeros(0, np.uint8)), table)
    specs, fmt = [], None
    for s in spectra:
        fmt = fmt or s.format
        if s.format != fmt:
            raise ValueError("spectra: mixed formats %s and %s: fit them separately (the format "
                             "picks the default resolution)" % (fmt, s.format))
        specs.append(_arms_of_spectrum(s)[0])
    # Each file's SURVEY (DESI) picks its survey's calibrations ("format:SURVEY", e.g. the
    # zero points of desi:lamost-regrid): spectra of different surveys are fitted group by group
    # and their rows put back in the input order.
    groups = {}
    for i, s in enumerate(spectra):
        groups.setdefault(getattr(s, "survey", ""), []).append(i)
    engine = lib.engine(config, device, threads, resolution_matrix)
    records, models = [None] * len(spectra), [None] * len(spectra)
    for survey, idx in groups.items():
        spectra_t = core_spectra([specs[i] for i in idx], errors=errors,
                                 targetid=[spectra[i].targetid for i in idx],
                                 objtypes=[spectra[i].meta.get("OBJTYPE", "") for i in idx],
                                 sources=[spectra[i].source_file for i in idx],
                                 rows=[spectra[i].row_in_file for i in idx],
                                 problems=[spectra[i].problem for i in idx])
        rows_g, mod = _fit_rows(engine, spectra_t, fmt + (":" + survey if survey else ""),
                                return_models)
        for k, i in enumerate(idx):
            records[i] = rows_g[k:k + 1]
            if return_models:
                models[i] = mod[k]
    rows = as_output(np.concatenate(records), table)
    return (rows, models) if return_models else rows


def fit_files(paths, *, library, device="auto", threads=0, config=None, format="auto",
              objtypes=None, targetids=None, targetid_file=None, min_sn=None,
              include_unselected=False, resolution_matrix=None, table=False, _epochs=None):
    """Fit spectrum files as ``velox fit FILES`` does, returning the rows instead of a catalog.

    paths: a path or a list of paths (LAMOST, SDSS/BOSS, DESI; format "auto" detects each).
    The DESI selection options mirror the CLI's (docs/desi.md): objtypes (target-mask names,
    globs or COLUMN:BIT), targetids, targetid_file, min_sn, include_unselected. Rows follow the
    input order (a path given twice is fitted once); an unreadable file gives one failure row
    (RVS_WARN BAD_INPUT) and a ``UserWarning`` naming it. Other arguments as in ``velox.fit``.
    Raises ValueError for a bad option or config or no paths, OSError for an unreadable
    library.
    """
    lib = as_library(library)
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    opt = _core.FitOptions()
    opt.format = format
    opt.device = device
    opt.threads = threads
    opt.resolution_matrix = -1 if resolution_matrix is None else int(bool(resolution_matrix))
    opt.objtypes = list(objtypes or [])
    opt.targetids = [int(t) for t in (targetids if targetids is not None else [])]
    opt.targetid_file = os.fspath(targetid_file) if targetid_file else ""
    opt.min_sn = math.nan if min_sn is None else float(min_sn)
    opt.include_unselected = bool(include_unselected)
    if _epochs is not None:
        opt.epochs = True
        opt.group_by = str(_epochs)
    check_engine_args(device, threads)
    with config_file(config, "fit") as cfg:
        opt.config = cfg
        records, failures = _core.fit_files(lib._core, [os.fspath(p) for p in paths], opt)
    for reason in failures:
        warnings.warn(reason, stacklevel=2 if _epochs is None else 3)
    if _epochs is not None:
        rows = records_to_rows(records)
        return (as_output(rows[rows["EPOCH"] < 0], table),
                as_output(rows[rows["EPOCH"] >= 0], table))
    return as_output(records_to_rows(records), table)


def fit_epochs(paths, *, library, group_by="TARGETID", **kwargs):
    """Fit every exposure of each star with shared labels, as ``velox fit --epochs`` does
    (docs/epochs.md), returning ``(stars, epochs)`` instead of a catalog.

    paths: DESI spectra files (one row per exposure), SDSS/BOSS spec files (their per-exposure
    frames) or LAMOST files; group_by: ``"TARGETID"``, or a header key such as ``"OBJNAME"``
    that joins files into stars. ``stars`` has one row per star (VRAD the weighted mean over its
    epochs, N_EPOCHS, VRAD_CHISQ_CONST, VRAD_LOGP_CONST, VRAD_MAXDIFF_SIG, FIT_INFO bit 6
    RV_VARIABLE); ``epochs`` one row per exposure (EPOCH, EXPID, MJD, VRAD with the labels held
    at the star's; TARGETID the star's). Both have every catalog column (the file's /epochs keeps
    a subset). Other keyword arguments as in ``velox.fit_files``; the same errors.
    """
    if not group_by:
        raise ValueError("group_by: empty key")
    return fit_files(paths, library=library, _epochs=group_by, **kwargs)


def model(library, teff, logg, feh, vrad, wave, resolution=None, *, alphafe=None, vacuum=True):
    """The emulated template at wavelengths ``wave``, for overplotting a fit.

    teff [K], logg [dex], feh [dex] (and alphafe [dex] for libraries with [alpha/Fe]) must lie
    inside ``library.label_ranges``. vrad [km/s]: relativistic Doppler shift. wave: 1-D array,
    Angstrom, vacuum (``vacuum=False``: air, converted). resolution: R = lambda/FWHM of the
    instrument (the templates are broadened to it, never sharpened), or None for the templates'
    own resolution. Returns float64 normalised flux (no continuum; multiply by the continuum, or
    use ``velox.fit(..., return_models=True)`` for the fitted model), NaN outside the template
    coverage. Same kernel as the fit (kern::template_at_pixels).
    Raises ValueError for labels outside the library, a bad R or wavelengths.
    """
    lib = as_library(library)
    vacuum = check_vacuum(vacuum)
    labels = _stored_labels(lib, {"TEFF": teff, "LOGG": logg, "FEH": feh, "ALPHAFE": alphafe})
    w = np.asarray(wave)
    if w.ndim != 1 or w.dtype.kind not in "fiu":
        raise ValueError("wave: expected a 1-D array of wavelengths, got dtype %s shape %s"
                         % (w.dtype, w.shape))
    w = np.ascontiguousarray(w, dtype=np.float64)
    if not vacuum:
        w = _core.air_to_vacuum(w)
    R = math.nan
    if resolution is not None:
        if not (isinstance(resolution, (int, float)) and math.isfinite(resolution)
                and resolution >= 100):
            raise ValueError("resolution=%r: expected a resolving power R = lambda / FWHM >= 100"
                             % (resolution,))
        R = float(resolution)
    return lib._core.model(labels, float(vrad), w, R)


def _stored_labels(lib, values):
    """The labels as the library stores them (log10 Teff, ...) from physical ``values``
    {"TEFF": K, "LOGG": dex, ...}; ValueError for a missing one or one outside the library."""
    labels = []
    ranges = lib.label_ranges
    for name in ranges:
        v = values.get(name)
        if v is None:
            raise ValueError("%s: required by this library (labels %s)" % (name.lower(),
                                                                          list(ranges)))
        lo, hi = ranges[name]
        if not (lo <= float(v) <= hi):
            raise ValueError("%s=%r is outside the library's range %.6g .. %.6g"
                             % (name.lower(), v, lo, hi))
        labels.append(math.log10(float(v)) if name == "TEFF" else float(v))
    return labels


def model_of_row(row, spectrum, *, library, config=None):
    """The fitted model of a catalog row on its spectrum, without fitting it again.

    For plots of a catalog written without ``--save-models``. The catalog stores no continuum,
    so this evaluates the fit's own forward model (template x per-arm Legendre continuum
    profiled by least squares) on the spectrum prepared as the fit prepares it (masks, telluric
    bands, per-arm velocity zero points, resolution matrices, the emulator's variance), with
    TEFF, LOGG, FEH (ALPHAFE) and VSINI held at the row's. VRAD alone is re-solved from the
    row's, as ``velox fit --epochs`` re-fits each epoch (a few Newton steps, one 5-sigma clipped
    re-fit; no CCF, template grid or Levenberg-Marquardt): milliseconds per spectrum. With the
    fit's config, library and spectrum this is the ``--save-models`` model up to float32
    rounding and the re-solved VRAD's convergence tolerance.

    Parameters
    ----------
    row : catalog row
        An element of a catalog (``velox.read_catalog``, h5py) or a mapping with VRAD [km/s],
        TEFF [K], LOGG, FEH [dex], ALPHAFE (libraries with [alpha/Fe]) and VSINI [km/s; NaN or
        absent: no rotation].
    spectrum : velox.Spectrum
        The row's spectrum (``velox.read_spectra`` of its SOURCE_FILE, the entry with its
        TARGETID); its format and survey pick the configured calibrations, as in the fit.
    library : velox.Library or path
        The fit's library (the catalog's provenance attribute ``templates_path``).
    config : None, path or dict
        The fit's configuration (the catalog's attribute ``config_yaml``, written to a file);
        None: the defaults.

    Returns
    -------
    models : list of float64 arrays, one per arm of ``spectrum.arms``, on the arm's pixels; NaN
        at pixels the fit does not use (masked, outside the templates, clipped), all NaN where
        the spectrum cannot be fitted.
    held : structured array of one row (``velox.CATALOG_DTYPE``): this held fit's VRAD (its
        per-arm velocities), CHISQ_TOT, NPIX_TOT, RVS_WARN ... (the labels are the row's).

    Raises
    ------
    ValueError
        VRAD not finite, a label missing, not finite or outside the library's range.
    """
    lib = as_library(library)

    def get(key, default=None):  # a structured-array element, an astropy Row or a mapping
        try:
            return row[key]
        except (KeyError, ValueError, IndexError):
            return default

    vrad = float(get("VRAD", math.nan))
    if not math.isfinite(vrad):
        raise ValueError("row: VRAD=%r is not finite (a failed fit has no model)" % vrad)
    values = {k: get(k) for k in ("TEFF", "LOGG", "FEH", "ALPHAFE")}
    labels = _stored_labels(lib, {k: v for k, v in values.items()
                                  if v is not None and math.isfinite(float(v))})
    vsini = float(get("VSINI", math.nan))
    theta = [vrad] + labels + [vsini if math.isfinite(vsini) and vsini > 0 else 0.0]
    arms, fmt = _arms_of_spectrum(spectrum)
    spectra_t = core_spectra([arms], errors="flag", targetid=[spectrum.targetid],
                             objtypes=[spectrum.meta.get("OBJTYPE", "")],
                             sources=[spectrum.source_file], rows=[spectrum.row_in_file],
                             problems=[spectrum.problem])
    engine = lib.engine(config, "cpu", 1)
    records, models = _core.model_held(engine, spectra_t, fmt, [theta])
    return list(models[0]), records_to_rows(records)


def _arms_of_spectrum(s):
    """The checked arms of a velox.Spectrum for core_spectra (none for a reader's problem: a
    BAD_INPUT row), and its format in _core's form ("desi:SURVEY" with a survey)."""
    arms = []
    for arm in ([] if s.problem else s.arms):
        lab = "[%s %d %s]" % (s.source_file, s.row_in_file, arm.name)
        a, = batch_arms(arm.name, arm.wave, arm.flux, arm.ivar, arm.mask, None, lab, True)
        a.res = (arm.resolution_R, arm.resolution)  # both, as the reader gives them
        arms.append(a)
    survey = getattr(s, "survey", "")
    return arms, s.format + (":" + survey if survey else "")
