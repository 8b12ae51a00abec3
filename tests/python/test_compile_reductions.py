"""The inductor's reduction kernels: element-wise work fused into a sum, mean, amax or amin over
the last dim (rows), every dim but the last (columns: a bias gradient), a block of dims before
the last (middle), every dim but such a block (around: per-channel statistics) or every dim, and the
element-wise work on the reduced values fused after it. The oracle is Tessera eager (sums
accumulate in double in both); describe() shows that the graph became one kernel."""
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
import pytest
from conftest import to_np

import tessera as ts
import tessera.nn.functional as F
from tessera.compiler import _plugin_backend, config


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TESSERA_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(config, "eager_when_nothing_fuses", False)


def described(compiled):
    run = compiled.entries[0][1].run
    return dict(f.split("=", 1) for f in _plugin_backend.describe(run.handle).split() if "=" in f)


CASES = {
    "rows sum": (lambda x, y: (x * y + 1).sum(-1), lambda: (ts.randn(64, 100), ts.randn(100))),
    "rows mean, keepdim, then rsqrt": (lambda x, y: ((x - y) ** 2).mean(-1, keepdim=True).add(1e-5).rsqrt(),
                                       lambda: (ts.randn(8, 33, 70), ts.randn(70))),
    "columns sum (a bias gradient)": (lambda g, x: (g * F.gelu(x)).sum(dim=(0, 1)),
                                      lambda: (ts.randn(8, 64, 300), ts.randn(8, 64, 300))),
    "columns amax, broadcast row": (lambda x, y: ts.amax(x.exp() * y, dim=0), lambda: (ts.randn(500, 130), ts.randn(130))),
    "all mean (a loss)": (lambda a, b: ((a - b) ** 2).mean(), lambda: (ts.randn(300, 301), ts.randn(300, 301))),
    "all amin": (lambda a, b: ts.amin(a * b), lambda: (ts.randn(1000), ts.randn(1000))),
    "rows amax with NaN": (lambda a, b: ts.amax(a + b, dim=-1),
                           lambda: (ts.tensor([[1.0, float("nan"), 3.0], [4.0, 5.0, -1.0]]), ts.ones(3))),
    "columns amin with NaN": (lambda a, b: ts.amin(a * b, dim=0),
                              lambda: (ts.tensor([[1.0, 2.0], [float("nan"), 0.5]]), ts.ones(2))),
    "a prologue value used outside too": (lambda a, b: ((a * b).tanh(), (a * b).tanh().sum(-1)),
                                          lambda: (ts.randn(40, 50), ts.randn(40, 50))),
    "float64 rows": (lambda a, b: (a * b).sum(-1), lambda: (ts.randn(7, 9, dtype=ts.float64), ts.randn(9, dtype=ts.float64))),
    "large all sum (threads)": (lambda a, b: (a * b).sum(), lambda: (ts.randn(1 << 20), ts.randn(1 << 20))),
    "large rows (threads)": (lambda a, b: (a * b).sum(-1), lambda: (ts.randn(4096, 512), ts.randn(512))),
    "large columns mean (threads)": (lambda a, b: (a + b).mean(0), lambda: (ts.randn(2048, 1536), ts.randn(1536))),
    "middle mean over a sequence, then scaled": (lambda x, y: (x * y).mean(1) * 3,
                                                 lambda: (ts.randn(4, 37, 24), ts.randn(4, 37, 24))),
    "middle sum, keepdim, block of two dims": (lambda x, y: (x - y).square().sum((1, 2), keepdim=True),
                                               lambda: (ts.randn(3, 5, 6, 7), ts.randn(3, 5, 6, 7))),
    "middle sum over dim 0 of three": (lambda x, y: (x * y).sum(0), lambda: (ts.randn(9, 4, 5), ts.randn(9, 4, 5))),
    "middle amax with NaN": (lambda x, y: ts.amax(x + y, dim=1),
                             lambda: (ts.tensor([[[1.0, 2.0], [float("nan"), 0.0]], [[3.0, -1.0], [2.0, 5.0]]]),
                                      ts.zeros(2, 2, 2))),
    "large middle mean (threads)": (lambda x, y: (x + y).mean(1), lambda: (ts.randn(64, 256, 128), ts.randn(64, 256, 128))),
    "float64 middle": (lambda x, y: (x * y).sum(1), lambda: (ts.randn(3, 8, 5, dtype=ts.float64),
                                                              ts.randn(3, 8, 5, dtype=ts.float64))),
    "around: statistics per channel, then rsqrt": (lambda x, y: ((x - y) ** 2).mean((0, 2, 3)).add(1e-5).rsqrt(),
                                                   lambda: (ts.randn(4, 6, 5, 7), ts.randn(4, 6, 5, 7))),
    "around: the last two dims, keepdim": (lambda x, y: (x * y).sum((1, 2), keepdim=True),
                                           lambda: (ts.randn(5, 9, 11), ts.randn(5, 9, 11))),
    "around amax with NaN": (lambda x, y: ts.amax(x * y, dim=(0, 2)),
                             lambda: (ts.tensor([[[1.0, 2.0], [float("nan"), 0.0]], [[3.0, -1.0], [2.0, 5.0]]]),
                                      ts.ones(2, 2, 2))),
    "large around mean (threads)": (lambda x, y: (x + y).mean((0, 2, 3)),
                                    lambda: (ts.randn(16, 64, 32, 32), ts.randn(16, 64, 32, 32))),
}


@pytest.mark.parametrize("case", list(CASES))
def test_reduction_fused_with_its_prologue_matches_eager(case):
    f, make = CASES[case]
    args = make()
    with ts.no_grad():
        c = ts.compile(f)
        c(*args)  # the capture (it runs the function itself)
        got, expected = c(*args), f(*args)
    got = got if isinstance(got, tuple) else (got,)
    expected = expected if isinstance(expected, tuple) else (expected,)
    for g, e in zip(got, expected):
        assert g.shape == e.shape and g.dtype == e.dtype
        tol = 1e-12 if e.dtype == ts.float64 else 1e-5
        np.testing.assert_allclose(to_np(g), to_np(e), rtol=tol, atol=tol)  # NaNs in the same places
    d = described(c)
    assert d["kernels"] == "1" and d["extern_calls"] == "0", d


def test_a_lone_reduction_and_a_broadcast_middle_input_stay_library_calls():
    with ts.no_grad():
        lone = ts.compile(lambda x: x.sum(-1) * 2)
        broadcast = ts.compile(lambda x, y: (x * y).sum(1))  # y broadcasts: the middle layout reads dense inputs
        x, y = ts.randn(4, 5, 6), ts.randn(6)
        lone(x), broadcast(x, y)
        np.testing.assert_allclose(to_np(lone(x)), to_np(x.sum(-1) * 2), rtol=1e-6)
        np.testing.assert_allclose(to_np(broadcast(x, y)), to_np((x * y).sum(1)), rtol=1e-6)
    assert described(lone)["extern_calls"] == "1"       # the sum; the scaling after it is a kernel
    assert described(broadcast)["extern_calls"] == "1"  # the sum; the product before it is a kernel


def test_reduction_kernels_read_their_sizes_at_run_time():
    f = CASES["rows mean, keepdim, then rsqrt"][0]
    c = ts.compile(f, dynamic=True)
    with ts.no_grad():
        for rows, d in ((8, 70), (3, 129), (1000, 33)):
            x, y = ts.randn(2, rows, d), ts.randn(d)
            c(x, y)
            np.testing.assert_allclose(to_np(c(x, y)), to_np(f(x, y)), rtol=1e-5, atol=1e-6)


def test_training_with_bias_gradient_sums_matches_eager():
    """A linear + GELU block trained compiled: the backward's bias gradients are column sums of
    the GELU backward's result, fused with it."""
    ts.manual_seed(0)
    net = ts.nn.Sequential(ts.nn.Linear(32, 96), ts.nn.GELU(), ts.nn.Linear(96, 32))
    ref = ts.nn.Sequential(ts.nn.Linear(32, 96), ts.nn.GELU(), ts.nn.Linear(96, 32))
    ref.load_state_dict(net.state_dict())
    compiled = ts.compile(net)
    x, y = ts.randn(4, 50, 32), ts.randn(4, 50, 32)
    compiled(x)  # the capture: later calls run the compiled forward and backward
    for model, call in ((net, compiled), (ref, ref)):
        loss = ((call(x) - y) ** 2).mean()
        loss.backward()
    for (name, a), b in zip(net.named_parameters(), ref.parameters()):
        np.testing.assert_allclose(to_np(a.grad), to_np(b.grad), rtol=1e-4, atol=1e-6, err_msg=name)


UNARY = ["sin", "exp", "tanh", "sigmoid", "relu", "neg", "abs"]
REDUCTIONS = [("sum", -1), ("mean", -1), ("amax", -1), ("amin", 0), ("sum", 0), ("mean", None), ("amax", None)]


@settings(max_examples=20, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(UNARY), st.sampled_from(["mul", "add"])), min_size=1, max_size=5),
       st.sampled_from(REDUCTIONS), st.booleans(), st.sampled_from([(7, 5), (3, 4, 33), (40000,)]))
def test_random_chains_ending_in_a_reduction_match_eager(steps, reduction, then_scale, shape):
    op, dim = reduction
    dim = None if dim is None or len(shape) == 1 else dim
    if dim == 0 and len(shape) == 3:
        dim = (0, 1)  # every dim but the last

    def f(x, b):
        for s in steps:
            x = getattr(ts, s)(x, b) if s in ("mul", "add") else getattr(ts, s)(x)
        if op in ("amax", "amin"):
            r = getattr(ts, op)(x, dim=() if dim is None else dim)
        else:
            r = getattr(x, op)() if dim is None else getattr(x, op)(dim=dim)
        return r * 0.5 + 1 if then_scale else r

    x, b = ts.randn(*shape), ts.randn(shape[-1])
    with ts.no_grad():
        c = ts.compile(f)
        c(x, b)
        got, expected = c(x, b), f(x, b)
    e = np.atleast_1d(to_np(expected))
    scale = max([1.0] + [float(v) for v in np.abs(e[np.isfinite(e)])])  # exp chains may overflow to inf
    np.testing.assert_allclose(to_np(got), to_np(expected), rtol=1e-5, atol=1e-5 * scale)
