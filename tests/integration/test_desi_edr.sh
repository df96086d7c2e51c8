#!/usr/bin/env bash
# The three DESI EDR cut-outs (coadd and spectra files, 5 fibres each, no stars): the run
# completes (exit 0); by default only fibres with OBJTYPE TGT and (COADD_)FIBERSTATUS 0 get a row
# (rvs_desi_fit's selection, docs/desi.md); with --include-unselected every FIBERMAP row gets one
# and the unselected ones are NOT_FITTED (RVS_WARN bit 10), SUCCESS false, never a crash.
set -euo pipefail
source "$VELOX_SOURCE_DIR/tests/integration/common.sh"
itest_setup desi_edr

mapfile -t inputs < <(ls -1 "$VELOX_DATA_DIR"/spectra/desi_edr/*.fits)
((${#inputs[@]} == 3)) || fail "expected 3 DESI EDR files, found ${#inputs[@]}"
run_rc rc "$VELOX" fit --templates "$LIB" --output catalog.h5 "${inputs[@]}"
((rc == 0)) || fail "velox fit exit code $rc, expected 0"
run_rc rc "$VELOX" fit --templates "$LIB" --output all.h5 --include-unselected "${inputs[@]}"
((rc == 0)) || fail "velox fit --include-unselected exit code $rc, expected 0"

"$PY" - "${inputs[@]}" <<'PYEOF'
import os
import sys

import h5py
import numpy as np
from astropy.table import Table

files = sys.argv[1:]
def load(p):
    with h5py.File(p, "r") as f:
        c = f["catalog"][:]
        fm = f["fibermap"][:]
    assert len(fm) == len(c) and (fm["TARGETID"] == c["TARGETID"]).all(), p + ": /fibermap"
    return c, np.array([s.decode() for s in c["SOURCE_FILE"]])
sel, sel_src = load("catalog.h5")
cat, src = load("all.h5")
errors = []
for fn in files:
    fm = Table.read(fn, hdu="FIBERMAP")
    status = fm["COADD_FIBERSTATUS"] if "COADD_FIBERSTATUS" in fm.colnames else fm["FIBERSTATUS"]
    objtype = np.ma.filled(fm["OBJTYPE"], "").astype(str)
    want = [i for i in range(len(fm)) if objtype[i].strip() == "TGT" and status[i] == 0]
    got = sorted(sel[sel_src == os.path.basename(fn)]["ROW_IN_FILE"])
    if got != want:
        errors.append(f"{fn}: selected fibres {got}, expected {want}")
    rows = cat[src == os.path.basename(fn)]
    rows = rows[np.argsort(rows["ROW_IN_FILE"])]
    if len(rows) != len(fm) or list(rows["ROW_IN_FILE"]) != list(range(len(fm))):
        errors.append(f"{fn}: --include-unselected gave {len(rows)} rows for {len(fm)} fibres")
        continue
    for i, r in enumerate(rows):
        if r["TARGETID"] != fm["TARGETID"][i]:
            errors.append(f"{fn} fibre {i}: TARGETID {r['TARGETID']} != {fm['TARGETID'][i]}")
        if i not in want and (r["SUCCESS"] or not r["RVS_WARN"] & (1 << 10)):
            errors.append(f"{fn} fibre {i}: unselected but SUCCESS {r['SUCCESS']}, "
                          f"RVS_WARN {r['RVS_WARN']}")
assert not errors, "\n".join(errors)
print(f"DESI EDR OK: {len(sel)} selected rows, {len(cat)} with --include-unselected")
PYEOF
