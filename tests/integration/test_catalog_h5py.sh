#!/usr/bin/env bash
# The catalog of a 3-file LAMOST fit reads with h5py and astropy: columns, per-column unit and
# description metadata, provenance attributes, and astropy units.
set -euo pipefail
source "$VELOX_SOURCE_DIR/tests/integration/common.sh"
itest_setup catalog_h5py

mapfile -t inputs < <(velox_lamost_inputs)
inputs=("${inputs[@]:0:3}")
"$VELOX" fit --templates "$LIB" --output catalog.h5 "${inputs[@]}"

"$PY" - catalog.h5 <<'PYEOF'
import sys

import astropy.units as u
import h5py
import numpy as np
from astropy.table import Table

path = sys.argv[1]
REQUIRED = ["TARGETID", "SOURCE_FILE", "VRAD", "VRAD_ERR", "TEFF", "TEFF_ERR", "LOGG",
            "LOGG_ERR", "FEH", "FEH_ERR", "ALPHAFE", "ALPHAFE_ERR", "VSINI", "VSINI_ERR", "VSINI_UPPER",
            "CHISQ_TOT", "NPIX_TOT", "SN", "RVS_WARN", "SUCCESS"]
ATTRS = ["velox_version", "git_commit", "command_line", "config_yaml", "templates_checksum",
         "created_utc"]
with h5py.File(path, "r") as f:
    cat = f["catalog"]
    vrad = cat["VRAD"]
    assert vrad.shape == (3,), f"VRAD shape {vrad.shape}, expected 3 rows"
    assert np.all(np.isfinite(vrad)), f"VRAD not all finite: {vrad}"
    names = list(cat.dtype.names)
    missing = [c for c in REQUIRED if c not in names]
    assert not missing, f"columns missing: {missing} (have {names})"
    for c in names:
        assert isinstance(cat.attrs[c + "_UNIT"], str), f"{c}: no unit attribute"
        assert cat.attrs[c + "_DESC"], f"{c}: empty description attribute"
    for a in ATTRS:
        assert a in f.attrs and len(f.attrs[a]) > 0, f"file attribute {a} missing or empty"
    assert "velox" in f.attrs["command_line"] and "fit" in f.attrs["command_line"]
    assert f.attrs["config_yaml"].startswith("fit:"), f.attrs["config_yaml"]

t = Table.read(path, path="catalog")
assert t["VRAD"].unit == u.km / u.s, f"astropy VRAD unit {t['VRAD'].unit}"
assert t["VRAD"].description, "astropy VRAD has no description"
print(f"catalog OK: {len(t)} rows, {len(names)} columns")
PYEOF

# A catalog written before a column existed (here: CLASS_Z removed with h5py) still reads:
# `velox info` summarises it (read_catalog gives the missing column its default, NaN).
"$PY" - catalog.h5 old.h5 <<'PYEOF'
import sys
import h5py
import numpy as np
src, dst = sys.argv[1:]
with h5py.File(src, "r") as a, h5py.File(dst, "w") as b:
    for k, v in a.attrs.items():
        b.attrs[k] = v
    cat = a["catalog"][:]
    keep = [n for n in cat.dtype.names if n != "CLASS_Z"]
    b.create_dataset("catalog", data=cat[keep], maxshape=(None,), chunks=True)
    for k, v in a["catalog"].attrs.items():
        b["catalog"].attrs[k] = v
PYEOF
"$VELOX" info old.h5 > old-info.txt 2> old-info.log || fail "velox info of a catalog without CLASS_Z: $(cat old-info.log)"
grep -q "rows: 3" old-info.txt || fail "velox info old.h5: $(cat old-info.txt)"
echo "older catalog OK"
