#!/usr/bin/env bash
# The CUDA plugin's checks on a GPU machine, in under 8 minutes: build (sm_90 + PTX), the CUDA
# gtests (every kernel against the CPU plugin, cuBLAS and the tiled GEMM, the allocator), the
# Python tests on device "cuda", and a benchmark. Prints a summary; exit status 1 on a failure.
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
T=120 step benchmark env PYTHONPATH="$B/python" python3 - <<'PY'
import time
import tessera as ts

C = ts.ops.cuda
def timed(f, reps):
    f(); C.synchronize(0)
    t0 = time.perf_counter()
    for _ in range(reps):
        f()
    C.synchronize(0)
    return (time.perf_counter() - t0) / reps

n = 256 * 1024 * 1024
a = ts.ones(n, device="cuda"); b = ts.ones(n, device="cuda")
t = timed(lambda: a + b, 10)
print(f"add 256M float32: {t*1e3:.2f} ms, {3*4*n/t/1e12:.2f} TB/s (H200 peak ~4.8 TB/s: {3*4*n/t/4.8e12*100:.0f}%)")
del a, b
C.empty_cache()
for dt, tf32 in [(ts.float32, False), (ts.float32, True), (ts.bfloat16, False)]:
    C.set_allow_tf32(tf32)
    x = ts.randn(8192, 8192).to(dt).to("cuda"); y = ts.randn(8192, 8192).to(dt).to("cuda")
    for vendor in (True, False):
        C.set_use_vendor_blas(vendor)
        t = timed(lambda: ts.mm(x, y), 3 if vendor else 1)
        print(f"mm 8192 {dt} tf32={tf32} {'cublas' if vendor else 'tiled '}: {t*1e3:8.2f} ms, {2*8192**3/t/1e12:7.1f} TFLOP/s")
    C.set_use_vendor_blas(True)
C.set_allow_tf32(False)
s = ts.randn(64, 64, device="cpu").to("cuda")
def chain():
    z = s
    for _ in range(10):
        z = ts.relu(z * 1.01 + 0.1)
    return z
t = timed(chain, 200)
print(f"chain of 10 small ops (64x64, 3 kernels each): {t/30*1e6:.1f} us per op")
print("memory_stats [alloc, reserved, peak_alloc, peak_reserved, n_alloc, hits, device_allocs, ooms]:", C.memory_stats(0))
PY

echo "=== summary"
rc=0
for k in configure+build nvidia-smi nm-no-host-symbols gtest-cuda gtest-allocator pytest-cuda benchmark; do
  printf '%-22s %s\n' "$k" "${R[$k]:-not run}"
  [[ "${R[$k]:-}" == PASS ]] || rc=1
done
exit $rc
