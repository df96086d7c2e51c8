#!/usr/bin/env bash
# The quality model on real data (docs/quality.md, issue: results a survey scientist can trust):
# - the DESI EDR fibres (galaxies/QSOs, no stars) and the SDSS white dwarf get SUCCESS false with
#   the reason in RVS_WARN; the white dwarf is classified STAR/WD (NOT_STAR), the EDR fibres
#   GALAXY, the stars STAR;
# - every SUCCESS star with SUBTYPE M has TEFF < 4300 K, with A or B TEFF > 7000 K;
# - >= 97% of the 134 LAMOST and 85 DESI-layout stars have SUCCESS, and >= 90% RVS_WARN == 0;
# - the repeat pairs of lamost_dr8 have pull widths (with the systematic floors) in [0.8, 1.3].
set -euo pipefail
source "$VELOX_SOURCE_DIR/tests/integration/common.sh"
itest_setup quality

D="$VELOX_DATA_DIR/spectra"
mapfile -t lamost < <(velox_lamost_inputs)
"$VELOX" fit --templates "$LIB" --output lamost.h5 "${lamost[@]}"
"$VELOX" fit --templates "$LIB" --output desi.h5 "$D"/desi_lamost/coadd-lamost-dr10.fits \
  "$D"/desi_lamost/coadd-lamost-dr8.fits
"$VELOX" fit --templates "$LIB" --output nonstars.h5 "$D"/desi_edr/coadd-sv3-dark-26065.fits \
  "$D"/desi_edr/coadd-5-169-thru20210419.fits "$D"/sdss/spec-0266-51602-0031.fits

"$PY" - <<'PY'
import h5py
import numpy as np

err = []
cat = lambda p: h5py.File(p, "r")["catalog"][:]
REJECT_BITS = {0: "CHISQ_NOT_BETTER", 1: "RV_EDGE", 2: "RV_ERR_LARGE", 3: "LABEL_EDGE",
               12: "MODEL_MISMATCH", 13: "NOT_STAR"}
n = cat("nonstars.h5")
if len(n) != 4:
    err.append(f"non-stars: {len(n)} rows, expected 3 EDR fibres + 1 white dwarf")
for r in n:
    name = r["SOURCE_FILE"].decode()
    why = [v for b, v in REJECT_BITS.items() if r["RVS_WARN"] & (1 << b)]
    print(f"{name} {r['TARGETID']}: SUCCESS {bool(r['SUCCESS'])} RVS_WARN {r['RVS_WARN']} {why}")
    if r["SUCCESS"] or not why:
        err.append(f"{name} {r['TARGETID']}: SUCCESS {bool(r['SUCCESS'])}, RVS_WARN {r['RVS_WARN']}")
    # The EDR target fibres are galaxies (SV3 LRG targets and a dark-time target; redrock's
    # galaxy class, scanned from z 0.005): GALAXY, not QSO as before the galaxy template.
    if name.startswith("coadd") and (r["SPECTYPE"] != b"GALAXY" or not r["CLASS_Z"] >= 0.005):
        err.append(f"{name} {r['TARGETID']}: {r['SPECTYPE']} at z {r['CLASS_Z']}, want GALAXY")
stars = np.concatenate([cat("lamost.h5"), cat("desi.h5")])
ok, clean = stars["SUCCESS"].mean(), (stars["RVS_WARN"] == 0).mean()
print(f"{len(stars)} real stars: SUCCESS {ok:.3f}, RVS_WARN == 0 {clean:.3f}")
if len(stars) != 219 or ok < 0.97 or clean < 0.90:
    err.append(f"{len(stars)} stars: SUCCESS fraction {ok:.3f} (>= 0.97), clean {clean:.3f} (>= 0.90)")
# Template classification (redrock classes in the library): the white dwarf is STAR/WD with
# NOT_STAR; every real star is classified STAR, and none of them is NOT_STAR.
wd = n[[s.startswith(b"spec-0266") for s in n["SOURCE_FILE"]]]
if len(wd) != 1 or wd["SUBTYPE"][0] != b"WD" or not wd["RVS_WARN"][0] & (1 << 13):
    err.append(f"white dwarf: SUBTYPE {wd['SUBTYPE']}, RVS_WARN {wd['RVS_WARN']} (expect WD, NOT_STAR)")
if (stars["SPECTYPE"] != b"STAR").any() or (stars["RVS_WARN"] & (1 << 13)).any():
    err.append(f"real stars classified {set(stars['SPECTYPE'])} or NOT_STAR")
# A normal star's SUBTYPE follows its TEFF (issue 25: LAMOST F stars of 6187 K had been M).
# The class boundaries are 3890 K (K/M) and 7310 K (A/F); the issue's bounds are looser.
good = stars[stars["SUCCESS"].astype(bool)]
sub_ = good["SUBTYPE"]
bad_m = good[(sub_ == b"M") & ~(good["TEFF"] < 4300)]
bad_ab = good[np.isin(sub_, [b"A", b"B"]) & ~(good["TEFF"] > 7000)]
print("SUBTYPE counts:", {s.decode(): int((sub_ == s).sum()) for s in set(sub_)})
if len(bad_m) or len(bad_ab):
    err.append(f"SUBTYPE vs TEFF: M at {bad_m['TEFF']}, A/B at {bad_ab['TEFF']}")
# Informational conditions are not warnings: the DESI Z arm outside MILES is FIT_INFO bit 0.
d = cat("desi.h5")
if not (d["FIT_INFO"] & 1).all() or (d["RVS_WARN"] & (1 << 9)).any():
    err.append("DESI-layout stars: Z outside MILES must be FIT_INFO ARM_EXCLUDED, not RVS_WARN")
if err:
    raise SystemExit("FAIL: " + "; ".join(err))
PY
# 8 repeat pairs: the robust sigma of 8 pulls scatters by ~25%; [0.8, 1.3] is the issue's band.
"$PY" "$VELOX_SOURCE_DIR/scripts/calibrate_floors.py" lamost.h5 --data-dir "$VELOX_DATA_DIR" \
  --bootstrap 200 --check 0.8 1.3
