# velox fit --epochs on real spectra (issue 28, docs/epochs.md):
#  - the BOSS G star spec-3586-55181-0500 (7 exposures): one star row and 7 epochs in /epochs,
#    with their exposure IDs and MJDs, the coadd not fitted;
#  - the 109 LAMOST DR8 files (+ a corrupt one) joined by the header key OBJNAME: the repeat
#    stars become one star each, whose files one rank fits (mpirun -np 2 equals -np 1 bitwise,
#    /epochs included; every star's epochs in one per-input catalog), a rerun skips every group,
#    and --merge of the per-input catalogs equals the job's merged catalog.
source "$(dirname "$0")/mpi_env.sh"
W="$VELOX_BUILD_DIR/test-tmp/epochs"
rm -rf "$W"
mkdir -p "$W"
SDSS="$VELOX_DATA_DIR/spectra/sdss/spec-3586-55181-0500.fits"

echo "== SDSS: 7 exposures of one star"
"$VELOX" fit --templates "$TEMPLATES" --threads 2 --epochs --output "$W/sdss.h5" "$SDSS"
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
PY

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
assert len(e) == 109 and len(c) == len(n_files) + 1, (len(e), len(c))  # + the corrupt file
# The repeats are constant stars (docs/epochs.md): none flagged RV_VARIABLE (bit 6).
assert not np.any(multi["FIT_INFO"] & (1 << 6)), multi["VRAD_LOGP_CONST"]
assert np.all(multi["VRAD_LOGP_CONST"] > -3), multi["VRAD_LOGP_CONST"]
# A star's epochs are all in one per-input catalog (never split across ranks).
where = collections.defaultdict(set)
for p in glob.glob(sys.argv[2] + "/*.velox.h5"):
    for t in h5py.File(p, "r")["epochs"]["TARGETID"]:
        where[t].add(p)
assert all(len(v) == 1 for v in where.values()) and len(where) == len(n_files)
print("LAMOST DR8 stars with repeats:", len(multi), "log10 p(const):",
      np.round(np.sort(multi["VRAD_LOGP_CONST"]), 2))
PY
grep -P "\tfailed\t0\t" "$W/np2/status.tsv" | grep -q corrupt.fits

echo "== a rerun skips every group; --merge of the per-input catalogs"
expect_rc 3 run 2 np2
[ "$(grep -cP '\tskipped\t' "$W/np2/status.tsv")" = "$(ls "$W"/np2/*.velox.h5 | wc -l)" ]
"$VELOX" fit --output-dir "$W/np2" --merge "$W/merged-again.h5"
$PY - "$W/np2.h5" "$W/merged-again.h5" <<'PY'
import sys, h5py, numpy as np
a, b = (h5py.File(p, "r") for p in sys.argv[1:])
for name in ("catalog", "epochs"):
    ka = np.sort(a[name]["SOURCE_FILE"]); kb = np.sort(b[name]["SOURCE_FILE"])
    assert len(kb) == len(ka) - (name == "catalog") and set(kb) <= set(ka), name  # no corrupt row
PY
echo "PASS"
