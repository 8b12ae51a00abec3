"""ts.compile's dynamic sizes: after a recompile caused only by a change of tensor sizes (or
from the start with dynamic=True), the inductor generates kernels that read their sizes at run
time, so every later size runs the kernels of one C++ build. The oracle is Tessera eager; the
number of libraries in a private kernel cache shows how many builds there were."""
import glob
import os
import warnings

import numpy as np
import pytest
from conftest import to_np

import tessera as ts
import tessera.nn.functional as F
from tessera.compiler import config


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TESSERA_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(config, "eager_when_nothing_fuses", False)


def builds(tmp_path):
    return len(glob.glob(os.path.join(str(tmp_path), "cache", "inductor", "*.so")))


def close(a, b, atol=1e-5, rtol=1e-5):
    np.testing.assert_allclose(to_np(a), to_np(b), atol=atol, rtol=rtol)


def chain(x, y):
    z = ts.sin(x * 2 + y).clamp(-0.5, 0.75)
    return ts.tanh(ts.exp(z) - 1) * y


def test_a_size_change_makes_sizes_dynamic_and_later_sizes_build_nothing(tmp_path):
    c = ts.compile(chain)
    for k, n in enumerate([1000, 2000, 3000, 40000, 70001, 5]):
        x, y = ts.randn(n), ts.randn(n)
        close(c(x, y), chain(x, y))
        # the first size builds its own kernels; the second builds the size-generic ones, once
        assert builds(tmp_path) == min(k + 1, 2), n
    assert c.dynamic_sizes
    assert c.recompile_reasons[0] == "args[0]: tensor size changed from [1000] to [2000]; sizes are dynamic from now on"
    assert len(c.entries) == 6


def test_dynamic_true_builds_once_and_false_builds_per_size(tmp_path):
    d = ts.compile(chain, dynamic=True)
    for n in (100, 200, 300):
        x, y = ts.randn(n), ts.randn(n)
        close(d(x, y), chain(x, y))
    assert builds(tmp_path) == 1
    s = ts.compile(lambda x, y: chain(x, y) + 1, dynamic=False)
    for n in (100, 200, 300):
        x, y = ts.randn(n), ts.randn(n)
        close(s(x, y), chain(x, y) + 1)
    assert builds(tmp_path) == 4 and not s.dynamic_sizes


def rows_and_broadcasts(x, w, b, scale):
    h = F.layer_norm(x * scale + 1, (x.shape[-1],), w, b)  # a row kernel, weight and bias per column
    g = F.gelu(h) + x                                     # element-wise after it
    s = F.softmax(g * 0.5, dim=-1)                          # a softmax row kernel
    return s * scale - F.log_softmax(g, dim=-1) * 0.1        # scale broadcasts along the middle dim


@pytest.mark.parametrize("shapes", [[(2, 5, 16), (2, 9, 16), (3, 33, 16), (2, 7, 48)],
                                    [(4, 3, 8), (6, 3, 8), (2, 3, 24)]], ids=["seq", "batch-and-width"])
def test_row_kernels_and_broadcasts_at_every_size(shapes, tmp_path):
    c = ts.compile(rows_and_broadcasts, dynamic=True)
    for shape in shapes:
        x = ts.randn(*shape)
        w, b = ts.randn(shape[-1]), ts.randn(shape[-1])
        scale = ts.rand(shape[0], 1, shape[-1]) + 0.5
        close(c(x, w, b, scale), rows_and_broadcasts(x, w, b, scale))
    assert builds(tmp_path) == 1  # one build served every size


def test_sizes_of_one_specialise():
    # A dim of size 1 broadcasts, so it is another graph (as PyTorch's 0/1 specialisation):
    # the compiled kernels must not read it as a dim of size n.
    c = ts.compile(lambda x, y: (x * y).exp() + y, dynamic=True)
    for rows in (4, 1, 6, 1):
        x, y = ts.randn(rows, 8), ts.randn(1, 8)
        close(c(x, y), (x * y).exp() + y)
    x, y = ts.randn(5, 8), ts.randn(5, 1)
    close(c(x, y), (x * y).exp() + y)


def test_transposed_inputs_of_several_sizes():
    f = lambda x, y: ts.sigmoid(x + y) * x  # noqa: E731
    c = ts.compile(f, dynamic=True)
    for n, m in ((6, 10), (7, 12), (9, 5)):
        x, y = ts.randn(m, n).t(), ts.randn(n, m)
        close(c(x, y), f(x, y))


def test_many_sizes_stay_compiled_and_the_oldest_entries_go(monkeypatch):
    monkeypatch.setattr(config, "recompile_limit", 2)
    monkeypatch.setattr(config, "dynamic_entries_limit", 4)
    c = ts.compile(chain)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "recompile limit" warning: sizes count once
        for n in range(10, 30):
            x, y = ts.randn(n), ts.randn(n)
            close(c(x, y), chain(x, y))
    assert len(c.entries) == 4
    assert all(not entry.eager for _, entry in c.entries)
    # a change of dtype is a recompile of another kind: it still counts against the limit
    c(ts.randn(5, dtype=ts.float64), ts.randn(5, dtype=ts.float64))
    with pytest.warns(UserWarning, match="recompile limit"):
        c(ts.randn(5).to(ts.bfloat16), ts.randn(5).to(ts.bfloat16))


# ---- symbolic graphs: after enough sizes, new sizes are served without capturing


def counted(fn):
    """fn, and a list whose length is how many times Python ran it (captures only, once compiled)."""
    runs = []

    def wrapper(*args):
        runs.append(1)
        return fn(*args)
    return wrapper, runs


def attention_block(x, w):
    # sizes flow into operator arguments: a view, a causal attention, a T x T mask and a slice
    b, t, c = x.shape
    q = (x @ w).view(b, t, 2, c // 2).transpose(1, 2)
    mask = ts.ones(t, t).tril() * 0.5
    scores = (q @ q.transpose(-1, -2)) * mask
    y = F.softmax(scores, dim=-1) @ q
    return F.gelu(y.transpose(1, 2).reshape(b, t, c))[:, 1:, :] + x[:, : t - 1, :]


def test_new_sizes_are_served_from_the_fitted_graph_without_capturing(tmp_path):
    w = ts.randn(8, 8) * 0.3
    fn, runs = counted(attention_block)
    c = ts.compile(fn)
    for t in [5, 6, 8, 11, 7]:  # static, then dynamic: five captures fit 1, t, t*t and check two
        x = ts.randn(2, t, 8)
        close(c(x, w), attention_block(x, w))
    assert len(runs) == 5
    for t in [9, 30, 4, 64, 13]:
        x = ts.randn(2, t, 8)
        close(c(x, w), attention_block(x, w), atol=1e-5)
    assert len(runs) == 5  # no capture: the fitted graph at each new length
    assert builds(tmp_path) == 2


def test_two_dims_varying_are_fitted_together():
    fn, runs = counted(lambda x, y: (x.sum(1, keepdim=True) * y).sin() + x[:, :2].mean())
    c = ts.compile(fn)
    shapes = [(2, 5), (3, 7), (4, 6), (2, 9), (5, 5), (3, 11), (6, 4), (4, 10), (7, 3), (5, 8)]
    for n, m in shapes:
        x, y = ts.randn(n, m), ts.randn(n, m)
        close(c(x, y), (x.sum(1, keepdim=True) * y).sin() + x[:, :2].mean())
    captured = len(runs)
    assert captured < len(shapes)
    for n, m in [(9, 12), (3, 3), (12, 9)]:
        x, y = ts.randn(n, m), ts.randn(n, m)
        close(c(x, y), (x.sum(1, keepdim=True) * y).sin() + x[:, :2].mean())
    assert len(runs) == captured


@pytest.mark.parametrize("case", ["floor-division", "python-tensor", "python-int-result"])
def test_graphs_no_expression_fits_keep_capturing(case):
    if case == "floor-division":
        f = lambda x: x.reshape(x.shape[0] // 2, 2).sum(1).exp()  # noqa: E731  (n // 2: no exact affine fit)
    elif case == "python-tensor":
        f = lambda x: x * ts.tensor([float(i) for i in range(x.shape[0])])  # noqa: E731  (contents depend on n)
    else:
        f = lambda x: ((x * 2).exp(), x.shape[0] * 3)  # noqa: E731  (a non-tensor result that depends on n)
    fn, runs = counted(f)
    c = ts.compile(fn)
    sizes = [4, 6, 8, 10, 12, 14, 16, 22, 30]
    for n in sizes:
        x = ts.randn(n)
        got, want = c(x), f(x)
        if case == "python-int-result":
            assert got[1] == want[1]
            got, want = got[0], want[0]
        close(got, want)
    assert len(runs) == len(sizes)  # every size captured: never served from a wrong fit


def test_training_at_several_lengths_matches_eager_and_builds_once(tmp_path):
    ts.manual_seed(0)
    model = ts.nn.Sequential(ts.nn.Linear(12, 24), ts.nn.GELU(), ts.nn.LayerNorm(24), ts.nn.Linear(24, 12))
    runs = []
    model.register_forward_pre_hook(lambda module, args: runs.append(1))
    c = ts.compile(model)
    for t in (5, 9, 16, 7, 11, 3, 20, 33, 8):
        x = ts.randn(3, t, 12)
        model.zero_grad()
        (c(x) ** 2).mean().backward()
        compiled = [p.grad.clone() for p in model.parameters()]
        model.zero_grad()
        (model(x) ** 2).mean().backward()
        for got, p in zip(compiled, model.parameters()):
            close(got, p.grad, atol=1e-5)
    # each compiled call that captured ran the module once more than eager did: 5 captures, then
    # the fitted graphs; forward and backward a build each for the first length, then one each for all others
    assert len(runs) == 9 + 5
    assert c._compiled_call.dynamic_sizes and builds(tmp_path) == 4


# ---- torch._dynamo's and torch.compiler's knobs


def test_mark_dynamic_compiles_dynamic_from_the_first_call(tmp_path):
    import tessera._dynamo as dynamo
    assert dynamo.config is config
    c = ts.compile(lambda x, y: chain(x, y) * 2)
    for n in (50, 60, 70):
        x, y = ts.randn(n), ts.randn(n)
        dynamo.mark_dynamic(x, 0)
        close(c(x, y), chain(x, y) * 2)
    assert c.dynamic_sizes and c.recompile_reasons[0] == "args[0]: tensor size changed from [50] to [60]"
    assert builds(tmp_path) == 1  # no static build for the first size
    with pytest.raises(IndexError, match="mark_dynamic: dim 2"):
        dynamo.mark_dynamic(ts.ones(3, 4), 2)
    dynamo.reset()
    assert c.entries == [] and not c.dynamic_sizes


def test_compiler_disable_keeps_a_function_eager():
    calls = []

    @ts.compiler.disable
    def f(x):
        calls.append(1)
        return x.sin() + 1

    c = ts.compile(f)
    assert c is f
    for _ in range(3):
        close(c(ts.ones(3)), ts.ones(3).sin() + 1)
    assert len(calls) == 3  # ran as Python every time
    g = ts.compile(lambda x: f(x) * 2)  # called inside a compiled function: captured with it
    close(g(ts.ones(4)), (ts.ones(4).sin() + 1) * 2)


def test_a_fit_that_breaks_at_new_sizes_falls_back_to_capturing():
    # pos = arange(min(T, 8)): affine (= T) over the lengths sampled below 8, wrong above; the
    # fitted graph then fails (a broadcast of T against 8 positions) and the call is captured instead
    def f(x):
        t = x.shape[1]
        pos = ts.arange(min(t, 8), dtype=ts.float32)
        return x[:, -8:] * 2 + pos
    fn, runs = counted(f)
    c = ts.compile(fn)
    for t in (3, 4, 5, 6, 7):
        x = ts.randn(2, t)
        close(c(x), f(x))
    assert len(runs) == 5
    family = next(iter(c._families.values()))
    assert family.exprs is not None  # fitted over 3..7
    for t in (12, 20, 6):
        x = ts.randn(2, t)
        close(c(x), f(x))  # right, by capturing
    assert family.failed and family.exprs is None


def test_graphs_that_write_buffers_keep_capturing():
    ts.manual_seed(0)
    bn = ts.nn.BatchNorm1d(4)  # training: the running statistics are written every call
    reference = ts.nn.BatchNorm1d(4)
    reference.load_state_dict(bn.state_dict())
    runs = []
    bn.register_forward_pre_hook(lambda module, args: runs.append(1))
    c = ts.compile(bn)
    sizes = (3, 5, 6, 7, 9, 11, 12)
    for n in sizes:
        x = ts.randn(n, 4)
        close(c(x), reference(x))
    close(bn.running_mean, reference.running_mean)
    assert len(runs) == len(sizes)  # every size captured: the running statistics are written once per call
