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


def test_training_at_several_sequence_lengths_matches_eager(tmp_path):
    ts.manual_seed(0)
    model = ts.nn.Sequential(ts.nn.Linear(12, 24), ts.nn.GELU(), ts.nn.LayerNorm(24), ts.nn.Linear(24, 12))
    c = ts.compile(model)
    for t in (5, 9, 16, 7):
        x = ts.randn(3, t, 12)
        model.zero_grad()
        (c(x) ** 2).mean().backward()
        compiled = [p.grad.clone() for p in model.parameters()]
        model.zero_grad()
        (model(x) ** 2).mean().backward()
        for got, p in zip(compiled, model.parameters()):
            close(got, p.grad, atol=1e-5)
    assert c._compiled_call.dynamic_sizes
    # forward and backward: a build each for the first length, then one each for all others
    assert builds(tmp_path) == 4
