#!/usr/bin/python3
"""Single-thread throughput of velox.fit (Python, arrays in memory) against the CLI.

Run by `scripts/bench.sh --python`. Each of --repeat rounds runs, back to back:
  1. `velox bench --threads 1 --device cpu --repeat 1 FILES`: the CLI's backend rate (the fit
     kernels on prepared spectra) and end-to-end rate (library load, reading, prepare, fit);
  2. velox.fit(..., threads=1, device="cpu") on the same spectra as one batch (read once with
     velox.read_spectra, passed as arrays): prepare, backend and finish from arrays, including
     the Python layer's checks and conversions. The engine is made before the rounds (as a
     notebook's second call finds it); the first call's time is printed too.
Prints the medians (spectra/s) and the ratios Python / CLI.
"""
import argparse
import re
import statistics
import subprocess
import time

import velox


def cli_round(velox_bin, library, files):
    out = subprocess.run([velox_bin, "bench", "--templates", library, "--threads", "1",
                          "--device", "cpu", "--repeat", "1", *files],
                         check=True, capture_output=True, text=True).stdout
    m = re.search(r"backend ([\d.]+) spectra/s.*end to end ([\d.]+) spectra/s", out)
    return float(m.group(1)), float(m.group(2))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--velox", required=True)
    ap.add_argument("--library", required=True)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("files", nargs="+")
    args = ap.parse_args()

    spectra = [s for p in args.files for s in velox.read_spectra(p)]
    arm = [s.arms[0] for s in spectra]  # LAMOST: one arm
    wave, flux, ivar, mask = ([getattr(a, k) for a in arm] for k in ("wave", "flux", "ivar",
                                                                      "mask"))
    lib = velox.Library.load(args.library)

    def python_fit():
        t0 = time.perf_counter()
        # format: the LAMOST defaults the CLI applies to these files (DR8 and DR10 share them:
        # error floors, the 5800 A split for VRAD_B/VRAD_R).
        rows = velox.fit(wave, flux, ivar, mask=mask, resolution=1800.0, format="lamost-dr8",
                         library=lib, threads=1, device="cpu")
        return len(rows) / (time.perf_counter() - t0), rows

    first, rows = python_fit()
    print("velox.fit: %d spectra, %d SUCCESS; first call (engine set-up included) %.2f spectra/s"
          % (len(rows), rows["SUCCESS"].sum(), first))
    backend, e2e, py = [], [], []
    for r in range(args.repeat):
        b, e = cli_round(args.velox, args.library, args.files)
        p, _ = python_fit()
        backend.append(b)
        e2e.append(e)
        py.append(p)
        print("round %d: CLI backend %.2f, CLI end to end %.2f, Python velox.fit %.2f spectra/s"
              % (r + 1, b, e, p))
    med = statistics.median
    print("medians over %d rounds, 1 thread, %d spectra: CLI backend %.2f spectra/s, CLI end to "
          "end %.2f spectra/s, Python velox.fit %.2f spectra/s" % (args.repeat, len(rows),
                                                                   med(backend), med(e2e),
                                                                   med(py)))
    print("Python / CLI: %.3f of the backend rate, %.3f of the end-to-end rate"
          % (med(py) / med(backend), med(py) / med(e2e)))


if __name__ == "__main__":
    main()
