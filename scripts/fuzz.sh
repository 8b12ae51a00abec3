#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/, with clang) and runs each for a bounded time.
#   FUZZ_SECONDS  seconds per target (default 60)
#   BUILD_DIR     the release build holding libtessera.so (default build/release; built if missing)
# Prints libFuzzer's final stats (executions per target); exits non-zero when a target crashes.
# Crash inputs are written to build/fuzz/artifacts/.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_EACH=${FUZZ_SECONDS:-60}
BUILD_DIR=${BUILD_DIR:-build/release}
command -v clang++ >/dev/null || { echo "fuzz.sh: clang++ is needed (apt-get install -y clang)" >&2; exit 2; }
if [ ! -e "$BUILD_DIR/lib/libtessera.so" ] || [ ! -e "$BUILD_DIR/lib/libtessera-cpp.so" ] || [ ! -e "$BUILD_DIR/lib/tessera/plugins/libtessera_cpu.so" ]; then
  # fuzz_safetensors makes CPU tensors: it needs the CPU plugin next to libtessera.so.
  cmake --preset release >/dev/null && cmake --build --preset release --target tessera tessera_cpu tessera_cpp
fi
# fuzz_index embeds the Python that `python3` runs (not whichever libpython CMake finds first), so
# that it sees the site-packages where the package is installed.
PYTHON=$(python3 -c "import sys; print(sys.executable)")
CC=clang CXX=clang++ cmake -S fuzz -B build/fuzz -G Ninja -DTESSERA_BUILD_DIR="$PWD/$BUILD_DIR" \
  -DPython3_EXECUTABLE="$PYTHON" >/dev/null
cmake --build build/fuzz
mkdir -p build/fuzz/artifacts
status=0
targets=(fuzz_schema fuzz_handshake fuzz_safetensors fuzz_export_archive fuzz_store_protocol)
# fuzz_index drives the Python frontend: the build tree's package if there is one, else the installed one.
[ -d "$BUILD_DIR/python/tessera" ] && export PYTHONPATH="$PWD/$BUILD_DIR/python${PYTHONPATH:+:$PYTHONPATH}"
if [ -x build/fuzz/fuzz_index ] && (cd /tmp && python3 -c "import tessera") 2>/dev/null; then
  targets+=(fuzz_index)
else
  echo "fuzz_index: skipped (no embeddable Python or no importable tessera package)"
fi
for target in "${targets[@]}"; do
  work=build/fuzz/corpus_work/$target   # new inputs found go here, the checked-in seeds stay as they are
  mkdir -p "$work"
  echo "== $target: ${SECONDS_EACH}s"
  log=build/fuzz/$target.log
  extra=()
  asan_options=${ASAN_OPTIONS:-}
  # The embedded interpreter keeps its objects until exit: leaks there are not tessera's.
  [ "$target" = fuzz_index ] && extra=(-detect_leaks=0) && asan_options=detect_leaks=0
  if ASAN_OPTIONS=$asan_options build/fuzz/$target -max_total_time="$SECONDS_EACH" -print_final_stats=1 -rss_limit_mb=4096 "${extra[@]}" \
       -artifact_prefix=build/fuzz/artifacts/$target- "$work" "fuzz/corpus/$target" >"$log" 2>&1; then
    echo "$target: no crash"
  else
    echo "$target: CRASH (see $log and build/fuzz/artifacts/)"
    grep -E "^$target: |ERROR|SUMMARY|==ABORTING|Test unit written|cannot import" "$log" | head -6 || true
    status=1
  fi
  grep -E "stat::number_of_executed_units|stat::average_exec_per_sec" "$log" | sed "s/^/  $target /"
done
exit $status
