#!/usr/bin/env bash
# Fuzz every reader (LAMOST DR8/DR10, SDSS, DESI, MILES, PHOENIX, STELIB, Kesseli, converted
# Cannon models) and the template-library loader
# with libFuzzer under ASan+UBSan (tests/fuzz/; docs/testing.md).
#
#   scripts/fuzz.sh [--budget SECONDS] [--build DIR] [TARGET...]
#
# Builds DIR (default build-sanitize: clang, -DVELOX_SANITIZE=address,undefined -DVELOX_FUZZ=ON,
# CUDA off), makes the seed corpora from the shared data (scripts/fuzz-seeds.py, plus a small
# template library built from MILES), then runs each TARGET (default: all) for SECONDS of wall
# time (default 60), FUZZ_JOBS at a time (default: the number of cores). The corpora grow across
# runs in DIR/fuzz-corpus/<target>; a crash, leak, timeout or sanitizer report is saved to
# DIR/fuzz-crashes/<target>/. A fixed finding becomes a test in
# tests/unit/io/test_fuzz_regressions.cpp, rebuilt from synthetic data (crash inputs are mutated
# survey files, which stay out of git); an input holding no survey data may go to
# tests/fuzz/regressions/<target>/ as it is (replayed by the same tests).
# Prints one line per target (executions, corpus, crashes); exits 1 if any target found a crash.
# Env: VELOX_DATA_DIR, FUZZ_RSS_MB (memory limit per input, default 2048), FUZZ_JOBS (targets at a
# time, default nproc).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$VELOX_REPO"

BUDGET=60 BUILD=$VELOX_REPO/build-sanitize TARGETS=()
while (($#)); do
  case $1 in
    --budget) BUDGET=$2; shift 2 ;;
    --build) BUILD=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "fuzz.sh: unknown option $1" >&2; exit 2 ;;
    *) TARGETS+=("$1"); shift ;;
  esac
done
((${#TARGETS[@]})) || TARGETS=(lamost-dr8 lamost-dr10 sdss desi miles phoenix stelib kesseli cannon library)

velox_build_sanitize "$BUILD"
SEEDS=$BUILD/fuzz-seeds
if [[ ! -d "$SEEDS/cannon" ]]; then
  # The loader's seed: a small library (219 MILES stars, 5000-5300 A, 4 components).
  printf 'templates:\n  wave_min_A: 5000\n  wave_max_A: 5300\n  n_components: 4\n  n_ccf_templates: 4\n' \
    >"$BUILD/fuzz-library.yaml"
  ASAN_OPTIONS=detect_leaks=0 "$BUILD/velox" --log-level warn templates build \
    --input "$VELOX_DATA_DIR/templates/miles/miles_thin" --config "$BUILD/fuzz-library.yaml" \
    --output "$BUILD/fuzz-library.h5"
  rm -rf "$SEEDS.tmp"
  "$VELOX_PYTHON" scripts/cannon-to-h5.py \
    "$VELOX_DATA_DIR/templates/doppler_cannon/cannongrid_3000_18000_coolstars_norm_cubic_model.pkl" \
    "$BUILD/fuzz-cannon.h5"
  "$VELOX_PYTHON" scripts/fuzz-seeds.py "$SEEDS.tmp" --data-dir "$VELOX_DATA_DIR" \
    --library "$BUILD/fuzz-library.h5" --cannon "$BUILD/fuzz-cannon.h5"
  rm -rf "$SEEDS"
  mv "$SEEDS.tmp" "$SEEDS"
fi

export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export VELOX_FUZZ_LIBRARY=$SEEDS/library/seed-0.h5  # survey targets also prepare the fit
# allocator_may_return_null: an absurd allocation returns NULL, as malloc does outside ASan, so
# CFITSIO's own checks (status 113, memory allocation) run instead of ASan aborting; velox's own
# code never sees NULL (operator new throws, which the harness reports).
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}
# Leaks inside dependencies on their error paths (tests/fuzz/lsan.supp says which and why).
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$VELOX_REPO/tests/fuzz/lsan.supp:print_suppressions=0}
for t in "${TARGETS[@]}"; do
  [[ -x "$BUILD/fuzz/velox_fuzz_${t//-/_}" ]] ||
    { echo "fuzz.sh: unknown target $t (no $BUILD/fuzz/velox_fuzz_${t//-/_})" >&2; exit 2; }
done

# fuzz_one TARGET: fuzz it for BUDGET s; prints its line (and the finding), exits 1 on a finding.
fuzz_one() {
  local t=$1 bin=$BUILD/fuzz/velox_fuzz_${1//-/_}
  local corpus=$BUILD/fuzz-corpus/$t crashes=$BUILD/fuzz-crashes/$t log=$BUILD/fuzz-logs/$t.log
  mkdir -p "$corpus" "$crashes" "$(dirname "$log")"
  local dict=()
  [[ $t == library ]] || dict=(-dict=tests/fuzz/fits.dict)
  local before after execs rc=0
  before=$(find "$crashes" -type f | wc -l)
  # -malloc_limit_mb 4096: CFITSIO sizes its buffer for a .gz file by the gzip trailer (at most
  # 4 GiB by the format) before inflating; a corrupt trailer makes that one large, untouched
  # allocation, which is not a velox bug.
  "$bin" "$corpus" "$SEEDS/$t" "${dict[@]}" -max_total_time="$BUDGET" -timeout=60 \
    -rss_limit_mb="${FUZZ_RSS_MB:-2048}" -malloc_limit_mb=4096 -max_len=262144 \
    -print_final_stats=1 -artifact_prefix="$crashes/" >"$log" 2>&1 || rc=$?
  after=$(find "$crashes" -type f | wc -l)
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  echo "fuzz $t: ${BUDGET} s, ${execs:-?} executions, corpus $(find "$corpus" -type f | wc -l) files," \
    "$((after - before)) new crashes (exit $rc; log $log)"
  if ((rc != 0 || after > before)); then
    grep -m5 -E "ERROR|runtime error|unexpected|Test unit written" "$log" || tail -20 "$log"
    return 1
  fi
}

# FUZZ_JOBS targets at a time (default: one per core; each libFuzzer process uses one core), each
# for its full budget; the lines come out in the targets' order.
JOBS=${FUZZ_JOBS:-$(nproc)}
OUT=$BUILD/fuzz-logs/run.$$
rm -rf "$OUT"
mkdir -p "$OUT"
for t in "${TARGETS[@]}"; do
  while (($(jobs -rp | wc -l) >= JOBS)); do wait -n || true; done
  (rc=0; fuzz_one "$t" >"$OUT/$t.txt" 2>&1 || rc=$?; echo "$rc" >"$OUT/$t.rc") &
done
wait
status=0
for t in "${TARGETS[@]}"; do
  head -n 1 "$OUT/$t.txt"
  if [[ "$(cat "$OUT/$t.rc" 2>/dev/null)" != 0 ]]; then
    status=1
    tail -n +2 "$OUT/$t.txt" >&2
  fi
done
rm -rf "$OUT"
exit $status
