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
def test_quiet_without_a_gpu_and_the_reason_where_the_device_is_requested():
    """is_available() and device_count() print nothing; the plugin's reason is in the error of a
    cuda tensor request, in the "tessera" log at INFO, and on stderr with TESSERA_PLUGIN_WARNINGS=1."""
    code = ("import logging, sys\n"
            "logging.basicConfig(stream=sys.stdout, level=logging.INFO, format='LOG %(name)s %(message)s')\n"
            "import tessera as ts\nprint(ts.cuda.is_available(), ts.cuda.device_count())\n"
            "try:\n    ts.zeros(1, device='cuda')\nexcept ValueError as e:\n    print(e)\n")
    env = dict(os.environ)
    env.pop("TESSERA_PLUGIN_WARNINGS", None)
    if BUILD_PYTHON:
        env["PYTHONPATH"] = BUILD_PYTHON + os.pathsep + env.get("PYTHONPATH", "")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert r.stderr == "", r.stderr
    assert "False 0" in r.stdout
    assert "0 devices" in r.stdout and "cudaGetDeviceCount" in r.stdout and "cuda tensors cannot be created" in r.stdout
    assert "LOG tessera plugin 'cuda': cuda: no cuda driver/device was found" in r.stdout
    env["TESSERA_PLUGIN_WARNINGS"] = "1"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
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


# ---------------------------------------------------------------- neural-network operators
# Forward and backward on CUDA against the CPU for the same data: leaves on each device, the
# same function, backward from the same upstream gradient, then outputs and grads compared.

F = ts.nn.functional
GRAD_TOL = {"float32": (1e-4, 1e-4), "float64": (1e-10, 1e-10)}


def _leaves(arrays, dtype):
    """CPU and CUDA leaf tensors (requires_grad) holding the same values."""
    cpu = [ts.tensor(a.tolist(), dtype=dtype).requires_grad_() for a in arrays]
    gpu = [ts.tensor(a.tolist(), dtype=dtype).to("cuda").detach().requires_grad_() for a in arrays]
    return cpu, gpu


def check_forward_backward(f, arrays, dtype, tol=None):
    rtol, atol = tol or GRAD_TOL[dtype]
    dt = getattr(ts, dtype)
    cpu, gpu = _leaves(arrays, dt)
    y_cpu, y_gpu = f(*cpu), f(*gpu)
    close(y_gpu, y_cpu, rtol, atol)
    up = np.random.default_rng(7).uniform(-1, 1, size=tuple(y_cpu.shape))
    (y_cpu * ts.tensor(up.tolist(), dtype=dt)).sum().backward()
    (y_gpu * ts.tensor(up.tolist(), dtype=dt).to("cuda")).sum().backward()
    for i, (c, g) in enumerate(zip(cpu, gpu)):
        assert g.grad is not None, f"input {i} got no gradient on cuda"
        close(g.grad, c.grad, rtol, atol)


def _rand(*shape, lo=-1.0, hi=1.0, seed=0):
    return np.random.default_rng(seed + len(shape)).uniform(lo, hi, size=shape)


@needs_gpu
@pytest.mark.parametrize("dtype", list(GRAD_TOL))
@pytest.mark.parametrize("act", ["gelu", "gelu_tanh", "silu", "sigmoid", "tanh", "relu"])
def test_activation_forward_backward(act, dtype):
    f = {"gelu": lambda x: F.gelu(x), "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
         "silu": lambda x: F.silu(x), "sigmoid": lambda x: ts.sigmoid(x), "tanh": lambda x: ts.tanh(x),
         "relu": lambda x: ts.relu(x)}[act]
    check_forward_backward(f, [_rand(4, 6, lo=-3, hi=3)], dtype)
    check_forward_backward(lambda x: f(x.t()), [_rand(6, 4, lo=-3, hi=3)], dtype)  # non-contiguous


@needs_gpu
@pytest.mark.skipif(not _plugin_available() or "libcudnn" not in open("/proc/self/maps").read(),
                    reason="the CUDA plugin was built without cuDNN: convolution runs on the CPU")
@pytest.mark.parametrize("dtype", list(GRAD_TOL))
@pytest.mark.parametrize("case", [
    dict(x=(2, 4, 9, 8), w=(6, 4, 3, 3), bias=True, stride=1, padding=1, dilation=1, groups=1),
    dict(x=(2, 4, 11, 10), w=(6, 2, 3, 2), bias=True, stride=(2, 1), padding=(1, 0), dilation=(2, 1), groups=2),
    dict(x=(3, 9, 8), w=(4, 3, 3, 3), bias=False, stride=1, padding=0, dilation=1, groups=1),
    dict(x=(2, 4, 17), w=(8, 4, 5), bias=True, stride=2, padding=2, dilation=1, groups=1),
    dict(x=(2, 4, 13), w=(4, 1, 3), bias=False, stride=1, padding=1, dilation=2, groups=4),
    dict(x=(2, 4, 5, 6, 7), w=(6, 2, 3, 2, 3), bias=True, stride=(1, 2, 1), padding=1, dilation=(2, 1, 1), groups=2),
    dict(x=(3, 4, 5, 6), w=(2, 3, 2, 2, 2), bias=False, stride=1, padding=0, dilation=1, groups=1),
], ids=["2d", "2d-strided-dilated-groups", "2d-unbatched", "1d", "1d-depthwise", "3d", "3d-unbatched"])
def test_convolution_forward_backward(case, dtype):
    conv = {3: F.conv1d, 4: F.conv2d, 5: F.conv3d}[len(case["w"])]
    arrays = [_rand(*case["x"]), _rand(*case["w"], seed=1)] + ([_rand(case["w"][0], seed=2)] if case["bias"] else [])
    kw = {k: case[k] for k in ("stride", "padding", "dilation", "groups")}
    check_forward_backward(lambda x, w, *b: conv(x, w, b[0] if b else None, **kw), arrays, dtype)


@needs_gpu
@pytest.mark.skipif(not _plugin_available() or "libcudnn" not in open("/proc/self/maps").read(),
                    reason="the CUDA plugin was built without cuDNN: convolution runs on the CPU")
@pytest.mark.parametrize("dtype", list(GRAD_TOL))
def test_transposed_convolution_forward_backward(dtype):
    """convolution_backward_input (cuDNN's backward-data) as a transposed convolution's forward."""
    check_forward_backward(lambda x, w, b: F.conv_transpose2d(x, w, b, stride=2, padding=1, output_padding=1),
                           [_rand(2, 4, 5, 6), _rand(4, 3, 3, 3, seed=1), _rand(3, seed=2)], dtype)
    check_forward_backward(lambda x, w: F.conv_transpose3d(x, w, None, stride=(2, 1, 2), groups=2),
                           [_rand(2, 4, 3, 4, 3), _rand(4, 2, 2, 3, 2, seed=1)], dtype)


@needs_gpu
@pytest.mark.parametrize("dtype", list(GRAD_TOL))
@pytest.mark.parametrize("ceil_mode", [False, True])
def test_pooling_forward_backward(dtype, ceil_mode):
    x = [_rand(2, 3, 9, 10)]
    check_forward_backward(lambda t: F.max_pool2d(t, (3, 2), stride=2, padding=1, dilation=(1, 2),
                                                  ceil_mode=ceil_mode), x, dtype)
    for include_pad in (True, False):
        for divisor in (None, 5):
            check_forward_backward(lambda t: F.avg_pool2d(t, 3, stride=(2, 3), padding=1, ceil_mode=ceil_mode,
                                                          count_include_pad=include_pad, divisor_override=divisor),
                                   x, dtype)
    for size in [(4, 3), 1, (12, 7)]:
        check_forward_backward(lambda t: F.adaptive_avg_pool2d(t, size), x, dtype)
    check_forward_backward(lambda t: F.max_pool2d(t.transpose(1, 2), 2), [_rand(3, 10, 9)], dtype)  # unbatched, strided
    g, i = F.max_pool2d(ts.tensor(x[0].tolist()).to("cuda"), 2, return_indices=True)
    _, ic = F.max_pool2d(ts.tensor(x[0].tolist()), 2, return_indices=True)
    assert g.dtype == ts.float32 and i.tolist() == ic.tolist()


@needs_gpu
@pytest.mark.parametrize("dtype", list(GRAD_TOL))
@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm_forward_backward(dtype, affine):
    arrays = [_rand(4, 3, 10)] + ([_rand(3, 10, seed=1), _rand(3, 10, seed=2)] if affine else [])
    check_forward_backward(lambda x, *wb: F.layer_norm(x, [3, 10], *(wb or (None, None))), arrays, dtype)
    check_forward_backward(lambda x: F.layer_norm(x, 10), [_rand(5, 10, lo=3, hi=4)], dtype)  # offset values


ATTENTION_CASES = [  # (B, H, L, S, E, Ev, causal, mask)
    (2, 3, 50, 70, 64, 64, True, None),    # tiles of 16 crossed, the causal diagonal inside tiles
    (1, 2, 33, 100, 128, 96, False, "bool"),  # tiles of 8 (large heads), a bool mask with a hidden row
    (2, 2, 40, 37, 16, 8, False, "float"),  # an additive float mask broadcast over heads
]


@needs_gpu
@pytest.mark.parametrize("case", ATTENTION_CASES, ids=[str(i) for i in range(len(ATTENTION_CASES))])
def test_fused_attention_matches_the_cpu_kernel(case):
    """scaled_dot_product_attention on cuda runs the fused kernel (output laid out [B, L, H, Ev]
    as the CPU's) and matches the CPU's fused kernel: values and all three gradients."""
    B, H, L, S, E, Ev, causal, mask = case
    rng = np.random.default_rng(3)
    arrays = [rng.standard_normal(shape) for shape in ((B, H, L, E), (B, H, S, E), (B, H, S, Ev))]
    if mask == "bool":
        allowed = rng.random((B, 1, L, S)) > 0.4
        allowed[:, :, 2] = False
        masks = (ts.tensor(allowed.tolist()), ts.tensor(allowed.tolist()).to("cuda"))
    elif mask == "float":
        m = rng.standard_normal((B, 1, L, S)).astype(np.float32)
        masks = (ts.tensor(m), ts.tensor(m).to("cuda"))
    else:
        masks = (None, None)
    cpu, gpu = _leaves(arrays, ts.float32)
    y_cpu = F.scaled_dot_product_attention(*cpu, attn_mask=masks[0], is_causal=causal)
    y_gpu = F.scaled_dot_product_attention(*gpu, attn_mask=masks[1], is_causal=causal)
    assert y_gpu.stride() == (L * H * Ev, Ev, H * Ev, 1)  # the fused kernel's layout
    close(y_gpu, y_cpu, 1e-4, 1e-5)
    up = rng.uniform(-1, 1, size=(B, H, L, Ev)).astype(np.float32)
    (y_cpu * ts.tensor(up)).sum().backward()
    (y_gpu * ts.tensor(up).to("cuda")).sum().backward()
    for c, g in zip(cpu, gpu):
        close(g.grad, c.grad, 1e-4, 1e-4)


@needs_gpu
def test_fused_attention_in_bfloat16_and_its_errors():
    rng = np.random.default_rng(4)
    q, k, v = (ts.tensor(rng.standard_normal((1, 2, 30, 32)).astype(np.float32)) for _ in range(3))
    want = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    got = F.scaled_dot_product_attention(*(t.to("cuda").to(ts.bfloat16) for t in (q, k, v)), is_causal=True)
    assert got.dtype == ts.bfloat16
    np.testing.assert_allclose(np_of(got.to(ts.float32)), want.numpy(), rtol=3e-2, atol=3e-2)
    op = ts.ops.aten._scaled_dot_product_flash_attention_for_cpu
    qc = q.to("cuda")
    with pytest.raises(ValueError, match="expected head sizes of at most 128"):
        op(*(ts.zeros(1, 1, 4, 200, device="cuda") for _ in range(3)))
    with pytest.raises(TypeError, match="expected float32, float16 or bfloat16 query, got float64"):
        op(qc.double(), qc.double(), qc.double())
    with pytest.raises(ValueError, match="expected dropout_p=0"):
        op(qc, qc, qc, 0.5)


@needs_gpu
def test_nn_operators_check_their_arguments_on_cuda():
    x = ts.randn(1, 3, 5, 5).to("cuda")
    with pytest.raises(ValueError, match="avg_pool2d.*padding"):
        ts.ops.aten.avg_pool2d(x, [2, 2], [], [2, 2])
    with pytest.raises(ValueError, match="native_layer_norm.*normalized_shape"):
        ts.ops.aten.native_layer_norm(x, [4], None, None, 1e-5)
    with pytest.raises(ValueError, match="gelu_backward.*approximate"):
        ts.ops.aten.gelu_backward(x, x, approximate="erf")
    with pytest.raises(ValueError, match="convolution.*channels"):
        ts.ops.aten.convolution(x, ts.randn(4, 2, 3, 3).to("cuda"), None, [1], [0], [1], 1)


def _on(t, like):
    """t moved to the device of `like` (targets and buffers that are not autograd leaves)."""
    return t.to("cuda") if str(like.device).startswith("cuda") else t


@needs_gpu
@pytest.mark.parametrize("dtype", list(GRAD_TOL))
@pytest.mark.parametrize("affine", [True, False])
def test_batch_norm_forward_backward(dtype, affine):
    dt = getattr(ts, dtype)
    arrays = [_rand(4, 3, 5, 2)] + ([_rand(3, seed=1), _rand(3, seed=2)] if affine else [])
    stats = {}

    def train(x, *wb):
        rm, rv = ts.zeros(3, dtype=dt), ts.ones(3, dtype=dt)
        rm, rv = _on(rm, x), _on(rv, x)
        stats[str(x.device)[:3]] = (rm, rv)
        return F.batch_norm(x, rm, rv, *(wb or (None, None)), training=True, momentum=0.3)

    check_forward_backward(train, arrays, dtype)
    rtol, atol = GRAD_TOL[dtype]
    for c, g in zip(stats["cpu"], stats["cud"]):  # running estimates updated in place alike
        close(g, c, rtol, atol)
    rm, rv = _rand(3, seed=3), _rand(3, lo=0.5, hi=2, seed=4)

    def evaluate(x, *wb):
        return F.batch_norm(x, _on(ts.tensor(rm.tolist(), dtype=dt), x), _on(ts.tensor(rv.tolist(), dtype=dt), x),
                            *(wb or (None, None)), training=False)

    check_forward_backward(evaluate, arrays, dtype)
    check_forward_backward(lambda x: F.batch_norm(x.transpose(0, 2), None, None, training=True),
                           [_rand(3, 4, 6)], dtype)  # non-contiguous, no running statistics


@needs_gpu
@pytest.mark.parametrize("dtype", list(GRAD_TOL))
@pytest.mark.parametrize("groups", [1, 3, 6])
def test_group_norm_forward_backward(dtype, groups):
    arrays = [_rand(3, 6, 4, 2), _rand(6, seed=1), _rand(6, seed=2)]
    check_forward_backward(lambda x, w, b: F.group_norm(x, groups, w, b), arrays, dtype)
    check_forward_backward(lambda x: F.group_norm(x, groups), [_rand(2, 6, 5, lo=3, hi=4)], dtype)


@needs_gpu
@pytest.mark.parametrize("dtype", list(GRAD_TOL))
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_losses_forward_backward(dtype, reduction):
    dt = getattr(ts, dtype)
    rng = np.random.default_rng(5)
    t2 = ts.tensor(rng.integers(0, 4, size=6).tolist(), dtype=ts.int64)
    t3 = ts.tensor(rng.integers(0, 4, size=(3, 5)).tolist(), dtype=ts.int64)
    w = _rand(4, lo=0.5, hi=2, seed=9)
    weight = lambda x: _on(ts.tensor(w.tolist(), dtype=dt), x)
    check_forward_backward(lambda x: F.cross_entropy(x, _on(t2, x), reduction=reduction), [_rand(6, 4)], dtype)
    check_forward_backward(lambda x: F.cross_entropy(x, _on(t3, x), weight=weight(x), ignore_index=2,
                                                     reduction=reduction), [_rand(3, 4, 5)], dtype)
    check_forward_backward(lambda x: F.nll_loss(F.log_softmax(x, dim=1), _on(t2, x), weight=weight(x),
                                                reduction=reduction), [_rand(6, 4)], dtype)
    check_forward_backward(lambda x, y: F.mse_loss(x, y, reduction=reduction), [_rand(4, 5), _rand(4, 5, seed=1)],
                           dtype)
    check_forward_backward(lambda x, y: F.l1_loss(x, y, reduction=reduction), [_rand(4, 5), _rand(4, 5, seed=1)],
                           dtype)
    t = _rand(4, 5, lo=0, hi=1, seed=2)
    check_forward_backward(lambda x: F.binary_cross_entropy_with_logits(
        x, _on(ts.tensor(t.tolist(), dtype=dt), x), reduction=reduction), [_rand(4, 5, lo=-3, hi=3)], dtype)
    check_forward_backward(lambda x: F.softmax(x, dim=0), [_rand(5, 3)], dtype)


@needs_gpu
@pytest.mark.parametrize("dtype", list(GRAD_TOL))
@pytest.mark.parametrize("padding_idx", [None, 2])
def test_embedding_forward_backward(dtype, padding_idx):
    idx = ts.tensor(np.random.default_rng(3).integers(0, 7, size=(3, 4)).tolist(), dtype=ts.int64)
    check_forward_backward(lambda w: F.embedding(_on(idx, w), w, padding_idx=padding_idx), [_rand(7, 5)], dtype)
    check_forward_backward(lambda w: F.embedding(_on(idx, w), w, padding_idx=padding_idx, scale_grad_by_freq=True),
                           [_rand(7, 5)], dtype)


@needs_gpu
@pytest.mark.parametrize("dtype", list(GRAD_TOL))
def test_dropout_forward_backward(dtype):
    dt = getattr(ts, dtype)
    check_forward_backward(lambda x: F.dropout(x, p=0.0), [_rand(20, 30)], dtype)
    check_forward_backward(lambda x: F.dropout(x, p=1.0), [_rand(20, 30)], dtype)
    check_forward_backward(lambda x: F.dropout(x, p=0.5, training=False), [_rand(20, 30)], dtype)
    # p = 0.25: about 75% kept, kept values scaled by 1 / 0.75, and the gradient follows the mask.
    a = _rand(200, 100, lo=0.5, hi=2)
    x = ts.tensor(a.tolist(), dtype=dt).to("cuda").requires_grad_()
    y = F.dropout(x, p=0.25)
    y.sum().backward()
    got, grad = np_of(y), np_of(x.grad)
    kept = got != 0
    assert abs(kept.mean() - 0.75) < 0.02, kept.mean()
    np.testing.assert_allclose(got[kept], a[kept] / 0.75, rtol=1e-6)
    np.testing.assert_allclose(grad, kept / 0.75, rtol=1e-6)
    ts.manual_seed(11)
    m1 = np_of(F.dropout(ts.ones(1000, dtype=dt).to("cuda"), p=0.5)) != 0
    m2 = np_of(F.dropout(ts.ones(1000, dtype=dt).to("cuda"), p=0.5)) != 0
    assert (m1 != m2).any(), "two dropout calls drew the same mask"


@needs_gpu
def test_new_nn_operators_check_their_arguments_on_cuda():
    x = ts.randn(2, 3).to("cuda")
    with pytest.raises(IndexError, match="nll_loss_forward.*target 5.*out of bounds"):
        ts.ops.aten.nll_loss_forward(x, ts.tensor([5, 0], dtype=ts.int64).to("cuda"), None, 1, -100)
    with pytest.raises(IndexError, match="embedding.*index 9"):
        F.embedding(ts.tensor([9], dtype=ts.int64).to("cuda"), x)
    with pytest.raises(ValueError, match="native_group_norm.*group"):
        ts.ops.aten.native_group_norm(x, None, None, 2, 3, 1, 2, 1e-5)
    with pytest.raises(ValueError, match="native_dropout.*\\[0, 1\\]"):
        ts.ops.aten.native_dropout(x, 1.5, True)
# ---------------------------------------------------------------- element-wise, reductions, factories, indexing

@needs_gpu
@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
def test_more_elementwise_and_reductions(dtype):
    dt = getattr(ts, dtype)
    a, b = (ts.randn(3, 1, 5) * 4).to(dt), (ts.rand(4, 5) * 3 + 1).to(dt)
    ga, gb = a.to("cuda"), b.to("cuda")
    aten = ts.ops.aten
    for f in [aten.floor_divide, aten.maximum, aten.minimum, aten.logical_and]:
        close(f(ga, gb), f(a, b))
    close(aten.clamp(ga, -1, 2), aten.clamp(a, -1, 2))
    close(aten.sign(ga), aten.sign(a))
    close(aten.erf(ga), aten.erf(a), 1e-5, 1e-6)
    x = (ts.rand(3, 5, 7) + 0.5).to(dt)
    g = x.to("cuda")
    close(aten.prod(g, [1]), aten.prod(x, [1]), 1e-5)
    close(aten.argmax(g, 2), aten.argmax(x, 2))
    close(aten.argmin(g), aten.argmin(x))
    close(aten.logsumexp(g, [0, 2]), aten.logsumexp(x, [0, 2]), 1e-5)
    if dtype != "int64":
        close(aten.var(g, [1]), aten.var(x, [1]), 1e-5)


@needs_gpu
def test_more_factories_and_indexing():
    aten = ts.ops.aten
    close(aten.arange(1, 4, 0.5, device="cuda"), aten.arange(1, 4, 0.5))
    close(aten.linspace(-1, 2, 7, device="cuda"), aten.linspace(-1, 2, 7))
    close(aten.eye(3, 4, device="cuda"), aten.eye(3, 4))
    u = np_of(aten.rand([2000], device="cuda"))
    assert u.min() >= 0 and u.max() < 1 and abs(u.mean() - 0.5) < 0.05
    r = np_of(aten.randint(-2, 3, [2000], device="cuda"))
    assert set(np.unique(r)) == {-2, -1, 0, 1, 2}
    x = ts.randn(4, 5)
    g = x.to("cuda")
    close(aten.cat([g, g], 1), aten.cat([x, x], 1))
    close(aten.stack([g, g], 0), aten.stack([x, x], 0))
    idx = ts.tensor([3, 0, 0])
    close(aten.index_select(g, 0, idx.to("cuda")), aten.index_select(x, 0, idx))
    gi = ts.tensor([[0, 3, 1, 2, 2]])
    close(aten.gather(g, 0, gi.to("cuda")), aten.gather(x, 0, gi))
    with pytest.raises(IndexError, match="index_select.*out of range"):
        aten.index_select(g, 0, ts.tensor([7]).to("cuda"))


# ---------------------------------------------------------------- advanced indexing (nonzero.cu)

@needs_gpu
@pytest.mark.parametrize("dtype", ["float32", "float16", "int64", "bool"])
def test_advanced_indexing_through_python_syntax(dtype):
    dt = getattr(ts, dtype)
    x = (ts.randn(4, 5, 6) * 3).to(dt)
    g = x.to("cuda")
    rows, cols = [3, 0, -1], ts.tensor([[4, 0], [1, -5]])
    for key in [rows, (slice(None), cols), (rows, slice(None), [5, 0, 1]), (Ellipsis, [2]), (1, cols)]:
        close(g[key], x[key])
    mask = x.to(ts.float32) > 0
    close(g[mask.to("cuda")], x[mask])          # masked_select
    close(g[:, mask[0, :, 0].to("cuda")], x[:, mask[0, :, 0]])  # a mask of one dim
    close(ts.nonzero(g), ts.nonzero(x))
    close(g.nonzero(), x.nonzero())
    y, gy = x.clone(), g.clone()
    v = (ts.randn(4, 2, 6) * 3).to(dt)
    y[:, [4, 1]] = v
    gy[:, [4, 1]] = v.to("cuda")
    close(gy, y)
    picked = y[mask]
    reversed_ = picked[ts.arange(picked.shape[0] - 1, -1, -1)]
    y[mask] = reversed_
    gy[mask.to("cuda")] = reversed_.to("cuda")
    close(gy, y)
    if dtype != "bool":
        acc = (ts.randn(2, 2, 5, 6) * 3).to(dt)
        idx = ts.tensor([[3, 0], [3, 3]])  # duplicates: accumulate sums them
        tol = (2e-2, 2e-2) if dtype == "float16" else (1e-5, 1e-6)
        close(ts.ops.aten.index_put(g, [idx.to("cuda")], acc.to("cuda"), True),
              ts.ops.aten.index_put(x, [idx], acc, True), *tol)
    with pytest.raises(IndexError, match="index 6 is out of bounds for dimension 2 with size 6"):
        g[:, :, [6]]
    with pytest.raises(IndexError, match="too many indices"):
        ts.ops.aten.index(g, [None, None, None, ts.tensor([0]).to("cuda")])


@needs_gpu
def test_nonzero_and_masked_select_at_size():
    x = ts.randn(3, 1000, 1001)
    g = x.to("cuda")
    m = x > 1.0
    close(ts.nonzero(g), ts.nonzero(x))
    close(ts.masked_select(g, m.to("cuda")), ts.masked_select(x, m))
    close(g[m.to("cuda")], x[m])
    assert tuple(ts.nonzero(ts.zeros(0, 3, device="cuda")).shape) == (0, 2)


# ---------------------------------------------------------------- tessera.cuda, tessera.backends.cuda

def test_torch_cuda_surface_without_loading_anything_at_import():
    code = ("import tessera as ts\nts.cuda, ts.backends.cuda\nprint(sorted(p.name for p in ts.plugins.list()))\n"
            "print(ts.cuda.is_available(), ts.cuda.device_count(), ts.backends.cuda.is_built())\n"
            "print(sorted(p.name for p in ts.plugins.list()))\n")
    env = dict(os.environ)
    if BUILD_PYTHON:
        env["PYTHONPATH"] = BUILD_PYTHON + os.pathsep + env.get("PYTHONPATH", "")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    before, answers, after = r.stdout.splitlines()
    assert "cuda" not in before  # importing tessera (and naming ts.cuda) loads no plugin
    assert answers == f"{device_count() > 0} {device_count()} True"
    assert "cuda" in after  # the first question loaded it


@pytest.mark.skipif(_plugin_available() and device_count() > 0, reason="this machine has a CUDA device")
def test_torch_cuda_surface_without_a_device_says_why():
    assert ts.cuda.is_available() is False and ts.cuda.device_count() == 0
    for call in [ts.cuda.synchronize, ts.cuda.memory_allocated, ts.cuda.current_device, ts.cuda.get_device_name]:
        with pytest.raises(RuntimeError, match="no cuda driver/device was found"):
            call()
    ts.cuda.empty_cache()  # nothing cached: nothing to do, as torch.cuda.empty_cache()
    assert ts.backends.cuda.matmul.allow_tf32 is False
    with pytest.raises(ValueError, match="expected a cuda device"):
        ts.cuda.memory_stats("cpu")


@needs_gpu
def test_torch_cuda_surface_memory_devices_and_switches():
    ts.cuda.synchronize()
    ts.cuda.empty_cache()
    ts.cuda.reset_peak_memory_stats()
    base = ts.cuda.memory_allocated()
    x = ts.empty(1 << 20, device="cuda")  # 4 MiB
    assert ts.cuda.memory_allocated() - base >= 4 << 20
    assert ts.cuda.max_memory_allocated() >= ts.cuda.memory_allocated()
    assert ts.cuda.memory_reserved() >= ts.cuda.memory_allocated()
    stats = ts.cuda.memory_stats(0)
    assert stats["allocated"] == ts.cuda.memory_allocated("cuda:0") and stats["num_allocations"] >= 1
    del x
    ts.cuda.synchronize()
    assert ts.cuda.memory_allocated() == base
    assert ts.cuda.max_memory_allocated() - base >= 4 << 20  # the peak stays until reset
    ts.cuda.reset_peak_memory_stats()
    assert ts.cuda.max_memory_allocated() == base
    ts.cuda.empty_cache()
    props = ts.cuda.get_device_properties(0)
    assert isinstance(props.name, str) and props.name == ts.cuda.get_device_name("cuda:0") and props.name
    assert ts.cuda.get_device_capability() == (props.major, props.minor) and props.major >= 5
    assert props.total_memory > 1 << 30 and props.multi_processor_count > 0
    assert ts.cuda.current_device() == 0
    with ts.cuda.device("cuda:0"):
        assert ts.cuda.current_device() == 0
    assert ts.cuda.current_stream() == ts.cuda.default_stream()
    s = ts.cuda.Stream("cuda")
    with ts.cuda.stream(s):
        assert ts.cuda.current_stream() == s
    assert ts.cuda.current_stream() == ts.cuda.default_stream()
    try:
        ts.backends.cuda.matmul.allow_tf32 = True
        assert ts.ops.cuda.allow_tf32() is True and ts.backends.cuda.matmul.allow_tf32 is True
    finally:
        ts.backends.cuda.matmul.allow_tf32 = False
    assert ts.ops.cuda.allow_tf32() is False


@needs_gpu
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("cls,kw", [("Adam", {}), ("Adam", {"amsgrad": True, "weight_decay": 0.1}),
                                    ("Adam", {"maximize": True}), ("AdamW", {"weight_decay": 0.05})])
def test_fused_adam_matches_the_cpu_step(cls, kw, dtype, monkeypatch):
    """Adam / AdamW on CUDA take the plugin's _fused_adam_ and follow the CPU's trajectory."""
    rng = np.random.default_rng(0)
    w0 = rng.standard_normal((33, 17))
    grads = [rng.standard_normal((33, 17)) for _ in range(5)]
    from tessera.optim import adam
    calls = []
    real_call = adam._call
    monkeypatch.setattr(adam, "_call", lambda op, *a: calls.append(op) or real_call(op, *a))
    results = {}
    for device in ("cpu", "cuda"):
        w = ts.tensor(w0, dtype=getattr(ts, dtype), device=device, requires_grad=True)
        opt = getattr(ts.optim, cls)([w], lr=0.05, **kw)
        for g in grads:
            w.grad = ts.tensor(g, dtype=getattr(ts, dtype), device=device)
            opt.step()
        results[device] = w.detach().cpu().numpy()
    assert calls.count("_fused_adam_") == 2 * len(grads)  # the fused step on both devices
    tol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(results["cuda"], results["cpu"], rtol=tol, atol=tol)


@needs_gpu
@pytest.mark.parametrize("mode", ["RNN", "LSTM", "GRU"])
@pytest.mark.parametrize("bidirectional", [False, True])
def test_recurrent_layers_on_cudnn_match_the_cpu(mode, bidirectional, monkeypatch):
    """nn.RNN / LSTM / GRU on CUDA run cuDNN's RNN (_rnn_layer on the device) and give the CPU's
    outputs, states and gradients, from the same weights, for 2 layers, both directions, batch_first."""
    from tessera.nn import _rnn
    devices = []
    real = _rnn._fused_segment
    monkeypatch.setattr(_rnn, "_fused_segment", lambda mode_, x, *a: devices.append(x.device.type) or real(mode_, x, *a))
    rng = np.random.default_rng(3)
    x0 = rng.standard_normal((4, 7, 5)).astype(np.float32)
    grads = {}
    for device in ("cpu", "cuda"):
        ts.manual_seed(0)
        layer = getattr(ts.nn, mode)(5, 6, num_layers=2, batch_first=True, bidirectional=bidirectional)
        layer = layer.to(device)
        x = ts.tensor(x0, device=device, requires_grad=True)
        out, state = layer(x)
        h = state[0] if mode == "LSTM" else state
        loss = (out * out).sum() + (h * h).sum()
        loss.backward()
        grads[device] = [out.detach().cpu().numpy(), h.detach().cpu().numpy(), x.grad.cpu().numpy()] + \
                        [p.grad.cpu().numpy() for p in layer.parameters()]
    assert "cuda" in devices  # the cuDNN kernel ran, not the per-step composite
    for got, want in zip(grads["cuda"], grads["cpu"]):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="_rnn_layer: expected weight_ih of shape"):
        ts._C.call_op("_rnn_layer", (ts.zeros(3, 2, 5, device="cuda"), ts.zeros(24, 4, device="cuda"),
                                     ts.zeros(24, 6, device="cuda"), None, None, ts.zeros(2, 6, device="cuda"),
                                     ts.zeros(2, 6, device="cuda"), 2, False, False), {})


@needs_gpu
@pytest.mark.parametrize("grad", [False, True])
def test_compiled_chain_runs_nvrtc_kernels_on_the_device(grad, tmp_path, monkeypatch):
    """ts.compile of an element-wise chain on CUDA tensors: the inductor generates CUDA C,
    NVRTC compiles it, the kernels run on the current stream and equal eager (forward and, in
    training, the backward graph's kernels too)."""
    monkeypatch.setenv("TESSERA_CACHE_DIR", str(tmp_path))
    import tessera.nn.functional as F
    from tessera.compiler import _plugin_backend

    def f(x, y):
        return ts.tanh(ts.exp(ts.sin(x * y + x)).clamp(0.0, 4.0) - x) * F.gelu(y)

    xs, ys = np.random.default_rng(1).standard_normal((2, 1000, 33)).astype(np.float32)
    x = ts.tensor(xs, device="cuda", requires_grad=grad)
    y = ts.tensor(ys[0], device="cuda", requires_grad=grad)
    c = ts.compile(f)
    for _ in range(2):
        out = c(x, y)
    expected = f(ts.tensor(xs), ts.tensor(ys[0]))
    np.testing.assert_allclose(out.cpu().detach().numpy(), expected.detach().numpy(), rtol=2e-5, atol=2e-5)
    run = c.entries[0][1].run
    handles = [run.handle] if hasattr(run, "handle") else []
    assert all("target=cuda" in _plugin_backend.describe(h) for h in handles)
    if grad:
        out.sum().backward()
        xc, yc = ts.tensor(xs, requires_grad=True), ts.tensor(ys[0], requires_grad=True)
        f(xc, yc).sum().backward()
        np.testing.assert_allclose(x.grad.cpu().numpy(), xc.grad.numpy(), rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(y.grad.cpu().numpy(), yc.grad.numpy(), rtol=1e-4, atol=1e-3)


@needs_gpu
def test_exported_program_runs_its_aot_cuda_kernels_on_the_device(tmp_path, monkeypatch):
    """ts.export.aot_compile(target="cuda") PTX, run by the C++ runtime (tessera-export-run
    --device cuda --allow-native): the driver loads the PTX and the result equals eager."""
    monkeypatch.setenv("TESSERA_CACHE_DIR", str(tmp_path / "cache"))
    import subprocess as sp
    from tessera.export._cli import runner_path
    m = ts.nn.Sequential(ts.nn.Linear(16, 64), ts.nn.GELU(), ts.nn.Linear(64, 16), ts.nn.Tanh()).eval()
    ep = ts.export.export(m, (ts.randn(8, 16),))
    ts.export.save(ts.export.aot_compile(ep, target="cuda"), tmp_path / "cuda.tspt")
    x = ts.randn(8, 16)
    ts.save({"in0": x}, tmp_path / "in.safetensors")
    args = [runner_path(), str(tmp_path / "cuda.tspt"), "--input", str(tmp_path / "in.safetensors"), "--output",
            str(tmp_path / "out.safetensors"), "--device", "cuda", "--allow-native"]
    r = sp.run(args, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    described = sp.run(args[:2] + ["--describe", "--device", "cuda", "--allow-native"], capture_output=True,
                       text=True, timeout=120).stdout
    assert "ahead-of-time" in described, described
    np.testing.assert_allclose(ts.load(tmp_path / "out.safetensors")["output_0"].numpy(), m(x).detach().numpy(),
                               rtol=1e-4, atol=1e-5)


# ---- CUDA graphs (ts.cuda.CUDAGraph, ts.cuda.graph) and ts.compile(mode="reduce-overhead")

@needs_gpu
def test_cuda_graph_replays_a_model_on_new_inputs():
    """Captured once on static tensors; each replay computes from what was copied into them."""
    ts.manual_seed(0)
    model = ts.nn.Sequential(ts.nn.Linear(32, 64), ts.nn.GELU(), ts.nn.Linear(64, 8)).to("cuda").eval()
    static_x = ts.randn(16, 32, device="cuda")
    with ts.no_grad():
        model(static_x)  # warm-up outside the capture (cuBLAS sets itself up)
        g = ts.cuda.CUDAGraph()
        with ts.cuda.graph(g):
            static_y = model(static_x)
        assert g.nodes >= 3 and not ts.cuda.is_current_stream_capturing()
        for _ in range(3):
            x = ts.randn(16, 32, device="cuda")
            static_x.copy_(x)
            g.replay()
            np.testing.assert_allclose(static_y.cpu().numpy(), model(x).cpu().numpy(), rtol=1e-5, atol=1e-5)
    g.reset()


@needs_gpu
def test_cuda_graph_memory_stays_in_its_pool_and_pools_can_be_shared():
    x = ts.randn(1024, device="cuda")
    (x * 2 + 1) * 3  # warm-up: the kernels are loaded before the captures
    g1, g2 = ts.cuda.CUDAGraph(), ts.cuda.CUDAGraph()
    with ts.cuda.graph(g1):
        scratch = x * 2
        y1 = scratch + 1
    scratch_ptr = scratch.data_ptr()
    del scratch  # its block goes back to g1's pool, not to the shared cache: g1's replays write it
    outside = [ts.empty(1024, device="cuda") for _ in range(4)]
    assert scratch_ptr not in [t.data_ptr() for t in outside]
    with ts.cuda.graph(g2, pool=g1.pool()):  # replayed after g1, so it may reuse g1's free blocks
        y2 = y1 * 3
    assert g2.pool() == g1.pool()
    x.copy_(ts.arange(1024, dtype=ts.float32, device="cuda"))
    g1.replay()
    g2.replay()
    expected = (np.arange(1024, dtype=np.float32) * 2 + 1) * 3
    np.testing.assert_allclose(y2.cpu().numpy(), expected)
    g1.reset()
    g2.reset()


@needs_gpu
def test_cuda_graph_capture_failures_are_clear_and_leave_no_capture_behind():
    x = ts.randn(64, device="cuda")
    (x * 2).sum(), x + 1  # warm-up: the kernels are loaded before the captures
    g = ts.cuda.CUDAGraph()
    with pytest.raises(RuntimeError):
        with ts.cuda.graph(g):
            (x * 2).sum().item()  # a host read of device data: not allowed in a capture
    assert not ts.cuda.is_current_stream_capturing()
    with pytest.raises(NotImplementedError, match="random numbers cannot be captured"):
        with ts.cuda.graph(ts.cuda.CUDAGraph()):
            ts.randn(8, device="cuda")
    g2 = ts.cuda.CUDAGraph()  # capturing works again afterwards
    with ts.cuda.graph(g2):
        y = x + 1
    g2.replay()
    np.testing.assert_allclose(y.cpu().numpy(), x.cpu().numpy() + 1, rtol=1e-6)


@needs_gpu
def test_compile_reduce_overhead_replays_one_cuda_graph(tmp_path, monkeypatch):
    monkeypatch.setenv("TESSERA_CACHE_DIR", str(tmp_path))
    from tessera.compiler import _cudagraphs
    ts.manual_seed(0)
    model = ts.nn.Sequential(ts.nn.Linear(32, 64), ts.nn.GELU(), ts.nn.Linear(64, 8)).to("cuda").eval()
    c = ts.compile(model, mode="reduce-overhead")
    held = []
    with ts.no_grad():
        for _ in range(5):
            x = ts.randn(16, 32, device="cuda")
            out = c(x)
            held.append((x, out))
            np.testing.assert_allclose(out.cpu().numpy(), model(x).cpu().numpy(), rtol=1e-5, atol=1e-5)
        x0, out0 = held[1]  # an earlier call's output is not overwritten by later replays
        np.testing.assert_allclose(out0.cpu().numpy(), model(x0).cpu().numpy(), rtol=1e-5, atol=1e-5)
    runner = c._compiled_call.entries[0][1].run
    assert isinstance(runner, _cudagraphs.CUDAGraphRunner) and runner.failure is None
    assert len(runner._captured) == 1
