# velox fit --epochs on real spectra (issue 28, docs/epochs.md):
#  - the BOSS G star spec-3586-55181-0500 (7 exposures): one star row and 7 epochs in /epochs,
#    with their exposure IDs and MJDs, the coadd not fitted;
#  - the 109 LAMOST DR8 files (+ a corrupt one) joined by the header key OBJNAME: the repeat
#    stars become one star each, whose files one rank fits (mpirun -np 2 equals -np 1 bitwise,
#    /epochs included; every star's epochs in one per-input catalog), a rerun skips every group,
#    and --merge of the per-input catalogs equals the job's merged catalog;
#  - the same LAMOST repeats written as a DESI spectra file (tests/python/make_desi_spectra.py:
#    one FIBERMAP row per exposure, grouped by TARGETID) give the same epochs, within what the
#    re-gridding changes, when fitted with the LAMOST DR8 floors, zero point and arm scatter;
#  - a group with a corrupt member: the member is one BAD_INPUT epoch, the others are fitted.
source "$(dirname "$0")/mpi_env.sh"
W="$VELOX_BUILD_DIR/test-tmp/epochs"
rm -rf "$W"
mkdir -p "$W"
SDSS="$VELOX_DATA_DIR/spectra/sdss/spec-3586-55181-0500.fits"

echo "== SDSS: 7 exposures of one star"
"$VELOX" fit --templates "$TEMPLATES" --threads 2 --epochs --output "$W/sdss.h5" \
  --output-format fits "$SDSS"
$PY - "$W/sdss.h5" <<'PY'
import sys, h5py, numpy as np
f = h5py.File(sys.argv[1], "r")
c, e = f["catalog"][:], f["epochs"][:]
assert len(c) == 1 and len(e) == 7, (len(c), len(e))
s = c[0]
assert s["SUCCESS"] and s["N_EPOCHS"] == 7 and s["EPOCH"] == -1, s
assert (e["TARGETID"] == s["TARGETID"]).all() and list(e["EPOCH"]) == list(range(7))
# The frames' EXPOSURE keys 104927..104933 and their TAI-BEG within one night (MJD 55181).
assert list(e["EXPID"]) == list(range(104927, 104934)), e["EXPID"]
assert np.all(np.diff(e["MJD"]) > 0) and np.all(np.floor(e["MJD"]) == 55181), e["MJD"]
# Per-exposure errors are larger than the star's (7 epochs: ~1/sqrt(7) with the floor).
assert np.all(e["VRAD_ERR"] > 2 * s["VRAD_ERR"]), (e["VRAD_ERR"], s["VRAD_ERR"])
# The star's VRAD is the epochs' weighted mean.
w = 1 / e["VRAD_ERR"] ** 2
assert abs(s["VRAD"] - (w * e["VRAD"]).sum() / w.sum()) < 1e-9
# A G1V star (SPALL: z * c = -30 km/s): every exposure within 40 km/s of it; the labels
# shared, the constancy statistics finite.
assert np.all(np.abs(e["VRAD"] + 30) < 40), e["VRAD"]
assert 5000 < s["TEFF"] < 6500 and np.isfinite(s["VRAD_LOGP_CONST"]), s
print("SDSS epochs:", np.round(e["VRAD"], 1), "+-", np.round(e["VRAD_ERR"], 1),
      "log10 p(const) %.2f" % s["VRAD_LOGP_CONST"])
# The rvspecfit layout: the star in RVTAB with its statistics, the exposures in EPOCHS.
from astropy.io import fits
with fits.open(sys.argv[1][:-3] + ".fits") as h:
    assert h["RVTAB"].data["N_EPOCHS"][0] == 7 and len(h["EPOCHS"].data) == 7
    assert np.array_equal(h["EPOCHS"].data["VRAD"], e["VRAD"])
    assert h["RVTAB"].data["VRAD_LOGP_CONST"][0] == s["VRAD_LOGP_CONST"]
PY

# scripts/plot_fit.py shows a --epochs catalog's star: its epochs' table and a PNG.
$PY "$VELOX_SOURCE_DIR/scripts/plot_fit.py" "$W/sdss.h5" "$SDSS" --out "$W/epochs.png" >"$W/plot.txt"
[ -s "$W/epochs.png" ] && [ "$(grep -c 'spec-3586-55181-0500.fits' "$W/plot.txt")" = 7 ]

echo "== LAMOST DR8 joined by OBJNAME: -np 1 and -np 2"
ls "$VELOX_DATA_DIR"/spectra/lamost_dr8/fits/*.fits.gz >"$W/inputs.txt"
head -c 5000 "$(head -n 1 "$W/inputs.txt")" >"$W/corrupt.fits"
echo "$W/corrupt.fits" >>"$W/inputs.txt"
run() {  # run NP NAME [extra args]
  local np=$1 name=$2
  shift 2
  "${MPIRUN[@]}" -np "$np" "$VELOX" fit --templates "$TEMPLATES" --threads 1 --epochs \
    --group-by OBJNAME --input-list "$W/inputs.txt" --output-dir "$W/$name" \
    --merge "$W/$name.h5" "$@"
}
expect_rc 3 run 1 np1
expect_rc 3 run 2 np2
$PY "$VELOX_SOURCE_DIR/tests/python/compare_catalogs.py" "$W/np1.h5" "$W/np2.h5"
$PY - "$W/np2.h5" "$W/np2" "$VELOX_DATA_DIR/spectra/lamost_dr8/header_index.csv" <<'PY'
import csv, glob, sys, collections, h5py, numpy as np
f = h5py.File(sys.argv[1], "r")
c, e = f["catalog"][:], f["epochs"][:]
# Stars with more than one file in the header index (OBJNAME): each one star row.
n_files = collections.Counter(r["objname"] for r in csv.DictReader(open(sys.argv[3])))
repeats = sum(1 for v in n_files.values() if v > 1)
multi = c[c["N_EPOCHS"] >= 2]
assert len(multi) == repeats and repeats >= 5, (len(multi), repeats)
# The corrupt copy keeps a readable header (OBJNAME): it joins its star as one BAD_INPUT epoch.
assert len(e) == 109 + 1 and len(c) == len(n_files), (len(e), len(c))
assert (e["SOURCE_FILE"] == b"corrupt.fits").sum() == 1
assert e[e["SOURCE_FILE"] == b"corrupt.fits"]["RVS_WARN"][0] & (1 << 8)
# LAMOST DR8's VRAD is the arms' weighted mean (fit.arm_rv_scatter_kms, FIT_INFO bit 7) for
# every fitted epoch, repeats (measured again at the star's labels) and single ones alike.
ok = e[e["SUCCESS"]]
assert np.all(ok["FIT_INFO"] & (1 << 7)), ok["FIT_INFO"]
# The repeats are constant stars (docs/epochs.md): none flagged RV_VARIABLE (bit 6).
assert not np.any(multi["FIT_INFO"] & (1 << 6)), multi["VRAD_LOGP_CONST"]
assert np.all(multi["VRAD_LOGP_CONST"] > -3), multi["VRAD_LOGP_CONST"]
# A star's epochs are all in one per-input catalog (never split across ranks).
where = collections.defaultdict(set)
for p in glob.glob(sys.argv[2] + "/*.velox.h5"):
    for t in h5py.File(p, "r")["epochs"]["TARGETID"]:
        where[t].add(p)
# (The partial group, with the corrupt member, has none: a rerun retries it.)
assert all(len(v) == 1 for v in where.values()) and len(where) == len(n_files) - 1
print("LAMOST DR8 stars with repeats:", len(multi), "log10 p(const):",
      np.round(np.sort(multi["VRAD_LOGP_CONST"]), 2))
PY
# Its group is "partial": fitted, with the member's error, and the job exits 3.
grep -P "\tpartial\t" "$W/np2/status.tsv" | grep -q "corrupt.fits: "

echo "== the GPU's batched path (--cpu-batch: step 1 in batches) gives the same stars and epochs"
"$VELOX" fit --templates "$TEMPLATES" --threads 2 --cpu-batch 8 --epochs --group-by OBJNAME \
  --input-list "$W/inputs.txt" --output "$W/batched.h5" || [ $? = 3 ]
"$VELOX" fit --templates "$TEMPLATES" --threads 2 --epochs --group-by OBJNAME \
  --input-list "$W/inputs.txt" --output "$W/stream.h5" || [ $? = 3 ]
$PY "$VELOX_SOURCE_DIR/tests/python/compare_catalogs.py" "$W/stream.h5" "$W/batched.h5"

echo "== a rerun skips every group but the partial one; --merge of the per-input catalogs"
expect_rc 3 run 2 np2
[ "$(grep -cP '\tskipped\t' "$W/np2/status.tsv")" = "$(ls "$W"/np2/*.velox.h5 | wc -l)" ]
"$VELOX" fit --output-dir "$W/np2" --merge "$W/merged-again.h5"
$PY - "$W/np2.h5" "$W/merged-again.h5" <<'PY'
import sys, h5py, numpy as np
a, b = (h5py.File(p, "r") for p in sys.argv[1:])
for name in ("catalog", "epochs"):
    ka = np.sort(a[name]["SOURCE_FILE"]); kb = np.sort(b[name]["SOURCE_FILE"])
    # The partial group (the corrupt member's star) has no per-input catalog: a rerun retries it.
    lost = {b"corrupt.fits", b"spec-55859-F5902_sp03-232.fits.gz"}
    assert set(kb) <= set(ka) and set(ka) - set(kb) <= lost and len(ka) - len(kb) >= 1, name
PY
echo "== a star whose group has a corrupt member: its other epochs are fitted"
$PY - "$VELOX_DATA_DIR/spectra/lamost_dr8" "$W" <<'PY'
import collections, csv, sys
from astropy.io import fits
d, w = sys.argv[1:]
g = collections.defaultdict(list)
for r in csv.DictReader(open(d + "/header_index.csv")):
    g[r["objname"]].append(r["file"])
files = sorted(next(v for v in g.values() if len(v) == 3))
with fits.open(d + "/fits/" + files[0]) as h:  # readable header (OBJNAME), truncated data
    h.writeto(w + "/full.fits", overwrite=True)
    n = (len(h[0].header.tostring()) + 2879) // 2880 * 2880
open(w + "/corrupt-member.fits", "wb").write(open(w + "/full.fits", "rb").read()[:n + 5000])
open(w + "/group.txt", "w").write("\n".join([w + "/corrupt-member.fits"] +
                                            [d + "/fits/" + f for f in files[1:]]) + "\n")
PY
# Exit code 3: a file failed; the star is fitted from the others.
expect_rc 3 "$VELOX" fit --templates "$TEMPLATES" --threads 2 --epochs --group-by OBJNAME \
  --input-list "$W/group.txt" --output "$W/group.h5" 2>"$W/group.log"
grep -q "corrupt-member.fits: .*truncated" "$W/group.log"
$PY - "$W/group.h5" <<'PY'
import sys, h5py
f = h5py.File(sys.argv[1], "r")
c, e = f["catalog"][:], f["epochs"][:]
assert len(c) == 1 and c["SUCCESS"][0] and c["N_EPOCHS"][0] == 2, c
bad = e[e["SOURCE_FILE"] == b"corrupt-member.fits"]
assert len(e) == 3 and len(bad) == 1 and bad["RVS_WARN"][0] & (1 << 8) and not bad["SUCCESS"][0]
PY

echo "== the repeats as a DESI spectra file"
mapfile -t REPEATS < <($PY - "$VELOX_DATA_DIR/spectra/lamost_dr8" <<'PY'
import csv, collections, sys
g = collections.defaultdict(list)
for r in csv.DictReader(open(sys.argv[1] + "/header_index.csv")):
    g[r["objname"]].append(r["file"])
for v in g.values():
    if len(v) > 1:
        for f in sorted(v):
            print(sys.argv[1] + "/fits/" + f)
PY
)
$PY "$VELOX_SOURCE_DIR/tests/python/make_desi_spectra.py" \
  "$VELOX_DATA_DIR/spectra/desi_lamost/coadd-lamost-dr8.fits" "$W/spectra-repeats.fits" "${REPEATS[@]}"
cat >"$W/desi-as-lamost.yaml" <<'YAML'
fit:
  arm_zero_point_kms:
    desi: {R: 9.5, Z: 9.5}
  arm_rv_scatter_kms:
    desi: {R: 15.1, Z: 15.1}
  error_floor:
    desi: {VRAD: 5.0, TEFF: 16, LOGG: 0.075, FEH: 0.04}
YAML
"$VELOX" fit --templates "$TEMPLATES" --threads 2 --epochs --output "$W/lamost-repeats.h5" \
  --group-by OBJNAME "${REPEATS[@]}"
"$VELOX" fit --templates "$TEMPLATES" --threads 2 --epochs --output "$W/desi-repeats.h5" \
  --config "$W/desi-as-lamost.yaml" "$W/spectra-repeats.fits"
$PY - "$W/lamost-repeats.h5" "$W/desi-repeats.h5" <<'PY'
import sys, h5py, numpy as np
a, b = (h5py.File(p, "r") for p in sys.argv[1:])
ca, cb, ea, eb = a["catalog"][:], b["catalog"][:], a["epochs"][:], b["epochs"][:]
assert list(ca["N_EPOCHS"]) == list(cb["N_EPOCHS"]) and len(ea) == len(eb) == 13
# One row per exposure: EXPID (the LAMOST OBSID) and MJD from the spectra file's FIBERMAP.
assert len(set(eb["EXPID"])) == 13 and np.all(eb["EXPID"] > 0) and np.all(eb["MJD"] > 5e4)
assert np.all(ea["MJD"] == eb["MJD"]), (ea["MJD"], eb["MJD"])
# Linear re-gridding onto 0.8 A pixels and the resolution matrices move an epoch's VRAD by
# 0.2-1.4 km/s: 2 km/s is 0.4 of the 5 km/s epoch errors. The constancy p-values then agree to
# 0.1 dex, and the errors to 0.1 km/s.
dv = eb["VRAD"] - ea["VRAD"]
assert np.all(np.abs(dv) < 2.0), dv
assert np.all(np.abs(eb["VRAD_ERR"] - ea["VRAD_ERR"]) < 0.1)
assert np.all(np.abs(cb["VRAD_LOGP_CONST"] - ca["VRAD_LOGP_CONST"]) < 0.1)
print("DESI spectra layout - LAMOST files, per-epoch VRAD:", np.round(dv, 2))
PY
echo "PASS"
