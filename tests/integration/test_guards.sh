#!/usr/bin/env bash
# Checks before the work (issue 11): every bad output path, option or config key exits 2 with one
# plain line before anything is fitted (no "fit: N inputs" start line, nothing written), and
# nothing but velox's own outputs is ever overwritten. Also: plain messages for a missing input
# and a directory input, --help shows the real defaults, and a one-target per-input catalog of a
# run over a long shell glob stays under 50 KB with the input list stored as a dataset.
set -euo pipefail
source "$VELOX_SOURCE_DIR/tests/integration/common.sh"
itest_setup guards
F="$VELOX_DATA_DIR/spectra/lamost_dr10_pylasp/fits/3703110.fits"
fit() { "$VELOX" fit --templates "$LIB" --threads 1 "$@"; }

# refused CASE WANT_IN_MESSAGE CMD...: exit 2, the message on one error line, no fit started.
refused() {
  local name=$1 want=$2 rc=0
  shift 2
  "$@" >"$name.log" 2>&1 || rc=$?
  [ "$rc" = 2 ] || { cat "$name.log"; fail "$name: exit code $rc, expected 2"; }
  grep -qF -- "$want" "$name.log" || { cat "$name.log"; fail "$name: message lacks '$want'"; }
  ! grep -q "fit: .* inputs" "$name.log" || fail "$name: fitting started"
  echo "refused as expected: $name: $(grep -m1 -F -- "$want" "$name.log")"
}

echo "== outputs"
lib_sum=$(md5sum <"$LIB")
cp "$F" input.fits
in_sum=$(md5sum <input.fits)
ln -s input.fits link.h5
echo "my notes" >notes.h5
mkdir out.h5
refused nodir "folder nodir does not exist" fit --output nodir/cat.h5 "$F"
# /proc takes no new files, even from root (permission bits would not tell).
refused unwritable "cannot write in folder /proc" fit --output /proc/cat.h5 "$F"
refused log_dir "--log-dir /proc/velox: cannot create the folder" \
  fit --output cat.h5 --log-dir /proc/velox "$F"
refused library "is the template library" fit --output "$LIB" "$F"
refused library_overwrite "not even with --overwrite" fit --output "$LIB" --overwrite "$F"
refused input "is input 1 of 1" fit --output link.h5 input.fits
refused merge_input "is input 1 of 1" fit --output-dir dir --merge link.h5 input.fits
refused merge_catalog "is the per-input catalog of input.fits" \
  fit --output-dir dir --merge dir/input.velox.h5 input.fits
refused not_catalog "not a velox catalog" fit --output notes.h5 "$F"
refused folder "is a folder" fit --output out.h5 "$F"
refused fits_name "name it cat.h5, or add --output-format fits" fit --output cat.fits "$F"
refused bad_ext "the catalog is an HDF5 file" fit --output cat.txt "$F"
refused templates_build "not a velox template library" \
  "$VELOX" templates build --input "$VELOX_DATA_DIR/templates/miles/miles_thin" --output notes.h5
[ "$(md5sum <"$LIB")" = "$lib_sum" ] && [ "$(md5sum <input.fits)" = "$in_sum" ] ||
  fail "an input or the library changed"
[ "$(cat notes.h5)" = "my notes" ] || fail "a file that is not an output was overwritten"
[ ! -e cat.h5 ] && [ ! -e cat.fits ] && [ ! -e dir/input.velox.h5 ] || fail "something was written"
# With --overwrite a non-catalog file may be replaced; --output NAME.fits with
# --output-format fits writes NAME.h5 and NAME.fits.
fit --output notes.h5 --overwrite "$F" 2>/dev/null
"$PY" -c "import h5py,sys; assert h5py.File('notes.h5')['catalog'].shape == (1,)"
fit --output table.fits --output-format fits "$F" 2>/dev/null
[ -s table.h5 ] && [ -s table.fits ] || fail "--output table.fits --output-format fits"
# An existing catalog is never replaced silently (issue 24): a rerun over it exits 2 before any
# fit and leaves its rows; with --overwrite it is replaced. Same for the FITS table.
refused keep_catalog "velox never replaces a catalog silently" fit --output notes.h5 "$F"
"$PY" -c "import h5py,sys; assert h5py.File('notes.h5')['catalog'].shape == (1,)"
refused keep_table "velox never replaces a catalog silently" \
  fit --output table.fits --output-format fits "$F"
fit --output table.fits --output-format fits --overwrite "$F" 2>/dev/null

echo "== never mixed silently (issue 24)"
# Reproduces the issue first: before the fix, resuming cats with another library skipped the
# finished input and --merge joined rows of two libraries with exit 0.
G="$VELOX_DATA_DIR/spectra/lamost_dr10_pylasp/fits/3706009.fits"
printf 'templates:\n  n_components: 6\n' >k6.yaml
"$VELOX" templates build --input "$VELOX_DATA_DIR/templates/miles/miles_thin" --config k6.yaml \
  --output lib_k6.h5 2>/dev/null
fit --output-dir mixed "$F" 2>/dev/null
sum_before=$(md5sum <mixed/3703110.velox.h5)
refused resume_library "template library fnv1a64:" \
  "$VELOX" fit --templates lib_k6.h5 --threads 1 --output-dir mixed --merge mixed/m.h5 "$F" "$G"
grep -qF -- "Add --refit-changed" resume_library.log || fail "the refusal does not say how to refit"
printf 'fit:\n  cont_deg: 4\n' >deg4.yaml
refused resume_config "fit configuration fnv1a64:" \
  fit --config deg4.yaml --output-dir mixed "$F" "$G"
[ "$(md5sum <mixed/3703110.velox.h5)" = "$sum_before" ] && [ ! -e mixed/3706009.velox.h5 ] &&
  [ ! -e mixed/m.h5 ] || fail "a refused resume wrote something"
# Another input fitted with the other library into the same folder: a merge refuses the mix.
"$VELOX" fit --templates lib_k6.h5 --threads 1 --output-dir other "$G" 2>/dev/null
cp other/3706009.velox.h5 mixed/
refused merge_mixed "was fitted differently from" "$VELOX" fit --output-dir mixed --merge m.h5
[ ! -e m.h5 ] || fail "a refused merge wrote its catalog"
# --refit-changed refits what differs from this run (both inputs: 3703110 had the other
# library) and the merge then holds one library's rows.
"$VELOX" fit --templates lib_k6.h5 --threads 1 --output-dir mixed --merge mixed/m.h5 \
  --refit-changed "$F" "$G" 2>refit.log
grep -qF -- "--refit-changed: refitting $F" refit.log || { cat refit.log; fail "no refit of $F"; }
"$PY" - mixed/m.h5 lib_k6.h5 <<'PY'
import sys
import h5py
m, lib = sys.argv[1:]
with h5py.File(lib, "r") as f:
    want = f.attrs["checksum"]
with h5py.File(m, "r") as f:
    assert f["catalog"].shape == (2,), f["catalog"].shape
    assert f.attrs["templates_checksum"] == want, (f.attrs["templates_checksum"], want)
    assert f.attrs["fit_config_hash"].startswith("fnv1a64:"), f.attrs["fit_config_hash"]
for name in ("mixed/3703110.velox.h5", "mixed/3706009.velox.h5"):
    with h5py.File(name, "r") as f:
        assert f.attrs["templates_checksum"] == want, name
print("refit-changed: both per-input catalogs and the merge hold", want)
PY
# The same run again skips both: identity unchanged.
"$VELOX" fit --templates lib_k6.h5 --threads 1 --output-dir mixed "$F" "$G" 2>same.log
grep -qF "(0 to fit, 2 skipped" same.log || { cat same.log; fail "an unchanged resume refitted"; }

echo "== options and config"
refused log_level "--log-level: verbose not in" "$VELOX" --log-level verbose fit --output c.h5 "$F"
refused threads "--threads: must be a number >= 0, not -3" fit --threads -3 --output c.h5 "$F"
refused repeat "--repeat: must be a number >= 1, not 0" "$VELOX" bench --templates "$LIB" --repeat 0 "$F"
printf 'fit:\n  cont_degg: 3\n' >typo_key.yaml
refused typo_key "fit.cont_degg: unknown key (did you mean fit.cont_deg?)" \
  fit --config typo_key.yaml --output c.h5 "$F"
printf 'fitt:\n  cont_deg: 3\n' >typo_section.yaml
refused typo_section "unknown section 'fitt:' (did you mean 'fit:'?)" \
  fit --config typo_section.yaml --output c.h5 "$F"
printf 'select:\n  min_snn: 3\n' >typo_select.yaml
refused typo_select "select.min_snn: unknown key (did you mean select.min_sn?)" \
  fit --config typo_select.yaml --output c.h5 "$F"
printf 'templates:\n  n_component: 3\n' >typo_templates.yaml
refused typo_templates "templates.n_component: unknown key (did you mean templates.n_components?)" \
  "$VELOX" templates build --input "$VELOX_DATA_DIR/templates/miles/miles_thin" \
  --config typo_templates.yaml --output lib2.h5
# A file shared with velox fit: templates build checks its fit: section as fit does (issue 53).
refused templates_fit_key "fit.cont_degg: unknown key (did you mean fit.cont_deg?)" \
  "$VELOX" templates build --input "$VELOX_DATA_DIR/templates/miles/miles_thin" \
  --config typo_key.yaml --output lib2.h5
[ ! -e c.h5 ] && [ ! -e lib2.h5 ] || fail "a refused run wrote an output"

echo "== help shows the real defaults; bench lists what it uses"
"$VELOX" fit --help >fit_help.txt
for want in "--threads INT=0" "--format TEXT:{auto,lamost-dr8,lamost-dr10,sdss,desi}=auto" \
            "--glob TEXT=*.fits*" "--device TEXT=auto" "--output-format TEXT:{h5,fits}=h5" \
            "--progress-interval FLOAT=5"; do
  grep -qF -- "$want" fit_help.txt || { cat fit_help.txt; fail "fit --help lacks '$want'"; }
done
! grep -q "{false}" fit_help.txt || fail "fit --help shows a negated flag default"
"$VELOX" --help >help.txt  # (a pipe into grep -q could SIGPIPE velox under pipefail)
grep -qF -- "--log-level TEXT:{trace,debug,info,warn,error}=info" help.txt ||
  fail "--help lacks the log level default"
"$VELOX" bench --help >bench_help.txt
grep -qF -- "--repeat INT=5" bench_help.txt || fail "bench --help lacks --repeat's default"
for gone in --objtypes --save-models --output-format --include-unselected --targetid; do
  ! grep -qF -- "$gone" bench_help.txt || fail "bench --help lists $gone, which bench ignores"
done

echo "== plain messages for a missing input and a directory input"
rc=0
fit --output missing.h5 "$F" no_such_file.fits 2>missing.log || rc=$?
cat missing.log
[ "$rc" = 3 ] || fail "missing input: exit $rc, expected 3"
grep -qF "[error] no_such_file.fits: no such file" missing.log || fail "missing input: message"
! grep -q "CFITSIO status" missing.log || fail "missing input: CFITSIO jargon"
refused directory "is a directory: use --input-dir" fit --output dir.h5 "$VELOX_DATA_DIR/spectra/sdss"

echo "== compact provenance"
# A shell glob of every LAMOST spectrum; the per-input catalogs hold one target each.
mapfile -t inputs < <(velox_lamost_inputs)
fit --output-dir cats --merge cats/merged.h5 "${inputs[@]}" 2>/dev/null
size=$(stat -c %s cats/3703110.velox.h5)
echo "one-target per-input catalog: $size bytes"
((size < 50000)) || fail "per-input catalog of $size bytes, expected < 50 KB"
"$PY" - cats/3703110.velox.h5 cats/merged.h5 "${#inputs[@]}" <<'PY'
import sys
import h5py
from astropy.table import Table
one, merged, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
with h5py.File(one, "r") as f:
    cmd = f.attrs["command_line"]
    assert f"<{n} input files>" in cmd and ".fits" not in cmd.split("--templates")[0], cmd
    assert len(cmd) < 400, len(cmd)  # no input path in it
with h5py.File(merged, "r") as f:
    paths = [p.decode() for p in f["provenance/inputs"][:]]
    assert len(paths) == n and paths[0].endswith("3703110.fits"), paths[:2]
    bits = f["catalog"].attrs["RVS_WARN_BITS"]
    assert bits.startswith("0:CHISQ_NOT_BETTER,1:RV_EDGE"), bits
t = Table.read(one, path="catalog")  # astropy still reads units and provenance
assert len(t) == 1 and str(t["VRAD"].unit) == "km / s" and "command_line" in t.meta
print("provenance OK:", cmd)
PY
# Merging an output directory alone checks its target first, too.
refused merge_only "folder nodir does not exist" "$VELOX" fit --output-dir cats --merge nodir/m.h5

echo "== more threads than cores (issue 53)"
# --threads beyond the cores the process may run on (its affinity: nproc) is capped there, with
# a warning naming both numbers; the fit runs.
cores=$(nproc)
run_rc rc "$VELOX" fit --templates "$LIB" --threads 1000 --output threads.h5 "$F" >threads.log 2>&1
((rc == 0)) || { cat threads.log; fail "--threads 1000: exit code $rc"; }
grep -q "warning.*--threads 1000: this process may run on $cores cores.*using $cores threads" \
  threads.log || { cat threads.log; fail "--threads 1000: no warning naming $cores cores"; }
grep -q "1 ranks x $cores threads" threads.log ||
  { cat threads.log; fail "--threads 1000: not capped at $cores"; }
echo "PASS"
