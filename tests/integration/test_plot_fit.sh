#!/usr/bin/env bash
# scripts/plot_fit.py on every input format velox reads (LAMOST DR8 .fits.gz, LAMOST DR10, SDSS/
# BOSS, DESI coadd): `velox fit --save-models` over one file of each, then a plot per target.
# Each must write a PNG and print the fitted values with their errors and RVS_WARN decoded by
# name; the DESI target's Z arm lies beyond MILES, so its FIT_INFO names ARM_EXCLUDED.
set -euo pipefail
source "$VELOX_SOURCE_DIR/tests/integration/common.sh"
itest_setup plot_fit
S=$VELOX_DATA_DIR/spectra
dr8s=("$S"/lamost_dr8/fits/*.fits.gz)  # (not `ls | head`: SIGPIPE under pipefail)
dr8=${dr8s[0]}
dr10=$S/lamost_dr10_pylasp/fits/3703110.fits
boss=$(velox_boss_star)
desi=$S/desi_lamost/coadd-lamost-dr10.fits
desi_id=7000000003703110  # the DR10 star above, re-gridded into the DESI layout
"$VELOX" fit --templates "$LIB" --output models.h5 --save-models "$dr8" "$dr10" "$boss" \
  2>fit.log || { cat fit.log; fail "velox fit"; }
"$VELOX" fit --templates "$LIB" --output desi.h5 --save-models --targetid "$desi_id" "$desi" \
  2>fit_desi.log || { cat fit_desi.log; fail "velox fit (DESI)"; }

plot() {  # plot NAME CATALOG INPUT [TARGETID]: run plot_fit.py, check its PNG and summary line
  local name=$1
  shift
  "$VELOX_PYTHON" "$VELOX_SOURCE_DIR/scripts/plot_fit.py" "$@" --out "$name.png" \
    >"$name.txt" || { cat "$name.txt"; fail "plot_fit.py $name"; }
  cat "$name.txt"
  [ "$(stat -c %s "$name.png")" -gt 20000 ] || fail "$name: PNG missing or empty"
  grep -qE "VRAD -?[0-9.]+ ± [0-9.]+ km/s, TEFF [0-9]+ ± [0-9]+ K" "$name.txt" ||
    fail "$name: fitted values with errors not printed"
  grep -qE "RVS_WARN [0-9]+ = ([A-Z_|]+|none)" "$name.txt" || fail "$name: RVS_WARN not decoded"
}
plot dr8 models.h5 "$dr8"
grep -q "(lamost-dr8)" dr8.txt || fail "dr8: format not recognised"
plot dr10 models.h5 "$dr10"
grep -q "(lamost-dr10)" dr10.txt || fail "dr10: format not recognised"
plot boss models.h5 "$boss"
grep -q "(sdss)" boss.txt || fail "boss: format not recognised"
plot desi desi.h5 "$desi" "$desi_id"
grep -q "(desi)" desi.txt && grep -q "ARM_EXCLUDED" desi.txt ||
  fail "desi: format or FIT_INFO bit 0 (ARM_EXCLUDED, the Z arm) not shown"
echo "PASS"
