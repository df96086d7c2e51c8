#!/usr/bin/env bash
# The instruction-set split of the CPU kernel and of the host preparation's inner loops, checked on
# the compiled objects (test cpu_isa.objects; docs/performance.md "Instruction sets"):
#  1. every per-level object defines only its entry points, velox::cpu_isa::<level>::fit_spectrum
#     and the test entry fixed_taps (fit_slot.cpp), or velox::prep_isa::<level>::kernels()
#     (prep_slot.cpp): every kernel template and helper inside is local, so the linker cannot
#     merge the AVX2/AVX-512 copy of one into the other levels (ODR);
#  2. the baseline objects and every other object of the velox layers contain no VEX/EVEX
#     instruction and no ymm/zmm register: outside the dispatched kernels the binary runs on any
#     x86-64 CPU;
#  3. the avx2 and avx512 objects do use VEX/EVEX code (their -march flags took effect).
# Usage: check-isa-objects.sh LEVEL:OBJECT... -- OBJECT...   (the second list: the layers' own
# objects). Exits 77 (skipped) without nm/objdump or off x86-64.
set -euo pipefail
command -v nm >/dev/null && command -v objdump >/dev/null || { echo "no nm/objdump: skipped"; exit 77; }
[[ "$(uname -m)" == x86_64 ]] || { echo "not x86-64: skipped"; exit 77; }

# CMake passes a generator-expression list as one argument separated by ';'.
levels=() core=()
seen_sep=0
for arg in "$@"; do
  if [[ "$arg" == "--" ]]; then seen_sep=1; continue; fi
  IFS=';' read -ra parts <<< "$arg"
  if [[ $seen_sep -eq 0 ]]; then levels+=("${parts[@]}"); else core+=("${parts[@]}"); fi
done
fail=0

# Mnemonics of VEX/EVEX instructions (v...) and uses of ymm/zmm/mask registers in an object.
wide_code() {
  objdump -d --no-show-raw-insn "$1" | awk -F'\t' '$1 ~ /:$/ && NF >= 2 {
    split($2, a, " "); if (a[1] ~ /^v/ || $2 ~ /%[yz]mm|%k[0-7]/) print }'
}

for spec in "${levels[@]}"; do
  level="${spec%%:*}" obj="${spec#*:}"
  # Type descriptions are data, the same for every level: clang's -fsanitize=function (the
  # sanitizer build, scripts/test-sanitize.sh) emits weak "typeinfo for <function type>" objects.
  exported="$(nm -g --defined-only -C "$obj" | awk '{ $1 = ""; $2 = ""; sub(/^  /, ""); print }' |
    grep -v '^typeinfo \(name \)\?for ' | LC_ALL=C sort || true)"
  case "$obj" in
    *prep_slot*) want="velox::prep_isa::${level}::kernels()" ;;
    *) want="velox::cpu_isa::${level}::fit_spectrum(velox::kern::BatchView const&, int, int, double*)
velox::cpu_isa::${level}::fixed_taps(float const*, int, double const*, int const*, double const*, double*)" ;;
  esac
  want="$(LC_ALL=C sort <<< "$want")"
  if [[ "$exported" != "$want" ]]; then
    echo "FAIL $level: $obj exports more than its entry points:"; echo "$exported"; fail=1
  else
    echo "ok   $level: only its entry points are external: $(tr "\n" " " <<< "$want")"
  fi
  n_wide="$(wide_code "$obj" | wc -l)"
  if [[ "$level" == baseline && "$n_wide" -ne 0 ]]; then
    echo "FAIL baseline: $n_wide VEX/EVEX instructions in $obj:"; wide_code "$obj" | head -5; fail=1
  elif [[ "$level" != baseline && "$n_wide" -eq 0 ]]; then
    echo "FAIL $level: no VEX/EVEX instruction in $obj (-march flag missing?)"; fail=1
  else
    echo "ok   $level: $n_wide VEX/EVEX instructions"
  fi
done

n_core=0
for obj in "${core[@]}"; do
  [[ "$obj" == *.o ]] || continue
  n_core=$((n_core + 1))
  if [[ -n "$(wide_code "$obj" | head -1)" ]]; then
    echo "FAIL core object $obj has VEX/EVEX code:"; wide_code "$obj" | head -3; fail=1
  fi
done
echo "ok   $n_core other objects of the velox layers checked for VEX/EVEX code"
exit "$fail"
