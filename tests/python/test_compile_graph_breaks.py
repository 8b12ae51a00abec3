"""ts.compile around graph breaks: a read of tensor data into Python (item, bool, int, tolist)
cuts the captured graph; the pieces are compiled, the value is read at every call and guarded
on, and another value captures the function again (a new continuation). The oracle is the
same function run uncompiled; a list the function appends to counts how often its Python ran
(a replay runs none of it)."""
import warnings

import numpy as np
import pytest
from conftest import to_np

import tessera as ts
from tessera.compiler import config


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TESSERA_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(config, "eager_when_nothing_fuses", False)


def close(a, b, atol=1e-6, rtol=1e-5):
    np.testing.assert_allclose(to_np(a), to_np(b), atol=atol, rtol=rtol)


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_a_branch_on_a_value_compiles_both_continuations(backend):
    runs = []

    def f(x):
        runs.append(1)
        y = ts.sin(x * 2) + 0.5
        if y.sum() > 0:  # the break
            return ts.tanh(y * 3) + 1
        return ts.exp(y) - 1

    c = ts.compile(f, backend=backend)
    pos, neg = ts.full((64,), 0.3), ts.full((64,), -1.0)
    for x in (pos, pos, neg, neg, pos, neg, pos * 1.5, neg * 1.1):
        close(c(x), f(x))
    # f's own calls above add 8; the compiled function ran its Python for the two captures only.
    assert len(runs) == 8 + 2
    (key, entry), = c.entries
    assert entry.segmented and not entry.eager and entry.run.variants == 2
    assert [len(s.ir["nodes"]) for s in entry.run.pieces()][0] >= 4  # mul, sin, add, sum, gt
    assert len(c.recompile_reasons) == 1 and "read False, compiled for True" in c.recompile_reasons[0]
    assert "y.sum() > 0" in c.recompile_reasons[0]
    if backend == "inductor":  # each piece is a compiled graph
        assert all(hasattr(s.run, "handle") for s in entry.run.pieces() if s.ir["outputs"])


def test_explain_counts_a_graph_per_piece():
    def f(x):
        if x.sum() > 0:
            return x + 1
        return x - 1
    out = ts.compiler.explain(f)(ts.ones(3))
    assert out.graph_count == 2 and out.graph_break_count == 1
    assert [len(ops) for ops in out.ops_per_graph] == [2, 1]
    assert "sum" in out.ops_per_graph[0][0] and "add" in out.ops_per_graph[1][0]


def test_a_later_continuation_may_need_values_the_first_did_not():
    """The second branch reads b, which the first piece did not return when only the first
    branch was known: the shared piece returns both from then on."""
    runs = []

    def f(x):
        runs.append(1)
        a, b = ts.sin(x), ts.cos(x) * 2
        if a.sum() > 0:
            return a * 2
        return b * 3

    c = ts.compile(f, backend="inductor")
    for x in (ts.full((16,), 0.5), ts.full((16,), -0.5), ts.full((16,), 0.7), ts.full((16,), -0.9)):
        close(c(x), f(x))
    assert len(runs) == 4 + 2


def test_training_through_a_break_matches_eager_over_steps():
    ts.manual_seed(0)
    net = ts.nn.Sequential(ts.nn.Linear(6, 16), ts.nn.Tanh(), ts.nn.Linear(16, 3))
    ref = ts.nn.Sequential(ts.nn.Linear(6, 16), ts.nn.Tanh(), ts.nn.Linear(16, 3))
    ref.load_state_dict(net.state_dict())
    runs = []

    def step(model):
        def loss_fn(x, y):
            runs.append(1)
            out = model(x)
            scale = 2.0 if (x.mean() + out.mean() * 1e-3) > 0 else 0.5  # a Python branch on a value
            return ((out - y) ** 2).mean() * scale
        return loss_fn

    compiled = ts.compile(step(net), backend="inductor")
    plain = step(ref)
    opts = [ts.optim.SGD(m.parameters(), lr=0.1) for m in (net, ref)]
    x, y = ts.randn(32, 6), ts.randn(32, 3)
    for k in range(20):
        xs = x if k % 2 else -x  # both branches, alternating
        losses = []
        for fn, opt in ((compiled, opts[0]), (plain, opts[1])):
            opt.zero_grad()
            losses.append(fn(xs, y))
            losses[-1].backward()
            opt.step()
        close(losses[0], losses[1], atol=1e-5)
    for (name, a), b in zip(net.state_dict().items(), ref.state_dict().values()):
        close(a, b, atol=1e-4)
    assert len(runs) == 20 + 2  # the plain function's 20 calls, and two captures


def test_a_parameter_read_and_a_tolist_read_are_guarded():
    class Gate(ts.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("on", ts.tensor(True))

        def forward(self, x, idx):
            first = idx.tolist()[0]  # a list read
            if self.on.item():        # a read of a buffer, not of an argument
                return x[first] * 2
            return x[first] - 1

    m = Gate()
    c = ts.compile(m, backend="inductor")
    x = ts.randn(5, 4)
    for i in (1, 1, 3):
        idx = ts.tensor([i, 0])
        close(c(x, idx), x[i] * 2)
    m.on.fill_(False)
    close(c(x, ts.tensor([3, 0])), x[3] - 1)
    close(c(x, ts.tensor([1, 0])), x[1] - 1)


def test_a_returned_value_is_the_value_of_this_call():
    def f(x):
        s = x.sum()
        return x * 2, s.item()

    c = ts.compile(f)
    x = ts.arange(4.0)
    for _ in range(3):
        out, v = c(x)
        close(out, x * 2)
        assert v == 6.0 and isinstance(v, float)
    out, v = c(x + 1)
    assert v == 10.0


def test_values_past_the_recompile_limit_run_eagerly_with_one_warning(monkeypatch):
    monkeypatch.setattr(config, "recompile_limit", 3)

    def f(x):
        n = int(x.sum())
        return x[:n] + n

    c = ts.compile(f)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for n in range(1, 8):
            x = ts.zeros(8)
            x[:n] = 1
            close(c(x), f(x))
    limit = [w for w in caught if "recompile limit" in str(w.message)]
    assert len(limit) == 1
    assert "int(x.sum())" in str(limit[0].message) and "read 4" in str(limit[0].message)


def test_a_random_value_read_is_never_replayed_with_the_wrong_branch():
    def f(x):
        r = ts.rand(1)
        return x + r if r.item() > 0.5 else x - r

    c = ts.compile(f)
    x = ts.zeros(1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the values seldom repeat: the recompile limit is reached
        for _ in range(30):
            d = c(x).item()
            assert d > 0.5 or -0.5 <= d <= 0.0, d


def test_writes_before_a_read_and_printing_keep_the_function_eager(capsys):
    runs = []

    def writes(x):
        runs.append(1)
        x.add_(1)  # writes its input: running it again after a miss would add twice
        return x * 2 if x.sum() > 0 else x

    c = ts.compile(writes)
    for _ in range(3):
        x = ts.zeros(4)
        close(c(x), ts.full((4,), 2.0))
        close(x, ts.ones(4))
    (_, entry), = c.entries
    assert entry.eager and len(runs) == 3

    def prints(x):
        print("value", x)
        return x + 1

    c = ts.compile(prints)
    for _ in range(2):
        close(c(ts.ones(2)), ts.full((2,), 2.0))
    assert capsys.readouterr().out.count("value") == 2  # printed at every call, as in eager
    assert c.entries[0][1].eager


def test_an_explicit_graph_break_compiles_both_sides():
    runs = []

    def f(x):
        runs.append(1)
        y = ts.sin(x) * 2
        ts._dynamo.graph_break()
        return ts.exp(y) + 1

    c = ts.compile(f, backend="inductor")
    x = ts.randn(50)
    for _ in range(3):
        close(c(x), ts.exp(ts.sin(x) * 2) + 1)
    assert len(runs) == 1
    (_, entry), = c.entries
    assert entry.segmented and [len(s.ir["nodes"]) for s in entry.run.pieces()] == [2, 2]
    out = ts.compiler.explain(f)(x)
    assert out.graph_count == 2 and out.break_reasons[0][0] == "graph_break()"
    with pytest.raises(ts.compiler.GraphBreakError, match=r"graph_break\(\) at .*ts._dynamo.graph_break"):
        ts.compile(f, fullgraph=True)(x)
