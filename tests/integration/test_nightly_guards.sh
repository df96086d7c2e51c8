#!/usr/bin/env bash
# scripts/nightly.sh's input-folder checks (docs/running.md "Nightly reprocessing"): a missing
# (unmounted) input folder, a file, an unreadable folder, a folder with no file matching the glob,
# and a failing `find` each stop the night with exit 2 and one "nightly.sh:" line naming the
# folder, before velox runs, with OUT/.last-success untouched and no manifest written; also when
# a pending manifest is resumed and under --dry-run. Before the fix such a night exited 0 and
# moved .last-success forward, so inputs updated upstream were never refitted. --allow-empty
# accepts an empty folder (the stamp moves), and a folder with one input still runs the fit.
# No velox build needed: --velox is a stand-in that records its calls and creates nothing.
# NIGHTLY_SH=path runs another copy of the script (e.g. the one before the fix; it needs lib.sh
# next to it).
set -euo pipefail
S=${VELOX_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
NIGHTLY=${NIGHTLY_SH:-$S/scripts/nightly.sh}
if [ -n "${VELOX_BUILD_DIR:-}" ]; then
  W="$VELOX_BUILD_DIR/test-tmp/nightly_guards"
  chmod 755 "$W/inputs/locked" 2>/dev/null || true  # left unreadable by a killed run
  rm -rf "$W"
  mkdir -p "$W"
else
  W=$(mktemp -d)
fi
I=$W/inputs  # the input folders; $W/NAME: one case's OUT and stand-in velox
mkdir -p "$I"
trap 'chmod 755 "$I/locked" 2>/dev/null || true' EXIT  # so that the scratch dir can be removed
STAMP0=$(date -d '2020-01-01' +%s)

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# prepare NAME: a fresh $W/NAME with OUT=$W/NAME/out holding only .last-success (2020-01-01), and
# the stand-in velox $W/NAME/velox, which appends its arguments to $W/NAME/velox.calls.
prepare() {
  rm -rf "${W:?}/$1"
  mkdir -p "$W/$1/out"
  touch -d '2020-01-01' "$W/$1/out/.last-success"
  # shellcheck disable=SC2016  # expanded by the stand-in, not here
  printf '#!/bin/bash\necho "$*" >>"$(dirname "$0")/velox.calls"\n' >"$W/$1/velox"
  chmod +x "$W/$1/velox"
}

# night NAME DIR [ARGS...]: run nightly.sh on input folder DIR into $W/NAME/out; exit code in $rc,
# stdout and stderr in $W/NAME/{stdout,stderr}.
night() {
  local name=$1 dir=$2
  shift 2
  rc=0
  "$NIGHTLY" --input-dir "$dir" --output-dir "$W/$name/out" --templates "$W/no-library.h5" \
    --velox "$W/$name/velox" "$@" >"$W/$name/stdout" 2>"$W/$name/stderr" || rc=$?
}

stamp_mtime() { stat -c %Y "$W/$1/out/.last-success"; }

# refused NAME DIR WANT: exit 2, stderr is one "nightly.sh:" line naming DIR and saying WANT,
# velox never ran, .last-success untouched, no manifest written (nor anything else in OUT).
refused() {
  local name=$1 dir=$2 want=$3 err
  err=$(cat "$W/$name/stderr")
  [ "$rc" = 2 ] || { echo "$err"; fail "$name: exit code $rc, expected 2"; }
  [ "$(wc -l <"$W/$name/stderr")" = 1 ] || { echo "$err"; fail "$name: not one stderr line"; }
  [[ $err == "nightly.sh: "* ]] || fail "$name: message does not start with 'nightly.sh:': $err"
  grep -qF -- "$dir" <<<"$err" || fail "$name: message does not name $dir: $err"
  grep -qF -- "$want" <<<"$err" || fail "$name: message lacks '$want': $err"
  [ ! -e "$W/$name/velox.calls" ] || fail "$name: velox ran: $(cat "$W/$name/velox.calls")"
  [ "$(stamp_mtime "$name")" = "$STAMP0" ] || fail "$name: .last-success was touched"
  [ ! -e "$W/$name/out/manifests" ] || fail "$name: OUT/manifests was created"
  echo "refused as expected: $name: $err"
}

# refused_fresh NAME DIR WANT [ARGS...]: a night on a fresh OUT is refused; no manifest.pending.
refused_fresh() {
  local name=$1 dir=$2 want=$3
  shift 3
  prepare "$name"
  night "$name" "$dir" "$@"
  refused "$name" "$dir" "$want"
  [ ! -e "$W/$name/out/manifest.pending" ] || fail "$name: manifest.pending was created"
}

echo "== a missing input folder (not mounted)"
refused_fresh missing "$I/no-such-folder" "does not exist"
refused_fresh missing_dry "$I/no-such-folder" "does not exist" --dry-run

echo "== a file, not a folder"
touch "$I/a-file.fits"
refused_fresh file "$I/a-file.fits" "is not a folder"

echo "== an unreadable folder"
mkdir "$I/locked"
touch "$I/locked/a.fits"
chmod 000 "$I/locked"
if [ "$(id -u)" = 0 ]; then
  echo "SKIP (this sub-case only): running as root, whom permission bits do not stop from reading"
else
  refused_fresh unreadable "$I/locked" "cannot be listed"
fi
chmod 755 "$I/locked"

echo "== a folder with no file matching the glob"
mkdir "$I/empty"
touch "$I/empty/README.txt"  # present, but not '*.fits*'
refused_fresh empty "$I/empty" "unexpectedly empty"

echo "== a failing find (listing error): its exit status counts"
mkdir -p "$W/bin" "$I/flaky"
touch "$I/flaky/a.fits"
real_find=$(command -v find)
# The stand-in lists DIR partially and fails, as on an I/O error; any other find is the real one.
cat >"$W/bin/find" <<EOF
#!/bin/bash
if [ "\$1" = "$I/flaky" ]; then
  printf '%s\0' "\$1/a.fits"
  echo "find: '\$1/b.fits': Input/output error" >&2
  exit 1
fi
exec "$real_find" "\$@"
EOF
chmod +x "$W/bin/find"
PATH="$W/bin:$PATH" refused_fresh find_error "$I/flaky" "Input/output error"

echo "== resuming a pending manifest while the input folder is missing"
prepare resume
echo "$I/gone/a.fits" >"$W/resume/out/manifest.pending"
cp -p "$W/resume/out/manifest.pending" "$W/resume/manifest.before"
night resume "$I/gone"
refused resume "$I/gone" "does not exist"
if ! cmp -s "$W/resume/manifest.before" "$W/resume/out/manifest.pending" ||
   [ "$(stat -c %Y "$W/resume/out/manifest.pending")" != "$(stat -c %Y "$W/resume/manifest.before")" ]; then
  fail "resume: manifest.pending changed"
fi

echo "== --allow-empty: an expected empty night completes and moves the stamp"
prepare allow_empty
night allow_empty "$I/empty" --allow-empty
[ "$rc" = 0 ] || { cat "$W/allow_empty/stderr"; fail "allow_empty: exit code $rc, expected 0"; }
grep -q "0 inputs new or missing" "$W/allow_empty/stderr" || fail "allow_empty: no '0 inputs' line"
[ ! -e "$W/allow_empty/velox.calls" ] || fail "allow_empty: velox ran with nothing to fit"
[ "$(stamp_mtime allow_empty)" -gt "$STAMP0" ] || fail "allow_empty: .last-success did not move"
[ ! -e "$W/allow_empty/out/manifest.pending" ] || fail "allow_empty: manifest left pending"
echo "completed as expected: allow_empty"

echo "== a folder with one input: the guard lets a normal night through"
mkdir "$I/in"
touch "$I/in/a.fits" "$I/in/notes.txt"
prepare one
night one "$I/in" --dry-run  # prints the fit, runs nothing, changes nothing
[ "$rc" = 0 ] || { cat "$W/one/stderr"; fail "one --dry-run: exit code $rc, expected 0"; }
grep -qF "  manifest: $I/in/a.fits" "$W/one/stderr" || fail "one --dry-run: manifest not printed"
grep -qF -- "--input-list" "$W/one/stdout" || fail "one --dry-run: fit command not printed"
if [ -e "$W/one/velox.calls" ] || [ "$(stamp_mtime one)" != "$STAMP0" ] ||
   [ -e "$W/one/out/manifest.pending" ] || [ -e "$W/one/out/manifests" ]; then
  fail "one --dry-run: changed something"
fi
night one "$I/in"
[ "$rc" = 0 ] || { cat "$W/one/stderr"; fail "one: exit code $rc, expected 0"; }
# The stand-in velox fits and writes nothing: one call, the fit; with no catalog in OUT the
# script skips the merge, and the night completes.
[ "$(wc -l <"$W/one/velox.calls")" = 1 ] || fail "one: velox calls: $(cat "$W/one/velox.calls")"
grep -q "^fit .*--input-list $W/one/out/manifest.pending" "$W/one/velox.calls" ||
  fail "one: not the fit: $(cat "$W/one/velox.calls")"
[ "$(stamp_mtime one)" -gt "$STAMP0" ] || fail "one: .last-success did not move"
[ ! -e "$W/one/out/manifest.pending" ] || fail "one: manifest left pending"
[ "$(cat "$W"/one/out/manifests/*.manifest.txt)" = "$I/in/a.fits" ] || fail "one: archived manifest"
echo "completed as expected: one"

[ -n "${VELOX_BUILD_DIR:-}" ] || rm -rf "$W"
echo "PASS"
