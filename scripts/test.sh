#!/usr/bin/env bash
# Builds Tessera (release preset), runs the C++ suites with ctest, then installs the Python
# package with pip and runs the Python suite against the installed package.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
bash scripts/bootstrap.sh
cmake --preset release >/dev/null
cmake --build --preset release
ctest --preset release --timeout 600 "$@"
python3 -m pip install -q --disable-pip-version-check --no-build-isolation "$ROOT"
# From outside the source tree, so `import tessera` is the installed package.
(cd /tmp && TESSERA_TEST_INSTALLED=1 python3 -m pytest -q -p no:cacheprovider "$ROOT/tests/python")
# The SDK as a vendor uses it: an out-of-tree device plugin built with clang++/libc++ against the
# installed Tessera, tested from C++ and Python, twice at once.
bash scripts/test_sdk.sh
bash scripts/test_examples_cpp.sh  # the C++ API: examples/cpp built out of tree against the installed package
# Reliability: each libFuzzer target for a bounded time, the threads tests under TSan, and every
# C++ suite under ASan + UBSan.
FUZZ_SECONDS=${FUZZ_SECONDS:-30} bash scripts/fuzz.sh
bash scripts/test_tsan.sh
bash scripts/test_asan.sh
