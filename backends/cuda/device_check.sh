#!/usr/bin/env bash
# The CUDA plugin's checks on a GPU machine, in under 8 minutes: build (sm_90 + PTX), the CUDA
# gtests (every kernel against the CPU plugin, cuBLAS and the tiled GEMM, the allocator), the
# Python tests on device "cuda", every operator of ops.yaml on "cuda" against the CPU (the
# sweep), and the benchmark against cuBLAS called directly, the HBM peak and PyTorch when it is
# installed (benchmarks/cuda_vs_peers.py), and the NCCL process-group backend (a world of one,
# and of two ranks where there are two GPUs). Prints a summary; exit status 1 on a failure.
#   bash backends/cuda/device_check.sh [build-dir]
# A GPU machine reaches no registry, and its image lacks some Debian packages Tessera builds
# against: fetch them here first (bash backends/cuda/device_deps.sh, into .devdeps/), then carry
# them. As one device `run`, with carry [".devdeps"]:
#   set -o pipefail; bash backends/cuda/device_check.sh 2>&1 | tee $OUT/device_check.log
# A dry run here (the GPU steps then fail or skip) that finds nothing in /usr, as on that image:
#   BUILD_TIMEOUT=3600 EXTRA_CMAKE_ARGS=-DCMAKE_IGNORE_PREFIX_PATH=/usr bash backends/cuda/device_check.sh /tmp/check
set -uo pipefail
cd "$(dirname "$0")/../.."
B=${1:-build/cuda-check}
J=$(nproc)
declare -A R
step() { local name=$1; shift; echo "=== $name"; if timeout "${T:-300}" "$@"; then R[$name]=PASS; else R[$name]="FAIL($?)"; fi; }

# The carried packages, unpacked into a private prefix (nothing is installed).
PREFIX_PATH=""
if compgen -G ".devdeps/*.deb" >/dev/null; then
  DEPS=/tmp/tessera-devdeps
  rm -rf "$DEPS" && mkdir -p "$DEPS"
  for f in .devdeps/*.deb; do dpkg -x "$f" "$DEPS"; done
  PREFIX_PATH="$DEPS/usr"
  export LD_LIBRARY_PATH="$DEPS/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
# cuDNN: the toolkit's, else the one pip installed beside PyTorch (nvidia-cudnn-cu*), whose folder
# has only versioned libraries: the build links a libcudnn.so made here, the plugin loads its own.
CUDNN_ARGS=()
if ! compgen -G "/usr/local/cuda/lib*/libcudnn.so" >/dev/null; then
  CUDNN_DIR=$(python3 -c "import nvidia.cudnn, os; print(list(nvidia.cudnn.__path__)[0])" 2>/dev/null || true)
  CUDNN_LIB=$(ls "$CUDNN_DIR"/lib/libcudnn.so.* 2>/dev/null | head -1 || true)
  if [[ -n "$CUDNN_LIB" && -f "$CUDNN_DIR/include/cudnn.h" ]]; then
    mkdir -p /tmp/tessera-cudnn && ln -sf "$CUDNN_LIB" /tmp/tessera-cudnn/libcudnn.so
    CUDNN_ARGS=(-DTESSERA_CUDNN_INCLUDE_DIR="$CUDNN_DIR/include" -DTESSERA_CUDNN_LIBRARY=/tmp/tessera-cudnn/libcudnn.so)
    export LD_LIBRARY_PATH="$CUDNN_DIR/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  fi
fi

mkdir -p "$B"
T=${BUILD_TIMEOUT:-360} step configure+build bash -c "(cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DTESSERA_BUILD_PYTHON=ON \
  -DTESSERA_BUILD_ROCM=OFF -DTESSERA_BUILD_BENCHMARKS=OFF -DTESSERA_BUILD_EXAMPLES=OFF -DCMAKE_PREFIX_PATH='$PREFIX_PATH' \
  ${CUDNN_ARGS[*]} ${EXTRA_CMAKE_ARGS:-} > $B/configure.log 2>&1 || (tail -40 $B/configure.log; exit 1)) && { grep -E 'CUDA plugin|SLEEF' $B/configure.log; \
  cmake --build $B -j$J --target tessera tessera_cpu tessera_cuda tessera_autograd test_cuda test_cuda_allocator \
  tessera_python tessera_python_package tessera_nccl tessera_distributed; }"
T=30 step nvidia-smi nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
T=30 step nm-no-host-symbols bash -c "! nm -D --undefined-only -C $B/lib/tessera/plugins/libtessera_cuda.so | grep 'tessera::'"
T=120 step gtest-cuda "$B/bin/test_cuda"
T=30 step gtest-allocator "$B/bin/test_cuda_allocator"
T=150 step pytest-cuda env PYTHONPATH="$B/python" TESSERA_TEST_BUILD_DIR="$B" python3 -m pytest -q tests/python/test_cuda.py
T=150 step sweep env PYTHONPATH="$B/python" TESSERA_TEST_BUILD_DIR="$B" TESSERA_SWEEP_DEVICE=cuda \
  python3 -m pytest -q tests/python/test_every_operator_on_device.py
T=120 step nccl env PYTHONPATH="$B/python" TESSERA_TEST_BUILD_DIR="$B" python3 -m pytest -q tests/python/test_distributed_nccl.py
T=150 step benchmark env PYTHONPATH="$B/python" python3 benchmarks/cuda_vs_peers.py

echo "=== summary"
rc=0
for k in configure+build nvidia-smi nm-no-host-symbols gtest-cuda gtest-allocator pytest-cuda sweep nccl benchmark; do
  printf '%-22s %s\n' "$k" "${R[$k]:-not run}"
  [[ "${R[$k]:-}" == PASS ]] || rc=1
done
exit $rc
