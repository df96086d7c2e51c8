#!/usr/bin/python3
"""Fail on any #include that runs upward between velox's layers (issue 27, docs/design.md).

The layers, bottom to top (a folder may include its own layer and those below):
  0 kernels/                the per-spectrum math
  0.5 src/common/           what every layer above uses (errors, stop, YAML keys, thread pool)
  1 src/io/                 readers, catalog data model, HDF5/FITS
  2 src/emulator/           template sources and the emulator
  3 src/model/              per-resolution arm models
  4 src/fit/                prepare and finish of one fit, the host-side statistics
  5 src/backend/            the CPU and CUDA backends
  6 src/app/                the engine, the job, templates build, validation, bench
  7 mpi/, python/src/       the MPI driver and the Python module (each on app only; neither
                            includes the other)
src/main.cpp (the command line) may include anything.

Usage: check-layers.py [ROOT]   (ROOT: the repository, default this script's parent)
Prints each upward include as FILE:LINE and exits 1 if there is any, else prints the count (0).
"""
import os
import re
import sys

# common links kernels (CMakeLists.txt), not the other way round: 0.5.
LAYERS = {"kernels": 0, "common": 0.5, "io": 1, "emulator": 2, "model": 3, "fit": 4,
          "backend": 5, "app": 6, "mpi": 7, "python": 7}
# Same level, still forbidden: the Python module links velox_app only, without MPI.
FORBIDDEN = {("python", "mpi"), ("mpi", "python")}
INCLUDE = re.compile(r'\s*#\s*include\s+"([A-Za-z_]+)/')


def layer_of(rel):
    parts = rel.split("/")
    if parts[0] == "src" and len(parts) > 2:
        return parts[1]
    if parts[0] == "python" and len(parts) > 1 and parts[1] == "src":
        return "python"
    return parts[0] if parts[0] in ("kernels", "mpi") else None


def main(root):
    bad = []
    for top in ("src", "kernels", "mpi", os.path.join("python", "src")):
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for name in sorted(files):
                if not name.endswith((".hpp", ".cpp", ".cu", ".h", ".cuh")):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, root).replace(os.sep, "/")
                layer = layer_of(rel)
                if layer not in LAYERS:
                    continue
                with open(path, encoding="utf-8", errors="replace") as fh:
                    for i, line in enumerate(fh, 1):
                        m = INCLUDE.match(line)
                        if m and (LAYERS.get(m.group(1), -1) > LAYERS[layer] or
                                  (layer, m.group(1)) in FORBIDDEN):
                            bad.append(f"{rel}:{i}: {layer} includes {m.group(1)}/ "
                                       f"({line.strip()})")
    for b in bad:
        print(b)
    print(f"check-layers: {len(bad)} upward includes")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else
                  os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")))
