#!/usr/bin/env bash
# The main demo: installs the build dependencies, builds and installs Tessera (the C++ install and
# the Python package), runs the C++ hello example from the install, then trains a small CNN on
# scikit-learn's 8x8 digits with tessera.nn / tessera.optim / autograd (examples/train_digits.py).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
bash scripts/bootstrap.sh
cmake --preset release >/dev/null
cmake --build --preset release
cmake --install build/release --prefix install/release >/dev/null
echo "installed layout:"; (cd install/release && find lib -name "libtessera*.so*" | sort)
echo "hello links: $(ldd install/release/bin/hello | grep -o 'libtessera[^ ]*' | sort -u | tr '\n' ' ')"
echo
install/release/bin/hello
echo
python3 -m pip install -q --disable-pip-version-check --no-build-isolation "$ROOT"
# From outside the source tree, so `import tessera` is the installed package.
(cd /tmp && python3 "$ROOT/examples/train_digits.py" "$@")
