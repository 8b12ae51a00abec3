#!/usr/bin/env bash
# Every test suite, as CI runs it (.ci/run). One release build (build/release) serves ctest, the
# pip-installed package (pip reuses that tree and compiles nothing: cmake/TesseraWheel.cmake), the
# SDK and C++-example checks and the fuzzers; the sanitizer builds compile only the host, the CPU
# and transform plugins, the fixtures and the tests (no GPU plugin: its code cannot run here).
# Each step is a phase: its wall time is printed as it ends, and a table of all of them with the
# total at the end (scripts/phases.sh). Arguments go to ctest. Env: PYTEST_WORKERS (default 2),
# FUZZ_SECONDS (default 30), PHASE_LOG (a file for the table).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
source scripts/phases.sh

configure_and_build() {
  cmake --preset release >/dev/null
  cmake --build --preset release
}

# From outside the source tree, so `import tessera` is the installed package; pytest-xdist spreads
# the suite over the cores. Every test runs, those marked `slow` included.
python_tests() (
  cd /tmp
  TESSERA_TEST_INSTALLED=1 python3 -m pytest -q -p no:cacheprovider -n "${PYTEST_WORKERS:-2}" "$ROOT/tests/python" "$ROOT/tests/compat"
)

phase bootstrap bash scripts/bootstrap.sh
phase build configure_and_build
phase ctest ctest --preset release --timeout 600 -j2 "$@"
phase "pip install" python3 -m pip install -q --disable-pip-version-check --no-build-isolation "$ROOT"
phase pytest python_tests
# The SDK as a vendor uses it: an out-of-tree device plugin built with clang++/libc++ against the
# installed Tessera, tested from C++ and Python, twice at once.
phase sdk bash scripts/test_sdk.sh
phase examples bash scripts/test_examples_cpp.sh  # examples/cpp built out of tree against the install
# Reliability: each libFuzzer target for a bounded time, the threads tests under TSan, and every
# C++ suite under ASan + UBSan.
phase fuzz env FUZZ_SECONDS="${FUZZ_SECONDS:-30}" bash scripts/fuzz.sh
phase tsan bash scripts/test_tsan.sh
phase asan bash scripts/test_asan.sh
