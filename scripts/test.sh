#!/usr/bin/env bash
# Builds Tessera (release preset) and runs every test suite with ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
cmake --preset release >/dev/null
cmake --build --preset release
ctest --preset release --timeout 600 "$@"
