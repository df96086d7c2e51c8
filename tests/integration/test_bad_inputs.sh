#!/usr/bin/env bash
# One `velox fit` over good LAMOST files and bad ones made here: unreadable files become a
# BAD_INPUT row and a one-line error naming the file (exit 3); readable targets with no usable
# pixels become NO_PIXELS rows; a few corrupt pixels are masked and the fit still succeeds.
# Also: empty --input-list (exit 2), missing templates (exit 1), `velox info` on both files, on a
# FITS input and on a file that is neither.
set -euo pipefail
source "$VELOX_SOURCE_DIR/tests/integration/common.sh"
itest_setup bad_inputs

dr10=("$VELOX_DATA_DIR"/spectra/lamost_dr10_pylasp/fits/*.fits)
dr8=("$VELOX_DATA_DIR"/spectra/lamost_dr8/fits/*.fits.gz)
DR10="${dr10[0]}" DR8="${dr8[0]}"

echo "this is not a FITS file" >x.fits
head -c 5000 "$DR10" >truncated.fits
"$PY" - "$DR10" <<'PYEOF'
import sys

import numpy as np
from astropy.io import fits

src = sys.argv[1]


def variant(name, edit):
    """Copy the DR10 file with edit(coadd_row_arrays) applied and write it as `name`."""
    with fits.open(src) as h:
        cols = {c.name: np.array(h["COADD"].data[c.name]) for c in h["COADD"].columns}
        edit(cols)
        hdu = fits.BinTableHDU.from_columns(
            [fits.Column(name=k, format=f"{v.shape[1]}E" if v.ndim == 2 else "E", array=v)
             for k, v in cols.items()], header=h["COADD"].header, name="COADD")
        fits.HDUList([h[0].copy(), hdu]).writeto(name, overwrite=True, output_verify="silentfix")


def no_ivar(c):
    del c["IVAR"]


def zero_ivar(c):
    c["IVAR"][:] = 0


def all_bad_pixels(c):  # every pixel NaN/inf flux or negative ivar
    c["FLUX"][:, 0::3] = np.nan
    c["FLUX"][:, 1::3] = np.inf
    c["IVAR"][:, 2::3] = -1.0


def some_bad_pixels(c):  # 5% of pixels each: NaN flux, inf flux, negative ivar
    n = c["FLUX"].shape[1]
    rng = np.random.default_rng(1)
    c["FLUX"][:, rng.choice(n, n // 20, replace=False)] = np.nan
    c["FLUX"][:, rng.choice(n, n // 20, replace=False)] = np.inf
    c["IVAR"][:, rng.choice(n, n // 20, replace=False)] = -1.0


def wave_times_3(c):
    c["WAVELENGTH"] *= 3


variant("no_ivar.fits", no_ivar)
variant("zero_ivar.fits", zero_ivar)
variant("all_bad_pixels.fits", all_bad_pixels)
variant("some_bad_pixels.fits", some_bad_pixels)
variant("wave_times_3.fits", wave_times_3)
PYEOF

run_rc rc "$VELOX" fit --templates "$LIB" --output catalog.h5 "$DR10" x.fits truncated.fits \
  no_ivar.fits zero_ivar.fits all_bad_pixels.fits some_bad_pixels.fits wave_times_3.fits "$DR8" \
  2>fit.log
cat fit.log
((rc == 3)) || fail "velox fit exit code $rc, expected 3 (completed with failures)"
[[ -f catalog.h5 ]] || fail "no catalog written"
for f in x.fits truncated.fits no_ivar.fits; do
  [[ "$(grep -cF "$f" fit.log)" == 1 ]] || fail "stderr does not name $f on exactly one line"
  [[ "$(grep -F "$f" fit.log)" == *"[error] $f: "* ]] || fail "stderr line for $f is not an error"
done

"$PY" - catalog.h5 "$(basename "$DR10")" "$(basename "$DR8")" <<'PYEOF'
import sys

import h5py

path, good_dr10, good_dr8 = sys.argv[1:4]
BAD_INPUT, NO_PIXELS = 1 << 8, 1 << 5
expect = {  # file -> (SUCCESS, RVS_WARN bit that must be set or None)
    good_dr10: (True, None), good_dr8: (True, None), "some_bad_pixels.fits": (True, None),
    "x.fits": (False, BAD_INPUT), "truncated.fits": (False, BAD_INPUT),
    "no_ivar.fits": (False, BAD_INPUT), "zero_ivar.fits": (False, NO_PIXELS),
    "all_bad_pixels.fits": (False, NO_PIXELS), "wave_times_3.fits": (False, NO_PIXELS),
}
with h5py.File(path, "r") as f:
    cat = f["catalog"][:]
rows = {}
for r in cat:
    rows.setdefault(r["SOURCE_FILE"].decode(), []).append(r)
assert sorted(rows) == sorted(expect), f"files in catalog {sorted(rows)}"
errors = []
for name, (success, bit) in expect.items():
    if len(rows[name]) != 1:
        errors.append(f"{name}: {len(rows[name])} rows, expected 1")
    r = rows[name][0]
    if bool(r["SUCCESS"]) != success:
        errors.append(f"{name}: SUCCESS {bool(r['SUCCESS'])} RVS_WARN {r['RVS_WARN']}")
    if bit is not None and not r["RVS_WARN"] & bit:
        errors.append(f"{name}: RVS_WARN {r['RVS_WARN']} lacks bit {bit.bit_length() - 1}")
assert not errors, "\n".join(errors)
print(f"bad-input catalog OK: {len(cat)} rows")
PYEOF

# An empty --input-list is a usage error (2) with a clear message.
: >empty.list
run_rc rc "$VELOX" fit --templates "$LIB" --output empty.h5 --input-list empty.list 2>empty.log
cat empty.log
((rc == 2)) || fail "empty --input-list: exit code $rc, expected 2"
grep -qi "no input files" empty.log || fail "empty --input-list: no clear message"
[[ ! -e empty.h5 ]] || fail "empty --input-list wrote a catalog"

# A nonexistent template library is fatal (1) and the message names it.
run_rc rc "$VELOX" fit --templates no_such_lib.h5 --output nolib.h5 "$DR10" 2>nolib.log
cat nolib.log
((rc == 1)) || fail "missing templates: exit code $rc, expected 1"
grep -q "no_such_lib.h5" nolib.log || fail "missing templates: message does not name the file"

"$VELOX" info catalog.h5 >info_catalog.txt
cat info_catalog.txt
grep -q "velox catalog" info_catalog.txt || fail "velox info on the catalog"
"$VELOX" info "$LIB" >info_lib.txt
cat info_lib.txt
grep -q "velox template library" info_lib.txt || fail "velox info on the library"
# A FITS input is described from its headers (issue 53: it said "not an HDF5 file"); a file that
# is neither gets a message saying what info reads.
"$VELOX" info "$VELOX_DATA_DIR/spectra/desi_lamost/coadd-lamost-dr10.fits" >info_fits.txt
grep -q "coadd-lamost-dr10.fits: FITS file" info_fits.txt && grep -q "B_FLUX: image 29 x 2751" info_fits.txt &&
  grep -q "velox fit input: format desi, 29 spectra" info_fits.txt || fail "velox info on FITS: $(cat info_fits.txt)"
run_rc rc "$VELOX" info x.fits 2>info_x.log
((rc == 1)) && grep -q "not an HDF5 file (velox info reads velox catalogs and template libraries" info_x.log ||
  fail "velox info on a text file: exit $rc, $(cat info_x.log)"
