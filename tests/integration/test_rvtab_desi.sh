#!/usr/bin/env bash
# The rvspecfit-layout table to the DESI data model (issue 24): on the DESI-layout coadd of
# real LAMOST stars, with a redrock file written beside it (the shared data hold none; its
# classes are made up so that the skip rule is exercised: every 4th target GALAXY at z 0.3,
# one GALAXY at z 0.001, which rvspecfit keeps, every 8th from the 2nd QSO):
#  - RVTAB has every column of the DESI MWS DR1 rvtab model (tests/data copy), in its order,
#    with its TFORM and unit; VRAD_SKEW/VRAD_KURT finite for SUCCESS rows; the primary header
#    carries rvspecfit's provenance keywords; every HDU's CHECKSUM verifies;
#  - --redrock auto skips the redrock non-stars and fills RR_Z / RR_SPECTYPE; HEALPIX from HPXPIXEL;
#  - under mpirun -np 2, --output and --output-dir/--merge write the same rows as one process,
#    and every rank writes its own per-input rvtab_<stem>.fits;
#  - --desi-root finds the coadds of a healpix tree (made of links here) with their redrock
#    files, and the outputs mirror it (OUT/PIXGROUP/PIXNUM/rvtab_coadd-S-P-PIXNUM.fits); a rerun
#    skips both pixels and --merge finds the catalogs in the tree.
source "$(dirname "$0")/mpi_env.sh"
W="$VELOX_BUILD_DIR/test-tmp/rvtab_desi"
rm -rf "$W"
mkdir -p "$W/in"
for f in coadd-lamost-dr8 coadd-lamost-dr10; do
  ln -s "$VELOX_DATA_DIR/spectra/desi_lamost/$f.fits" "$W/in/$f.fits"
done
$PY - "$W/in" <<'PY'
import sys
import numpy as np
from astropy.table import Table
for name in ("lamost-dr8", "lamost-dr10"):
    fm = Table.read(f"{sys.argv[1]}/coadd-{name}.fits", "FIBERMAP")
    n = len(fm)
    st = np.array(["STAR"] * n, dtype="U6")
    st[::4] = "GALAXY"
    st[1::8] = "QSO"
    z = np.where(st == "STAR", 1e-4, 0.3)
    z[4] = 0.001  # a GALAXY at |z| < 0.005: rvspecfit fits it
    t = Table({"TARGETID": np.asarray(fm["TARGETID"])[::-1], "Z": z[::-1], "SPECTYPE": st[::-1]})
    t.meta["EXTNAME"] = "REDSHIFTS"
    t.write(f"{sys.argv[1]}/redrock-{name}.fits")
PY
IN=("$W/in/coadd-lamost-dr8.fits" "$W/in/coadd-lamost-dr10.fits")
fit() { "$VELOX" fit --templates "$TEMPLATES" --threads 1 --output-format fits --redrock auto "$@"; }
VELOX_MPI=0 fit --output "$W/one.h5" "${IN[@]}" 2>"$W/one.log"
"${MPIRUN[@]}" -np 2 "$VELOX" fit --templates "$TEMPLATES" --threads 1 --output-format fits \
  --redrock auto --output "$W/np2.h5" "${IN[@]}" 2>"$W/np2.log"
"${MPIRUN[@]}" -np 2 "$VELOX" fit --templates "$TEMPLATES" --threads 1 --output-format fits \
  --redrock auto --output-dir "$W/dir" --merge "$W/dir/merged.h5" "${IN[@]}" 2>"$W/dir.log"
$PY - "$W" "$VELOX_SOURCE_DIR/tests/data/desi_mws_dr1_rvtab_columns.csv" <<'PY'
import csv
import sys
import h5py
import numpy as np
from astropy.io import fits
from astropy.table import Table

w, model_csv = sys.argv[1:]
with open(model_csv) as f:
    model = list(csv.DictReader(line for line in f if not line.startswith("#")))
assert len(model) == 33, len(model)

def check_layout(path):
    with fits.open(path, checksum=True) as h:  # a bad CHECKSUM/DATASUM warns: make it fail
        for hdu in h:
            assert hdu.verify_checksum() == 1 and hdu.verify_datasum() == 1, (path, hdu.name)
        assert [x.name for x in h] == ["PRIMARY", "RVTAB", "FIBERMAP", "SCORES"], [x.name for x in h]
        p = h[0].header
        for k in ("RVS_CMD", "RVS_CONF", "TMPLCON0", "TMPLREV0", "TMPLSVR0", "DEPNAM00", "DEPVER00"):
            assert p.get(k), (path, k)
        assert "--redrock auto" in p["RVS_CMD"], p["RVS_CMD"]
        assert p["TMPLREV0"].startswith("fnv1a64:"), p["TMPLREV0"]
        cols = h["RVTAB"].columns
        for i, m in enumerate(model):  # the model's columns first, in its order
            c = cols[i]
            assert c.name == m["name"], (i, c.name, m["name"])
            assert c.format == m["format"], (c.name, c.format, m["format"])
            assert (c.unit or "") == m["unit"], (c.name, c.unit, m["unit"])
        extra = {c.name: c.format for c in cols[len(model):]}
        assert extra["FIBER"] == "J" and extra["EXPID"] == "J" and extra["HEALPIX"] == "K", extra
        assert extra["VSINI_UPPER"] == "D" and extra["FIT_INFO"] == "K", extra
    t = Table.read(path, "RVTAB")
    fm = Table.read(path, "FIBERMAP")
    assert len(fm) == len(t) and np.array_equal(fm["TARGETID"], t["TARGETID"]), path
    return t

one = check_layout(f"{w}/one.fits")
ok = one["SUCCESS"]
assert ok.sum() >= 40, ok.sum()
for c in ("VRAD_SKEW", "VRAD_KURT"):
    v = np.asarray(one[c][ok])
    assert np.isfinite(v).all(), (c, v)
# Near-Gaussian velocity posteriors at these S/N: kurtosis (not excess) about 3, skew about 0.
# Bounds: 10x the spread seen on these stars (kurt 2.98-3.01, |skew| < 0.05).
assert np.all(np.abs(np.asarray(one["VRAD_KURT"][ok]) - 3) < 0.5), one["VRAD_KURT"][ok]
assert np.all(np.abs(np.asarray(one["VRAD_SKEW"][ok])) < 0.5), one["VRAD_SKEW"][ok]
rr = np.char.strip(np.asarray(one["RR_SPECTYPE"]).astype(str))
z = np.asarray(one["RR_Z"])
keep = (rr == "STAR") | (np.abs(z) < 0.005)
assert keep.all(), (rr[~keep], z[~keep])  # non-stars skipped
assert (rr == "GALAXY").sum() == 2, rr  # the z = 0.001 galaxy of each file is fitted
assert set(np.asarray(one["HEALPIX"])) == {26065}, set(one["HEALPIX"])
# An upper limit is told as in the HDF5 catalog: VSINI_UPPER and FIT_INFO's VSINI_UPPER_LIMIT
# (1 << 4, io/rvs_warn.hpp), row for row; VSINI stays the fitted value (the data model's).
with h5py.File(f"{w}/one.h5", "r") as f:
    cat = f["catalog"][:]
assert np.array_equal(cat["TARGETID"], np.asarray(one["TARGETID"]))
for c in ("VSINI", "VSINI_UPPER"):
    assert np.array_equal(cat[c], np.asarray(one[c]), equal_nan=True), c
assert np.array_equal(cat["FIT_INFO"], np.asarray(one["FIT_INFO"]))
upper = (np.asarray(one["FIT_INFO"]) & (1 << 4)) != 0
assert upper.sum() > 0 and np.all(np.isfinite(np.asarray(one["VSINI_UPPER"])[upper]))
assert np.all(np.isnan(np.asarray(one["VSINI_UPPER"])[~upper]))
print(f"one process: {len(one)} rows, {ok.sum()} SUCCESS, skew/kurt medians "
      f"{np.median(one['VRAD_SKEW'][ok]):.3f}/{np.median(one['VRAD_KURT'][ok]):.3f}")
for other in (f"{w}/np2.fits", f"{w}/dir/merged.fits"):
    t = check_layout(other)
    assert len(t) == len(one), (other, len(t))
    for c in one.colnames:
        a, b = np.asarray(one[c]), np.asarray(t[c])
        same = np.array_equal(a, b, equal_nan=True) if a.dtype.kind == "f" else np.array_equal(a, b)
        assert same, (other, c)
    print(f"{other}: identical rows")
for stem in ("coadd-lamost-dr8", "coadd-lamost-dr10"):
    t = check_layout(f"{w}/dir/rvtab_{stem}.fits")
    with h5py.File(f"{w}/dir/{stem}.velox.h5", "r") as f:
        assert f["fibermap"].shape == (len(t),), f["fibermap"].shape
ranks = sorted({h5py.File(f"{w}/dir/{s}.velox.h5", "r").attrs["mpi_rank"]
                for s in ("coadd-lamost-dr8", "coadd-lamost-dr10")})
print("per-input catalogs by ranks", ranks)
PY

echo "== --desi-root: healpix discovery and the output tree"
for pix in 26065 26166; do
  d="$W/root/healpix/sv3/dark/$((pix / 100))/$pix"
  mkdir -p "$d"
  ln -s "$W/in/coadd-lamost-dr8.fits" "$d/coadd-sv3-dark-$pix.fits"
  ln -s "$W/in/redrock-lamost-dr8.fits" "$d/redrock-sv3-dark-$pix.fits"
done
tree() { "$VELOX" fit --templates "$TEMPLATES" --threads 2 --output-format fits --redrock auto \
  --desi-root "$W/root" --survey sv3 --program dark --output-dir "$W/tree" "$@"; }
VELOX_MPI=0 tree 2>"$W/tree.log"
for pix in 26065 26166; do
  for f in "rvtab_coadd-sv3-dark-$pix.fits" "coadd-sv3-dark-$pix.velox.h5"; do
    [ -s "$W/tree/$((pix / 100))/$pix/$f" ] || { cat "$W/tree.log"; echo "FAIL: no tree/$((pix / 100))/$pix/$f"; exit 1; }
  done
done
VELOX_MPI=0 tree --healpix 26166,26065 --merge "$W/tree/merged.h5" 2>"$W/tree2.log"
grep -q "2 inputs (0 to fit, 2 skipped" "$W/tree2.log" || { cat "$W/tree2.log"; echo "FAIL: the rerun refitted"; exit 1; }
$PY - "$W/tree/merged.h5" "$W/one.h5" <<'PY'
import sys
import h5py
with h5py.File(sys.argv[1], "r") as m, h5py.File(sys.argv[2], "r") as one:
    n1 = sum(1 for s in one["catalog"]["SOURCE_FILE"] if s.startswith(b"coadd-lamost-dr8"))
    assert len(m["catalog"]) == 2 * n1, (len(m["catalog"]), n1)
print("tree: 2 healpix coadds found, outputs mirrored, resumed, merged")
PY
VELOX_MPI=0 "$VELOX" fit --templates "$TEMPLATES" --desi-root "$W/root" --output-dir x >"$W/noprog.log" 2>&1 && exit 1
grep -q "needs --survey and --program" "$W/noprog.log" || { cat "$W/noprog.log"; echo "FAIL: message"; exit 1; }
echo "PASS"
