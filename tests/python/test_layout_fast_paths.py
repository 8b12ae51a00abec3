"""Layouts the fast paths depend on: a transposed copy (tiled) gives the same values as NumPy in
every element size and batch layout, a broadcast value copies as a fill, and a weight used transposed (Linear) gets a contiguous
gradient, so accumulating it is a plain copy."""
import numpy as np
import pytest

import tessera as ts


@pytest.mark.parametrize("dtype", ["uint8", "int16", "float32", "float64", "complex64"])
@pytest.mark.parametrize("shape,perm", [((300, 517), (1, 0)), ((3, 70, 129), (0, 2, 1)), ((5, 64, 64), (2, 1, 0)),
                                        ((2, 3, 65, 33), (0, 1, 3, 2))])
def test_transposed_copy_matches_numpy(dtype, shape, perm):
    rng = np.random.default_rng(0)
    a = (rng.standard_normal(shape) * 50).astype(dtype)
    t = ts.from_numpy(a).permute(*perm)
    out = t.contiguous()
    assert out.is_contiguous()
    np.testing.assert_array_equal(out.numpy(), np.ascontiguousarray(a.transpose(perm)))
    dst = ts.zeros(*t.shape, dtype=t.dtype)
    dst.copy_(t)
    np.testing.assert_array_equal(dst.numpy(), a.transpose(perm))


@pytest.mark.parametrize("dtype", ["uint8", "int16", "float32", "float64", "complex64"])
def test_broadcast_copy_fills(dtype):
    """An expanded scalar (sum().backward()'s gradient) or row, made contiguous or copied in."""
    a = np.array(3, dtype=dtype) if dtype != "complex64" else np.array(3 - 2j, dtype=dtype)
    t = ts.from_numpy(a).expand(5, 7, 300)
    np.testing.assert_array_equal(t.contiguous().numpy(), np.broadcast_to(a, (5, 7, 300)))
    dst = ts.zeros(5, 7, 300, dtype=t.dtype).permute(2, 0, 1)  # a strided destination takes the plain loop
    dst.copy_(ts.from_numpy(a).expand(300, 5, 7))
    np.testing.assert_array_equal(dst.numpy(), np.broadcast_to(a, (300, 5, 7)))
    row = np.arange(300).astype(dtype)
    np.testing.assert_array_equal(ts.from_numpy(row).expand(4, 300).contiguous().numpy(), np.broadcast_to(row, (4, 300)))


def test_linear_weight_gradient_is_contiguous_and_right():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((16, 40)).astype("float32")
    lin = ts.nn.Linear(40, 30)
    y = lin(ts.from_numpy(x))
    g = rng.standard_normal((16, 30)).astype("float32")
    y.backward(ts.from_numpy(g))
    assert lin.weight.grad.is_contiguous()
    np.testing.assert_allclose(lin.weight.grad.numpy(), g.T @ x, rtol=1e-5, atol=1e-5)
    # a batch of sequences (the folded path): d(sum)/dW = ones(out) outer the summed rows of x
    x3 = ts.randn(4, 5, 40)
    lin.weight.grad = None
    lin(x3).sum().backward()
    assert lin.weight.grad.is_contiguous()
    np.testing.assert_allclose(lin.weight.grad.numpy(), np.outer(np.ones(30), x3.numpy().reshape(-1, 40).sum(0)),
                               rtol=1e-4, atol=1e-4)


def _complex(shape, seed):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype("complex64")


def test_complex_weight_used_transposed():
    w0, a0 = _complex((6, 3), 2), _complex((4, 3), 3)
    w = ts.from_numpy(w0).requires_grad_()
    (ts.from_numpy(a0) @ w.t()).abs().sum().backward()
    assert w.grad.shape == (6, 3) and w.grad.is_contiguous()
    # d sum|y| / d conj(W) as torch defines it: (y / |y|)^T-weighted rows of conj(a)
    y = a0 @ w0.T
    np.testing.assert_allclose(w.grad.numpy(), (y / np.abs(y)).T @ a0.conj() * 1, rtol=1e-4, atol=1e-4)
