"""AdaptiveAvgPool1d, the *_with_indices pooling forms, FractionalMaxPool3d, the in-place functional
activations (elu_, ..., threshold_), NLLLoss2d and Container: values and gradients against torch on
the same inputs, and their errors."""
import warnings

import numpy as np
import pytest

import tessera as ts
import tessera.nn as nn
import tessera.nn.functional as F
from conftest import T, close, from_torch, to_np

RNG = np.random.default_rng(0)


def test_adaptive_avg_pool1d_windows():
    x = np.arange(14, dtype=np.float32).reshape(1, 2, 7)
    out = to_np(nn.AdaptiveAvgPool1d(3)(T(x)))
    bounds = [(0, 3), (2, 5), (4, 7)]  # [floor(i L / n), ceil((i + 1) L / n))
    np.testing.assert_allclose(out, np.stack([x[..., a:b].mean(-1) for a, b in bounds], -1), rtol=1e-6)
    assert tuple(F.adaptive_avg_pool1d(T(x[0]), (3,)).shape) == (2, 3)
    assert repr(nn.AdaptiveAvgPool1d(3)) == "AdaptiveAvgPool1d(output_size=3)"


def test_adaptive_avg_pool1d_errors():
    with pytest.raises(RuntimeError, match="adaptive_avg_pool1d.*2 to 3 dimensions"):
        F.adaptive_avg_pool1d(ts.ones(1, 2, 3, 4), 2)
    with pytest.raises(RuntimeError, match="should contain one int"):
        F.adaptive_avg_pool1d(ts.ones(2, 3), (2, 3))
    with pytest.raises(TypeError, match="output_size"):
        F.adaptive_avg_pool1d(ts.ones(2, 3), None)


def test_with_indices_forms_return_pairs():
    x = T(RNG.standard_normal((2, 3, 8)))
    out, idx = F.max_pool1d_with_indices(x, 3, 2)
    ref_out, ref_idx = F.max_pool1d(x, 3, 2, return_indices=True)
    assert np.array_equal(to_np(out), to_np(ref_out)) and np.array_equal(to_np(idx), to_np(ref_idx))
    assert len(F.adaptive_max_pool1d_with_indices(x, 3)) == 2
    assert len(F.adaptive_max_pool2d_with_indices(T(RNG.standard_normal((2, 5, 6))), (2, 3))) == 2


def test_inplace_activations_modify_and_return_the_input():
    for fn, args in [(F.elu_, ()), (F.celu_, (0.5,)), (F.selu_, ()), (F.hardtanh_, (-0.5, 0.5)),
                     (F.leaky_relu_, (0.2,)), (F.threshold_, (0.1, 7.0)), (F.rrelu_, ())]:
        x = T(RNG.standard_normal(6))
        name = fn.__name__[:-1]
        expected = to_np(getattr(F, name)(x.clone(), *args))
        out = fn(x, *args)
        assert out is x, name
        np.testing.assert_allclose(to_np(x), expected, rtol=1e-6, err_msg=name)


def test_has_torch_function_stubs():
    x = ts.ones(2)
    assert F.has_torch_function((x,)) is False
    assert F.has_torch_function_unary(x) is False
    assert F.has_torch_function_variadic(x, x) is False


def test_deprecated_modules_warn():
    with pytest.warns(FutureWarning, match="NLLLoss2d"):
        loss = nn.NLLLoss2d()
    logp = F.log_softmax(T(RNG.standard_normal((2, 3, 4, 4))), 1)
    target = ts.tensor(RNG.integers(0, 3, (2, 4, 4)))
    close(loss(logp, target), to_np(nn.NLLLoss()(logp, target)))
    with pytest.warns(FutureWarning, match="nn.Container"):
        c = nn.Container(a=nn.Linear(2, 3))
    assert isinstance(c.a, nn.Linear) and len(list(c.parameters())) == 2


def test_fractional_max_pool3d_module_checks():
    with pytest.raises(ValueError, match="either an output size, or a pooling ratio"):
        nn.FractionalMaxPool3d(2)
    with pytest.raises(ValueError, match="only one of"):
        nn.FractionalMaxPool3d(2, output_size=3, output_ratio=0.5)
    with pytest.raises(ValueError, match="between 0 and 1"):
        nn.FractionalMaxPool3d(2, output_ratio=(0.5, 1.5, 0.5))
    out = nn.FractionalMaxPool3d(2, output_ratio=0.5)(T(RNG.standard_normal((2, 6, 8, 10))))
    assert tuple(out.shape) == (2, 3, 4, 5)


@pytest.mark.torch
def test_adaptive_avg_pool1d_matches_torch():
    import torch
    for shape, size in [((2, 3, 10), 4), ((3, 7), 7), ((1, 2, 5), 8), ((2, 2, 9), 1)]:
        xt = torch.randn(*shape, requires_grad=True)
        x = from_torch(xt, requires_grad=True)
        out = nn.AdaptiveAvgPool1d(size)(x)
        ref = torch.nn.AdaptiveAvgPool1d(size)(xt)
        close(out, ref)
        g = torch.randn(ref.shape)
        out.backward(from_torch(g))
        ref.backward(g)
        close(x.grad, xt.grad)


@pytest.mark.torch
@pytest.mark.parametrize("batched", [True, False])
def test_fractional_max_pool3d_matches_torch(batched):
    import torch
    xt = torch.randn(2, 3, 9, 10, 11, requires_grad=True)
    samples = torch.rand(2, 3, 3)
    if not batched:
        xt = xt[0].detach().requires_grad_()
        samples = samples[:1]
    x = from_torch(xt, requires_grad=True)
    kw = dict(output_size=(5, 4, 6), return_indices=True)
    out, idx = F.fractional_max_pool3d(x, (2, 3, 2), _random_samples=from_torch(samples), **kw)
    ref, ref_idx = torch.nn.functional.fractional_max_pool3d(xt, (2, 3, 2), _random_samples=samples, **kw)
    close(out, ref)
    assert np.array_equal(to_np(idx), ref_idx.numpy())
    g = torch.randn(ref.shape)
    out.backward(from_torch(g))
    ref.backward(g)
    close(x.grad, xt.grad)
    module = nn.FractionalMaxPool3d(2, output_ratio=(0.5, 0.6, 0.7), _random_samples=from_torch(samples))
    torch_module = torch.nn.FractionalMaxPool3d(2, output_ratio=(0.5, 0.6, 0.7), _random_samples=samples)
    close(module(x), torch_module(xt))


@pytest.mark.torch
def test_inplace_activations_match_torch():
    import torch
    cases = [("elu_", ()), ("celu_", (0.7,)), ("selu_", ()), ("hardtanh_", (-0.3, 0.8)), ("leaky_relu_", (0.1,)),
             ("threshold_", (0.2, -3.0)), ("rrelu_", (0.1, 0.3, False))]
    for name, args in cases:
        xt = torch.randn(4, 5)
        x = from_torch(xt)
        getattr(torch.nn.functional, name)(xt, *args)
        getattr(F, name)(x, *args)
        close(x, xt)


@pytest.mark.torch
def test_with_indices_match_torch():
    import torch
    xt = torch.randn(2, 3, 9)
    for fname, args in [("max_pool1d_with_indices", (3, 2, 1)), ("adaptive_max_pool1d_with_indices", (4,))]:
        out, idx = getattr(F, fname)(from_torch(xt), *args)
        ref, ref_idx = getattr(torch.nn.functional, fname)(xt, *args)
        close(out, ref)
        assert np.array_equal(to_np(idx), ref_idx.numpy())
    x2 = torch.randn(2, 3, 7, 9)
    out, idx = F.adaptive_max_pool2d_with_indices(from_torch(x2), (3, 4))
    ref, ref_idx = torch.nn.functional.adaptive_max_pool2d_with_indices(x2, (3, 4))
    close(out, ref)
    assert np.array_equal(to_np(idx), ref_idx.numpy())
