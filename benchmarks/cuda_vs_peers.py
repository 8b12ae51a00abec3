"""The CUDA plugin against its peers, in one run on a GPU machine (backends/cuda/device_check.sh
runs it). Every row prints medians and ratios, side by side:
  - add on 256M float32: against the hardware's peak HBM bandwidth (--peak-tbs, H200: 4.8) and
    against a device-to-device cudaMemcpy of the same buffers (what the memory system delivers);
  - GEMM 8192 in float32 (TF32 off and on) and bfloat16: ts.mm against cuBLAS called directly
    (cublasGemmEx through ctypes on the very same device buffers) and against our tiled kernel;
  - a chain of small element-wise ops: time per op (launch- and dispatch-bound).
PyTorch joins every row when it is importable with a GPU.
    python3 benchmarks/cuda_vs_peers.py [--quick] [--peak-tbs 4.8]
"""
import argparse
import ctypes
import glob
import statistics
import time

import tessera as ts

CUDA_R = {"float32": 0, "float16": 2, "bfloat16": 14}  # cudaDataType (library_types.h)
CUBLAS_COMPUTE_32F, CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_GEMM_DEFAULT = 68, 77, -1  # cublas_api.h
CUDA_MEMCPY_DEVICE_TO_DEVICE = 3


def load_library(stem):
    """The CUDA library `stem` (cudart, cublas): the copy the plugin already loaded, else the toolkit's."""
    for name in [f"lib{stem}.so", *(f"lib{stem}.so.{v}" for v in (13, 12, 11))] + \
            sorted(glob.glob(f"/usr/local/cuda/lib64/lib{stem}.so*")):
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    raise OSError(f"lib{stem}.so was not found")


class Runtime:
    def __init__(self):
        self.lib = load_library("cudart")
        self.lib.cudaMemcpy.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]

    def synchronize(self):
        check(self.lib.cudaDeviceSynchronize(), "cudaDeviceSynchronize")

    def copy(self, dst, src, nbytes):
        check(self.lib.cudaMemcpy(dst.data_ptr(), src.data_ptr(), nbytes, CUDA_MEMCPY_DEVICE_TO_DEVICE), "cudaMemcpy")


class Cublas:
    """cublasGemmEx on tessera tensors' device buffers: row-major c = a @ b as column-major
    c^T = b^T a^T, the way every row-major framework calls it."""

    def __init__(self):
        self.lib = load_library("cublas")
        self.handle = ctypes.c_void_p()
        check(self.lib.cublasCreate_v2(ctypes.byref(self.handle)), "cublasCreate")
        p, i = ctypes.c_void_p, ctypes.c_int
        self.lib.cublasGemmEx.argtypes = [p, i, i, i, i, i, p, p, i, i, p, i, i, p, p, i, i, i, i]

    def gemm(self, a, b, c, tf32):
        m, k = a.shape
        n = b.shape[1]
        t = CUDA_R[a.dtype.name]
        compute = CUBLAS_COMPUTE_32F_FAST_TF32 if tf32 and a.dtype == ts.float32 else CUBLAS_COMPUTE_32F
        one, zero = ctypes.c_float(1.0), ctypes.c_float(0.0)
        check(self.lib.cublasGemmEx(self.handle, 0, 0, n, m, k, ctypes.addressof(one), b.data_ptr(), t, n,
                                    a.data_ptr(), t, k, ctypes.addressof(zero), c.data_ptr(), t, n, compute,
                                    CUBLAS_GEMM_DEFAULT), "cublasGemmEx")


def check(status, what):
    if status != 0:
        raise RuntimeError(f"{what} failed with status {status}")


def median_seconds(f, sync, reps, runs):
    """The median over `runs` of the time per call of `reps` back-to-back calls."""
    f()
    sync()
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        for _ in range(reps):
            f()
        sync()
        times.append((time.perf_counter() - t0) / reps)
    return statistics.median(times)


def torch_cuda():
    try:
        import torch
    except ImportError:
        return None
    return torch if torch.cuda.is_available() else None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smaller sizes and fewer runs (a smoke test)")
    ap.add_argument("--peak-tbs", type=float, default=4.8, help="the GPU's peak memory bandwidth in TB/s")
    args = ap.parse_args()
    if not ts.cuda.is_available():
        raise SystemExit("cuda_vs_peers: no CUDA device (ts.cuda.device_count() == 0; the plugin's reason is printed "
                         "above when it loaded)")
    C = ts.ops.cuda
    rt, blas, torch = Runtime(), Cublas(), torch_cuda()
    runs = 3 if args.quick else 7
    print(f"device: {ts.cuda.device_count()} x cuda; PyTorch: {torch.__version__ if torch else 'not importable'}")

    # ---- element-wise add, bandwidth-bound
    n = (16 if args.quick else 256) * 1024 * 1024
    a, b = ts.ones(n, device="cuda"), ts.ones(n, device="cuda")
    moved = 3 * 4 * n  # two reads and a write
    t = median_seconds(lambda: a + b, rt.synchronize, 10, runs)
    dst = ts.empty(n, device="cuda")
    t_copy = median_seconds(lambda: rt.copy(dst, a, 4 * n), rt.synchronize, 10, runs)
    copy_tbs = 2 * 4 * n / t_copy / 1e12
    tbs = moved / t / 1e12
    print(f"add {n >> 20}M float32: tessera {t * 1e3:7.3f} ms = {tbs:5.2f} TB/s; {tbs / args.peak_tbs:5.1%} of the "
          f"{args.peak_tbs} TB/s peak; {tbs / copy_tbs:5.1%} of cudaMemcpy D2D ({copy_tbs:.2f} TB/s)")
    if torch:
        ta, tb = torch.ones(n, device="cuda"), torch.ones(n, device="cuda")
        tt = median_seconds(lambda: ta + tb, torch.cuda.synchronize, 10, runs)
        print(f"    PyTorch {tt * 1e3:7.3f} ms: tessera/PyTorch time = {t / tt:.2f}")
        del ta, tb
    del a, b, dst
    C.empty_cache()

    # ---- GEMM: ts.mm (cuBLAS inside) against cuBLAS called directly, and our tiled kernel
    size = 2048 if args.quick else 8192
    flop = 2 * size ** 3
    for dtype, tf32 in [(ts.float32, False), (ts.float32, True), (ts.bfloat16, False)]:
        C.set_allow_tf32(tf32)
        x = ts.randn(size, size).to(dtype).to("cuda")
        y = ts.randn(size, size).to(dtype).to("cuda")
        out = ts.empty(size, size, dtype=dtype, device="cuda")
        ours = median_seconds(lambda: ts.mm(x, y), rt.synchronize, 3, runs)
        direct = median_seconds(lambda: blas.gemm(x, y, out, tf32), rt.synchronize, 3, runs)
        C.set_use_vendor_blas(False)
        tiled = median_seconds(lambda: ts.mm(x, y), rt.synchronize, 1, 3)
        C.set_use_vendor_blas(True)
        agree = (ts.mm(x, y).to(ts.float32) - out.to(ts.float32)).abs().max().item()
        label = f"mm {size} {dtype.name}{' tf32' if tf32 else ''}"
        print(f"{label:24s}: tessera {ours * 1e3:8.2f} ms ({flop / ours / 1e12:6.1f} TFLOP/s) | cuBLAS direct "
              f"{direct * 1e3:8.2f} ms ({flop / direct / 1e12:6.1f}) | tessera/cuBLAS throughput "
              f"{direct / ours:6.1%} | tiled kernel {flop / tiled / 1e12:6.1f} TFLOP/s | max |diff| {agree:.3g}")
        if torch:
            tdt = getattr(torch, dtype.name)
            torch.backends.cuda.matmul.allow_tf32 = tf32
            tx, ty = torch.randn(size, size, device="cuda").to(tdt), torch.randn(size, size, device="cuda").to(tdt)
            tt = median_seconds(lambda: tx @ ty, torch.cuda.synchronize, 3, runs)
            print(f"    PyTorch {tt * 1e3:8.2f} ms: tessera/PyTorch throughput {tt / ours:6.1%}")
            del tx, ty
        del x, y, out
        C.empty_cache()
    C.set_allow_tf32(False)

    # ---- a chain of small element-wise ops: dispatch and launch cost per op
    s = ts.randn(64, 64).to("cuda")

    def chain(z=s):
        for _ in range(10):
            z = ts.relu(z * 1.01 + 0.1)
        return z

    t = median_seconds(chain, rt.synchronize, 20 if args.quick else 200, runs) / 30
    print(f"chain of 30 small ops (64x64): tessera {t * 1e6:6.2f} us per op")
    if torch:
        ts_ = torch.randn(64, 64, device="cuda")

        def tchain(z=ts_):
            for _ in range(10):
                z = torch.relu(z * 1.01 + 0.1)
            return z

        tt = median_seconds(tchain, torch.cuda.synchronize, 20 if args.quick else 200, runs) / 30
        print(f"    PyTorch {tt * 1e6:6.2f} us per op: tessera/PyTorch time = {t / tt:.2f}")
    print("allocator:", ts.cuda.memory_stats())


if __name__ == "__main__":
    main()
