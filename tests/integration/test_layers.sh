# No #include runs upward between velox's layers (issue 27, scripts/check-layers.py, the order in
# docs/design.md "Layers"): the repository passes with 0, and a planted upward include (io
# including fit) in a copy of the tree makes the check fail and name the file and line.
# The build enforces the same: compiled with velox_io's own flags (compile_commands.json), a file
# of io that includes io/ builds, and one that includes fit/ fails for want of the header (each
# layer's include root holds only its own folder and the layers below, CMakeLists.txt).
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

CC_JSON="$VELOX_BUILD_DIR/compile_commands.json"
[ -f "$CC_JSON" ] || { echo "FAIL: no $CC_JSON (CMAKE_EXPORT_COMPILE_COMMANDS)"; exit 1; }
printf '#include "io/catalog.hpp"\nint main() { return 0; }\n' >"$W/own.cpp"
printf '#include "io/catalog.hpp"\n#include "fit/fitter.hpp"\nint main() { return 0; }\n' \
  >"$W/upward.cpp"
compile_as_io() {  # FILE: compile it with the flags of src/io/info.cpp (velox_io), syntax only
  "$VELOX_PYTHON" - "$CC_JSON" "$1" <<'PY'
import json, shlex, subprocess, sys
cmds = json.load(open(sys.argv[1]))
e = next(c for c in cmds if c["file"].endswith("/src/io/info.cpp"))
args = shlex.split(e["command"])
i = args.index("-o")
del args[i:i + 2]
args = [a for a in args if a not in ("-c", e["file"])] + ["-fsyntax-only", sys.argv[2]]
sys.exit(subprocess.run(args, cwd=e["directory"]).returncode)
PY
}
compile_as_io "$W/own.cpp" || { echo "FAIL: io/ does not build with velox_io's own flags"; exit 1; }
rc=0
compile_as_io "$W/upward.cpp" 2>"$W/build.txt" || rc=$?
cat "$W/build.txt"
[ "$rc" != 0 ] || { echo "FAIL: io including fit/ built with velox_io's flags"; exit 1; }
grep -qE "fit/fitter.hpp'?:? (No such file|file not found)" "$W/build.txt"  # GCC, clang
echo "PASS"
