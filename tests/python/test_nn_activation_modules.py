"""The activation functions and modules of torch.nn beyond ReLU/GELU/SiLU: values and gradients
against NumPy formulas, and against torch itself when it is importable."""
import numpy as np
import pytest

import tessera as ts
import tessera.nn as nn
import tessera.nn.functional as F

X = np.linspace(-30.0, 30.0, 241).astype(np.float32).reshape(1, 241)
SMALL = np.array([[-4.0, -3.0, -1.5, -0.4, 0.0, 0.3, 1.0, 2.5, 3.0, 7.0]], dtype=np.float32)


def _softplus(x, beta=1.0, threshold=20.0):
    return np.where(beta * x > threshold, x, np.log1p(np.exp(np.minimum(beta * x, threshold))) / beta)


NUMPY_FORMS = {
    "leaky_relu": (lambda t: F.leaky_relu(t, 0.2), lambda x: np.where(x > 0, x, 0.2 * x)),
    "elu": (lambda t: F.elu(t), lambda x: np.where(x > 0, x, np.expm1(np.minimum(x, 0)))),
    "selu": (F.selu, lambda x: 1.0507009873554805 * np.where(x > 0, x, 1.6732632423543772 * np.expm1(np.minimum(x, 0)))),
    "celu": (lambda t: F.celu(t, 2.0), lambda x: np.where(x > 0, x, 2.0 * np.expm1(np.minimum(x, 0) / 2.0))),
    "hardtanh": (lambda t: F.hardtanh(t, -2.0, 3.0), lambda x: np.clip(x, -2.0, 3.0)),
    "relu6": (F.relu6, lambda x: np.clip(x, 0.0, 6.0)),
    "hardsigmoid": (F.hardsigmoid, lambda x: np.clip(x + 3, 0, 6) / 6),
    "hardswish": (F.hardswish, lambda x: x * np.clip(x + 3, 0, 6) / 6),
    "softplus": (lambda t: F.softplus(t, 2.0, 10.0), lambda x: _softplus(x, 2.0, 10.0)),
    "mish": (F.mish, lambda x: x * np.tanh(_softplus(x))),
    "softsign": (F.softsign, lambda x: x / (1 + np.abs(x))),
    "logsigmoid": (F.logsigmoid, lambda x: -_softplus(-x.astype(np.float64), 1.0, 1e9)),
    "tanhshrink": (F.tanhshrink, lambda x: x - np.tanh(x)),
    "softshrink": (lambda t: F.softshrink(t, 1.0), lambda x: np.where(np.abs(x) > 1, x - np.sign(x), 0)),
    "hardshrink": (lambda t: F.hardshrink(t, 1.0), lambda x: np.where(np.abs(x) > 1, x, 0)),
    "threshold": (lambda t: F.threshold(t, 0.5, -7.0), lambda x: np.where(x > 0.5, x, -7.0)),
}


@pytest.mark.parametrize("name", sorted(NUMPY_FORMS))
@pytest.mark.parametrize("values", [X, SMALL], ids=["wide", "small"])
def test_activation_matches_its_formula(name, values):
    fn, reference = NUMPY_FORMS[name]
    got = fn(ts.tensor(values)).numpy()
    np.testing.assert_allclose(got, reference(values), rtol=1e-5, atol=1e-5)


def test_glu_prelu_softmin():
    x = np.random.default_rng(0).standard_normal((3, 4, 6)).astype(np.float32)
    a, b = x[..., :3], x[..., 3:]
    np.testing.assert_allclose(F.glu(ts.tensor(x)).numpy(), a / (1 + np.exp(-b)), rtol=1e-5, atol=1e-6)
    w = np.array([0.1, 0.2, 0.3, 0.4], dtype=np.float32)
    np.testing.assert_allclose(F.prelu(ts.tensor(x), ts.tensor(w)).numpy(),
                               np.where(x > 0, x, x * w[None, :, None]), rtol=1e-6)
    e = np.exp(-x - (-x).max(axis=1, keepdims=True))
    np.testing.assert_allclose(F.softmin(ts.tensor(x), dim=1).numpy(), e / e.sum(axis=1, keepdims=True), rtol=1e-5)


def test_bad_arguments_are_named():
    with pytest.raises(RuntimeError, match="Halving dimension must be even"):
        F.glu(ts.ones(2, 3))
    with pytest.raises(RuntimeError, match="prelu: mismatch of parameter numbers"):
        F.prelu(ts.ones(2, 3, 4), ts.ones(2))
    with pytest.raises(ValueError, match="hardtanh: min_val"):
        F.hardtanh(ts.ones(2), 1.0, -1.0)
    with pytest.raises(TypeError, match="unexpected keyword argument 'slope'"):
        nn.LeakyReLU(slope=0.1)


def test_inplace_forms_write_into_the_input():
    t = ts.tensor(SMALL.copy())
    out = F.leaky_relu(t, 0.1, inplace=True)
    np.testing.assert_allclose(t.numpy(), np.where(SMALL > 0, SMALL, 0.1 * SMALL), rtol=1e-6)
    np.testing.assert_allclose(out.numpy(), t.numpy())


def test_modules_carry_their_arguments_and_train():
    model = nn.Sequential(nn.Linear(10, 8), nn.PReLU(8), nn.Linear(8, 8), nn.ELU(0.5), nn.Linear(8, 2),
                          nn.Hardswish())
    assert "alpha=0.5" in repr(model)
    x = ts.tensor(SMALL)
    model(x).sum().backward()
    prelu = model[1]
    assert prelu.weight.grad is not None and prelu.weight.grad.shape == (8,)


MODULE_CASES = [
    ("LeakyReLU", (0.2,)), ("ELU", (0.7,)), ("SELU", ()), ("CELU", (1.5,)), ("Hardtanh", (-0.5, 2.0)), ("ReLU6", ()),
    ("Hardsigmoid", ()), ("Hardswish", ()), ("Softplus", (1.5, 5.0)), ("Mish", ()), ("Softsign", ()),
    ("LogSigmoid", ()), ("Tanhshrink", ()), ("Softshrink", (0.7,)), ("Hardshrink", (0.7,)), ("Threshold", (0.1, 20.0)),
    ("GLU", (1,)), ("Softmin", (1,)),
]


@pytest.mark.torch
@pytest.mark.parametrize("name,args", MODULE_CASES, ids=[c[0] for c in MODULE_CASES])
def test_module_value_and_gradient_match_torch(name, args):
    import torch
    x = np.random.default_rng(1).uniform(-5, 5, (4, 6)).astype(np.float32)
    ours, theirs = getattr(nn, name)(*args), getattr(torch.nn, name)(*args)
    tx, rx = ts.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    y, ry = ours(tx), theirs(rx)
    np.testing.assert_allclose(y.detach().numpy(), ry.detach().numpy(), rtol=1e-5, atol=1e-6)
    g = np.random.default_rng(2).standard_normal(tuple(ry.shape)).astype(np.float32)
    y.backward(ts.tensor(g))
    ry.backward(torch.tensor(g))
    np.testing.assert_allclose(tx.grad.numpy(), rx.grad.numpy(), rtol=1e-4, atol=1e-5)
    assert repr(ours) == repr(theirs)


@pytest.mark.torch
def test_prelu_matches_torch():
    import torch
    x = np.random.default_rng(3).standard_normal((2, 3, 5)).astype(np.float32)
    ours, theirs = nn.PReLU(3, 0.1), torch.nn.PReLU(3, 0.1)
    tx, rx = ts.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    ours(tx).sum().backward()
    theirs(rx).sum().backward()
    np.testing.assert_allclose(ours.weight.grad.numpy(), theirs.weight.grad.numpy(), rtol=1e-5)
    np.testing.assert_allclose(tx.grad.numpy(), rx.grad.numpy(), rtol=1e-5)
    assert repr(ours) == repr(theirs)
