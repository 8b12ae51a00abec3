#!/usr/bin/env bash
# The SDK's out-of-tree check: builds the example device plugin (sdk/examples/simdevice) and the
# example compiler plugin (sdk/examples/tinycompiler) with
# clang++ and libc++ against an *installed* Tessera, checks that the plugin imports nothing of
# the host's C++ (no libstdc++, no tessera:: symbols), then runs its C++ and Python tests,
# including two builds of it (simdev and simdev2) loaded at once; then sdk/README.md's walkthrough
# (the device template, sdk/template/device) from the README's own code blocks.
# Needs a release build (cmake --build --preset release). Env: JOBS (default 1), KEEP=1 keeps the work dir.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=$ROOT/build/release
JOBS=${JOBS:-1}
START=$SECONDS
step() { printf '\n== %s (%ds)\n' "$*" $((SECONDS - START)); }

step "clang++ and libc++"
if ! echo 'int main() {}' | clang++ -stdlib=libc++ -x c++ - -o /dev/null 2>/dev/null; then
  SUDO=$([ "$(id -u)" = 0 ] && echo "" || echo sudo)
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq clang libc++-dev libc++abi-dev >/dev/null
fi
clang++ --version | head -1

[ -f "$BUILD/CMakeCache.txt" ] || { echo "error: no release build at $BUILD; run: cmake --preset release && cmake --build --preset release" >&2; exit 1; }
WORK=$(mktemp -d /tmp/tessera-sdk.XXXXXX)
[ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$WORK"' EXIT
PREFIX=$WORK/prefix

step "install the release build to $PREFIX"
cmake --install "$BUILD" --prefix "$PREFIX" >/dev/null

# Configures and builds the example as its own CMake project. $1: device name, $2: build tests,
# then any extra configure arguments.
build_example() {
  local name=$1 tests=$2
  shift 2
  CC=clang CXX=clang++ cmake -S "$ROOT/sdk/examples/simdevice" -B "$WORK/$name" -G Ninja \
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$PREFIX" -DSIM_LIBCXX=ON \
    -DSIM_DEVICE_NAME="$name" -DSIM_BUILD_TESTS="$tests" "$@" >/dev/null
  cmake --build "$WORK/$name" -j "$JOBS" >/dev/null
}

# A plugin must not depend on the host's C++: no libstdc++ (versioned GLIBCXX/CXXABI symbols or
# the library itself), and no undefined tessera symbol at all (the C ABI is all it uses).
check_imports() {
  local so=$1
  local undefined
  undefined=$(nm -D --undefined-only "$so" | c++filt)
  if grep -E 'GLIBCXX|CXXABI_|__cxx11' <<<"$undefined"; then echo "error: $so imports libstdc++ symbols (above)" >&2; exit 1; fi
  if grep -i 'tessera' <<<"$undefined"; then echo "error: $so imports tessera symbols (above)" >&2; exit 1; fi
  if readelf -d "$so" | grep -q 'NEEDED.*libstdc++'; then echo "error: $so links libstdc++" >&2; exit 1; fi
  echo "$(basename "$so"): $(wc -l <<<"$undefined") undefined symbols, none from libstdc++ or tessera; needs $(readelf -d "$so" | sed -n 's/.*NEEDED.*\[\(.*\)\]/\1/p' | tr '\n' ' ')"
}

step "build simdev (clang++ -stdlib=libc++)"
build_example simdev ON
SIMDEV_PLUGIN=$WORK/simdev/plugins/libtessera_simdev.so
check_imports "$SIMDEV_PLUGIN"

# simdev2 is the plugin alone: find_package(Tessera COMPONENTS sdk), which must need no other
# package (fmt and Boost are made unfindable here to prove it). It is then installed with its own
# prefix, where it must land in <prefix>/lib/tessera/plugins, and loaded from there.
step "build simdev2 (the same sources, another device name; the sdk component alone, no fmt or Boost)"
build_example simdev2 OFF -DCMAKE_DISABLE_FIND_PACKAGE_fmt=ON -DCMAKE_DISABLE_FIND_PACKAGE_Boost=ON --no-warn-unused-cli
check_imports "$WORK/simdev2/plugins/libtessera_simdev2.so"

step "install simdev2 with its own prefix"
VENDOR_PREFIX=$WORK/vendor-prefix
cmake --install "$WORK/simdev2" --prefix "$VENDOR_PREFIX" >/dev/null
SIMDEV2_PLUGIN=$VENDOR_PREFIX/lib/tessera/plugins/libtessera_simdev2.so
if [ ! -f "$SIMDEV2_PLUGIN" ]; then
  echo "error: cmake --install --prefix $VENDOR_PREFIX did not put the plugin at $SIMDEV2_PLUGIN; it installed:" >&2
  find "$VENDOR_PREFIX" -type f >&2 || true
  exit 1
fi
echo "installed at $SIMDEV2_PLUGIN (the tests below load it from there)"
export SIMDEV_PLUGIN SIMDEV2_PLUGIN

step "C++ tests"
"$WORK/simdev/tests/test_simdevice" --gtest_brief=1

step "conformance kit on simdev (every kernel it registers against the CPU)"
"$PREFIX/bin/tessera-conformance" --plugin "$SIMDEV_PLUGIN" --device simdev

step "the operator list a vendor reads: share/tessera/ops.yaml and tessera-conformance --list-ops"
[ -s "$PREFIX/share/tessera/ops.yaml" ] || { echo "error: the install lacks share/tessera/ops.yaml" >&2; exit 1; }
listed=$("$PREFIX/bin/tessera-conformance" --list-ops --plugin "$SIMDEV_PLUGIN")
grep -q '^simdev::fused_axpy(' <<<"$listed" || { echo "error: --list-ops --plugin does not list the plugin's own operator" >&2; exit 1; }
echo "$(wc -l <<<"$listed") operator overloads listed, simdev::fused_axpy among them"

step "Python tests"
# The installed package when there is one (CI pip-installs it), else the build tree's.
cd "$WORK"
if ! python3 -c 'import tessera' 2>/dev/null; then
  export PYTHONPATH=$BUILD/python${PYTHONPATH:+:$PYTHONPATH}
  echo "(no installed tessera package: using $BUILD/python)"
fi
python3 -c 'import tessera, os; print("tessera package:", os.path.dirname(tessera.__file__))'
python3 -m pytest -q -p no:cacheprovider "$ROOT/sdk/examples/simdevice/tests/test_simdevice.py"

step "tinycompiler, the example compiler plugin (clang++ -stdlib=libc++), behind ts.compile(backend=\"tinycompiler\")"
CC=clang CXX=clang++ cmake -S "$ROOT/sdk/examples/tinycompiler" -B "$WORK/tinycompiler" -G Ninja \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$PREFIX" -DTINY_LIBCXX=ON >/dev/null
cmake --build "$WORK/tinycompiler" -j "$JOBS" >/dev/null
TINYCOMPILER_PLUGIN=$WORK/tinycompiler/plugins/libtessera_tinycompiler.so
check_imports "$TINYCOMPILER_PLUGIN"
TINYCOMPILER_PLUGIN=$TINYCOMPILER_PLUGIN python3 -m pytest -q -p no:cacheprovider \
  "$ROOT/sdk/examples/tinycompiler/tests/test_tinycompiler.py"

step "sdk/README.md's walkthrough, run from its own code blocks (the device template, g++ and clang++/libc++)"
TESSERA_PREFIX=$PREFIX bash "$ROOT/scripts/test_sdk_walkthrough.sh" >"$WORK/walkthrough.log" 2>&1 ||
  { tail -40 "$WORK/walkthrough.log"; echo "error: the walkthrough failed (log above)" >&2; exit 1; }
tail -1 "$WORK/walkthrough.log"

step "SDK checks passed in $((SECONDS - START)) s"
