#!/usr/bin/env bash
# The CUDA plugin's checks on a GPU machine, in under 8 minutes: build (sm_90 + PTX), the CUDA
# gtests (every kernel against the CPU plugin, cuBLAS and the tiled GEMM, the allocator), the
# Python tests on device "cuda", every operator of ops.yaml on "cuda" against the CPU (the
# sweep), and the benchmark against cuBLAS called directly, the HBM peak and PyTorch when it is
# installed (benchmarks/cuda_vs_peers.py). Prints a summary; exit status 1 on a failure.
#   bash backends/cuda/device_check.sh [build-dir]
set -uo pipefail
cd "$(dirname "$0")/../.."
B=${1:-build/cuda-check}
J=$(nproc)
declare -A R
step() { local name=$1; shift; echo "=== $name"; if timeout "${T:-300}" "$@"; then R[$name]=PASS; else R[$name]="FAIL($?)"; fi; }

T=300 step configure+build bash -c "cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DTESSERA_BUILD_PYTHON=ON \
  -DTESSERA_BUILD_ROCM=OFF -DTESSERA_BUILD_BENCHMARKS=OFF -DTESSERA_BUILD_EXAMPLES=OFF >/dev/null && \
  cmake --build $B -j$J --target tessera tessera_cpu tessera_cuda tessera_autograd test_cuda test_cuda_allocator \
  _C.cpython-$(python3 -c 'import sys;print(f\"{sys.version_info[0]}{sys.version_info[1]}\")')-x86_64-linux-gnu.so"
T=30 step nvidia-smi nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
T=30 step nm-no-host-symbols bash -c "! nm -D --undefined-only -C $B/lib/tessera/plugins/libtessera_cuda.so | grep 'tessera::'"
T=120 step gtest-cuda "$B/bin/test_cuda"
T=30 step gtest-allocator "$B/bin/test_cuda_allocator"
T=150 step pytest-cuda env PYTHONPATH="$B/python" TESSERA_TEST_BUILD_DIR="$B" python3 -m pytest -q -x tests/python/test_cuda.py
T=150 step sweep env PYTHONPATH="$B/python" TESSERA_TEST_BUILD_DIR="$B" TESSERA_SWEEP_DEVICE=cuda \
  python3 -m pytest -q tests/python/test_every_operator_on_device.py
T=150 step benchmark env PYTHONPATH="$B/python" python3 benchmarks/cuda_vs_peers.py

echo "=== summary"
rc=0
for k in configure+build nvidia-smi nm-no-host-symbols gtest-cuda gtest-allocator pytest-cuda sweep benchmark; do
  printf '%-22s %s\n' "$k" "${R[$k]:-not run}"
  [[ "${R[$k]:-}" == PASS ]] || rc=1
done
exit $rc
