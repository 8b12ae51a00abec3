#!/usr/bin/env bash
# The C++ API as an embedder uses it: installs the release build to a temporary prefix, builds
# examples/cpp/train_mlp and examples/cpp/infer_mlp as their own CMake projects against it
# (find_package(Tessera) + Tessera::cpp), trains (the loss must fall, weights are saved), then
# infers from the saved weights; exports a CNN from Python (the installed package) and serves it
# from examples/cpp/serve_exported (Tessera::export) from four threads.
# Prints the install size of libtessera and the CPU plugin.
# Needs a release build (cmake --build --preset release). Env: BUILD (default build/release),
# JOBS (default 1), KEEP=1 keeps the work dir.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=${BUILD:-$ROOT/build/release}
JOBS=${JOBS:-1}
START=$SECONDS
step() { printf '\n== %s (%ds)\n' "$*" $((SECONDS - START)); }

[ -f "$BUILD/CMakeCache.txt" ] || { echo "error: no build at $BUILD; run: cmake --preset release && cmake --build --preset release" >&2; exit 1; }
WORK=$(mktemp -d /tmp/tessera-examples-cpp.XXXXXX)
[ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$WORK"' EXIT
PREFIX=$WORK/prefix

step "install $BUILD to $PREFIX"
cmake --install "$BUILD" --prefix "$PREFIX" >/dev/null
LIBDIR=$(dirname "$(find "$PREFIX" -name libtessera.so -print -quit)")
for f in "$LIBDIR/libtessera-cpp.so" "$LIBDIR/tessera/plugins/libtessera_cpu.so" "$LIBDIR/tessera/plugins/libtessera_autograd.so" \
         "$PREFIX/include/tessera/tensor_methods.h" "$PREFIX/include/tessera/cpp/api.h"; do
  [ -e "$f" ] || { echo "error: the install lacks $f" >&2; exit 1; }
done

for ex in train_mlp infer_mlp serve_exported; do
  step "configure and build examples/cpp/$ex against the install"
  cmake -S "$ROOT/examples/cpp/$ex" -B "$WORK/$ex" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="$PREFIX" >/dev/null
  cmake --build "$WORK/$ex" -j "$JOBS" >/dev/null
done

# Run from the work dir with no TESSERA_PLUGIN_PATH: the installed plugin folder must be enough.
cd "$WORK"
unset TESSERA_PLUGIN_PATH
step "train_mlp"
"$WORK/train_mlp/train_mlp" "$WORK/mlp.safetensors"
[ -s "$WORK/mlp.safetensors" ] || { echo "error: train_mlp saved no weights" >&2; exit 1; }
step "infer_mlp"
"$WORK/infer_mlp/infer_mlp" "$WORK/mlp.safetensors"

step "serve_exported: a program exported from Python, served from C++"
python3 "$ROOT/examples/cpp/serve_exported/export_model.py" "$WORK/model.tspt" "$WORK/requests.safetensors"
"$WORK/serve_exported/serve_exported" "$WORK/model.tspt" "$WORK/requests.safetensors"

step "install size"
du -ch "$LIBDIR"/libtessera.so* | tail -1 | sed 's/total/libtessera.so (core + dispatcher + plugin host)/'
du -h "$LIBDIR/tessera/plugins/libtessera_cpu.so" | sed 's|\t.*|\tlibtessera_cpu.so (CPU plugin)|'
du -cbL "$LIBDIR/libtessera.so" "$LIBDIR/tessera/plugins/libtessera_cpu.so" | tail -1 |
  awk '{printf "libtessera + CPU plugin: %.1f MiB (%d bytes)\n", $1 / 1048576, $1}'
du -hL "$LIBDIR/libtessera-cpp.so" "$LIBDIR/libtessera-export.so" "$LIBDIR/tessera/plugins/libtessera_autograd.so" | sed 's|\t.*/|\t|'

step "C++ examples passed in $((SECONDS - START)) s"
