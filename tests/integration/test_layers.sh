# No #include runs upward between velox's layers (issue 27, scripts/check-layers.py, the order in
# docs/design.md "Layers"): the repository passes with 0, and a planted upward include (io
# including fit) in a copy of the tree makes the check fail and name the file and line.
set -euo pipefail
: "${VELOX_SOURCE_DIR:?}" "${VELOX_BUILD_DIR:?}"
source "$VELOX_SOURCE_DIR/scripts/lib.sh"
CHECK="$VELOX_SOURCE_DIR/scripts/check-layers.py"
"$VELOX_PYTHON" "$CHECK" "$VELOX_SOURCE_DIR" | tee /dev/stderr | grep -q "^check-layers: 0 upward"

W="$VELOX_BUILD_DIR/test-tmp/layers"
rm -rf "$W"
mkdir -p "$W"
cp -r "$VELOX_SOURCE_DIR/src" "$VELOX_SOURCE_DIR/kernels" "$VELOX_SOURCE_DIR/mpi" "$W/"
printf '#include "io/catalog.hpp"\n#include "fit/fitter.hpp"\n' >"$W/src/io/planted.cpp"
rc=0
"$VELOX_PYTHON" "$CHECK" "$W" >"$W/out.txt" || rc=$?
cat "$W/out.txt"
[ "$rc" = 1 ] || { echo "FAIL: the planted upward include passed (rc $rc)"; exit 1; }
grep -q "^src/io/planted.cpp:2: io includes fit/" "$W/out.txt"
grep -q "^check-layers: 1 upward includes" "$W/out.txt"
echo "PASS"
