#!/usr/bin/env bash
# The three DESI EDR cut-outs (coadd and spectra files, 5 fibres each, no stars): the run
# completes (exit 0), every FIBERMAP row gets a catalog row, and sky/unassigned fibres are
# SUCCESS false with a nonzero RVS_WARN instead of a crash.
set -euo pipefail
source "$VELOX_SOURCE_DIR/tests/integration/common.sh"
itest_setup desi_edr

mapfile -t inputs < <(ls -1 "$VELOX_DATA_DIR"/spectra/desi_edr/*.fits)
((${#inputs[@]} == 3)) || fail "expected 3 DESI EDR files, found ${#inputs[@]}"
run_rc rc "$VELOX" fit --templates "$LIB" --output catalog.h5 "${inputs[@]}"
((rc == 0)) || fail "velox fit exit code $rc, expected 0"

"$PY" - catalog.h5 "${inputs[@]}" <<'PYEOF'
import os
import sys

import h5py
import numpy as np
from astropy.table import Table

path, files = sys.argv[1], sys.argv[2:]
with h5py.File(path, "r") as f:
    cat = f["catalog"][:]
src = np.array([s.decode() for s in cat["SOURCE_FILE"]])
errors = []
for fn in files:
    fm = Table.read(fn, hdu="FIBERMAP")
    rows = cat[src == os.path.basename(fn)]
    rows = rows[np.argsort(rows["ROW_IN_FILE"])]
    if len(rows) != len(fm) or list(rows["ROW_IN_FILE"]) != list(range(len(fm))):
        errors.append(f"{fn}: {len(rows)} rows (ROW_IN_FILE {list(rows['ROW_IN_FILE'])}) "
                      f"for {len(fm)} fibres")
        continue
    objtype = np.ma.filled(fm["OBJTYPE"], "").astype(str)
    for i, r in enumerate(rows):
        if r["TARGETID"] != fm["TARGETID"][i]:
            errors.append(f"{fn} fibre {i}: TARGETID {r['TARGETID']} != {fm['TARGETID'][i]}")
        not_target = objtype[i].strip() != "TGT" or fm["TARGETID"][i] < 0
        if not_target and (r["SUCCESS"] or r["RVS_WARN"] == 0):
            errors.append(f"{fn} fibre {i} (OBJTYPE '{objtype[i]}', TARGETID "
                          f"{fm['TARGETID'][i]}): SUCCESS {r['SUCCESS']}, RVS_WARN {r['RVS_WARN']}")
assert not errors, "\n".join(errors)
print(f"DESI EDR OK: {len(cat)} rows from {len(files)} files")
PYEOF
