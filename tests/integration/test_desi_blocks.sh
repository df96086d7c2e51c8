#!/usr/bin/env bash
# Large DESI coadds are read and fitted in blocks of fibres (issue 26; --read-block-fibres,
# docs/running.md "Memory"): a 512-fibre coadd made here by tiling the shared 64-fibre file (not
# committed) is fitted with --threads 2 at a peak RSS within 300 MB (the whole file's arrays are
# 229 MB on disk; reading it whole peaked at 503 MB, blocks of 32 at 117 MB), and its rows,
# /fibermap and per-input catalog are identical to those of the whole-file read; a truncated
# copy gives one failure row.
set -euo pipefail
source "$VELOX_SOURCE_DIR/tests/integration/common.sh"
itest_setup desi_blocks
"$PY" - "$VELOX_DATA_DIR/spectra/desi_lamost/coadd-lamost-dr8.fits" coadd-512.fits <<'PY'
import sys
import numpy as np
from astropy.io import fits
src, dst, k = sys.argv[1], sys.argv[2], 8
h = fits.open(src)
out = [h[0].copy()]
for x in h[1:]:
    if isinstance(x, fits.BinTableHDU):
        d = np.concatenate([x.data] * k).copy()
        if "TARGETID" in d.dtype.names:  # distinct targets in every copy
            n = len(x.data)
            for j in range(k):
                d["TARGETID"][j * n:(j + 1) * n] += j * 10**12
        out.append(fits.BinTableHDU(d, header=x.header, name=x.name))
    elif x.data is not None and x.data.ndim >= 2:
        out.append(fits.ImageHDU(np.concatenate([x.data] * k, axis=0), header=x.header, name=x.name))
    else:
        out.append(x.copy())
fits.HDUList(out).writeto(dst)
PY
# Peak RSS [MB] of one velox run (its own process: RUSAGE_CHILDREN is that run alone).
peak_mb() {
  "$PY" - "$@" <<'PY'
import resource, subprocess, sys
rc = subprocess.call(sys.argv[1:], stderr=open("run.log", "a"))
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024 if rc == 0 else -rc)
PY
}
blocks=$(peak_mb "$VELOX" fit --templates "$LIB" --threads 2 --output blocks.h5 coadd-512.fits)
whole=$(peak_mb "$VELOX" fit --templates "$LIB" --threads 2 --read-block-fibres 0 --output whole.h5 \
  coadd-512.fits)
echo "peak RSS: blocks of 32 fibres $blocks MB, whole file $whole MB"
((blocks > 0 && whole > 0)) || fail "velox fit failed: $(cat run.log)"
((blocks <= 300)) || fail "peak RSS $blocks MB with blocks, want <= 300 MB"
"$VELOX" fit --templates "$LIB" --threads 2 --output-dir per 2>>run.log coadd-512.fits ||
  fail "--output-dir: $(cat run.log)"
"$PY" - blocks.h5 whole.h5 per/coadd-512.velox.h5 <<'PY' || fail "blocks differ from the whole file"
import sys, h5py, numpy as np
def same(x, y):
    return np.array_equal(x, y, equal_nan=True) if x.dtype.kind == "f" else bool((x == y).all())
a, b, c = (h5py.File(p, "r") for p in sys.argv[1:])
for g in ("catalog", "fibermap"):
    for other in (b, c):
        x, y = a[g][:], other[g][:]
        assert len(x) == len(y) == 480, (g, len(x), len(y))  # 8 x 60 stars
        bad = [k for k in x.dtype.names if not same(x[k], y[k])]
        assert not bad, (g, bad)
assert len(set(a["catalog"]["TARGETID"])) == 480
PY
# A partly written coadd (cut at 150 MB: its Z arm is short) is read in blocks too, and every
# block fails: still one failure row (BAD_INPUT, bit 8), not one per block.
head -c 150000000 coadd-512.fits >cut-512.fits
rm -f coadd-512.fits
run_rc rc "$VELOX" fit --templates "$LIB" --threads 2 --output cut.h5 cut-512.fits 2>cut.log
grep -q "truncated or corrupt" cut.log || fail "cut file: no error line: $(tail -3 cut.log)"
"$PY" - cut.h5 <<'PY' || fail "cut file: want one BAD_INPUT row"
import sys, h5py
c = h5py.File(sys.argv[1], "r")["catalog"][:]
assert len(c) == 1 and not c["SUCCESS"][0] and c["RVS_WARN"][0] & (1 << 8), c[["RVS_WARN"]]
PY
rm -f cut-512.fits
echo "desi_blocks: OK"
