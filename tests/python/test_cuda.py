"""The CUDA plugin from Python. Everywhere: it loads without a driver, reports 0 devices, and a
CUDA tensor request raises a clear error (the runtime's reason is printed when it loads). With a
GPU: the kernels against NumPy (via the CPU); skipped, with the reason, when there is no device."""
import os
import subprocess
import sys

import numpy as np
import pytest

import tessera as ts
from conftest import BUILD_PYTHON


def _plugin_available():
    try:  # naming the device loads its plugin (lazily, by name); with 0 devices it then refuses
        ts.device("cuda")
    except ValueError:
        pass
    try:
        ts.ops.cuda.device_count
        return True
    except AttributeError:
        return False


pytestmark = pytest.mark.skipif(not _plugin_available(), reason="libtessera_cuda.so was not built or not found")


def device_count():
    return ts.ops.cuda.device_count()


needs_gpu = pytest.mark.skipif(not _plugin_available() or device_count() == 0,
                               reason="no CUDA device on this machine (cuda.device_count() == 0)")


def test_plugin_loads_and_reports_its_devices():
    assert device_count() >= 0
    assert ts.ops.cuda.is_available() == (device_count() > 0)
    stats = ts.ops.cuda.memory_stats(0)
    assert len(stats) == 8 and all(isinstance(v, int) for v in stats)
    ts.ops.cuda.empty_cache()
    ts.ops.cuda.set_allow_tf32(False)
    assert ts.ops.cuda.allow_tf32() is False


@pytest.mark.skipif(_plugin_available() and device_count() > 0, reason="this machine has a CUDA device")
def test_without_a_device_requests_fail_clearly():
    with pytest.raises(ValueError, match=r"cuda.*0 devices"):
        ts.zeros(2, 3, device="cuda")
    with pytest.raises(ValueError, match="0 devices"):
        ts.ones(2).to("cuda")
    with pytest.raises(RuntimeError, match=r"no cuda driver/device was found: cudaGetDeviceCount"):
        ts.ops.cuda.synchronize(0)


@pytest.mark.skipif(_plugin_available() and device_count() > 0, reason="this machine has a CUDA device")
def test_the_reason_is_printed_when_the_plugin_loads():
    code = "import tessera as ts\ntry:\n    ts.zeros(1, device='cuda')\nexcept ValueError as e:\n    print(e)\n"
    env = dict(os.environ)
    if BUILD_PYTHON:
        env["PYTHONPATH"] = BUILD_PYTHON + os.pathsep + env.get("PYTHONPATH", "")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert "0 devices" in r.stdout
    assert "cudaGetDeviceCount" in r.stderr and "cuda tensors cannot be created" in r.stderr


# ---------------------------------------------------------------- with a GPU

def np_of(t):
    return np.array(t.to("cpu").tolist(), dtype=np.float64)


def close(got, want, rtol=1e-5, atol=1e-6):
    assert str(got.device).startswith("cuda")
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert tuple(got.shape) == tuple(want.shape)
    np.testing.assert_allclose(np_of(got), np_of(want), rtol=rtol, atol=atol)


TOL = {"float32": (1e-5, 1e-6), "float64": (1e-12, 1e-12), "float16": (2e-3, 2e-3), "bfloat16": (2e-2, 2e-2)}


@needs_gpu
@pytest.mark.parametrize("dtype", list(TOL))
@pytest.mark.parametrize("op", ["neg", "abs", "exp", "sin", "cos", "tanh", "sigmoid", "relu", "gelu", "silu"])
def test_unary(op, dtype):
    x = (ts.randn(4, 6) * 2).to(getattr(ts, dtype))
    f = getattr(ts, op) if hasattr(ts, op) else getattr(ts.ops, op)
    close(f(x.to("cuda")), f(x), *TOL[dtype])
    close(f(x.to("cuda").t()), f(x.t()), *TOL[dtype])  # non-contiguous


@needs_gpu
@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
def test_binary_broadcast_and_compare(dtype):
    dt = getattr(ts, dtype)
    a, b = (ts.randn(3, 1, 5) * 4).to(dt), (ts.randn(4, 5) * 4 + 10).to(dt)
    ga, gb = a.to("cuda"), b.to("cuda")
    for f in [lambda x, y: x + y, lambda x, y: x - y, lambda x, y: x * y, lambda x, y: x / y,
              lambda x, y: x == y, lambda x, y: x < y, lambda x, y: ts.where(x > y, x, y), lambda x, y: x * 2.5]:
        close(f(ga, gb), f(a, b))


@needs_gpu
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_reductions_softmax_matmul(dtype):
    dt = getattr(ts, dtype)
    x = ts.randn(3, 5, 7).to(dt)
    g = x.to("cuda")
    close(g.sum(), x.sum(), 1e-4)
    close(ts.sum(g, [0, 2], keepdim=True), ts.sum(x, [0, 2], keepdim=True), 1e-4)
    close(ts.mean(g, [1]), ts.mean(x, [1]), 1e-4)
    close(ts.amax(g, [2]), ts.amax(x, [2]))
    close(ts.softmax(g, 1), ts.softmax(x, 1), 1e-4)
    close(ts.log_softmax(g, -1), ts.log_softmax(x, -1), 1e-4)
    a, b = ts.randn(2, 6, 5).to(dt), ts.randn(5, 3).to(dt)
    for vendor in (True, False):
        ts.ops.cuda.set_use_vendor_blas(vendor)
        close(ts.matmul(a.to("cuda"), b.to("cuda")), ts.matmul(a, b), 1e-4, 1e-5)
    ts.ops.cuda.set_use_vendor_blas(True)


@needs_gpu
def test_views_copies_and_memory_stats():
    x = ts.randn(2, 3, 4)
    g = x.to("cuda")
    close(g.permute(2, 0, 1).contiguous(), x.permute(2, 0, 1).contiguous())
    close(g.transpose(0, 2).reshape(-1), x.transpose(0, 2).reshape(-1))
    close(g[:, 1:, ::2], x[:, 1:, ::2])
    close(g.to(ts.float16), x.to(ts.float16), 1e-3, 1e-3)
    ts.ops.cuda.synchronize(0)
    assert ts.ops.cuda.memory_stats(0)[0] > 0


def test_no_device_error_says_why():
    """Without a driver, asking for a CUDA tensor names the runtime's own reason (captured from the
    plugin's load-time warning), not just 'index out of range'."""
    import tessera as ts

    if not ts._C.plugins_load_named("cuda"):
        pytest.skip("the CUDA plugin is not built")
    if ts.ops.cuda.device_count() > 0:
        pytest.skip("a CUDA device is present")
    with pytest.raises(ValueError, match="when it loaded, the plugin said: .*cuda"):
        ts.zeros(3, device="cuda")
