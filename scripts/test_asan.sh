#!/usr/bin/env bash
# The C++ test suites under AddressSanitizer + UndefinedBehaviorSanitizer (the `asan` preset),
# with LeakSanitizer on. One test runs without leak detection: LeakSanitizer's own tracer dies
# (signal 11) when oneDNN's OpenMP threads are alive at exit; ASan and UBSan still check it.
# allocator_may_return_null: the out-of-memory tests expect a failed allocation, not an abort.
# The autograd engine tests (test_autograd_engine: the MLP training loop that builds and frees a
# graph every step is the leak check) keep leak detection but run with OMP_NUM_THREADS=1, so no
# OpenMP worker thread is alive at exit for the tracer to trip on (seen once in ~70 runs of the
# training test with the default thread count).
set -euo pipefail
cd "$(dirname "$0")/.."
NO_LSAN_TEST='CpuLinalg.MmFloat32ManyShapes'
ONE_OMP_THREAD_TESTS='AutogradEngine'
cmake --preset asan >/dev/null
cmake --build --preset asan
ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 ctest --preset asan --timeout 600 \
  -E "$NO_LSAN_TEST|$ONE_OMP_THREAD_TESTS"
OMP_NUM_THREADS=1 ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 ctest --preset asan --timeout 600 \
  -R "$ONE_OMP_THREAD_TESTS"
ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1 ctest --preset asan --timeout 600 -R "$NO_LSAN_TEST"
