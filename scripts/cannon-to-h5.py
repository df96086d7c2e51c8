#!/usr/bin/python3
"""Convert a trained Cannon model pickle from the `thedoppler` package to HDF5.

Usage:
    scripts/cannon-to-h5.py IN.pkl OUT.h5

Sources:
    $VELOX_DATA_DIR/templates/doppler_cannon/cannongrid_3000_18000_{coolstars,hotdwarfs}_norm_cubic_model.pkl
    (thedoppler 1.1.32, D. Nidever, MIT; The Cannon = `annieslasso` 0.2.93, A. Casey). The
    pickle is read with an unpickler that only admits NumPy array/dtype/scalar reconstruction;
    anything else raises. The separate continuum model stored in the pickle is not converted.

Output layout (n_pix = 150001, n_terms = 20, n_labels = 3, n = training set size):
    dispersion           float64 [n_pix]            wavelength, Angstrom, AIR (3000 + 0.1*i exactly)
    theta                float64 [n_pix][n_terms]   Cannon coefficients, term 0 = constant
    s2                   float64 [n_pix]            intrinsic scatter variance (flux^2; 0 for many px)
    powers               int32   [n_terms][n_labels] power of each label in each term (row 0 = 0)
    fiducials            float64 [n_labels]         median of training_set_labels (per label)
    scales               float64 [n_labels]         97.5th minus 2.5th percentile of training labels
    training_set_labels  float64 [n][n_labels]      TEFF [K], LOGG [dex cgs], FEH [dex]
Root attributes: label_names, source, cannon_version, doppler_version, flux, lsf_fwhm_A, lsf_note,
teff/logg/feh _min/_max, plus descriptive extras (evaluator, clip_note, pickle_fwhm, ...).

Evaluator (identical to thecannon.CannonModel.__call__, labels in their natural units, Teff in K):
    x_l    = (label_l - fiducials_l) / scales_l
    term_j = prod_l x_l ** powers[j][l]
    flux   = sum_j theta[:, j] * term_j          (continuum-normalised flux, ~1 in the continuum)
doppler's DopplerCannonModel.__call__ then applies flux = min(flux, 1.0) and returns float32.
fiducials/scales are computed exactly as thecannon does (np.percentile on the float32 training
labels) and stored as float64.

Needs numpy and h5py only.
"""
import os
import pickle
import sys

import h5py
import numpy as np

DOPPLER_VERSION = "1.1.32"

_ALLOWED = {
    ("numpy.core.multiarray", "_reconstruct"),
    ("numpy._core.multiarray", "_reconstruct"),
    ("numpy.core.multiarray", "scalar"),
    ("numpy._core.multiarray", "scalar"),
    ("numpy", "ndarray"),
    ("numpy", "dtype"),
}

LSF_NOTE = (
    "No instrumental LSF is defined for these models. The pickle's fwhm=0.001 is a placeholder "
    "hard-coded by doppler's training script (cannongrid_cubic_norm_training.py: temp['fwhm']=0.001) "
    "and is never read by doppler; doppler treats the model as unresolved and convolves it with the "
    "full LSF of the observed spectrum (after rebinning to >=4 model px per observed FWHM). "
    "Measured absorption-line FWHMs in the model are ~7 km/s median, narrowest ~5-6 km/s "
    "(0.1 A at 5000 A, 0.15-0.2 A at 9000 A, 0.3-0.35 A at 15500 A), i.e. velocity-constant "
    "(intrinsic thermal+microturbulent width), and the 0.1 A sampling limits anything narrower "
    "(below ~5000 A). doppler's docs quote usable observed resolution up to R=20000 at 3000 A and "
    "120000 at 18000 A (observed FWHM >= 0.15 A). For R < ~10000 treat the model as unresolved "
    "(model FWHM = 0: convolve with the full observed LSF)."
)


class _NumpyOnlyUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        if (module, name) in _ALLOWED:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"forbidden global in pickle: {module}.{name}")


def load_pickle(path):
    with open(path, "rb") as fp:
        return _NumpyOnlyUnpickler(fp, encoding="latin-1").load()


def term_powers(terms, label_names):
    """Vectorizer terms [[(label, power), ...], ...] -> int32 [1 + len(terms)][n_labels]."""
    powers = np.zeros((len(terms) + 1, len(label_names)), dtype=np.int32)
    for j, term in enumerate(terms, start=1):
        for label, power in term:
            idx = label if isinstance(label, (int, np.integer)) else list(label_names).index(label)
            if float(power) != int(power) or power < 0:
                raise ValueError(f"non-integer/negative power {power!r} in term {j}")
            powers[j, idx] += int(power)  # repeated labels add, as in thecannon's parser
    return powers


SEAL_BLOCK = 512  # src/io/h5_seal.hpp: the HDF5 user block that holds velox's integrity seal


def seal(path):
    """Write velox's integrity seal (src/io/h5_seal.hpp) into the file's 512-byte user block:
    "velox-seal v1 fnv1a64:<16 hex> bytes:<n>\n" of everything after the block. velox refuses a
    converted model without it, so that libhdf5 never parses a damaged file (it can crash)."""
    with open(path, "r+b") as fh:
        head = fh.read(SEAL_BLOCK)
        body = fh.read()
        if len(head) != SEAL_BLOCK or any(head):
            raise ValueError(f"{path}: no empty {SEAL_BLOCK}-byte user block to seal")
        # The start value is velox's (h5_seal.cpp: 1469598103934665603, not FNV's usual 0xcbf2...).
        h, prime, mask = 1469598103934665603, 0x100000001B3, (1 << 64) - 1
        for b in body:  # FNV-1a 64 (about 5 s for a 26 MB model)
            h = ((h ^ b) * prime) & mask
        text = f"velox-seal v1 fnv1a64:{h:016x} bytes:{len(body)}\n".encode()
        fh.seek(0)
        fh.write(text + bytes(SEAL_BLOCK - len(text)))


def convert(src, dst):
    state = load_pickle(src)
    md = state.get("metadata", {})
    vec_class, vec_kwds = state["vectorizer"]
    if vec_class != "PolynomialVectorizer":
        raise ValueError(f"unsupported vectorizer {vec_class}")
    label_names = tuple(vec_kwds["label_names"])
    terms = vec_kwds["terms"]
    if isinstance(terms, str):
        raise ValueError("string vectorizer terms are not supported")

    theta = np.asarray(state["theta"], dtype=np.float64)
    s2 = np.asarray(state["s2"], dtype=np.float64)
    disp = np.asarray(state["dispersion"], dtype=np.float64)
    tsl_native = np.asarray(state["training_set_labels"])  # float32 in these pickles
    powers = term_powers(terms, label_names)

    n_pix, n_terms = theta.shape
    if powers.shape[0] != n_terms or s2.shape != (n_pix,) or disp.shape != (n_pix,):
        raise ValueError(f"shape mismatch: theta {theta.shape}, powers {powers.shape}, "
                         f"s2 {s2.shape}, dispersion {disp.shape}")
    if tsl_native.ndim != 2 or tsl_native.shape[1] != len(label_names):
        raise ValueError(f"training_set_labels shape {tsl_native.shape}")
    if not (np.all(np.isfinite(theta)) and np.all(np.isfinite(disp))):
        raise ValueError("non-finite theta or dispersion")

    # Exactly thecannon.model.CannonModel.__init__ (0.2.93), on the labels as stored.
    scales = np.ptp(np.percentile(tsl_native, [2.5, 97.5], axis=0), axis=0).astype(np.float64)
    fiducials = np.percentile(tsl_native, 50, axis=0).astype(np.float64)
    tsl = tsl_native.astype(np.float64)
    lo, hi = tsl.min(axis=0), tsl.max(axis=0)

    wavevac = bool(state.get("wavevac", False))
    tmp = dst + ".tmp"
    try:
        _write(tmp, src, md, label_names, disp, theta, s2, powers, fiducials, scales, tsl, lo, hi,
               wavevac, state.get("fwhm", np.nan))
        seal(tmp)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
    os.replace(tmp, dst)


def _write(tmp, src, md, label_names, disp, theta, s2, powers, fiducials, scales, tsl, lo, hi,
           wavevac, pickle_fwhm):
    with h5py.File(tmp, "w", userblock_size=SEAL_BLOCK) as f:
        def dataset(name, data, **attrs):
            d = f.create_dataset(name, data=data)
            for k, v in attrs.items():
                d.attrs[k] = v

        dataset("dispersion", disp, units="Angstrom", medium="vacuum" if wavevac else "air")
        dataset("theta", theta,
                description="flux = theta @ term_vector; column 0 is the constant term")
        dataset("s2", s2,
                description="Cannon intrinsic scatter variance per pixel (normalised flux^2)")
        dataset("powers", powers, description="term_j = prod_l x_l**powers[j][l]")
        dataset("fiducials", fiducials, description="median of training_set_labels")
        dataset("scales", scales, description="97.5th - 2.5th percentile of training_set_labels")
        dataset("training_set_labels", tsl, units="TEFF K, LOGG dex (cgs), FEH dex")

        a = f.attrs
        a["label_names"] = ",".join(label_names)
        a["source"] = os.path.basename(src)
        a["cannon_version"] = str(md.get("version", "unknown"))
        a["doppler_version"] = DOPPLER_VERSION
        a["flux"] = "normalised"
        a["lsf_fwhm_A"] = np.float64(np.nan)
        a["lsf_note"] = LSF_NOTE
        for i, key in enumerate(("teff", "logg", "feh")):
            a[f"{key}_min"] = np.float64(lo[i])
            a[f"{key}_max"] = np.float64(hi[i])
        a["evaluator"] = ("x_l = (label_l - fiducials_l)/scales_l; term_j = prod_l x_l^powers[j][l]; "
                          "flux = sum_j theta[:,j]*term_j (labels: TEFF in K, LOGG, FEH)")
        a["clip_note"] = ("doppler returns min(flux, 1.0) as float32; raw flux slightly exceeds 1 "
                          "at some pixels and can be <=0 in saturated line cores")
        a["pickle_fwhm"] = np.float64(pickle_fwhm)
        a["wavevac"] = wavevac
        a["training_set_hash"] = str(md.get("training_set_hash", ""))
        a["modified"] = str(md.get("modified", ""))


def main(argv):
    if len(argv) != 3:
        sys.stderr.write(__doc__)
        return 2
    convert(argv[1], argv[2])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
