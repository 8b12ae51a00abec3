"""F.linear_cross_entropy and nn.LinearCrossEntropyLoss (torch 2.15): the reference path (linear,
then cross_entropy) and the chunked path (LinearCrossEntropyOptions) against a NumPy oracle and
against torch when importable; values and the gradients of input, weight and bias; chunk sizes;
the second-backward rule; torch's errors."""
import numpy as np
import pytest

import tessera as ts
import tessera.nn.functional as F
from conftest import to_np

RNG = np.random.default_rng(11)
N, D, C = 37, 16, 50
X = RNG.standard_normal((N, D))
W = RNG.standard_normal((C, D)) * 0.3
B = RNG.standard_normal(C) * 0.1
TARGET = RNG.integers(0, C, N)
TARGET[[3, 20]] = -100  # ignored rows
CLASS_WEIGHT = RNG.random(C) + 0.5
CHUNKED = ts.nn.LinearCrossEntropyOptions(batch_chunk_size=8, chunking_method=None)


def oracle(reduction, class_weight=None, bias=True):
    """(loss, d input, d weight, d bias) in float64 NumPy."""
    logits = X @ W.T + (B if bias else 0)
    lse = np.log(np.exp(logits - logits.max(1, keepdims=True)).sum(1)) + logits.max(1)
    valid = TARGET != -100
    t = np.where(valid, TARGET, 0)
    w = np.where(valid, 1.0 if class_weight is None else class_weight[t], 0.0)
    scale = w / w.sum() if reduction == "mean" else w
    loss = ((lse - logits[np.arange(N), t]) * scale).sum()
    d = np.exp(logits - lse[:, None])
    d[np.arange(N), t] -= 1
    d *= scale[:, None]
    return loss, d @ W, d.T @ X, d.sum(0)


def run(options, reduction, class_weight=None, bias=True):
    x, w, b = (ts.tensor(v, requires_grad=True) for v in (X, W, B))
    loss = F.linear_cross_entropy(x, w, ts.tensor(TARGET), linear_bias=b if bias else None,
                                  weight=None if class_weight is None else ts.tensor(class_weight),
                                  reduction=reduction, options=options)
    loss.backward()
    return loss, x.grad, w.grad, b.grad


@pytest.mark.parametrize("options", [None, CHUNKED, ts.nn.LinearCrossEntropyOptions()], ids=["reference", "chunks of 8",
                                                                                         "aspect ratio"])
@pytest.mark.parametrize("reduction", ["mean", "sum"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("bias", [False, True])
def test_matches_the_numpy_oracle(options, reduction, weighted, bias):
    want = oracle(reduction, CLASS_WEIGHT if weighted else None, bias)
    got = run(options, reduction, CLASS_WEIGHT if weighted else None, bias)
    for g, w in zip(got[:3], want[:3]):
        np.testing.assert_allclose(to_np(g), w, rtol=1e-10, atol=1e-12)
    if bias:
        np.testing.assert_allclose(to_np(got[3]), want[3], rtol=1e-10, atol=1e-12)
    else:
        assert got[3] is None or not got[3].abs().sum().item()


@pytest.mark.torch
@pytest.mark.parametrize("kw", [dict(reduction="none"), dict(label_smoothing=0.2), dict(ignore_index=7),
                                dict(reduction="sum", weight=True)], ids=["none", "smoothing", "ignore 7", "weighted"])
def test_matches_torch(kw):
    torch = pytest.importorskip("torch")
    kw = dict(kw)
    use_weight = kw.pop("weight", False)
    t = np.where(TARGET == -100, 7, TARGET)
    results = []
    for lib in (ts, torch):
        x, w, b = (lib.tensor(v, requires_grad=True) for v in (X, W, B))
        weight = lib.tensor(CLASS_WEIGHT) if use_weight else None
        loss = lib.nn.functional.linear_cross_entropy(x, w, lib.tensor(t), linear_bias=b, weight=weight, **kw)
        loss.sum().backward()
        results.append([np.asarray(v.detach().numpy()) for v in (loss, x.grad, w.grad, b.grad)])
    for ours, theirs in zip(*results):
        np.testing.assert_allclose(ours, theirs, rtol=1e-10, atol=1e-12)


@pytest.mark.torch
def test_k_dimensional_loss_and_probability_targets_match_torch():
    torch = pytest.importorskip("torch")
    x = RNG.standard_normal((6, 5))
    w = RNG.standard_normal((10, 4, 3, 5))
    b = RNG.standard_normal((10, 4, 3))
    idx = RNG.integers(0, 10, (6, 4, 3))
    probs = RNG.random((6, 10, 4, 3))
    probs /= probs.sum(1, keepdims=True)
    for target in (idx, probs):
        got = F.linear_cross_entropy(ts.tensor(x), ts.tensor(w), ts.tensor(target), linear_bias=ts.tensor(b))
        want = torch.nn.functional.linear_cross_entropy(torch.tensor(x), torch.tensor(w), torch.tensor(target),
                                                        linear_bias=torch.tensor(b))
        np.testing.assert_allclose(to_np(got), want.numpy(), rtol=1e-12)
    # the chunked path does not cover them: a warning, then the reference result
    with pytest.warns(UserWarning, match="chunked path does not support class-probability targets"):
        got = F.linear_cross_entropy(ts.tensor(X), ts.tensor(W), ts.softmax(ts.tensor(X @ W.T), 1), options=CHUNKED)
    np.testing.assert_allclose(to_np(got), to_np(F.cross_entropy(ts.tensor(X @ W.T), ts.softmax(ts.tensor(X @ W.T),
                                                                                                    1))), rtol=1e-12)


def test_chunk_sizes():
    o = ts.nn.LinearCrossEntropyOptions
    # aspect ratio: next_pow2(ceil(rows / ceil(classes / in_features)))
    assert o().chunk_rows(37, 16, 50) == 16  # ceil(37 / 4) = 10 -> 16
    assert o(chunking_method="aspect_ratio:2").chunk_rows(37, 16, 50) == 8
    assert o().chunk_rows(1000, 64, 32000) == 2  # ceil(1000 / 500) = 2
    assert o(chunking_method=None).chunk_rows(37, 16, 50) == 37  # one chunk
    assert o(chunking_method=None, batch_chunk_size=5).chunk_rows(37, 16, 50) == 5
    with pytest.raises(ValueError, match="give different chunk sizes"):
        o(batch_chunk_size=5).chunk_rows(37, 16, 50)
    with pytest.raises(ValueError, match="chunking_method must be"):
        o(chunking_method="halves")
    with pytest.raises(ValueError, match="batch_chunk_size must be a positive integer"):
        o(batch_chunk_size=0)


def test_a_second_backward_needs_allow_retain_graph():
    x = ts.tensor(X, requires_grad=True)
    loss = F.linear_cross_entropy(x, ts.tensor(W), ts.tensor(TARGET), options=CHUNKED)
    loss.backward(retain_graph=True)
    with pytest.raises(RuntimeError, match="allow_retain_graph=True"):
        loss.backward()
    keep = ts.nn.LinearCrossEntropyOptions(allow_retain_graph=True, batch_chunk_size=8, chunking_method=None)
    x = ts.tensor(X, requires_grad=True)
    loss = F.linear_cross_entropy(x, ts.tensor(W), ts.tensor(TARGET), options=keep)
    loss.backward(retain_graph=True)
    first = to_np(x.grad).copy()
    loss.backward()
    np.testing.assert_allclose(to_np(x.grad), 2 * first)


def test_errors():
    x, w, t = ts.tensor(X), ts.tensor(W), ts.tensor(TARGET)
    with pytest.raises(RuntimeError, match="expected input with dimensionality 1 or 2, got 3"):
        F.linear_cross_entropy(x[None], w, t)
    with pytest.raises(RuntimeError, match="expected equal input and linear_weight last dimensions"):
        F.linear_cross_entropy(x[:, :5], w, t)
    with pytest.raises(RuntimeError, match=r"expected linear_bias shape \(50,\), got \(49,\)"):
        F.linear_cross_entropy(x, w, t, linear_bias=ts.zeros(49))
    with pytest.raises(IndexError, match="target 50 is out of bounds for 50 classes"):
        F.linear_cross_entropy(x, w, ts.full((N,), 50), options=CHUNKED)


def test_module():
    ts.manual_seed(0)
    m = ts.nn.LinearCrossEntropyLoss(5, 10, out_features=(4, 3), bias=True)
    assert repr(m).splitlines()[1].strip() == ("in_features=5, num_classes=10, out_features=(4, 3), bias=True, "
                                                "reduction=mean, ignore_index=None, label_smoothing=0.0, options=None")
    assert tuple(m.linear.weight.shape) == (120, 5) and tuple(m.linear.bias.shape) == (120,)
    x = ts.randn(2, 5)
    target = ts.randint(0, 10, (2, 4, 3))
    want = F.cross_entropy((x @ m.linear.weight.t() + m.linear.bias).reshape(2, 10, 4, 3), target)
    np.testing.assert_allclose(to_np(m(x, target)), to_np(want), rtol=1e-6)
    with pytest.raises(RuntimeError, match=r"expected weight shape to be \(10,\), got \(3,\)"):
        ts.nn.LinearCrossEntropyLoss(5, 10, weight=ts.ones(3))
