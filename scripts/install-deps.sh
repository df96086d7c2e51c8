#!/usr/bin/env bash
# Install every Debian package velox needs to build, test and run (idempotent).
# The CUDA toolkit is not installed here: it is optional and, where present, already on the machine.
set -euo pipefail
PKGS=(
  build-essential cmake ninja-build ccache pkg-config
  libcfitsio-dev libhdf5-dev libeigen3-dev libspdlog-dev libfmt-dev zlib1g-dev
  catch2 libcli11-dev libyaml-cpp-dev libfftw3-dev
  libopenmpi-dev openmpi-bin
  python3 python3-numpy python3-h5py python3-astropy python3-matplotlib
  python3-dev pybind11-dev python3-pybind11
  python3-venv python3-pip  # `pip install .` (pyproject.toml; tests/integration/test_pip.sh)
  clang libclang-rt-14-dev  # sanitizer CI and fuzzing (scripts/test-sanitize.sh, scripts/fuzz.sh)
  slurmctld slurmd slurm-client munge  # tests/integration/test_slurm.sh starts its own Slurm
  fiu-utils libfiu-dev  # fault injection (fiu-run): tests/integration/test_faults*.sh
)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#PKGS[@]} packages present"
  exit 0
fi
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
