"""mode="reduce-overhead": the CUDA-graph runner's logic (warm-up, capture on private input
copies, copies in, replay, writes back to mutated inputs, fresh outputs, one graph per size, a
failed capture falling back with one warning), checked here with a stand-in for ts.cuda's graph
that replays the captured function on the captured tensors, as a CUDA graph replays its kernels
on the captured addresses. The real CUDA graphs run in test_cuda.py (the device check).
Also: ts.cuda.CUDAGraph's errors without a device, and reduce-overhead on CPU inputs."""
import contextlib
import warnings

import numpy as np
import pytest

import tessera as ts
from tessera.compiler import _cudagraphs


class Recorded:
    """A compiled graph's callable (inputs -> list of outputs) that remembers the inputs of the
    call made during a capture, so the stand-in graph can replay it."""

    def __init__(self, fn):
        self.fn = fn
        self.calls = 0
        self.graphs = ["ir"]
        self.capturing = None

    def __call__(self, *inputs):
        self.calls += 1
        outs = self.fn(*inputs)
        if self.capturing is not None:
            self.capturing.capture(self.fn, inputs, outs)
        return outs


class FakeGraph:
    """Replays by running the captured function on the captured inputs and writing the results
    into the captured outputs: the graph's buffers, as a CUDA graph's replay does."""
    live = []

    def __init__(self):
        self.replays = 0
        FakeGraph.live.append(self)

    def capture(self, fn, inputs, outs):
        self.fn, self.inputs, self.outs = fn, inputs, outs

    def replay(self):
        self.replays += 1
        for held, fresh in zip(self.outs, self.fn(*self.inputs)):
            held.copy_(fresh)


class FakeStream:
    """The side stream the warm-up runs on: ordering is all it does on a device."""
    waits = 0

    def wait_stream(self, other):
        FakeStream.waits += 1

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


@pytest.fixture
def fake_cuda_graphs(monkeypatch):
    FakeGraph.live = []
    FakeStream.waits = 0
    current = {}

    class graph:
        def __init__(self, g):
            self.g = g

        @staticmethod
        def capture_stream_for(stream):
            return FakeStream()

        def __enter__(self):
            current["run"].capturing = self.g

        def __exit__(self, *exc):
            current["run"].capturing = None
            return False

    monkeypatch.setattr(ts.cuda, "CUDAGraph", FakeGraph)
    monkeypatch.setattr(ts.cuda, "graph", graph)
    monkeypatch.setattr(ts.cuda, "current_stream", lambda: FakeStream())
    monkeypatch.setattr(ts.cuda, "device", lambda index: contextlib.nullcontext())

    def runner(fn, mutated=()):
        run = Recorded(fn)
        current["run"] = run
        return run, _cudagraphs.CUDAGraphRunner(run, list(mutated))
    return runner


def test_warm_up_then_capture_then_replays_with_each_calls_inputs(fake_cuda_graphs):
    run, runner = fake_cuda_graphs(lambda x, y: [x * y + 1, ts.sin(x)])
    results = []
    for k in range(5):
        x, y = ts.randn(3, 4), ts.randn(3, 4)
        outs = runner(x, y)
        results.append((x, y, outs))
        np.testing.assert_allclose(outs[0].numpy(), x.numpy() * y.numpy() + 1, rtol=1e-6)
        np.testing.assert_allclose(outs[1].numpy(), np.sin(x.numpy()), rtol=1e-6)
    graph, = FakeGraph.live
    assert graph.replays == 4  # call 1 warms up; call 2 captures and replays; 3-5 replay
    assert run.calls == 2  # the warm-up and the capture: a replay does not call the compiled callable
    assert FakeStream.waits == 2  # the warm-up's side stream waited for the caller's, and the other way round
    # Outputs are the caller's: a later replay did not overwrite an earlier call's results.
    x, y, outs = results[1]
    np.testing.assert_allclose(outs[0].numpy(), x.numpy() * y.numpy() + 1, rtol=1e-6)
    # The capture ran on private copies, never on the caller's tensors.
    assert all(a is not b for a, b in zip(graph.inputs, results[1][:2]))


def test_an_input_the_function_writes_is_written_back(fake_cuda_graphs):
    def fn(buf, x):
        buf.add_(x)
        return [buf * 2]
    run, runner = fake_cuda_graphs(fn, mutated=[0])
    buf = ts.zeros(4)
    expected = np.zeros(4, np.float32)
    for _ in range(4):
        x = ts.randn(4)
        out = runner(buf, x)
        expected += x.numpy()
        np.testing.assert_allclose(buf.numpy(), expected, rtol=1e-6)
        np.testing.assert_allclose(out[0].numpy(), 2 * expected, rtol=1e-6)


def test_each_input_size_gets_its_own_graph(fake_cuda_graphs):
    run, runner = fake_cuda_graphs(lambda x: [ts.exp(x)])
    for n in (3, 5, 3, 5, 3):
        x = ts.randn(n)
        np.testing.assert_allclose(runner(x)[0].numpy(), np.exp(x.numpy()), rtol=1e-6)
    assert len(FakeGraph.live) == 2
    assert sorted(g.replays for g in FakeGraph.live) == [1, 2]  # size 5: captured on its 2nd call, then 1 more


def test_a_failed_capture_warns_once_and_launches_the_kernels(monkeypatch):
    class Refusing:
        def __init__(self, g):
            pass

        @staticmethod
        def capture_stream_for(stream):
            return FakeStream()

        def __enter__(self):
            raise RuntimeError("cuda::graph_capture_begin: the current stream is already capturing a graph")

        def __exit__(self, *exc):
            return False
    monkeypatch.setattr(ts.cuda, "CUDAGraph", lambda: object())
    monkeypatch.setattr(ts.cuda, "graph", Refusing)
    monkeypatch.setattr(ts.cuda, "current_stream", lambda: FakeStream())
    monkeypatch.setattr(ts.cuda, "device", lambda index: contextlib.nullcontext())
    runner = _cudagraphs.CUDAGraphRunner(Recorded(lambda x: [x + 1]), [])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(4):
            x = ts.randn(3)
            np.testing.assert_allclose(runner(x)[0].numpy(), x.numpy() + 1)
    messages = [str(w.message) for w in caught]
    assert len(messages) == 1 and "already capturing" in messages[0] and "one by one" in messages[0]
    assert "already capturing" in runner.failure


def test_reduce_overhead_on_cpu_inputs_runs_the_compiled_kernels():
    def f(x, y):
        return ts.tanh(x * y) + y
    c = ts.compile(f, mode="reduce-overhead")
    for _ in range(3):
        x, y = ts.randn(8, 8), ts.randn(8, 8)
        np.testing.assert_allclose(c(x, y).numpy(), np.tanh(x.numpy() * y.numpy()) + y.numpy(), rtol=1e-5,
                                   atol=1e-6)
    (_, entry), = c.entries
    assert not isinstance(entry.run, _cudagraphs.CUDAGraphRunner)  # PyTorch skips CPU graphs too


def test_modes_that_replay_cuda_graphs():
    assert _cudagraphs.wants_cuda_graphs("reduce-overhead", None)
    assert _cudagraphs.wants_cuda_graphs("max-autotune", None)
    assert _cudagraphs.wants_cuda_graphs(None, {"triton.cudagraphs": True})
    assert not _cudagraphs.wants_cuda_graphs("max-autotune-no-cudagraphs", None)
    assert not _cudagraphs.wants_cuda_graphs(None, None)


def test_cuda_graph_api_errors_without_a_device():
    g = ts.cuda.CUDAGraph()
    with pytest.raises(ValueError, match="capture_error_mode must be"):
        g.capture_begin(capture_error_mode="loose")
    with pytest.raises(RuntimeError, match="holds no capture"):
        g.replay()
    with pytest.raises(RuntimeError, match="no capture was begun"):
        g.capture_end()
    g.reset()  # nothing to release
    assert ts.cuda.is_current_stream_capturing() is False
    if not ts.cuda.is_available():
        with pytest.raises(RuntimeError, match="cuda"):
            g.capture_begin()
