#!/usr/bin/env bash
# Building from a non-default prefix (docs/cluster-build.md, issue 53): nothing in velox's CMake
# assumes Debian's paths. The dependencies' Debian -dev packages (CFITSIO, HDF5, Eigen, spdlog,
# fmt, CLI11, yaml-cpp, zlib, Open MPI), and the runtime packages their lib*.so links resolve
# to, are staged into a scratch prefix as symbolic links, with the pkg-config files rewritten
# for the prefix (as an install into a prefix has them). velox is configured there with the
# `cluster` preset and CMAKE_PREFIX_PATH=<prefix>, while find_* may not look in the system:
# CMAKE_IGNORE_PREFIX_PATH=/usr;/ and CMAKE_IGNORE_PATH=/usr/bin;/bin (the tools, compiler,
# ninja, pkg-config and uname, are named by path), PKG_CONFIG_LIBDIR = the prefix's pkgconfig
# folders only, and Open MPI relocated into the prefix (OPAL_PREFIX, MPI_C_COMPILER=<prefix>/bin/mpicc,
# as a module or a relocated install provides it). Checked:
#  - CMakeCache.txt: every dependency (CFITSIO, HDF5, Eigen3, spdlog, fmt, CLI11, yaml-cpp, zlib,
#    MPI) was found under the prefix, and no cache entry but the tools and CMake's own names /usr;
#  - build.ninja: no target's compile or link line (velox, every layer) names /usr;
#  - velox_deps_probe (linked like velox_io: CFITSIO, HDF5, zlib) builds with fitsio.h, hdf5.h
#    and zlib.h read from the prefix (ninja's dependency record, -fno-canonical-system-headers so
#    that GCC records the path it opened) and a link line that names no library outside it, runs,
#    and each library is the version of its header; the loader finds them in the prefix (RPATH).
# Not isolated (said in docs/cluster-build.md): the compiler's own search path keeps
# /usr/include and /usr/lib, so a header or library the prefix lacked could still come from there
# (the checks above see it for what the probe uses); the libraries' own dependencies (libcurl,
# libsz, ...) load from the system. Only the probe is built (a few seconds), not velox.
# Skips (77) without dpkg, one of the packages, or CMake >= 3.23 (CMAKE_IGNORE_PREFIX_PATH).
set -euo pipefail
source "$VELOX_SOURCE_DIR/tests/integration/common.sh"
PKGS=(libcfitsio-dev libhdf5-dev libeigen3-dev libspdlog-dev libfmt-dev libcli11-dev libyaml-cpp-dev
      zlib1g-dev libopenmpi-dev openmpi-common)
skip() {
  echo "SKIP: $*"
  exit 77
}
command -v dpkg >/dev/null || skip "no dpkg (the staging reads Debian's package lists)"
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || skip "$p not installed"
done
for t in gcc g++ ninja pkg-config uname opal_wrapper; do command -v "$t" >/dev/null || skip "no $t"; done
"$PY" -c 'import sys; v = tuple(map(int, sys.argv[1].split(".")[:2])); sys.exit(v < (3, 23))' \
  "$(cmake --version | sed -n 's/^cmake version //p')" || skip "CMake < 3.23"

# Outside the source tree: CMake refuses to export include folders inside it (velox_io's HDF5).
SCRATCH=$(mktemp -d "${TMPDIR:-/tmp}/velox-prefix-build.XXXXXX")
trap 'rm -rf "$SCRATCH"' EXIT
P="$SCRATCH/prefix"
B="$SCRATCH/build"

# Stage: each file of the packages under /usr (or /) as PREFIX/<the rest>, a link; .pc files
# rewritten from /usr to PREFIX; then the runtime packages of every staged lib*.so.
"$PY" - "$P" "${PKGS[@]}" <<'PYEOF'
import os, re, subprocess, sys
prefix, *pkgs = sys.argv[1:]
skip = ("/usr/share/doc/", "/usr/share/man/", "/usr/share/lintian/", "/usr/bin/", "/bin/")
def stage(names):
    out = subprocess.run(["dpkg", "-L", *names], check=True, capture_output=True, text=True).stdout
    n = 0
    for f in out.splitlines():
        if not f.startswith("/") or f.startswith(skip) or os.path.isdir(f):
            continue
        dest = os.path.join(prefix, f[len("/usr/"):] if f.startswith("/usr/") else f[1:])
        if os.path.lexists(dest):
            continue
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        if f.endswith(".pc"):
            text = re.sub(r"=/usr$", "=" + prefix, open(f).read(), flags=re.M)
            open(dest, "w").write(text.replace("/usr/", prefix + "/"))
        else:
            os.symlink(f, dest)
        n += 1
    return n
n = stage(pkgs)
libs = {os.path.realpath(os.path.join(d, x)) for d, _, xs in os.walk(prefix) for x in xs if x.endswith(".so")}
query = sorted(libs | {l[len("/usr"):] for l in libs if l.startswith("/usr/")})  # merged /usr
owners = subprocess.run(["dpkg", "-S", *query], capture_output=True, text=True).stdout
runtime = sorted({p.split(":")[0] for line in owners.splitlines()
                  for p in line.split(": ")[0].split(", ")} - set(pkgs))
n += stage(runtime)
print(f"staged {n} files: {' '.join(pkgs)} and {' '.join(runtime)}")
PYEOF
mkdir -p "$P/bin"
ln -s "$(command -v opal_wrapper)" "$P/bin/mpicc"  # Open MPI's wrapper, relocated by OPAL_PREFIX

echo "== configure (preset cluster) with the system prefixes ignored"
start=$SECONDS
env -u CMAKE_PREFIX_PATH -u PKG_CONFIG_PATH -u HDF5_ROOT -u HDF5_DIR -u CPATH -u LIBRARY_PATH \
    OPAL_PREFIX="$P" PKG_CONFIG_LIBDIR="$P/lib/x86_64-linux-gnu/pkgconfig:$P/share/pkgconfig" \
  cmake -S "$VELOX_SOURCE_DIR" -B "$B" --preset cluster -G Ninja \
    -DCMAKE_PREFIX_PATH="$P" "-DCMAKE_IGNORE_PREFIX_PATH=/usr;/" "-DCMAKE_IGNORE_PATH=/usr/bin;/bin" \
    -DCMAKE_MAKE_PROGRAM="$(command -v ninja)" -DCMAKE_C_COMPILER="$(command -v gcc)" \
    -DCMAKE_CXX_COMPILER="$(command -v g++)" -DCMAKE_UNAME="$(command -v uname)" \
    -DPKG_CONFIG_EXECUTABLE="$(command -v pkg-config)" -DMPI_C_COMPILER="$P/bin/mpicc" \
    -DCMAKE_CXX_FLAGS=-fno-canonical-system-headers -DVELOX_CUDA=OFF -DVELOX_PYTHON=OFF \
    >"$SCRATCH/configure.log" 2>&1 || { cat "$SCRATCH/configure.log"; fail "configure failed"; }
echo "configured in $((SECONDS - start)) s"

"$PY" - "$B/CMakeCache.txt" "$P" <<'PYEOF'
import re, sys
cache, prefix = sys.argv[1:]
entries = {}
for line in open(cache):
    m = re.match(r"([^#/][^:=]*):[A-Z]+=(.*)", line.rstrip("\n"))
    if m:
        entries[m.group(1)] = m.group(2)
found = {  # what velox's find_package/pkg_check_modules calls found, one entry or more each
    "CFITSIO": ["pkgcfg_lib_CFITSIO_cfitsio", "CFITSIO_INCLUDEDIR"],
    "HDF5": ["HDF5_C_INCLUDE_DIR", "HDF5_hdf5_LIBRARY_RELEASE"],
    "Eigen3": ["Eigen3_DIR"], "spdlog": ["spdlog_DIR"], "fmt": ["fmt_DIR"], "CLI11": ["CLI11_DIR"],
    "yaml-cpp": ["yaml-cpp_DIR"], "ZLIB": ["ZLIB_INCLUDE_DIR", "ZLIB_LIBRARY_RELEASE"],
    "MPI": ["MPI_C_HEADER_DIR", "MPI_mpi_LIBRARY"],
}
bad = [f"{dep}: {k}={entries.get(k)}" for dep, keys in found.items() for k in keys
       if not entries.get(k, "").startswith(prefix + "/")]
assert not bad, "not found under the prefix:\n  " + "\n  ".join(bad)
# Nothing else may name /usr: only the tools given by path and CMake's own entries.
tools = {"PKG_CONFIG_EXECUTABLE", "FIND_PACKAGE_MESSAGE_DETAILS_PkgConfig"}
usr = [f"{k}={v}" for k, v in entries.items() if "/usr" in v and k not in tools
       and not k.startswith(("CMAKE_", "_GNUInstallDirs_"))]
assert not usr, "cache entries under /usr:\n  " + "\n  ".join(usr)
# The preset keeps the prefix's library folders in installed binaries (no LD_LIBRARY_PATH).
assert entries.get("CMAKE_INSTALL_RPATH_USE_LINK_PATH") == "ON", "preset cluster: install RPATH"
print(f"CMakeCache.txt: {', '.join(found)} under the prefix; /usr only in the tools' entries")
PYEOF

# Every target's compile and link lines (velox and its layers included, not built here).
lines=$(grep -cE '^ +(FLAGS|INCLUDES|LINK_LIBRARIES) = ' "$B/build.ninja")
bad=$(grep -E '^ +(FLAGS|INCLUDES|DEFINES|LINK_FLAGS|LINK_LIBRARIES|LINK_PATH) = .*/usr' "$B/build.ninja" || true)
[[ -z $bad ]] || fail "compile or link lines name /usr:"$'\n'"$(head -n 3 <<<"$bad")"
echo "build.ninja: $lines compile and link lines of every target, none names /usr"

echo "== build and run velox_deps_probe"
start=$SECONDS
env OPAL_PREFIX="$P" ninja -C "$B" velox_deps_probe >"$SCRATCH/build.log" 2>&1 ||
  { cat "$SCRATCH/build.log"; fail "velox_deps_probe does not build"; }
echo "built in $((SECONDS - start)) s"
headers=$(ninja -C "$B" -t deps | grep -E '/(fitsio|hdf5|zlib)\.h$' | sed 's/^ *//')
echo "$headers"
[[ $(grep -c . <<<"$headers") = 3 ]] || fail "expected fitsio.h, hdf5.h and zlib.h among the probe's headers"
! grep -v "^$P/" <<<"$headers" || fail "a dependency's header was read from outside the prefix"
link=$(ninja -C "$B" -t commands velox_deps_probe | tail -n 1)
while read -r lib; do
  [[ $lib == "$P"/* ]] || fail "the probe links $lib, outside the prefix: $link"
done < <(grep -oE '[^ ]+\.(so|a)\b' <<<"$link")
[[ $(grep -oE '[^ ]+\.(so|a)\b' <<<"$link" | grep -c .) -ge 3 ]] || fail "HDF5, CFITSIO, zlib not linked: $link"
! grep -qE -- ' -L/usr| /usr/lib' <<<"$link" || fail "the probe's link line names /usr: $link"
"$B/velox_deps_probe" || fail "velox_deps_probe: a library is not its header's version"
loaded=$(ldd "$B/velox_deps_probe" | grep -E 'libhdf5|libcfitsio|libz\.')
echo "$loaded"
! grep -v "=> $P/" <<<"$loaded" || fail "a dependency loads from outside the prefix"
echo "PASS: prefix build"
