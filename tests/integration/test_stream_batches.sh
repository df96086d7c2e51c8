#!/usr/bin/env bash
# The fit stream's two fitting stages give the same rows (docs/design.md "The fit stream"): one
# spectrum at a time per thread (the CPU default) and batches (the GPU's path, run here on the
# CPU with the hidden --cpu-batch N, so it is tested without a device). LAMOST files, a corrupt
# one and a DESI coadd with --include-unselected and --save-models: catalogs, /fibermap and
# /models bitwise identical, in input order, with 1 and 3 threads (velox caps 3 at the cores the
# process may use: 2 on a 2-core CI machine, still more than one).
set -euo pipefail
source "$VELOX_SOURCE_DIR/tests/integration/common.sh"
itest_setup stream_batches
IN=("$VELOX_DATA_DIR"/spectra/lamost_dr10_pylasp/fits/*.fits)
IN=("${IN[@]:0:12}")
head -c 5000 "${IN[0]}" >corrupt.fits
IN+=(corrupt.fits "$VELOX_DATA_DIR/spectra/desi_lamost/coadd-lamost-dr10.fits")

fit() {  # fit NAME [options]: one catalog, input order (single process: the DESI side outputs)
  local name=$1 rc
  shift
  run_rc rc env VELOX_MPI=0 "$VELOX" fit --templates "$LIB" --output "$name.h5" \
    --include-unselected --save-models "$@" "${IN[@]}"
  ((rc == 3)) || fail "$name: exit code $rc, expected 3 (corrupt.fits)"
}
fit one1 --threads 1
fit one3 --threads 3
fit batch7 --threads 2 --cpu-batch 7
fit batch1000 --threads 2 --cpu-batch 1000
"$PY" - one1.h5 one3.h5 batch7.h5 batch1000.h5 <<'PY'
import sys
import h5py
import numpy as np

def content(path):
    with h5py.File(path, "r") as f:
        out = {"catalog": f["catalog"][:]}
        for g in ("fibermap", "models"):
            if g in f:
                for k, v in f[g].items() if isinstance(f[g], h5py.Group) else [(g, f[g])]:
                    out[f"{g}/{k}"] = v[:]
        return out

ref = content(sys.argv[1])
assert len(ref["catalog"]) > 13 and any(k.startswith("models/") for k in ref), list(ref)
for p in sys.argv[2:]:
    other = content(p)
    assert other.keys() == ref.keys(), (p, other.keys(), ref.keys())
    for k in ref:
        a, b = ref[k], other[k]
        assert a.dtype == b.dtype and a.shape == b.shape, (p, k)
        assert a.tobytes() == b.tobytes(), f"{p}: {k} differs from {sys.argv[1]}"
print(f"{len(sys.argv) - 1} catalogs, {len(ref['catalog'])} rows, datasets {sorted(ref)}: identical")
PY
echo "PASS"
