#!/usr/bin/env bash
# The C++ test suites under AddressSanitizer + UndefinedBehaviorSanitizer (the `asan` preset),
# with LeakSanitizer on. One test runs without leak detection: LeakSanitizer's own tracer dies
# (signal 11) when oneDNN's OpenMP threads are alive at exit; ASan and UBSan still check it.
# allocator_may_return_null: the out-of-memory tests expect a failed allocation, not an abort.
set -euo pipefail
cd "$(dirname "$0")/.."
NO_LSAN_TEST='CpuLinalg.MmFloat32ManyShapes'
cmake --preset asan >/dev/null
cmake --build --preset asan
ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 ctest --preset asan --timeout 600 -E "$NO_LSAN_TEST"
ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1 ctest --preset asan --timeout 600 -R "$NO_LSAN_TEST"
