#!/usr/bin/env bash
# Builds and installs Tessera, then runs the C++ example from the install: a program that
# links only libtessera.so, while the CPU backend arrives as a plugin at run time.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
cmake --preset release >/dev/null
cmake --build --preset release
cmake --install build/release --prefix install/release >/dev/null
echo "installed layout:"; (cd install/release && find lib -name "libtessera*.so*" | sort)
echo "hello links: $(ldd install/release/bin/hello | grep -o 'libtessera[^ ]*' | sort -u | tr '\n' ' ')"
echo
install/release/bin/hello
