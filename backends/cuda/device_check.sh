#!/usr/bin/env bash
# The CUDA plugin's checks on a GPU machine, as one prepared command of at most 8 minutes:
#   1. gpu-info        nvidia-smi: the card, the driver, the memory
#   2. cuda-smoke      a 10-line kernel through nvcc and the driver (is the GPU usable at all?)
#   3. unpack-deps     the carried .devdeps/*.deb into a private prefix (nothing is installed)
#   4. configure       cmake, sm_90 only (90-real: no PTX), with those packages
#   5. build           the plugins (the compiler and export runtime too), the CUDA gtests, the Python package
#   6. no-host-symbols the plugin resolves no tessera C++ symbol (the C ABI alone)
#   7. gtest-cuda      every kernel family against the CPU plugin
#   8. gtest-rerun     only when 7 failed: the first failing test alone, then the others, with
#                      CUDA_LAUNCH_BLOCKING=1 (an asynchronous fault is reported at a later
#                      sync and fails every test after it; launch-blocking names the kernel)
#   9. gtest-allocator the caching allocator on its fake device
#  10. pytest-cuda     tests/python/test_cuda.py on device "cuda" (but its CUDA-graph tests)
#  11. pytest-graphs   its CUDA-graph tests (CUDAGraph, reduce-overhead), without launch-blocking:
#                      a launch that blocks is a synchronisation, which a capture refuses
#  12. sweep           every overload of core/ops.yaml on "cuda" against the CPU
#  13. benchmark       benchmarks/cuda_vs_peers.py --quick
# Each step has its own time limit (LIMIT below: they add up to 490 s), the summary (result and seconds per step) is printed by an EXIT trap whatever happens, and the
# exit status is 1 when a step did not pass. When the smoke test fails the GPU steps are skipped
# (their failures would say nothing new) unless FORCE_GPU_STEPS=1.
#   bash backends/cuda/device_check.sh [build-dir]          (default build/cuda-check)
# Logs: the build's in $LOG_DIR/build.log (LOG_DIR: $OUT on the device machine, else the build
# dir); everything else on stdout. The device call (backends/cuda/README.md, "Checks on a GPU
# machine") carries .devdeps (bash backends/cuda/device_deps.sh, here, first): the packages the
# image lacks, unpacked into a private prefix.
# Dry runs here, without a GPU: DRY_RUN=1 configures for real and lists the build's commands
# (ninja -t commands) instead of running them; the GPU steps then skip at once. REUSE_BUILD=1
# FORCE_GPU_STEPS=1 on a build made already runs the later steps' wiring (without a device the
# gtests and pytest skip, the sweep and the benchmark fail at once).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
B=${1:-build/cuda-check}
LOG_DIR=${OUT:-$B}
mkdir -p "$B" "$LOG_DIR"
GTEST_LOG="$LOG_DIR/gtest-cuda.log"

# Seconds per step. The build is the one unknown (16 cores, nothing cached): it gets half.
declare -A LIMIT=([gpu-info]=10 [cuda-smoke]=20 [unpack-deps]=25 [configure]=25 [build]=220 [no-host-symbols]=5
                  [gtest-cuda]=45 [gtest-rerun]=20 [gtest-allocator]=5 [pytest-cuda]=40 [pytest-graphs]=15 [sweep]=40
                  [benchmark]=20)
LIMIT_TOTAL=0
for v in "${LIMIT[@]}"; do LIMIT_TOTAL=$(( LIMIT_TOTAL + v )); done
declare -A RESULT SECONDS_OF
STEPS=()
CHECK_START=$(date +%s)
summary() {
  local rc=0 name
  echo "=== summary (total $(( $(date +%s) - CHECK_START )) s; the limits add up to $LIMIT_TOTAL s)"
  for name in "${STEPS[@]}"; do
    printf '%-16s %-32s %5s s\n' "$name" "${RESULT[$name]}" "${SECONDS_OF[$name]:-0}"
    case "${RESULT[$name]}" in PASS | SKIP*) ;; *) rc=1 ;; esac
  done
  exit $rc
}
trap summary EXIT
# Steps run in the background and are waited for, so a TERM is handled at once: the running
# step is stopped and marked, and the EXIT trap still prints the summary.
CHILD=""
trap 'echo "=== interrupted"; [[ -n "$CHILD" ]] && kill -TERM "$CHILD" 2>/dev/null; exit 130' INT TERM

# step NAME COMMAND...: runs it under LIMIT[NAME] and records PASS, FAIL(rc) or TIMEOUT.
step() {
  local name=$1 limit=${LIMIT[$1]} start rc
  shift
  STEPS+=("$name")
  RESULT[$name]=INTERRUPTED  # until it returns
  echo "=== $name (limit ${limit} s)"
  start=$(date +%s)
  if declare -F "$1" >/dev/null; then
    # A function of this script: `timeout` runs it in a child bash given the functions and state.
    timeout -k 5 "$limit" bash -c "set -o pipefail; $(declare -p B LOG_DIR DEPS CMAKE_ARGS TARGETS GTEST_LOG 2>/dev/null); $(declare -f); $*" &
  else
    timeout -k 5 "$limit" "$@" &
  fi
  CHILD=$!
  wait "$CHILD"
  rc=$?
  CHILD=""
  SECONDS_OF[$name]=$(( $(date +%s) - start ))
  if (( rc == 0 )); then RESULT[$name]=PASS
  elif (( rc == 124 || rc == 137 )); then RESULT[$name]="TIMEOUT(${limit}s)"
  else RESULT[$name]="FAIL($rc)"
  fi
  return $rc
}
skip() {  # skip NAME REASON
  STEPS+=("$1")
  RESULT[$1]="SKIP($2)"
  echo "=== $1: skipped ($2)"
}
passed() { [[ "${RESULT[$1]:-}" == PASS ]]; }

# ---- 1, 2: the GPU first, before any build time is spent
step gpu-info nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv
NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
SMOKE=$(mktemp -d)
cat > "$SMOKE/smoke.cu" <<'EOF'
#include <cstdio>
__global__ void twice(int* x, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] = 2 * i; }
int main() {
  const int n = 1 << 20; int* d = nullptr; static int h[1 << 20];
  if (cudaMalloc(&d, n * sizeof(int)) != cudaSuccess) { printf("cudaMalloc: %s\n", cudaGetErrorString(cudaGetLastError())); return 1; }
  twice<<<(n + 255) / 256, 256>>>(d, n);
  cudaError_t e = cudaMemcpy(h, d, n * sizeof(int), cudaMemcpyDeviceToHost);
  for (int i = 0; e == cudaSuccess && i < n; ++i) if (h[i] != 2 * i) { printf("wrong value at %d\n", i); return 1; }
  printf("smoke: %s\n", cudaGetErrorString(e)); return e != cudaSuccess;
}
EOF
step cuda-smoke bash -c "'$NVCC' -arch=sm_90 -o '$SMOKE/smoke' '$SMOKE/smoke.cu' && '$SMOKE/smoke'"
GPU_OK=0
if passed cuda-smoke || [[ "${FORCE_GPU_STEPS:-0}" == 1 ]]; then GPU_OK=1; fi

# ---- 3..6: the build, and the plugin it made.
DEPS=$(mktemp -d /tmp/tessera-devdeps.XXXXXX)  # fresh: removing an old one takes longer than unpacking
unpack_deps() {
  for f in .devdeps/*.deb; do dpkg -x "$f" "$DEPS" || return 1; done
  echo "unpacked $(ls .devdeps/*.deb | wc -l) packages into $DEPS"
}
PREFIX_PATH=""
if ! compgen -G ".devdeps/*.deb" >/dev/null; then
  skip unpack-deps "no .devdeps/*.deb: the image's own packages"
elif [[ "${REUSE_BUILD:-0}" == 1 ]]; then
  skip unpack-deps "REUSE_BUILD=1"
elif step unpack-deps unpack_deps; then
  PREFIX_PATH="$DEPS/usr"
  export LD_LIBRARY_PATH="$DEPS/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
CMAKE_ARGS=(-S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90-real
            -DTESSERA_BUILD_PYTHON=ON -DTESSERA_BUILD_ROCM=OFF -DTESSERA_BUILD_BENCHMARKS=OFF
            -DTESSERA_BUILD_EXAMPLES=OFF -DCMAKE_PREFIX_PATH="$PREFIX_PATH"
            -DPython_EXECUTABLE="$(command -v python3)")
# pybind11 from pip (the image's Python) when no system package provides it.
if PYBIND11_DIR=$(python3 -m pybind11 --cmakedir 2>/dev/null); then CMAKE_ARGS+=(-Dpybind11_DIR="$PYBIND11_DIR"); fi
# cuDNN: the toolkit's, else the one pip installed beside PyTorch (nvidia-cudnn-cu*), whose folder
# has only versioned libraries: the build links a libcudnn.so made here, the plugin loads its own.
if ! compgen -G "/usr/local/cuda/lib*/libcudnn.so" >/dev/null; then
  CUDNN_DIR=$(python3 -c "import nvidia.cudnn, os; print(list(nvidia.cudnn.__path__)[0])" 2>/dev/null || true)
  CUDNN_LIB=$(ls "$CUDNN_DIR"/lib/libcudnn.so.* 2>/dev/null | head -1 || true)
  if [[ -n "$CUDNN_LIB" && -f "$CUDNN_DIR/include/cudnn.h" ]]; then
    mkdir -p /tmp/tessera-cudnn && ln -sf "$CUDNN_LIB" /tmp/tessera-cudnn/libcudnn.so
    CMAKE_ARGS+=(-DTESSERA_CUDNN_INCLUDE_DIR="$CUDNN_DIR/include" -DTESSERA_CUDNN_LIBRARY=/tmp/tessera-cudnn/libcudnn.so)
    export LD_LIBRARY_PATH="$CUDNN_DIR/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  fi
fi
# shellcheck disable=SC2206
CMAKE_ARGS+=(${EXTRA_CMAKE_ARGS:-})
configure() {
  cmake "${CMAKE_ARGS[@]}" > "$LOG_DIR/configure.log" 2>&1 || { tail -40 "$LOG_DIR/configure.log"; return 1; }
  grep -E 'CUDA plugin|SLEEF' "$LOG_DIR/configure.log"
}
# tracer + inductor + export: test_cuda.py's compiled (NVRTC) and exported (AOT PTX) kernels.
TARGETS=(tessera tessera_cpu tessera_cuda tessera_autograd test_cuda test_cuda_allocator tessera_python
         tessera_python_package tessera_tracer tessera_inductor tessera_export tessera_export_run)
build() {
  if [[ "${DRY_RUN:-0}" == 1 ]]; then  # list what the build would run; show the kernels' targets
    ninja -C "$B" -t commands "${TARGETS[@]}" > "$LOG_DIR/build.log" || return 1
    echo "build (dry run): $(wc -l < "$LOG_DIR/build.log") commands listed, not run; CUDA code for:" \
      "$(grep -o -- '--generate-code=[^ ]*\|-gencode[= ][^ ]*\|-arch[= ][^ ]*' "$LOG_DIR/build.log" | sort -u | tr '\n' ' ')"
    return 0
  fi
  if cmake --build "$B" -j"$(nproc)" --target "${TARGETS[@]}" > "$LOG_DIR/build.log" 2>&1; then
    echo "build: $(grep -c '^\[' "$LOG_DIR/build.log") steps"
  else
    grep -E -B2 -A12 'error|FAILED' "$LOG_DIR/build.log" | head -80
    return 1
  fi
}
BUILT=0
if [[ "${REUSE_BUILD:-0}" == 1 ]]; then  # a dry run of the later steps on a build made already
  skip configure "REUSE_BUILD=1"
  skip build "REUSE_BUILD=1"
  BUILT=1
else
  step configure configure
  if passed configure; then step build build; else skip build "configure failed"; fi
  if passed build && [[ "${DRY_RUN:-0}" != 1 ]]; then BUILT=1; fi
fi
PLUGIN="$B/lib/tessera/plugins/libtessera_cuda.so"
if (( BUILT )); then
  step no-host-symbols bash -c "test -f '$PLUGIN' && ! nm -D --undefined-only -C '$PLUGIN' | grep 'tessera::'"
else
  skip no-host-symbols "no build"
fi

# ---- 7..12: on the GPU
gpu_step() {  # gpu_step NAME COMMAND...: skipped without a usable GPU or a build
  if (( !GPU_OK )); then skip "$1" "no usable GPU"; return 1; fi
  if (( !BUILT )); then skip "$1" "no build"; return 1; fi
  step "$@"
}
gtest_cuda() { "$B/bin/test_cuda" 2>&1 | tee "$GTEST_LOG"; }
# The tests to rerun: the failed ones, and the one running when the process died.
failing_tests() {
  awk '/^\[ RUN      \]/ { running = $4 } /^\[       OK \]|^\[  SKIPPED \]/ { running = "" }
       /^\[  FAILED  \] [A-Za-z0-9_]+\.[A-Za-z0-9_]+ \(/ { print $4; running = "" }
       END { if (running != "") print running }' "$GTEST_LOG" | awk '!seen[$0]++'
}
gtest_rerun() {
  local tests first rest
  mapfile -t tests < <(failing_tests)
  if (( ${#tests[@]} == 0 )); then echo "no failing test named in $GTEST_LOG: rerunning all"; tests=("*"); fi
  first=${tests[0]}
  rest=$(IFS=:; echo "${tests[*]:1}")
  echo "rerun with CUDA_LAUNCH_BLOCKING=1: $first alone${rest:+, then $rest}"
  local rc=0
  CUDA_LAUNCH_BLOCKING=1 "$B/bin/test_cuda" --gtest_filter="$first" || rc=1
  if [[ -n "$rest" ]]; then CUDA_LAUNCH_BLOCKING=1 "$B/bin/test_cuda" --gtest_filter="$rest" || rc=1; fi
  return $rc
}
PY_ENV=(env PYTHONPATH="$B/python" TESSERA_TEST_BUILD_DIR="$B" PYTHONUNBUFFERED=1)
gpu_step gtest-cuda gtest_cuda
case "${RESULT[gtest-cuda]}" in
  FAIL* | TIMEOUT*) step gtest-rerun gtest_rerun ;;
  *) skip gtest-rerun "gtest-cuda did not fail" ;;
esac
if (( BUILT )); then step gtest-allocator "$B/bin/test_cuda_allocator"; else skip gtest-allocator "no build"; fi
# Launch-blocking in pytest: a kernel fault fails the test that caused it, not the next sync.
gpu_step pytest-cuda "${PY_ENV[@]}" CUDA_LAUNCH_BLOCKING=1 python3 -m pytest -q --tb=short --maxfail=10 \
  -k "not cuda_graph and not reduce_overhead" tests/python/test_cuda.py
gpu_step pytest-graphs "${PY_ENV[@]}" python3 -m pytest -q --tb=short -k "cuda_graph or reduce_overhead" \
  tests/python/test_cuda.py
gpu_step sweep "${PY_ENV[@]}" CUDA_LAUNCH_BLOCKING=1 TESSERA_SWEEP_DEVICE=cuda \
  python3 -m pytest -q --tb=short --maxfail=20 tests/python/test_every_operator_on_device.py
gpu_step benchmark "${PY_ENV[@]}" python3 benchmarks/cuda_vs_peers.py --quick
true
