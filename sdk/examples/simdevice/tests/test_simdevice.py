"""The simulated device from Python, against the CPU results.

Run against the installed tessera package. The plugin comes from $SIMDEV_PLUGIN (set by
scripts/test_sdk.sh); $SIMDEV2_PLUGIN adds the two-device tests.
"""
import os

import pytest

import tessera as ts

PLUGIN = os.environ.get("SIMDEV_PLUGIN")
PLUGIN2 = os.environ.get("SIMDEV2_PLUGIN")
pytestmark = pytest.mark.skipif(not PLUGIN, reason="SIMDEV_PLUGIN is not set")


@pytest.fixture(scope="module", autouse=True)
def simdev():
    return ts.plugins.load(PLUGIN)


def close(got, want, tol=1e-5):
    """Same device-independent shape, dtype and values: `got` is copied back to the CPU first."""
    got = got.to("cpu")
    assert tuple(got.shape) == tuple(want.shape)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    g, w = got.reshape(-1).tolist(), want.reshape(-1).tolist()
    assert all(abs(a - b) <= tol * (1 + abs(b)) for a, b in zip(g, w)), (g, w)


def test_plugin_info(simdev):
    assert simdev.name == "simdev"
    assert simdev.devices == ["simdev"]
    assert simdev.operators_defined == ["simdev::fused_axpy", "simdev::set_kernel_time_us"]


def test_to_and_back():
    x = ts.randn(3, 4)
    d = x.to("simdev")
    assert str(d.device) == "simdev:0"
    close(d, x, 0)
    close(d.to("simdev:1"), x, 0)


def test_factories():
    close(ts.zeros(2, 3, device="simdev"), ts.zeros(2, 3))
    close(ts.ones(4, dtype=ts.int64, device="simdev"), ts.ones(4, dtype=ts.int64))
    close(ts.full((2, 2), 1.5, device="simdev"), ts.full((2, 2), 1.5))
    assert ts.empty(0, 3, device="simdev").shape == (0, 3)


@pytest.mark.parametrize("dtype", ["float32", "int64"])
def test_binary_broadcast(dtype):
    make = (lambda *s: ts.randn(*s)) if dtype == "float32" else (lambda *s: ts.randint(-9, 9, s))
    a, b, c = make(3, 4), make(1, 4), make(3, 1)
    da, db, dc = a.to("simdev"), b.to("simdev"), c.to("simdev")
    close(da + db, a + b)
    close(da - dc, a - c)
    close(db * dc, b * c)
    close(ts.add(da, db, alpha=2), ts.add(a, b, alpha=2))
    close(da / (db * db + 1), a / (b * b + 1))
    close(da * 3, a * 3)
    close(da + 0.5, a + 0.5)


def test_unary_reductions_matmul():
    x = ts.randn(3, 4)
    d = x.to("simdev")
    close(-d, -x)
    close(d.exp(), x.exp())
    close(d.relu(), x.relu())
    close(d.sum(), x.sum())
    close(d.sum(1, keepdim=True), x.sum(1, keepdim=True))
    close(d.mean(0), x.mean(0))
    close(d.mean(dim=-1), x.mean(dim=-1))
    y = ts.randn(4, 2)
    close(ts.mm(d, y.to("simdev")), ts.mm(x, y))
    close(d @ y.to("simdev"), x @ y)


def test_views_and_copies():
    x = ts.randn(2, 6)
    d = x.to("simdev")
    close(d.view(3, 4), x.view(3, 4), 0)
    close(d.reshape(-1), x.reshape(-1), 0)
    close(d.clone(), x, 0)
    close(d.contiguous(), x, 0)
    z = ts.zeros(2, 6, device="simdev")
    z.copy_(d)
    close(z, x, 0)


def test_custom_op_on_device_and_cpu():
    x, y = ts.randn(5), ts.randn(5)
    want = x * 2.0 + y
    close(ts.ops.simdev.fused_axpy(x, y, 2.0), want)
    close(ts.ops.simdev.fused_axpy(x.to("simdev"), y.to("simdev"), 2.0), want)


def test_errors_are_python_exceptions():
    d = ts.ones(3, device="simdev")
    with pytest.raises(Exception, match="expected all tensors on simdev:0"):
        d + ts.ones(3)
    # An operator the plugin lacks: the host's CPU fallback runs it with copies, or it is a
    # NotImplementedError naming it (hosts without the fallback, or with it switched off).
    x = ts.randn(3)
    try:
        close(x.to("simdev").sin(), x.sin())
    except NotImplementedError as e:
        assert "sin" in str(e)
    with pytest.raises(TypeError):
        ts.ones(3, dtype=ts.int64, device="simdev").mean()


@pytest.mark.skipif(not PLUGIN2, reason="SIMDEV2_PLUGIN is not set")
def test_two_devices_at_once():
    info2 = ts.plugins.load(PLUGIN2)
    assert info2.devices == ["simdev2"]
    keys = ts.plugins.describe("add.Tensor")
    assert "simdev" in str(keys) and "simdev2" in str(keys)
    x, y = ts.randn(3, 3), ts.randn(3, 3)
    a = x.to("simdev")
    b = a.to("simdev2")  # simdev -> cpu -> simdev2
    assert str(b.device) == "simdev2:0"
    close(b, x, 0)
    close((b @ y.to("simdev2")).to("simdev"), x @ y)
    close(ts.ops.simdev2.fused_axpy(b, b, 1.0), x * 2)
    with pytest.raises(Exception):
        a + b


def test_lazy_loading_by_device_name(tmp_path):
    """With the plugin's folder on TESSERA_PLUGIN_PATH, naming the device loads the plugin."""
    import subprocess
    import sys

    env = dict(os.environ, TESSERA_PLUGIN_PATH=os.path.dirname(os.path.abspath(PLUGIN)))
    code = "import tessera as ts; print(ts.ones(2, device='simdev').sum().item())"
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "2.0"


def test_autograd_on_the_device():
    """The plugin writes no gradient code: the autograd plugin's AutogradOther kernels call the
    device's kernels (and the CPU fallback) for the forward and the backward formulas."""
    w_cpu = ts.randn(4, 3)
    x_cpu = ts.randn(5, 4)
    w = w_cpu.to("simdev").requires_grad_()
    loss = ((x_cpu.to("simdev") @ w).exp()).sum()
    on_workers = ts.autograd._plugin.call("device_worker_nodes", ())
    loss.backward()
    # sum, exp and mm ran on the simdev worker thread of the engine (AccumulateGrad on the caller's)
    assert ts.autograd._plugin.call("device_worker_nodes", ()) - on_workers == 3
    wr = w_cpu.clone().requires_grad_()
    (x_cpu @ wr).exp().sum().backward()
    assert str(w.grad.device) == "simdev:0"
    close(w.grad, wr.grad, 1e-4)


def test_autograd_device_worker_errors_and_mixed_devices():
    """A graph across the CPU and the device: the device's nodes run on its worker, the CPU's on
    the calling thread, and an error on the worker reaches the caller as the same exception."""
    a_cpu = ts.randn(3, 3)
    a = a_cpu.clone().requires_grad_()
    b = (a * 2.0).to("simdev")           # CPU node, then the copy to the device
    loss = (b.exp() * b).sum()
    loss.backward()
    ar = a_cpu.clone().requires_grad_()
    br = ar * 2.0
    (br.exp() * br).sum().backward()
    close(a.grad, ar.grad, 1e-4)
    w = ts.randn(2, 2).to("simdev").requires_grad_()
    e = w.exp()
    e.mul_(2.0)                          # exp saved its result: its backward (on the worker) refuses
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        e.sum().backward()
    z = (w.exp()).sum()
    z.backward(retain_graph=True)
    z.backward()
    close(w.grad, (w.detach().to("cpu").exp() * 2.0), 1e-4)


# ---- streams and events (ABI 1.3). The simulated device computes at once but keeps a clock per
# stream: simdev::set_kernel_time_us makes each kernel "take" that long on its stream.
class kernel_time:
    def __init__(self, us):
        self.us = us

    def __enter__(self):
        self.previous = ts.ops.simdev.set_kernel_time_us(self.us)

    def __exit__(self, *exc):
        ts.ops.simdev.set_kernel_time_us(self.previous)


def test_streams_queue_work_and_events_time_it():
    x = ts.randn(64, 64)
    d = x.to("simdev")
    s = ts.Stream("simdev")
    assert s.device == ts.device("simdev:0") and s != ts.default_stream("simdev")
    start, end = ts.Event(enable_timing=True), ts.Event(enable_timing=True)
    with kernel_time(30_000):
        with ts.stream(s):
            assert ts.current_stream("simdev") == s
            start.record(s)
            y = (d @ d).exp()            # two kernels: 60 ms of simulated work on s
            end.record(s)
        assert ts.current_stream("simdev") == ts.default_stream("simdev")
        assert not s.query() and not end.query()     # still "running"
        assert ts.default_stream("simdev").query()   # the default stream has nothing queued
        end.synchronize()
        assert end.query() and s.query()
    assert 55 <= start.elapsed_time(end) <= 1000
    close(y, (x @ x).exp(), 1e-4)


def test_wait_event_orders_streams_and_blocking_copies_wait():
    d = ts.ones(8, device="simdev")
    producer, consumer = ts.Stream("simdev"), ts.Stream("simdev", priority=-1)
    assert consumer.priority == -1
    with kernel_time(40_000):
        with producer:
            y = d * 3
        done = producer.record_event()
        consumer.wait_event(done)            # consumer's later work starts after producer's
        assert not consumer.query()
        with consumer:
            z = y + 1
        consumer.synchronize()
        assert producer.query() and consumer.query()
        with producer:
            w = z * 2
        assert not producer.query()
        ts.synchronize("simdev")             # waits for every stream of the device
        assert producer.query()
        with producer:
            w = w + 0
            got = w.to("cpu")                # a blocking copy waits for the current stream's work
            assert producer.query()
    close(got, ts.full((8,), 8.0), 0)


def test_event_errors_are_clear():
    a, b = ts.Event(enable_timing=True), ts.Event()
    with pytest.raises(RuntimeError, match="must be recorded"):
        a.elapsed_time(ts.Event(enable_timing=True))
    a.record(ts.current_stream("simdev"))
    b.record(ts.current_stream("simdev"))
    with pytest.raises(ValueError, match="enable_timing=True"):
        a.elapsed_time(b)
    with pytest.raises(ValueError, match="belongs to simdev:0"):
        a.record(ts.Stream("simdev:1"))
    with pytest.raises(ValueError, match="pass a stream"):
        ts.Event().record()
    with pytest.raises(ValueError, match="pass a device"):
        ts.Stream()
    with pytest.raises(ValueError, match="out of range"):
        ts.Stream("simdev:7")


def test_pinned_memory_and_non_blocking_copies():
    x = ts.randn(5, 7)
    assert not x.is_pinned()
    p = x.pin_memory("simdev")
    assert p.is_pinned() and p.device.type == "cpu"
    close(p, x, 0)
    s = ts.Stream("simdev")
    with kernel_time(20_000), ts.stream(s):
        d = p.to("simdev", non_blocking=True)      # queued on s
        assert not s.query()
        back = (d * 2).to("cpu", non_blocking=True)  # lands in pinned memory, also queued
        assert back.is_pinned() and not s.query()
        s.synchronize()
    close(back, x * 2, 1e-6)
    # Without pinned memory a non-blocking copy is an ordinary blocking one.
    close(x.to("simdev", non_blocking=True), x, 0)
    d.record_stream(s)
    with pytest.raises(ValueError, match="record_stream"):
        x.record_stream(s)
    with pytest.raises(NotImplementedError, match="page-locked"):
        x.pin_memory("cpu")


def test_dataloader_pins_batches():
    from tessera.utils.data import DataLoader, TensorDataset
    ds = TensorDataset(ts.arange(12.0).reshape(6, 2), ts.arange(6))
    batches = list(DataLoader(ds, batch_size=4, pin_memory=True, pin_memory_device="simdev"))
    assert all(t.is_pinned() for b in batches for t in b)
    close(batches[1][0], ts.arange(8.0, 12.0).reshape(2, 2), 0)


def test_streams_are_per_thread():
    import threading
    s = ts.Stream("simdev")
    seen = []
    with s:
        t = threading.Thread(target=lambda: seen.append(ts.current_stream("simdev")))
        t.start()
        t.join()
        assert ts.current_stream("simdev") == s
    assert seen == [ts.default_stream("simdev")]


def test_backward_runs_on_the_callers_stream():
    """The engine's device worker queues the backward kernels on the stream that was current
    when backward() was called, behind the forward work queued there."""
    # Seeded and scaled: exp of unscaled 16-term dot products reaches e^15, where the two devices'
    # summation orders differ by more than the tolerance on a few draws.
    ts.manual_seed(0)
    w = (0.25 * ts.randn(16, 16)).to("simdev").requires_grad_()
    s = ts.Stream("simdev")
    with kernel_time(30_000), ts.stream(s):
        loss = (w @ w).exp().sum()
        s.synchronize()
        before = ts.autograd._plugin.call("device_worker_nodes", ())
        loss.backward()
        assert ts.autograd._plugin.call("device_worker_nodes", ()) > before
        assert not s.query()                          # the worker's kernels went to s...
        assert ts.default_stream("simdev").query()    # ...not to the default stream
        s.synchronize()
    wr = w.detach().to("cpu").requires_grad_()
    (wr @ wr).exp().sum().backward()
    close(w.grad, wr.grad, 1e-3)


def test_profiler_shows_the_device_kernel_on_its_own_track():
    import tessera.profiler as profiler
    a, b = ts.randn(8, 8), ts.randn(8, 8)
    x, y = a.to("simdev"), b.to("simdev")
    with profiler.profile() as prof:
        with profiler.record_function("on_simdev"):
            z = x @ y
    close(z, a @ b)
    events = prof._trace["traceEvents"]
    kernel = [e for e in events if e["ph"] == "X" and e.get("cat") == "kernel"]
    assert [e["name"] for e in kernel] == ["simdev::mm_kernel"]
    track = kernel[0]["pid"]
    assert any(e["ph"] == "M" and e["pid"] == track and e["args"]["name"].startswith("device ") for e in events)
    rng = next(e for e in events if e["name"] == "on_simdev")
    assert rng["ts"] <= kernel[0]["ts"] and kernel[0]["ts"] + kernel[0]["dur"] <= rng["ts"] + rng["dur"] + 1e-3
    table = prof.key_averages().table()
    assert "Self Device" in table and "simdev::mm_kernel" in table
