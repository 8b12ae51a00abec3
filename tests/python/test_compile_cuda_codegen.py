"""The inductor's CUDA C generator, checked without a GPU: the generated source of captured
graphs compiles with NVRTC (the library the plugin uses at run time), and the same source,
built for the host with a few lines standing in for CUDA's thread indices (one thread that
strides over every element), computes what eager computes. Running it on a device is
backends/cuda/device_check.sh's part (tests/python/test_cuda.py)."""
import ctypes
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from conftest import to_np

import tessera as ts
import tessera.nn.functional as F
from tessera import _C
from tessera.compiler import _capture, _plugin_backend

# CUDA's names for the host build: a grid of one block of one thread, so the grid-stride loop
# visits every element in order.
HOST_SHIM = r"""
#include <math.h>
#include <string.h>
struct ts_dim3 { unsigned x; };
static const ts_dim3 blockIdx{0}, threadIdx{0}, blockDim{1}, gridDim{1};
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(n)
#define __restrict__ __restrict
static inline double __longlong_as_double(long long v) { double d; memcpy(&d, &v, 8); return d; }
"""


def cuda_source(fn, *args):
    _plugin_backend._load("inductor")
    with ts.no_grad():
        _, cap = _capture.capture(fn, args, {})
    return _C.call_op("inductor::generate", (cap.ir_text, "cuda"), {})


def nvrtc(source, arch="compute_80"):
    try:
        return _C.call_op("inductor::nvrtc", (source, arch), {})
    except RuntimeError as e:
        if "not installed" in str(e):
            pytest.skip(str(e))
        raise


def chain(x, y):
    a = x * y + x
    b = ts.sin(a) * y + 1.0
    c = ts.clamp(ts.exp(b), 0.0, 4.0) - x
    return ts.tanh(c) + ts.sqrt(ts.abs(c))


def activations(x, m):
    g = F.gelu(x) * F.gelu(x, approximate="tanh")
    return ts.where(m, g, ts.sigmoid(x)) + ts.maximum(x, -x * 0.5)


def transposed(z, x, y):
    return ts.tanh(z * 2.0 + x) * y - x


CASES = {
    "chain, broadcast row": (chain, lambda: (ts.randn(16, 33), ts.randn(33))),
    "chain, float64": (chain, lambda: (ts.randn(5, 7, dtype=ts.float64), ts.randn(5, 1, 7, dtype=ts.float64)[0])),
    "gelu, where on a mask": (activations, lambda: (ts.randn(300) * 3, ts.randn(300) > 0)),
    "transposed input, column broadcast": (transposed, lambda: (ts.randn(6, 9), ts.randn(9, 6).t(), ts.randn(6, 1))),
}


@pytest.mark.parametrize("case", list(CASES))
def test_generated_cuda_compiles_with_nvrtc(case):
    fn, make = CASES[case]
    source = cuda_source(fn, *make())
    assert "__global__" in source and "tessera_kernel_0" in source
    ptx = nvrtc(source)
    assert re.search(r"\.entry\s+tessera_kernel_0\(", ptx), ptx[:400]


def test_nvrtc_errors_carry_the_compiler_log():
    nvrtc("extern \"C\" __global__ void ok() {}")  # skips without NVRTC
    with pytest.raises(RuntimeError, match=r"(?s)inductor::nvrtc: .*NVRTC could not compile.*undefined_name"):
        _C.call_op("inductor::nvrtc", ("extern \"C\" __global__ void k(float* o) { o[0] = undefined_name; }",
                                       "compute_80"), {})


def host_build(source, tmp_path):
    compiler = shutil.which(os.environ.get("CXX", "c++")) or shutil.which("g++")
    if compiler is None:
        pytest.skip("no C++ compiler")
    src = tmp_path / "kernels.cpp"
    src.write_text(HOST_SHIM + source)
    lib = tmp_path / "kernels.so"
    subprocess.run([compiler, "-O1", "-ffp-contract=off", "-shared", "-fPIC", "-o", str(lib), str(src)], check=True,
                   capture_output=True, text=True)
    return ctypes.CDLL(str(lib))


@pytest.mark.parametrize("case", list(CASES))
def test_generated_cuda_computes_what_eager_computes(case, tmp_path):
    fn, make = CASES[case]
    args = make()
    source = cuda_source(fn, *args)
    assert source.count("__global__") == 1  # one fused kernel: its inputs are the arguments, in order
    lib = host_build(source, tmp_path)
    expected = to_np(fn(*args))
    # The kernel reads each input through its own strides: hand it the memory they span.
    def memory(a):
        extent = 1 + sum((n - 1) * s for n, s in zip(a.shape, a.stride()))
        flat = to_np(a.as_strided((extent,), (1,), a.storage_offset()))
        return np.ascontiguousarray(flat.astype(np.uint8) if flat.dtype == np.bool_ else flat)
    buffers = [memory(a) for a in args]
    out = np.empty(expected.shape, dtype=expected.dtype)
    kernel = lib.tessera_kernel_0
    kernel.restype = None
    kernel(*[ctypes.c_void_p(b.ctypes.data) for b in buffers], ctypes.c_void_p(out.ctypes.data))
    tol = 1e-9 if expected.dtype == np.float64 else 2e-6  # the series tanh: as the CPU kernels
    np.testing.assert_allclose(out, expected, rtol=tol, atol=tol)


def test_ptx_cache_rebuilds_a_truncated_entry_and_survives_two_writers(tmp_path, monkeypatch):
    monkeypatch.setenv("TESSERA_CACHE_DIR", str(tmp_path))
    source = cuda_source(chain, ts.randn(64), ts.randn(64))
    fresh = nvrtc(source)
    cached = _C.call_op("inductor::nvrtc", (source, "compute_80", True), {})
    assert cached == fresh
    cache_dir = _C.call_op("inductor::cache_dir", (), {})
    entries = [os.path.join(cache_dir, f) for f in os.listdir(cache_dir) if f.endswith(".ptx")]
    assert len(entries) == 1 and open(entries[0]).read().startswith(fresh)
    with open(entries[0], "r+") as f:  # a write cut short
        f.truncate(len(fresh) // 2)
    assert _C.call_op("inductor::nvrtc", (source, "compute_80", True), {}) == fresh
    assert open(entries[0]).read().startswith(fresh)  # rebuilt whole
    os.remove(entries[0])
    # Two processes filling the same entry at once: each gets the PTX, and the file is whole.
    script = ("import tessera as ts; from tessera import _C; from tessera.compiler import _plugin_backend as p; "
              "p._load('inductor'); import sys; src = open(sys.argv[1]).read(); "
              "print(len(_C.call_op('inductor::nvrtc', (src, 'compute_80', True), {})))")
    (tmp_path / "src.cu").write_text(source)
    env = {**os.environ, "TESSERA_CACHE_DIR": str(tmp_path)}
    procs = [subprocess.Popen([sys.executable, "-c", script, str(tmp_path / "src.cu")], env=env,
                              stdout=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=120)[0].strip() for p in procs]
    assert outs == [str(len(fresh))] * 2
    assert open(entries[0]).read().startswith(fresh)
    assert not [f for f in os.listdir(cache_dir) if ".tmp" in f]


def test_cuda_source_is_the_schedule_compile_makes_with_in_place_pairs_not_restrict():
    """inductor::generate plans as inductor::compile does (an archive's PTX is checked against
    the source compile generates): an output written over a dying input shares its pointer, so
    neither is __restrict__."""
    w = ts.randn(16, 16)
    source = cuda_source(lambda x: (x.mm(w) * 2).tanh() + 1, ts.randn(16, 16))
    signature = source[source.index("tessera_kernel_0("):].split(")")[0]
    assert "const float* in0" in signature and "float* out0" in signature and "__restrict__" not in signature
    nvrtc(source)


UNARY = ["sin", "cos", "exp", "tanh", "sigmoid", "relu", "neg", "abs", "erf", "sqrt"]
BINARY = ["add", "sub", "mul", "maximum", "minimum"]


@settings(max_examples=12, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(UNARY), st.sampled_from(BINARY)), min_size=1, max_size=6),
       st.sampled_from([(37,), (5, 9), (3, 1, 8)]))
def test_random_chains_in_cuda_c_compute_what_eager_computes(tmp_path_factory, steps, shape):
    """Random element-wise chains (a broadcast operand for the binary ones): the generated CUDA
    C, run on the host, against eager."""
    def f(x, b):
        y = x
        for s in steps:
            y = getattr(ts, s)(y, b) if s in BINARY else getattr(ts, s)(ts.abs(y) if s == "sqrt" else y)
        return y * 1.0
    x, b = ts.randn(*shape), ts.randn(shape[-1])
    source = cuda_source(f, x, b)
    assert source.count("__global__") == 1, source  # every op of the chain fuses: one kernel is the whole f
    lib = host_build(source, tmp_path_factory.mktemp("chain"))
    expected = to_np(f(x, b))
    out = np.empty(expected.shape, dtype=expected.dtype)
    kernel = lib.tessera_kernel_0
    kernel.restype = None
    signature = source[source.index("tessera_kernel_0("):].split(")")[0]
    inputs = [np.ascontiguousarray(to_np(t)) for t in (x, b)][:signature.count(" in")]  # x first, then b if read
    kernel(*[ctypes.c_void_p(a.ctypes.data) for a in inputs], ctypes.c_void_p(out.ctypes.data))
    finite = np.abs(expected[np.isfinite(expected)])
    np.testing.assert_allclose(out, expected, rtol=2e-6, atol=2e-6 * max(1.0, float(finite.max(initial=1.0))))
