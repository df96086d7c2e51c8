#!/usr/bin/env bash
# Mistakes of the operator (issue 50; docs/running.md "Outputs", "Merging"): each is refused with
# a clear message (exit 2) or done safely, and nothing is replaced, lost or duplicated.
#  1. merge-only (--output-dir D --merge D/<stem>.velox.h5, no inputs) over a per-input catalog
#  2. --output-format fits over an rvspecfit rvtab_<stem>.fits already in the output folder
#  3. --merge over a velox catalog that is not an earlier merge of the same folder (an --output
#     catalog, a merge of another folder); an earlier merge of this folder is replaced
#  4. a merge named *.velox.h5 inside the output folder is refused; one put there by hand is
#     never read back as an input (the next merge has one row per input)
#  5. (nightly.sh with a missing input folder: test_nightly_guards.sh)
#  6. a usage error under mpirun -np 2: exit 2 on one plain line, no MPI_ABORT banner
# And the seal of a catalog's rows: a per-input catalog whose rows were changed, or that has no
# seal, is refitted by a resume (saying which file and why) and refused by a merge-only run.
source "$(dirname "$0")/common.sh"
itest_setup operator_guards
mapfile -t IN < <(ls "$VELOX_DATA_DIR"/spectra/lamost_dr10_pylasp/fits/*.fits | head -n 3)
fit() { "$VELOX" fit --templates "$LIB" --threads 1 "$@"; }
sum() { md5sum <"$1"; }

refused() {  # refused CASE WANT_IN_MESSAGE CMD...: exit 2 and the message
  local name=$1 want=$2 rc=0
  shift 2
  "$@" >"$name.log" 2>&1 || rc=$?
  [ "$rc" = 2 ] || { cat "$name.log"; fail "$name: exit code $rc, expected 2"; }
  grep -qF -- "$want" "$name.log" || { cat "$name.log"; fail "$name: message lacks '$want'"; }
  echo "refused as expected: $name: $(grep -m1 -F -- "$want" "$name.log" | cut -c1-200)"
}
rows() { $PY -c "import h5py,sys; print(len(h5py.File(sys.argv[1])['catalog']))" "$1"; }

fit --output-dir od "${IN[@]}" >fit.log 2>&1 || fail "fit: exit $?"
stem=$(basename "${IN[0]}" .fits)
per_input="od/$stem.velox.h5"
s0=$(sum "$per_input")

# 1. merge-only over a per-input catalog.
refused merge_only_per_input "is the per-input catalog of" fit --output-dir od --merge "$per_input"
[ "$(sum "$per_input")" = "$s0" ] || fail "merge_only_per_input: the per-input catalog changed"

# 4. a merge named like a per-input catalog inside the folder.
refused merge_named_per_input "are per-input catalogs" fit --output-dir od --merge od/all.velox.h5
refused merge_named_elsewhere "are per-input catalogs" fit --output-dir od --merge other.velox.h5
fit --output-dir od --merge od/merged.h5 >m1.log 2>&1 || fail "merge: exit $?"
[ "$(rows od/merged.h5)" = 3 ] || fail "merge: not 3 rows"
cp od/merged.h5 od/hand-copied.velox.h5  # put there by hand
fit --output-dir od --merge od/merged.h5 >m2.log 2>&1 || fail "second merge: exit $?"
[ "$(rows od/merged.h5)" = 3 ] || fail "a merge in the folder was read back as an input"
grep -q "hand-copied.velox.h5 is not a per-input catalog" m2.log || fail "no word on the skipped merge"
rm od/hand-copied.velox.h5
echo "merges: an earlier merge of the folder replaced; a merge in the folder never read as input"

# 3. --merge over catalogs that are not a merge of this folder.
fit --output single.h5 "${IN[0]}" >single.log 2>&1 || fail "single: exit $?"
s1=$(sum single.h5)
refused merge_over_output "not a merge of" fit --output-dir od --merge single.h5
[ "$(sum single.h5)" = "$s1" ] || fail "merge_over_output: single.h5 changed"
fit --output-dir od2 "${IN[1]}" >fit2.log 2>&1 || fail "fit od2: exit $?"
refused merge_other_folder "a merge of another folder" fit --output-dir od2 --merge od/merged.h5
fit --output-dir od2 --merge od/merged.h5 --overwrite >m3.log 2>&1 || fail "--overwrite: exit $?"
[ "$(rows od/merged.h5)" = 1 ] || fail "--overwrite did not replace"

# 2. an rvspecfit table where velox would write its own.
$PY - "od/rvtab_$(basename "${IN[2]}" .fits).fits" <<'PYEOF'
import sys
from astropy.io import fits
p = fits.PrimaryHDU()
p.header["DEPNAM00"] = "rvspecfit"
fits.HDUList([p, fits.BinTableHDU.from_columns([fits.Column("VRAD", "D", array=[1.0])],
                                               name="RVTAB")]).writeto(sys.argv[1])
PYEOF
rv="od/rvtab_$(basename "${IN[2]}" .fits).fits"
s2=$(sum "$rv")
rm "od/$(basename "${IN[2]}" .fits).velox.h5"  # that input would be fitted again
refused rvspecfit_table "not written by velox" fit --output-dir od --output-format fits "${IN[@]}"
[ "$(sum "$rv")" = "$s2" ] || fail "rvspecfit_table: the rvspecfit table changed"
fit --output-dir od --output-format fits --overwrite "${IN[2]}" >ow.log 2>&1 || fail "--overwrite: exit $?"
$PY -c "from astropy.io import fits; import sys; assert fits.getheader(sys.argv[1])['DEPNAM00'] == 'velox'" "$rv"

# The seal: change one row's VRAD (A); drop another's seal (B: a catalog of a velox before the
# seal, kept as it reads); drop a third's seal and its rows (C: what a write lost at close left
# before the seal existed); and a fourth input's catalog truncated to 200 bytes (D: damaged).
stem1=$(basename "${IN[1]}" .fits) stem2=$(basename "${IN[2]}" .fits)
$PY - "$per_input" "od/$stem1.velox.h5" "od/$stem2.velox.h5" <<'PYEOF'
import sys, h5py
with h5py.File(sys.argv[1], "r+") as f:
    c = f["catalog"][:]
    c["VRAD"][0] += 1.0
    f["catalog"][:] = c
with h5py.File(sys.argv[2], "r+") as f:
    del f.attrs["velox_rows_seal"]
with h5py.File(sys.argv[3], "r+") as f:
    del f.attrs["velox_rows_seal"]
    f["catalog"].resize((0,))
PYEOF
rc=0
fit --output-dir od --merge od/merged.h5 --overwrite >bad_merge.log 2>&1 || rc=$?
[ "$rc" = 1 ] || { cat bad_merge.log; fail "merge of a changed catalog: exit $rc, expected 1"; }
grep -q "2 of the 3 per-input catalogs in od fail their check" bad_merge.log ||
  { cat bad_merge.log; fail "merge: no word on the failed checks"; }
grep -q "do not match their seal" bad_merge.log || fail "merge: no reason given"
fit --output-dir od "${IN[@]}" >resume.log 2>&1 || fail "resume: exit $?"
grep -q "resume: .*$stem.velox.h5: the rows do not match their seal.*refitting" resume.log ||
  { cat resume.log; fail "resume: the changed catalog was not refitted with a word"; }
grep -q "resume: .*$stem2.velox.h5: has no seal .* and no rows; refitting" resume.log ||
  fail "resume: the unsealed empty catalog was not refitted with a word"
grep -q "resume: 1 per-input catalogs were written by a velox before 2026-11" resume.log ||
  fail "resume: the unsealed catalog with rows was not kept with a word"
grep -q "fit: 3 inputs (2 to fit, 1 skipped" resume.log || fail "resume: not 2 refits"
fit --output-dir od --merge od/merged.h5 --overwrite >good_merge.log 2>&1 || fail "merge after resume"
[ "$(rows od/merged.h5)" = 3 ] || fail "merge after resume: not 3 rows"
grep -q "merge: 1 per-input catalogs were written by a velox before 2026-11" good_merge.log ||
  fail "merge: the unsealed catalog was not named"
head -c 200 "od/$stem1.velox.h5" >d.tmp && mv d.tmp "od/$stem1.velox.h5"
fit --output-dir od "${IN[@]}" >damaged.log 2>&1 || { cat damaged.log; fail "damaged: exit $?"; }
grep -q "resume: .*$stem1.velox.h5.*refitting" damaged.log || fail "damaged: not refitted"
echo "seal: changed and empty unsealed catalogs refitted by the resume and refused by the merge;"
echo "      an older unsealed catalog kept with a word; a damaged one refitted"

# 6. a usage error under mpirun.
if command -v mpirun >/dev/null; then
  MPIRUN=(mpirun --oversubscribe -np 2)
  [ "$(id -u)" = 0 ] && MPIRUN+=(--allow-run-as-root)
  rc=0
  "${MPIRUN[@]}" "$VELOX" fit --templates "$LIB" --threads 1 --output single.h5 "${IN[0]}" \
    >mpi_usage.log 2>&1 || rc=$?
  [ "$rc" = 2 ] || { cat mpi_usage.log; fail "mpi usage error: exit $rc, expected 2"; }
  grep -q "velox never replaces a catalog silently" mpi_usage.log || fail "mpi usage: no message"
  ! grep -qiE "MPI_ABORT|unpack would read past" mpi_usage.log ||
    { cat mpi_usage.log; fail "mpi usage error: MPI abort noise"; }
  [ "$(sum single.h5)" = "$s1" ] || fail "mpi usage: single.h5 changed"
  echo "mpirun: a usage error exits 2 on one line, no abort"
else
  echo "SKIP (mpirun part): mpirun not found"
fi
echo PASS
