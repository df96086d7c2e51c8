#!/usr/bin/env bash
# `bash -n` on every shell script of the repository: scripts/*.sh, slurm/*.sh, .ci/run and the
# integration tests themselves; and the one interpreter rule of the Python scripts.
set -euo pipefail
cd "${VELOX_SOURCE_DIR:?VELOX_SOURCE_DIR must be set}"
shopt -s nullglob
n=0
for f in scripts/*.sh slurm/*.sh .ci/run tests/integration/*.sh; do
  bash -n "$f" || { echo "FAIL: syntax error in $f" >&2; exit 1; }
  n=$((n + 1))
done
[[ -f .ci/run ]] || { echo "FAIL: .ci/run missing" >&2; exit 1; }
echo "bash -n: $n scripts OK"

# One interpreter rule (scripts/lib.sh VELOX_PYTHON): every Python script starts with
# #!/usr/bin/python3 (Debian's, which has numpy, h5py, astropy), and shell scripts run Python
# only as "$VELOX_PYTHON" or the tests' "$PY" = $VELOX_PYTHON, never a bare `python3` (the first
# one on PATH may lack h5py). The user commands of the Python package (python/velox, the wheel's
# [project.scripts]) are installed as such scripts too (CMakeLists.txt share/velox/scripts).
for f in scripts/*.py tests/python/*.py python/velox/{compare_reference,plot_fit,qa_catalog}.py; do
  [[ "$(head -n 1 "$f")" == "#!/usr/bin/python3" ]] || { echo "FAIL: $f: shebang" >&2; exit 1; }
  [[ -x "$f" ]] || { echo "FAIL: $f is not executable" >&2; exit 1; }
done
bad=$(grep -nE '(^|[^-_./A-Za-z0-9])(/usr/bin/env +)?python3?( |$)' scripts/*.sh slurm/*.sh slurm/*.sbatch \
      .ci/run tests/integration/*.sh | grep -vE '^\S+:[0-9]+:\s*#' | grep -v 'python3-' || true)
[[ -z "$bad" ]] || { echo "FAIL: Python run without \$VELOX_PYTHON:" >&2; echo "$bad" >&2; exit 1; }
grep -q 'VELOX_PYTHON="${VELOX_PYTHON:-/usr/bin/python3}"' scripts/lib.sh ||
  { echo "FAIL: scripts/lib.sh does not define VELOX_PYTHON" >&2; exit 1; }
echo "Python: one interpreter (/usr/bin/python3 via VELOX_PYTHON) OK"
