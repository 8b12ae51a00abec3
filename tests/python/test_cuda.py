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
    assert len(stats) == 10 and all(isinstance(v, int) for v in stats)
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


# ---------------------------------------------------------------- streams, events, pinned memory

@pytest.mark.skipif(_plugin_available() and device_count() > 0, reason="this machine has a CUDA device")
def test_without_a_device_streams_and_pinned_memory_fail_clearly():
    with pytest.raises(ValueError, match="0 devices"):
        ts.Stream(device="cuda:0")
    # The plugin's own reason, through set_error, not a crash.
    with pytest.raises(RuntimeError, match=r"no cuda (driver/)?device was found"):
        ts.ones(4).pin_memory("cuda")


@needs_gpu
def test_default_current_and_side_streams():
    default = ts.default_stream("cuda")
    assert ts.current_stream("cuda") == default
    s = ts.Stream(device="cuda:0", priority=0)
    assert s != default
    with ts.stream(s):
        assert ts.current_stream("cuda") == s
        with ts.stream(default):
            assert ts.current_stream("cuda") == default
        assert ts.current_stream("cuda") == s
    assert ts.current_stream("cuda") == default
    s.synchronize()
    assert s.query()
    urgent = ts.Stream(device="cuda", priority=-100)  # clamped into the device's range
    urgent.synchronize()
    assert urgent.query()


@needs_gpu
def test_a_matmul_chain_timed_with_events():
    a = ts.randn(1024, 1024).to("cuda")
    s = ts.current_stream("cuda")
    start, end = ts.Event(enable_timing=True), ts.Event(enable_timing=True)
    start.record(s)
    y = a
    for _ in range(8):
        y = ts.mm(y, a) * (1.0 / 32)
    end.record(s)
    end.synchronize()
    assert start.query() and end.query()
    ms = start.elapsed_time(end)
    assert isinstance(ms, float) and ms > 0
    untimed = ts.Event()
    untimed.record(s)
    with pytest.raises(ValueError, match="enable_timing"):
        start.elapsed_time(untimed)


@needs_gpu
def test_work_on_a_side_stream_waited_for_matches_cpu():
    x = ts.randn(512, 512)
    want = ts.relu(ts.mm(x, x) * 0.05 + 1.0)
    main = ts.current_stream("cuda")
    g = x.to("cuda")
    side = ts.Stream(device="cuda")
    side.wait_stream(main)  # g was written on the main stream
    with ts.stream(side):
        out = ts.relu(ts.mm(g, g) * 0.05 + 1.0)
        done = side.record_event()
    g.record_stream(side)  # freed while side may still read it: not reused before side is done
    main.wait_event(done)
    out.record_stream(main)  # made on side, used on main from here
    close(out, want, 1e-4, 1e-4)


@needs_gpu
def test_record_stream_delays_reuse_until_that_streams_work_is_done():
    C = ts.ops.cuda
    C.synchronize(0)
    C.empty_cache()
    side = ts.Stream(device="cuda")
    big = ts.randn(4096, 4096).to("cuda")
    side.wait_stream(ts.current_stream("cuda"))
    t = ts.empty(1 << 20, device="cuda")  # on the default stream
    with ts.stream(side):
        y = big
        for _ in range(10):  # tens of milliseconds of work that "uses" t
            y = ts.mm(y, big) * (1.0 / 64)
    t.record_stream(side)
    t.record_stream(ts.current_stream("cuda"))  # its own stream: nothing to note
    stats = C.memory_stats(0)
    del t  # side is still busy: the block waits for it
    after_free = C.memory_stats(0)
    assert after_free[8] == stats[8] + 1  # num_deferred_frees
    assert after_free[9] == stats[9] + 1  # pending_frees
    u = ts.empty(1 << 20, device="cuda")  # cannot have t's block yet
    assert C.memory_stats(0)[6] == after_free[6] + 1  # a new device allocation
    side.synchronize()
    del u
    v = ts.empty(1 << 20, device="cuda")
    assert C.memory_stats(0)[9] == 0  # the pending free went back to its pool
    del v, y
    C.empty_cache()


@needs_gpu
def test_non_blocking_copies_with_pinned_memory_are_exact():
    x = ts.randn(1 << 16)
    p = x.pin_memory("cuda")
    assert p.is_pinned() and not x.is_pinned()
    assert p.pin_memory("cuda").is_pinned()
    g = p.to("cuda", non_blocking=True)
    del p  # still read by the copy: kept until it is done
    back = g.to("cpu", non_blocking=True)  # lands in pinned memory
    assert back.is_pinned()
    ts.current_stream("cuda").synchronize()
    assert back.tolist() == x.tolist()
    dst = ts.zeros(1 << 16).pin_memory("cuda")
    dst.copy_(g * 2, non_blocking=True)
    ts.synchronize("cuda")
    assert dst.tolist() == (x * 2).tolist()
    empty = ts.empty(0).pin_memory("cuda")  # zero bytes work too
    assert empty.is_pinned() and tuple(empty.to("cuda", non_blocking=True).shape) == (0,)
    # Pageable memory: non_blocking is allowed and simply synchronous.
    assert x.to("cuda", non_blocking=True).to("cpu").tolist() == x.tolist()


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
