#!/usr/bin/env bash
# GPU acceptance runs (issues 8 and 26), on a GPU host, from a bundle made here with
#   ../shared/tools/pack-gpu-bundle.sh BUILD .gpu/vx.tgz templates/miles/miles_thin \
#     spectra/lamost_dr10_pylasp spectra/lamost_dr8 spectra/desi_lamost
# where BUILD is a folder holding only velox, tests/velox_gpu_parity, miles.h5 (MILES) and desi.h5
# (`velox templates build --preset desi`) copied from a CUDA build: the bundle packs every
# executable there, and with the checkout it must stay under the 64 MiB a device call carries.
# Unpacked there with: tar xzf .gpu/vx.tgz -C /tmp && source /tmp/vxb/env.sh
# usage: gpu-acceptance.sh STAGE...   stages (each well inside the 10-minute command limit):
#   parity    gpu.parity (LAMOST DR10 + DESI-layout coadd with resolution matrices)
#   devices   velox fit --device gpu and cpu with desi.h5 on the DESI-layout coadds and the LAMOST
#             files: catalogs to $OUT/{desi,lam}-{gpu,cpu}.h5 (compare them with
#             scripts/compare_devices.py)
#   bench     velox bench --device cpu,gpu --replicate N on the LAMOST files (kernel, prepare,
#             end-to-end rates and the GPU/CPU ratio)
#   desi      velox bench --device cpu,gpu on the DESI-layout coadds (resolution matrices on),
#             MILES and desi.h5
#   whole     velox fit --device gpu vs cpu on 60 copies of coadd-lamost-dr8.fits (3840 DESI
#             spectra), MILES and desi.h5, two rounds: fit stage rate, wall and peak RSS; the GPU
#             with each engine of WHOLE_ENGINES (default "warp staged")
#   stages    the GPU backend with one fit stage left out at a time (desi.h5; config variants)
#   prod      velox fit --device auto vs --device cpu over REPS x 134 LAMOST files (links)
#   sanitize  compute-sanitizer memcheck and racecheck on one LAMOST spectrum and memcheck on
#             the 29-fibre DESI-layout coadd (desi.h5)
#   engine    the batched engines (VELOX_GPU_ENGINE=kinds, and staged: the row GEMMs with cuBLAS)
#             against the warp kernel: velox bench --device gpu with each (DESI-layout with
#             desi.h5, the staged engine's with --device cpu,gpu for the GPU/CPU ratio; LAMOST
#             with MILES), the DESI-layout catalogs of each to
#             $OUT/engine-{warp,kinds,staged}.h5 (compare them here with
#             scripts/compare_devices.py), gpu.parity of both engines, memcheck and racecheck of
#             the staged engine and memcheck of the kinds engine on one LAMOST spectrum, and
#             memcheck of the staged engine on the DESI-layout coadd; each engine's DESI-layout
#             bench stderr to $OUT/engine-stages-ENGINE-desi.txt, where the staged engine's time
#             per stage goes (VELOX_GPU_STAGE_TIMES=1). ENGINES picks the benched engines
#             (default "warp kinds staged")
# Env: VXB (default /tmp/vxb), OUT (logs; default /tmp/vx-out), THREADS (16), REPLICATE (25000),
#      REPS (75: 10 050 files), ENGINES (engine), WHOLE_ENGINES (whole).
set -euo pipefail
VXB=${VXB:-/tmp/vxb}
OUT=${OUT:-/tmp/vx-out}
THREADS=${THREADS:-16}
mkdir -p "$OUT"
# The staged engine loads cuBLAS at run time (libcublas.so.13): the GPU host's CUDA toolkit has it,
# the bundle does not carry it (its 600 MB are over the 64 MiB a device call carries).
if [[ -d /usr/local/cuda/lib64 ]]; then
  export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}/usr/local/cuda/lib64
fi
vx=$VXB/bin/velox
lib=$VXB/miles.h5
desi_lib=$VXB/desi.h5
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
peak() {  # peak LABEL COMMAND...: wall clock, peak RSS and the fit's rate line of one run
  # (the standard library only: any Python 3 of the GPU host; VELOX_PYTHON picks one)
  "${VELOX_PYTHON:-python3}" - "$@" <<'PY'
import resource, subprocess, sys, time
label, t0 = sys.argv[1], time.time()
r = subprocess.run(sys.argv[2:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
wall = time.time() - t0
mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
fit = [l for l in r.stderr.splitlines() if "spectra fitted of" in l]
print(f"{label}: rc {r.returncode}, wall {wall:.2f} s, peak RSS {mb:.0f} MB | "
      f"{fit[-1] if fit else r.stderr[-300:]}", flush=True)
PY
}
for stage in "$@"; do
  case $stage in
    parity) "$VXB/bin/velox_gpu_parity" 2>&1 | tee "$OUT/parity.log" | tail -5 ;;
    devices)
      for dev in gpu cpu; do
        "$vx" fit --templates "$desi_lib" --device "$dev" --threads "$THREADS" \
          --output "$OUT/desi-$dev.h5" --overwrite "$data"/desi_lamost/*.fits 2>"$OUT/fit-desi-$dev.err"
        "$vx" fit --templates "$desi_lib" --device "$dev" --threads "$THREADS" \
          --output "$OUT/lam-$dev.h5" --overwrite "${lamost[@]}" 2>"$OUT/fit-lam-$dev.err"
      done
      ls "$OUT"/desi-*.h5 "$OUT"/lam-*.h5 ;;
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
      for l in "$lib" "$desi_lib"; do
        "$vx" bench --templates "$l" --device cpu,gpu --threads "$THREADS" \
          --replicate "${REPLICATE:-4000}" --repeat 3 "$data"/desi_lamost/*.fits \
          2>>"$OUT/desi.err" | tee -a "$OUT/desi.log"
      done ;;
    whole)
      rm -rf /tmp/vx-c60 && mkdir -p /tmp/vx-c60
      for k in $(seq 1 60); do ln -s "$data/desi_lamost/coadd-lamost-dr8.fits" "/tmp/vx-c60/c$k.fits"; done
      # The GPU with each engine of WHOLE_ENGINES (the host's memory and feed are the same code
      # for all; staged adds cuBLAS), then the CPU.
      for round in 1 2; do
        for l in "$desi_lib" "$lib"; do
          for eng in ${WHOLE_ENGINES:-warp staged}; do
            VELOX_GPU_ENGINE=$eng peak "$(basename "$l" .h5)-gpu-$eng-$round" "$vx" fit \
              --templates "$l" --device gpu --threads "$THREADS" --input-dir /tmp/vx-c60 \
              --output "/tmp/vx-w-gpu.h5" --overwrite
          done
          peak "$(basename "$l" .h5)-cpu-$round" "$vx" fit --templates "$l" --device cpu \
            --threads "$THREADS" --input-dir /tmp/vx-c60 --output "/tmp/vx-w-cpu.h5" --overwrite
        done
      done | tee "$OUT/whole.txt" ;;
    stages)
      # one stage of the fit left out at a time (docs/gpu.md, "Where the DESI kernel's time goes")
      mkdir -p /tmp/vx-cfg
      printf 'fit: {}\n' >/tmp/vx-cfg/none.yaml
      printf 'fit:\n  fit_vsini: false\n' >/tmp/vx-cfg/vsini.yaml
      printf 'fit:\n  n_starts: 1\n' >/tmp/vx-cfg/second_start.yaml
      printf 'fit:\n  clip_sigma: 0\n' >/tmp/vx-cfg/clipped_refit.yaml
      printf 'fit:\n  vrad_moments_half: 0\n' >/tmp/vx-cfg/moments.yaml
      printf 'fit:\n  seg_max_iter: 0\n' >/tmp/vx-cfg/arm_velocities.yaml
      for c in none vsini second_start clipped_refit moments arm_velocities; do
        echo "left out: $c"
        "$vx" bench --templates "$desi_lib" --config "/tmp/vx-cfg/$c.yaml" --device gpu \
          --threads "$THREADS" --replicate 3000 --repeat 3 "$data"/desi_lamost/*.fits 2>/dev/null |
          grep -E '\[gpu\]: ([0-9]+ threads|per spectrum)' || echo "  (no GPU figure)"
      done | tee "$OUT/stages.txt" ;;
    sanitize)
      for tool in memcheck racecheck; do
        timeout 280 compute-sanitizer --tool "$tool" "$vx" fit --templates "$lib" --device gpu \
          --threads 1 --output "/tmp/vx-san-$tool.h5" --overwrite "${lamost[0]}" \
          >"$OUT/sanitize-$tool.log" 2>&1 || echo "sanitize $tool: exit $?"
        tail -3 "$OUT/sanitize-$tool.log"
      done
      timeout 200 compute-sanitizer --tool memcheck "$vx" fit --templates "$desi_lib" --device gpu \
        --threads 1 --output /tmp/vx-san-desi.h5 --overwrite \
        "$data/desi_lamost/coadd-lamost-dr10.fits" >"$OUT/sanitize-desi.log" 2>&1 ||
        echo "sanitize desi: exit $?"
      tail -3 "$OUT/sanitize-desi.log" ;;
    engine)
      for eng in ${ENGINES:-warp kinds staged}; do
        # The staged engine's device time per stage (VELOX_GPU_STAGE_TIMES, printed to stderr
        # when the backend ends) goes to engine-stages-$eng-desi.txt.
        # The staged engine's DESI-layout bench takes the CPU too (--threads THREADS): the
        # issue's GPU/CPU ratio in the same call (about 30 s more).
        devs=gpu
        [[ $eng == staged ]] && devs=cpu,gpu
        VELOX_GPU_ENGINE=$eng VELOX_GPU_STAGE_TIMES=1 "$vx" bench --templates "$desi_lib" \
          --device "$devs" --threads "$THREADS" --replicate "${REPLICATE_DESI:-4000}" --repeat 3 \
          "$data"/desi_lamost/*.fits 2>"$OUT/engine-stages-$eng-desi.txt" |
          sed "s/^/$eng desi: /"
        grep -A18 "stage times" "$OUT/engine-stages-$eng-desi.txt" | head -40 |
          sed "s/^/$eng desi stages: /" >&2 || true
        VELOX_GPU_ENGINE=$eng "$vx" bench --templates "$lib" --device gpu --threads "$THREADS" \
          --replicate "${REPLICATE:-25000}" --repeat 3 "${lamost[@]}" 2>>"$OUT/engine.err" |
          sed "s/^/$eng lamost: /"
        VELOX_GPU_ENGINE=$eng "$vx" fit --templates "$desi_lib" --device gpu --threads "$THREADS" \
          --output "$OUT/engine-$eng.h5" --overwrite "$data"/desi_lamost/*.fits \
          2>>"$OUT/engine.err" || echo "engine $eng: fit exit $?"
      done | tee "$OUT/engine.log"
      for eng in kinds staged; do
        VELOX_GPU_ENGINE=$eng "$VXB/bin/velox_gpu_parity" 2>&1 | tee "$OUT/engine-parity-$eng.log" |
          tail -5 | sed "s/^/$eng parity: /"
      done
      # The sanitizers on the staged engine (its row stages and cuBLAS are the new code) and
      # memcheck on the kinds engine.
      for run in staged:memcheck staged:racecheck kinds:memcheck; do
        eng=${run%%:*} tool=${run#*:}
        VELOX_GPU_ENGINE=$eng timeout 150 compute-sanitizer --tool "$tool" "$vx" fit \
          --templates "$lib" --device gpu --threads 1 --output "/tmp/vx-eng-$eng-$tool.h5" \
          --overwrite "${lamost[0]}" >"$OUT/engine-sanitize-$eng-$tool.log" 2>&1 ||
          echo "engine sanitize $eng $tool: exit $?"
        tail -3 "$OUT/engine-sanitize-$eng-$tool.log" | sed "s/^/$eng $tool: /"
      done
      VELOX_GPU_ENGINE=staged timeout 150 compute-sanitizer --tool memcheck "$vx" fit \
        --templates "$desi_lib" --device gpu --threads 1 --output /tmp/vx-eng-desi.h5 \
        --overwrite "$data/desi_lamost/coadd-lamost-dr10.fits" >"$OUT/engine-sanitize-desi.log" \
        2>&1 || echo "engine sanitize desi: exit $?"
      tail -3 "$OUT/engine-sanitize-desi.log" | sed "s/^/staged memcheck desi: /" ;;
    *) echo "gpu-acceptance.sh: unknown stage '$stage'" >&2; exit 2 ;;
  esac
done
