#!/usr/bin/env bash
# Builds the `tsan` preset for just what the thread tests need (libtessera, the CPU and autograd
# and profiler plugins, the fixture plugins, test_threads, test_dispatcher, test_autograd_engine,
# test_profiler_threads) and runs them under ThreadSanitizer (test_autograd_engine: backward from 8
# threads on separate graphs, and plain operators on other threads while autograd records;
# test_profiler_threads: workers record while the profiler starts, stops and is read).
# OpenMP (libgomp) is not TSan-instrumented, so its barriers look like races: the run uses
# OMP_NUM_THREADS=1, which keeps the CPU kernels single-threaded inside each caller thread.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --preset tsan >/dev/null
targets=(tessera tessera_cpu tessera_autograd tessera_profiler tessera_good tessera_lazydev test_threads
         test_dispatcher test_autograd_engine test_profiler_threads)
cmake --build --preset tsan --target "${targets[@]}"
export OMP_NUM_THREADS=1
export TSAN_OPTIONS="halt_on_error=0 exitcode=66 ${TSAN_OPTIONS:-}"
log=build/tsan/tsan.log
: >"$log"
status=0
for t in test_threads test_dispatcher test_autograd_engine test_profiler_threads; do
  build/tsan/bin/$t --gtest_output=xml:build/tsan/$t.xml >>"$log" 2>&1 || status=$?
done
# In a fresh process, so that 8 threads race to load the CPU plugin (skipped in the run above).
build/tsan/bin/test_autograd_engine --gtest_filter='AutogradEngineThreads.FirstUse*' >>"$log" 2>&1 || status=$?
figure=$(grep -o 'threads_x_operations" value="[^"]*"' build/tsan/test_threads.xml | cut -d'"' -f3 || true)
backwards=$(grep -o 'threads_x_backwards" value="[^"]*"' build/tsan/test_autograd_engine.xml | cut -d'"' -f3 || true)
reports=$(grep -c "WARNING: ThreadSanitizer" "$log" || true)
echo "TSan (OMP_NUM_THREADS=1): test_threads ran ${figure:-?} (threads x operations) while plugins loaded;" \
     "test_dispatcher ran; test_autograd_engine ran ${backwards:-?} backward passes from 8 threads;" \
     "ThreadSanitizer reports: $reports; exit status $status (log: $log)"
[ "$status" -eq 0 ] && [ "$reports" -eq 0 ]
