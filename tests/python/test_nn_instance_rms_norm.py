"""InstanceNorm1d/2d/3d and RMSNorm: against NumPy, and against torch (values, gradients, running
stats, reprs) when it is importable."""
import numpy as np
import pytest

import tessera as ts
import tessera.nn as nn

X = np.random.default_rng(0).standard_normal((4, 3, 5, 6)).astype(np.float32) * 2 + 1


def test_instance_norm_normalizes_each_plane():
    y = nn.InstanceNorm2d(3)(ts.tensor(X)).numpy()
    mean, var = X.mean(axis=(2, 3), keepdims=True), X.var(axis=(2, 3), keepdims=True)
    np.testing.assert_allclose(y, (X - mean) / np.sqrt(var + 1e-5), rtol=1e-4, atol=1e-5)


def test_rms_norm_matches_its_formula():
    w = np.linspace(0.5, 1.5, 6).astype(np.float32)
    m = nn.RMSNorm(6, eps=1e-6)
    m.weight.data = ts.tensor(w)
    y = m(ts.tensor(X)).detach().numpy()
    np.testing.assert_allclose(y, X / np.sqrt((X * X).mean(-1, keepdims=True) + 1e-6) * w, rtol=1e-5, atol=1e-6)


def test_bad_input():
    with pytest.raises(ValueError, match=r"expected 3D or 4D input \(got 2D input\)"):
        nn.InstanceNorm2d(3)(ts.ones(3, 4))
    with pytest.raises(RuntimeError, match="rms_norm: given normalized_shape=\\[5\\]"):
        nn.RMSNorm(5)(ts.tensor(X))


@pytest.mark.torch
@pytest.mark.parametrize("kwargs", [{}, {"affine": True}, {"track_running_stats": True, "momentum": 0.3},
                                    {"affine": True, "track_running_stats": True}])
@pytest.mark.parametrize("dims", [1, 2, 3])
def test_instance_norm_matches_torch(kwargs, dims):
    import torch
    x = X.reshape(4, 3, 30) if dims == 1 else X if dims == 2 else X.reshape(4, 3, 5, 3, 2)
    ours, theirs = getattr(nn, f"InstanceNorm{dims}d")(3, **kwargs), getattr(torch.nn, f"InstanceNorm{dims}d")(3, **kwargs)
    assert repr(ours) == repr(theirs)
    g = np.random.default_rng(1).standard_normal(x.shape).astype(np.float32)
    for _ in range(2):
        tx, rx = ts.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
        y, ry = ours(tx), theirs(rx)
        np.testing.assert_allclose(y.detach().numpy(), ry.detach().numpy(), rtol=1e-4, atol=1e-5)
        y.backward(ts.tensor(g))
        ry.backward(torch.tensor(g))
        np.testing.assert_allclose(tx.grad.numpy(), rx.grad.numpy(), rtol=1e-3, atol=1e-4)
    if kwargs.get("track_running_stats"):
        np.testing.assert_allclose(ours.running_mean.numpy(), theirs.running_mean.numpy(), rtol=1e-5)
        np.testing.assert_allclose(ours.running_var.numpy(), theirs.running_var.numpy(), rtol=1e-5)
        ours.eval()
        theirs.eval()
        np.testing.assert_allclose(ours(ts.tensor(x)).detach().numpy(), theirs(torch.tensor(x)).detach().numpy(),
                                   rtol=1e-4, atol=1e-5)
    if kwargs.get("affine"):
        np.testing.assert_allclose(ours.weight.grad.numpy(), theirs.weight.grad.numpy(), rtol=1e-3, atol=1e-4)


@pytest.mark.torch
@pytest.mark.parametrize("shape,eps", [((6,), None), ((5, 6), 1e-3)])
def test_rms_norm_matches_torch(shape, eps):
    import torch
    ours, theirs = nn.RMSNorm(shape, eps=eps), torch.nn.RMSNorm(shape, eps=eps)
    assert repr(ours) == repr(theirs)
    tx, rx = ts.tensor(X, requires_grad=True), torch.tensor(X, requires_grad=True)
    y, ry = ours(tx), theirs(rx)
    np.testing.assert_allclose(y.detach().numpy(), ry.detach().numpy(), rtol=1e-5, atol=1e-6)
    y.sum().backward()
    ry.sum().backward()
    np.testing.assert_allclose(tx.grad.numpy(), rx.grad.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(ours.weight.grad.numpy(), theirs.weight.grad.numpy(), rtol=1e-4, atol=1e-4)
