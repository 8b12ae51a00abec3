#!/usr/bin/env bash
# The main demo: installs the build dependencies, builds what the demo runs (libtessera, the CPU and
# autograd plugins, the Python module and the C++ hello example: no GPU plugin, so a new user waits
# minutes, not a full build), runs hello from the build tree, pip-installs the package from that
# same build tree (pip compiles nothing again), then trains a small CNN on scikit-learn's 8x8
# digits with tessera.nn / tessera.optim / autograd (examples/train_digits.py). Arguments go to
# train_digits.py. `cmake --build --preset release` later builds the rest (GPU plugins, tests).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
source scripts/phases.sh

build_demo_targets() {
  cmake --preset release >/dev/null
  cmake --build --preset release --target tessera_wheel_cpu hello
}

run_hello() {
  echo "plugins built: $(cd build/release/lib && find tessera/plugins -name 'libtessera*.so' | sort | tr '\n' ' ')"
  echo "hello links: $(ldd build/release/bin/hello | grep -o 'libtessera[^ ]*' | sort -u | tr '\n' ' ')"
  echo
  build/release/bin/hello
}

# From outside the source tree, so `import tessera` is the installed package.
train() { (cd /tmp && python3 "$ROOT/examples/train_digits.py" "$@"); }

phase bootstrap bash scripts/bootstrap.sh
phase build build_demo_targets
phase hello run_hello
phase "pip install" python3 -m pip install -q --disable-pip-version-check --no-build-isolation \
  -C build.targets=tessera_wheel_cpu "$ROOT"
phase train train "$@"
