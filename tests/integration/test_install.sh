#!/usr/bin/env bash
# `cmake --install` puts velox where the ecosystem expects it (CMakeLists.txt install rules):
# PREFIX/bin/velox runs and fits a real LAMOST spectrum with the build's library; the Python
# package in PREFIX/lib/pythonX.Y/site-packages/velox imports from there alone (no build tree
# on the path) and fits the same star with the same VRAD; the user scripts and the docs are in
# PREFIX/share (qa_catalog.py and compare_reference.py run from there), and the installed Slurm
# templates run PREFIX/bin/velox (dry runs); a CMake project outside velox (tests/downstream/)
# finds the installed package with find_package(velox), links velox::velox_app and fits the same
# star with the same VRAD.
# CMakePresets.json lists its presets (a malformed file fails cmake --list-presets).
set -euo pipefail
source "$VELOX_SOURCE_DIR/tests/integration/common.sh"
itest_setup install
P="$SCRATCH/prefix"
cmake --install "$VELOX_BUILD_DIR" --prefix "$P" >install.log 2>&1 || {
  cat install.log
  fail "cmake --install failed"
}
[[ -x "$P/bin/velox" ]] || fail "no PREFIX/bin/velox"
for s in calibrate_floors.py compare_reference.py plot_fit.py qa_catalog.py; do
  [[ -x "$P/share/velox/scripts/$s" ]] || fail "no executable PREFIX/share/velox/scripts/$s"
done
[[ -f "$P/share/doc/velox/user-guide.md" ]] || fail "no PREFIX/share/doc/velox/user-guide.md"
# The installed Slurm templates find their common.sh, lib.sh and PREFIX/bin/velox: run from
# PREFIX/share/velox/slurm, and read from stdin with VELOX_HOME=PREFIX (dry runs).
for how in path home; do
  if [[ $how = path ]]; then
    out=$(env -u VELOX -u VELOX_HOME DRY_RUN=1 TEMPLATES=lib.h5 INPUT_LIST=list.txt OUTPUT_DIR=out \
          bash "$P/share/velox/slurm/velox-gpu.sbatch" 2>&1) || fail "installed template: $out"
  else
    out=$(env -u VELOX VELOX_HOME="$P" DRY_RUN=1 TEMPLATES=lib.h5 INPUT_LIST=list.txt OUTPUT_DIR=out \
          bash -s <"$P/share/velox/slurm/velox-cpu.sbatch" 2>&1) || fail "installed template: $out"
  fi
  [[ $out == *"--cpu-bind=cores $P/bin/velox fit --templates lib.h5"* ]] ||
    fail "the installed template ($how) does not run PREFIX/bin/velox: $out"
done
[[ -x "$P/share/velox/scripts/nightly.sh" ]] || fail "no executable PREFIX/share/velox/scripts/nightly.sh"
"$P/bin/velox" --version | grep -q "CPU kernel isa" || fail "installed velox --version"
STAR="$VELOX_DATA_DIR/spectra/lamost_dr8/fits/spec-55859-F5902_sp03-232.fits.gz"
"$P/bin/velox" --log-level warn fit --templates "$LIB" --threads 1 --output cat.h5 "$STAR"
[[ -s cat.h5 ]] || fail "installed velox wrote no catalog"
# The user commands run from the prefix alone (the Python package's modules, with their helper).
(cd / && env -u PYTHONPATH MPLBACKEND=Agg "$P/share/velox/scripts/qa_catalog.py" "$SCRATCH/cat.h5" \
  --out "$SCRATCH/qa.png" && "$P/share/velox/scripts/compare_reference.py" "$SCRATCH/cat.h5" \
  --data-dir "$VELOX_DATA_DIR") >scripts.log 2>&1 || { cat scripts.log; fail "installed scripts"; }
grep -q "1 rows, 1 SUCCESS" scripts.log && grep -q "N = 1, SUCCESS = 1" scripts.log ||
  { cat scripts.log; fail "installed qa_catalog.py / compare_reference.py: unexpected output"; }
site=$(ls -d "$P"/lib*/python3*/site-packages 2>/dev/null | head -1 || true)
if [[ -n "$site" && -d "$site/velox" ]]; then
  (cd / && env -u PYTHONPATH PYTHONPATH="$site" "$PY" - "$STAR" "$LIB" "$SCRATCH/cat.h5" "$site") <<'PYEOF'
import sys
import h5py
import velox
star, lib, cat, site = sys.argv[1:5]
assert velox.__file__.startswith(site), f"velox imported from {velox.__file__}, not {site}"
rows = velox.fit_files([star], library=velox.Library.load(lib), threads=1)
cli = h5py.File(cat, "r")["catalog"][:]
assert rows["VRAD"][0] == cli["VRAD"][0], (rows["VRAD"][0], cli["VRAD"][0])
print(f"install: the installed package fits VRAD {rows['VRAD'][0]:.3f} km/s, as the installed CLI")
PYEOF
else
  echo "install: no Python package built (VELOX_PYTHON off or pybind11 missing): not checked"
fi
[[ -f "$P/lib/cmake/velox/veloxConfig.cmake" ]] || fail "no PREFIX/lib/cmake/velox/veloxConfig.cmake"
cmake -S "$VELOX_SOURCE_DIR/tests/downstream" -B downstream -DCMAKE_PREFIX_PATH="$P" \
  -DCMAKE_BUILD_TYPE=Release >downstream.log 2>&1 && cmake --build downstream >>downstream.log 2>&1 || {
  cat downstream.log
  fail "the downstream project (find_package(velox)) does not build"
}
v=$(./downstream/fit_one "$LIB" "$STAR")
"$PY" - "$v" "$SCRATCH/cat.h5" <<'PYEOF'
import sys
import h5py
v, cli = float(sys.argv[1]), h5py.File(sys.argv[2], "r")["catalog"]["VRAD"][0]
assert v == cli, (v, cli)
print(f"install: a downstream project (find_package(velox)) fits VRAD {v:.3f} km/s, as the CLI")
PYEOF
cd "$VELOX_SOURCE_DIR" && cmake --list-presets >/dev/null || fail "CMakePresets.json is not valid"
echo "PASS: install"
