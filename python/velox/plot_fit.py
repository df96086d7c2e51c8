#!/usr/bin/python3
"""Plot one velox fit: data, model and residuals per arm, and zooms on diagnostic lines.

usage: velox-plot-fit CATALOG.h5 INPUT [TARGETID] [--out PNG] [--json JSON] [--templates LIB]
       (from a checkout: scripts/plot_fit.py, the same command)

CATALOG.h5 is a `velox fit` catalog; INPUT the file the target was read from, in any format
velox reads (LAMOST DR8/DR10, SDSS/BOSS spec-*.fits, DESI coadd/spectra), read with velox's own
readers (velox.read_spectra: the pixels, masks and resolution the fit saw). TARGETID defaults
to the first target of INPUT in the catalog.

The model is the catalog's /models/<arm> where `velox fit --save-models` wrote them. Otherwise
it is velox.model_of_row: the fit's own forward model at the catalog row's TEFF, LOGG, FEH and
VSINI, with the continuum profiled again (the catalog stores none) and VRAD re-solved from the
row's (milliseconds, no refit of the labels; docs/python.md), under the catalog's own fit
config (attribute config_yaml) and library (templates_path, or --templates where the library
has moved; a library whose checksum differs from templates_checksum is refused). That needs
velox's Python module (pip install, or PYTHONPATH=build/python in a checkout).

The figure: one column per arm (LAMOST and SDSS files hold one spectrum, blue and red joined;
DESI has B, R, Z arms): data with the model on top (x: vacuum wavelength in Angstrom, as the
files store it: LAMOST VACUUM=T, SDSS and DESI are vacuum; y: flux in the file's unit),
residuals in sigma below; then a zoom on each diagnostic line inside the spectrum's range: Hbeta
4861, Mg b 5167-5184, Na D 5890/5896, Halpha 6563, the Ca II triplet 8498/8542/8662 (air
wavelengths, converted to vacuum and shifted by VRAD; dashed). Pixels the fit did not use
(masked, ivar <= 0, non-finite, outside the templates, telluric bands, clipped) are grey,
masked ones also ticked in magenta. The title and stdout give the fitted values with their
uncertainties and RVS_WARN and FIT_INFO decoded by name (the catalog's RVS_WARN_BITS and
FIT_INFO_BITS attributes). --json writes what was plotted (values, arms, zoom windows, model
source).

A catalog of `velox fit --epochs` (dataset /epochs, no models) gives instead the star's epochs:
VRAD of every epoch against its MJD with the errors, the star's weighted mean and its error, and
N_EPOCHS, VRAD_CHISQ_CONST, VRAD_LOGP_CONST, VRAD_MAXDIFF_SIG and RV_VARIABLE in the title; the
epochs are also printed as a table (docs/epochs.md). INPUT then only picks the star (any of its
files). Needs numpy, h5py and matplotlib.
"""
import argparse
import json
import os
import sys
import tempfile

import h5py
import numpy as np

try:
    from . import _scripts
except ImportError:  # run as a file: _scripts.py is beside it
    import _scripts

C_KMS = 299792.458
# Flux units of the surveys' data models (their files have no BUNIT in the spectrum's HDU).
FLUX_UNIT = {
    "lamost-dr8": "relative, uncalibrated",
    "lamost-dr10": "relative, uncalibrated",
    "sdss": "1e-17 erg s^-1 cm^-2 Å^-1",
    "desi": "1e-17 erg s^-1 cm^-2 Å^-1",
}
SURVEY_NAME = {"lamost-dr8": "LAMOST DR8", "lamost-dr10": "LAMOST DR10", "sdss": "SDSS/BOSS",
               "desi": "DESI"}
# Diagnostic lines: name, rest air wavelengths [A] (NIST), zoom window in air [A].
LINES = [
    ("Hβ", (4861.35,), (4815.0, 4910.0)),
    ("Mg b", (5167.32, 5172.68, 5183.60), (5140.0, 5210.0)),
    ("Na D", (5889.95, 5895.92), (5865.0, 5920.0)),
    ("Hα", (6562.79,), (6515.0, 6610.0)),
    ("Ca II", (8498.02, 8542.09, 8662.14), (8480.0, 8685.0)),
]
ARM_COLOR = {"B": "tab:blue", "R": "tab:red", "Z": "tab:brown"}


def doppler(vrad):
    """Relativistic Doppler factor lambda_obs / lambda_rest for vrad [km/s]."""
    b = vrad / C_KMS
    return np.sqrt((1 + b) / (1 - b))


def zoom_windows(arms, vrad, air_to_vacuum):
    """The diagnostic lines inside the spectrum: per line its name, vacuum observed wavelengths,
    window and the arm (of ``arms``: name -> wavelength array) that covers the window best."""
    out = []
    for name, air, (lo, hi) in LINES:
        f = doppler(vrad if np.isfinite(vrad) else 0.0)
        lines = air_to_vacuum(np.array(air)) * f
        win = air_to_vacuum(np.array([lo, hi])) * f
        best, cover = None, 0.0
        for arm, w in arms.items():
            if not (w[0] <= lines.min() and lines.max() <= w[-1]):
                continue
            c = (min(w[-1], win[1]) - max(w[0], win[0])) / (win[1] - win[0])
            if c > cover:
                best, cover = arm, c
        if best is not None:
            out.append({"name": name, "rest_air_A": list(air), "line_vacuum_A": lines.tolist(),
                        "window_A": win.tolist(), "arm": best})
    return out


def find_row(f, a, source):
    """Index of the target's row in /catalog (and the TARGETID picked)."""
    cat = f["catalog"]
    names = cat["SOURCE_FILE"]
    from_file = np.array([s.decode() == source for s in names])
    tid = cat["TARGETID"]
    if a.targetid is None:
        if not from_file.any():
            sys.exit(f"{a.catalog}: no row from {source}")
        a.targetid = int(tid[np.nonzero(from_file)[0][0]])
    idx = np.nonzero((tid == a.targetid) & from_file)[0]
    if len(idx) == 0:
        idx = np.nonzero(tid == a.targetid)[0]
    if len(idx) == 0:
        sys.exit(f"{a.catalog}: TARGETID {a.targetid} not in /catalog")
    return int(idx[0])


def import_velox():
    try:
        import velox
    except ImportError as e:
        sys.exit(f"needs velox's Python module ({e}): pip install it, or in a checkout set "
                 "PYTHONPATH=build/python")
    return velox


def saved_models(f, i, spec):
    """({arm: model on the arm's pixels}, resampled) from --save-models' /models, or (None,
    False) without them. /models/<arm>_wave is one grid per catalog (its first spectrum's): a
    spectrum on another grid was stored interpolated onto it, and is interpolated back here."""
    if "models" not in f:
        return None, False
    out, resampled = {}, False
    for arm in spec.arms:
        if arm.name not in f["models"]:
            out[arm.name] = np.full(arm.wave.size, np.nan)
            continue
        mw, mod = f["models"][arm.name + "_wave"][:], f["models"][arm.name][i].astype(float)
        same = len(mw) == len(arm.wave) and np.array_equal(mw, arm.wave)
        resampled |= not same
        out[arm.name] = mod if same else np.interp(arm.wave, mw, mod, left=np.nan,
                                                   right=np.nan)
    return out, resampled


def row_models(f, row, spec, velox, templates):
    """velox.model_of_row with the catalog's config and library: ({arm: model}, held row)."""
    path = templates or str(f.attrs.get("templates_path", ""))
    if not path or not os.path.exists(path):
        sys.exit(f"the catalog's library {path or '(none recorded)'} is not there: give "
                 "--templates LIB")
    lib = velox.Library.load(path)
    want = str(f.attrs.get("templates_checksum", ""))
    if want and lib.checksum != want:
        sys.exit(f"{path}: checksum {lib.checksum}, the catalog was fitted with {want}: the "
                 "model would not be the fit's; give the fit's library with --templates")
    config_yaml = f.attrs.get("config_yaml", "")
    config_yaml = config_yaml.decode() if isinstance(config_yaml, bytes) else str(config_yaml)
    with tempfile.NamedTemporaryFile("w", suffix=".yaml") as cfg:
        cfg.write(config_yaml)
        cfg.flush()
        models, held = velox.model_of_row(row, spec, library=lib,
                                          config=cfg.name if config_yaml else None)
    return {a.name: m for a, m in zip(spec.arms, models)}, held[0]


def pm(row, col, fmt):
    return f"{row[col]:{fmt}} ± {row[col + '_ERR']:{fmt}}"


def arm_title(fmt, survey, arm, w):
    if arm == "ALL":
        return (f"{SURVEY_NAME.get(fmt, fmt)} spectrum (blue and red joined), "
                f"{w[0]:.0f}–{w[-1]:.0f} Å")
    layout = f"DESI layout ({survey})" if survey and survey not in ("main", "sv1", "sv2", "sv3",
                                                                   "special", "cmx") else "DESI"
    return f"{layout} {arm} arm, {w[0]:.0f}–{w[-1]:.0f} Å"


def plot_fit(a):
    source = os.path.basename(a.input)
    velox = import_velox()
    with h5py.File(a.catalog, "r") as f:
        i = find_row(f, a, source)
        row = f["catalog"][i]
        names = _scripts.bit_names(f["catalog"])
        info_names = _scripts.bit_names(f["catalog"], "FIT_INFO_BITS")
        spectra = [s for s in velox.read_spectra(a.input) if s.targetid == a.targetid]
        if not spectra:
            sys.exit(f"{a.input}: no target {a.targetid}")
        spec = spectra[0]
        models, resampled = saved_models(f, i, spec)
        held = None
        if models is not None:
            kind, how = "saved", "model: the fit's (--save-models)"
            if resampled:
                how += (", interpolated twice: the catalog's /models grid is another file's "
                        "(velox.model_of_row gives it on this grid)")
        elif not np.isfinite(row["VRAD"]):
            models = {arm.name: np.full(arm.wave.size, np.nan) for arm in spec.arms}
            kind, how = "none", "no model: the fit failed"
        else:
            try:
                models, held = row_models(f, row, spec, velox, a.templates)
                kind = "model_of_row"
                how = (f"model: velox.model_of_row, the catalog's labels and VSINI held, VRAD "
                       f"re-solved {held['VRAD']:.2f} km/s")
            except ValueError as e:  # labels not finite or outside the library: a failed fit
                models = {arm.name: np.full(arm.wave.size, np.nan) for arm in spec.arms}
                kind, how = "none", f"no model: {e}"
    fmt, survey = spec.format, spec.survey
    arms = {arm.name: arm for arm in spec.arms}
    shown = [k for k in ("B", "R", "Z", "ALL") if k in arms]
    zooms = zoom_windows({k: arms[k].wave for k in shown}, row["VRAD"], velox.air_to_vacuum)
    warn = f"RVS_WARN {row['RVS_WARN']} = {_scripts.decode_bits(row['RVS_WARN'], names)}"
    warn += f"; FIT_INFO {_scripts.decode_bits(row['FIT_INFO'], info_names)}"
    values = (f"VRAD {pm(row, 'VRAD', '.2f')} km/s, TEFF {pm(row, 'TEFF', '.0f')} K, "
              f"LOGG {pm(row, 'LOGG', '.2f')}, [Fe/H] {pm(row, 'FEH', '.2f')}")
    if np.isfinite(row["VSINI"]):
        values += f", VSINI {row['VSINI']:.0f} km/s"

    plt = _scripts.pyplot()
    fig = plt.figure(figsize=(a.width, a.width * (0.75 if zooms else 0.52)))
    outer = fig.add_gridspec(3 if zooms else 2, 1, height_ratios=[3, 1, 2.6][:3 if zooms else 2],
                             hspace=0.38)
    top = outer[0:2].subgridspec(2, len(shown), height_ratios=[3, 1], hspace=0.05, wspace=0.22)
    unit = FLUX_UNIT.get(fmt, "file units")
    arm_info = []
    for c, name in enumerate(shown):
        arm = arms[name]
        w, fl, iv = arm.wave, arm.flux.astype(float), arm.ivar.astype(float)
        mod = models.get(name, np.full(w.size, np.nan))
        used = np.isfinite(mod)
        masked = arm.mask != 0
        color = ARM_COLOR.get(name, "tab:green")
        ax = fig.add_subplot(top[0, c])
        res = fig.add_subplot(top[1, c], sharex=ax)
        draw_arm(ax, w, fl, iv, mod, masked, color)
        sig = np.where(iv > 0, 1 / np.sqrt(np.where(iv > 0, iv, 1)), np.nan)
        res.plot(w, (fl - mod) / sig, color="k", lw=0.4)
        res.axhline(0, color=color, lw=0.6)
        res.set_ylim(-6, 6)
        ax.set_title(arm_title(fmt, survey, name, w) + ("" if used.any() else " (not fitted)"),
                     fontsize=9)
        ax.tick_params(labelbottom=False)
        res.set_xlabel("vacuum wavelength [Å]")
        for z in zooms:
            if z["arm"] == name:
                ax.axvspan(*z["window_A"], color="gold", alpha=0.25, lw=0)
        if c == 0:
            ax.set_ylabel(f"flux [{unit}]", fontsize=8)
            res.set_ylabel("(data − model) / σ", fontsize=8)
            ax.legend(fontsize=7, loc="lower right")
        arm_info.append({"name": name, "title": ax.get_title(), "wave_min_A": float(w[0]),
                         "wave_max_A": float(w[-1]), "model_pixels": int(used.sum())})
    if zooms:
        low = outer[2].subgridspec(1, len(zooms), wspace=0.25)
        for k, z in enumerate(zooms):
            arm = arms[z["arm"]]
            lo, hi = z["window_A"]
            sel = (arm.wave >= lo) & (arm.wave <= hi)
            ax = fig.add_subplot(low[0, k])
            mod = models.get(z["arm"], np.full(arm.wave.size, np.nan))
            draw_arm(ax, arm.wave[sel], arm.flux[sel].astype(float), arm.ivar[sel].astype(float),
                     mod[sel], arm.mask[sel] != 0, ARM_COLOR.get(z["arm"], "tab:green"))
            for x in z["line_vacuum_A"]:
                ax.axvline(x, color="0.4", ls="--", lw=0.7)
            ax.set_xlim(lo, hi)
            air = "/".join(f"{x:.0f}" for x in z["rest_air_A"])
            z["model_pixels"] = int(np.isfinite(mod[sel]).sum())
            z["data_pixels"] = int(sel.sum())
            where = [] if z["arm"] == "ALL" else [f"{z['arm']} arm"]
            where += [] if z["model_pixels"] else ["no model"]
            ax.set_title(f"{z['name']} {air}" + (f" ({'; '.join(where)})" if where else ""),
                         fontsize=8)
            ax.set_xlabel("vacuum wavelength [Å]", fontsize=8)
            ax.tick_params(labelsize=7)
            if k == 0:
                ax.set_ylabel("flux", fontsize=8)
    note = ("\nzooms: lines at their rest air wavelengths [Å]; dashed where VRAD puts them in "
            "vacuum" if zooms else "")
    fig.suptitle(f"{source} ({fmt}) TARGETID {a.targetid}, SUCCESS {bool(row['SUCCESS'])}\n"
                 f"{values}\n{warn}\n{how}{note}", fontsize=9)
    fig.subplots_adjust(left=0.06, right=0.985, bottom=0.06, top=0.84 if zooms else 0.78)
    out = a.out or f"fit-{a.targetid}.png"
    fig.savefig(out, dpi=a.dpi)
    print(f"{source} ({fmt}) TARGETID {a.targetid}: {values}; {warn}; "
          f"SUCCESS {bool(row['SUCCESS'])}")
    print(how)
    print(out)
    if a.json:
        summary = {
            "catalog": a.catalog, "input": a.input, "source_file": source, "format": fmt,
            "survey": survey, "targetid": a.targetid, "row": i,
            "model": kind, "model_resampled": resampled,
            "model_vrad_kms": None if held is None else float(held["VRAD"]),
            "values": {c: float(row[c]) for c in ("VRAD", "VRAD_ERR", "TEFF", "TEFF_ERR", "LOGG",
                                                  "LOGG_ERR", "FEH", "FEH_ERR", "VSINI")},
            "rvs_warn": int(row["RVS_WARN"]), "fit_info": int(row["FIT_INFO"]),
            "success": bool(row["SUCCESS"]), "arms": arm_info, "zooms": zooms, "png": out,
        }
        with open(a.json, "w") as fh:
            json.dump(summary, fh, indent=1)


def draw_arm(ax, w, fl, iv, mod, masked, color):
    """Data (grey where the fit did not use it), model, masked pixels ticked."""
    used = np.isfinite(mod)
    ax.plot(w, np.where(used, np.nan, fl), color="0.65", lw=0.5, label="data, not used")
    ax.plot(w, np.where(used, fl, np.nan), color="k", lw=0.5, label="data")
    ax.plot(w, mod, color=color, lw=0.8, label="model")
    good = (iv > 0) & ~masked & np.isfinite(fl)
    if good.sum() > 10:  # the usable data and the model, not cosmics or masked spikes
        lo, hi = np.percentile(fl[good], [0.5, 99.5])
        if used.any():
            lo, hi = min(lo, np.nanmin(mod)), max(hi, np.nanmax(mod))
        pad = 0.08 * (hi - lo)
        ax.set_ylim(lo - pad, hi + pad)
    if np.any(masked & np.isfinite(fl)):
        floor = ax.get_ylim()[0]
        ax.plot(w[masked], np.full(masked.sum(), floor), "|", color="m", ms=6, label="masked")


def plot_epochs(f, a, source):
    """The epochs of one star of a --epochs catalog: VRAD against MJD."""
    plt = _scripts.pyplot()
    cat, ep = f["catalog"][:], f["epochs"][:]
    info_names = _scripts.bit_names(f["catalog"], "FIT_INFO_BITS")
    if a.targetid is None:
        mine = ep[np.array([s.decode() == source for s in ep["SOURCE_FILE"]])]
        if len(mine) == 0:
            sys.exit(f"{a.catalog}: no epoch from {source}")
        a.targetid = int(mine["TARGETID"][0])
    star = cat[cat["TARGETID"] == a.targetid]
    e = ep[ep["TARGETID"] == a.targetid]
    if len(star) == 0 or len(e) == 0:
        sys.exit(f"{a.catalog}: TARGETID {a.targetid} has no star row or no epochs")
    row = star[0]
    ok = e["SUCCESS"].astype(bool)
    t = e["MJD"] - np.nanmin(e["MJD"]) if np.isfinite(e["MJD"]).any() else e["EPOCH"]
    fig, ax = plt.subplots(figsize=(6.5, 4))
    ax.errorbar(t[ok], e["VRAD"][ok], e["VRAD_ERR"][ok], fmt="o", color="k", label="epochs")
    if (~ok).any():
        ax.errorbar(t[~ok], e["VRAD"][~ok], e["VRAD_ERR"][~ok], fmt="x", color="0.6",
                    label="not SUCCESS")
    ax.axhline(row["VRAD"], color="tab:blue", lw=1, label="weighted mean")
    ax.axhspan(row["VRAD"] - row["VRAD_ERR"], row["VRAD"] + row["VRAD_ERR"], color="tab:blue",
               alpha=0.2)
    ax.set_xlabel("MJD - %.3f [d]" % np.nanmin(e["MJD"]) if np.isfinite(e["MJD"]).any()
                  else "epoch")
    ax.set_ylabel("VRAD [km/s]")
    ax.legend(fontsize=8)
    flags = _scripts.decode_bits(row["FIT_INFO"], info_names)
    title = (f"TARGETID {a.targetid}: N_EPOCHS {row['N_EPOCHS']}, VRAD {pm(row, 'VRAD', '.2f')} "
             f"km/s, TEFF {pm(row, 'TEFF', '.0f')} K\nchi2(const) {row['VRAD_CHISQ_CONST']:.2f}, "
             f"log10 p {row['VRAD_LOGP_CONST']:.2f}, max pair {row['VRAD_MAXDIFF_SIG']:.2f} sigma;"
             f" FIT_INFO {flags}")
    ax.set_title(title, fontsize=8)
    fig.tight_layout()
    out = a.out or f"epochs-{a.targetid}.png"
    fig.savefig(out, dpi=90)
    print(title.replace("\n", "; "))
    print("EPOCH  EXPID       MJD          VRAD     VRAD_ERR  SN     RVS_WARN  SOURCE_FILE")
    for x in e:
        print(f"{x['EPOCH']:5d}  {x['EXPID']:10d}  {x['MJD']:11.5f}  {x['VRAD']:8.2f}  "
              f"{x['VRAD_ERR']:8.2f}  {x['SN']:5.1f}  {x['RVS_WARN']:8d}  "
              f"{x['SOURCE_FILE'].decode()}")
    print(out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("catalog")
    ap.add_argument("input")
    ap.add_argument("targetid", type=int, nargs="?")
    ap.add_argument("--out", default=None, help="PNG path (default fit-TARGETID.png)")
    ap.add_argument("--json", default=None, help="also write what was plotted as JSON")
    ap.add_argument("--templates", default=None,
                    help="the fit's library, where the catalog's templates_path has moved")
    ap.add_argument("--width", type=float, default=13.0, help="figure width [inch] (13)")
    ap.add_argument("--dpi", type=float, default=100.0, help="PNG resolution (100)")
    a = ap.parse_args(argv)
    source = os.path.basename(a.input)
    with h5py.File(a.catalog, "r") as f:
        if "epochs" in f:
            return plot_epochs(f, a, source)
    return plot_fit(a)


if __name__ == "__main__":
    sys.exit(main())
