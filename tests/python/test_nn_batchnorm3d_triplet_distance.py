"""nn.BatchNorm3d and nn.TripletMarginWithDistanceLoss: against NumPy definitions, and against
PyTorch on the same inputs when it is importable."""
import numpy as np
import pytest

import tessera as ts
from conftest import HAVE_TORCH

try:
    import torch
except ImportError:
    torch = None

needs_torch = pytest.mark.skipif(not HAVE_TORCH, reason="torch not importable")


def _volume(seed=0):
    return np.random.default_rng(seed).standard_normal((4, 3, 2, 5, 6)).astype(np.float32)


def test_batchnorm3d_normalises_each_channel_over_batch_and_volume():
    x = _volume()
    bn = ts.nn.BatchNorm3d(3, momentum=0.5)
    y = bn(ts.tensor(x)).detach().numpy()
    mean = x.mean(axis=(0, 2, 3, 4), keepdims=True)
    var = x.var(axis=(0, 2, 3, 4), keepdims=True)
    np.testing.assert_allclose(y, (x - mean) / np.sqrt(var + 1e-5), atol=1e-5)
    n = x.size / 3
    np.testing.assert_allclose(bn.running_var.numpy(), 0.5 + 0.5 * var.ravel() * n / (n - 1), rtol=1e-5)
    bn.eval()
    y_eval = bn(ts.tensor(x)).detach().numpy()
    rm, rv = bn.running_mean.numpy().reshape(1, 3, 1, 1, 1), bn.running_var.numpy().reshape(1, 3, 1, 1, 1)
    np.testing.assert_allclose(y_eval, (x - rm) / np.sqrt(rv + 1e-5), atol=1e-5)
    with pytest.raises(ValueError, match="expected 5D input"):
        bn(ts.ones(2, 3, 4))


@needs_torch
@pytest.mark.parametrize("train", [True, False])
def test_batchnorm3d_matches_torch_forward_and_backward(train):
    x = _volume(1)
    ours, theirs = ts.nn.BatchNorm3d(3).train(train), torch.nn.BatchNorm3d(3).train(train)
    a, b = ts.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    ya, yb = ours(a), theirs(b)
    np.testing.assert_allclose(ya.detach().numpy(), yb.detach().numpy(), atol=1e-5)
    (ya * ya).sum().backward()
    (yb * yb).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), atol=1e-4)
    np.testing.assert_allclose(ours.weight.grad.numpy(), theirs.weight.grad.numpy(), rtol=1e-4)
    np.testing.assert_allclose(ours.running_var.numpy(), theirs.running_var.numpy(), rtol=1e-5)


def _triplets(seed=2):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((5, 8)).astype(np.float32) for _ in range(3)]


def test_triplet_margin_with_distance_loss_against_numpy():
    a, p, n = _triplets()
    dist = lambda x, y: np.sqrt(((x - y + 1e-6) ** 2).sum(-1))  # pairwise_distance's default
    expected = np.maximum(dist(a, p) - np.minimum(dist(a, n), dist(p, n)) + 0.5, 0).sum()
    loss = ts.nn.TripletMarginWithDistanceLoss(margin=0.5, swap=True, reduction="sum")
    np.testing.assert_allclose(float(loss(ts.tensor(a), ts.tensor(p), ts.tensor(n))), expected, rtol=1e-5)
    l1 = lambda x, y: (x - y).abs().sum(-1)
    custom = ts.nn.TripletMarginWithDistanceLoss(distance_function=l1, reduction="none")
    got = custom(ts.tensor(a), ts.tensor(p), ts.tensor(n)).numpy()
    np.testing.assert_allclose(got, np.maximum(np.abs(a - p).sum(-1) - np.abs(a - n).sum(-1) + 1.0, 0), rtol=1e-5)
    with pytest.raises(ValueError, match="margin to be greater than 0"):
        ts.nn.TripletMarginWithDistanceLoss(margin=0.0)
    with pytest.raises(RuntimeError, match="same number of dimensions"):
        ts.nn.functional.triplet_margin_with_distance_loss(ts.tensor(a), ts.tensor(p), ts.tensor(n[0]))


@needs_torch
def test_triplet_margin_with_distance_loss_matches_torch_with_gradients():
    a, p, n = _triplets(3)
    ours = [ts.tensor(v, requires_grad=True) for v in (a, p, n)]
    theirs = [torch.tensor(v, requires_grad=True) for v in (a, p, n)]
    cos = lambda f: (lambda x, y: 1.0 - f.cosine_similarity(x, y))
    la = ts.nn.TripletMarginWithDistanceLoss(distance_function=cos(ts.nn.functional), swap=True)(*ours)
    lb = torch.nn.TripletMarginWithDistanceLoss(distance_function=cos(torch.nn.functional), swap=True)(*theirs)
    np.testing.assert_allclose(float(la.detach()), float(lb.detach()), rtol=1e-5)
    la.backward()
    lb.backward()
    for x, y in zip(ours, theirs):
        np.testing.assert_allclose(x.grad.numpy(), y.grad.numpy(), atol=1e-5)
