#!/usr/bin/env bash
# Issue 8's GPU acceptance runs, on a GPU host, from a bundle made here with
#   ../shared/tools/pack-gpu-bundle.sh build .gpu/vx.tgz templates/miles/miles_thin \
#     spectra/lamost_dr10_pylasp spectra/lamost_dr8 spectra/desi_lamost
# and unpacked there (tar xzf .gpu/vx.tgz -C /tmp && source /tmp/vxb/env.sh).
# usage: gpu-acceptance.sh STAGE...   stages (each well inside the 10-minute command limit):
#   parity    gpu.parity (LAMOST DR10 + DESI-layout coadd with resolution matrices)
#   bench     velox bench --device cpu,gpu --replicate N on the LAMOST files (kernel, prepare,
#             end-to-end rates and the GPU/CPU ratio)
#   prod      velox fit --device auto vs --device cpu over REPS x 134 LAMOST files (links)
#   desi      velox bench --device cpu,gpu on the DESI-layout coadds (resolution matrices on)
#   sanitize  compute-sanitizer memcheck and racecheck on one LAMOST spectrum
# Env: VXB (default /tmp/vxb), OUT (logs; default /tmp/vx-out), THREADS (16), REPLICATE (25000),
#      REPS (75: 10 050 files).
set -euo pipefail
VXB=${VXB:-/tmp/vxb}
OUT=${OUT:-/tmp/vx-out}
THREADS=${THREADS:-16}
mkdir -p "$OUT"
vx=$VXB/bin/velox
lib=$VXB/miles.h5
data=$VXB/data/spectra
lamost=("$data"/lamost_dr10_pylasp/fits/*.fits "$data"/lamost_dr8/fits/*.fits.gz)
rate() {  # rate LABEL N_SPECTRA COMMAND...: wall-clock spectra/s of one run
  local label=$1 n=$2 t0 t1
  shift 2
  t0=$(date +%s.%N)
  "$@" >>"$OUT/$label.log" 2>&1
  t1=$(date +%s.%N)
  awk -v l="$label" -v n="$n" -v a="$t0" -v b="$t1" \
    'BEGIN { printf "%s: %d spectra in %.2f s = %.1f spectra/s\n", l, n, b - a, n / (b - a) }'
}
for stage in "$@"; do
  case $stage in
    parity) "$VXB/bin/velox_gpu_parity" 2>&1 | tee "$OUT/parity.log" | tail -5 ;;
    bench)
      "$vx" bench --templates "$lib" --device cpu,gpu --threads "$THREADS" \
        --replicate "${REPLICATE:-25000}" --repeat 3 "${lamost[@]}" 2>"$OUT/bench.err" |
        tee "$OUT/bench.log" ;;
    prod)
      rm -rf /tmp/vx-rep && mkdir -p /tmp/vx-rep
      for ((k = 0; k < ${REPS:-75}; ++k)); do
        for f in "${lamost[@]}"; do ln -s "$f" "/tmp/vx-rep/$k-$(basename "$f")"; done
      done
      n=$(ls /tmp/vx-rep | wc -l)
      for round in 1 2; do
        for dev in auto cpu; do
          rate "prod-$dev-$round" "$n" "$vx" fit --templates "$lib" --device "$dev" \
            --threads "$THREADS" --input-dir /tmp/vx-rep --output "/tmp/vx-$dev.h5" --overwrite
        done
      done | tee "$OUT/prod.txt" ;;
    desi)
      "$vx" bench --templates "$lib" --device cpu,gpu --threads "$THREADS" \
        --replicate "${REPLICATE:-25000}" --repeat 3 "$data"/desi_lamost/*.fits \
        2>"$OUT/desi.err" | tee "$OUT/desi.log" ;;
    sanitize)
      for tool in memcheck racecheck; do
        timeout 280 compute-sanitizer --tool "$tool" "$vx" fit --templates "$lib" --device gpu \
          --threads 1 --output "/tmp/vx-san-$tool.h5" --overwrite "${lamost[0]}" \
          >"$OUT/sanitize-$tool.log" 2>&1 || echo "sanitize $tool: exit $?"
        tail -3 "$OUT/sanitize-$tool.log"
      done ;;
    *) echo "gpu-acceptance.sh: unknown stage '$stage'" >&2; exit 2 ;;
  esac
done
