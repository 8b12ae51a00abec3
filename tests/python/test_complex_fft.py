"""Complex dtypes and torch.fft: values against NumPy (always) and PyTorch (when importable),
gradients against PyTorch's complex autograd, printing, NumPy interop and bad input."""
import numpy as np
import pytest

import tessera as ts
from conftest import to_np

RNG = np.random.default_rng(7)


def crandn(*shape, dtype=np.complex128):
    return (RNG.standard_normal(shape) + 1j * RNG.standard_normal(shape)).astype(dtype)


# ---------------------------------------------------------------------------- dtypes and interop
def test_complex_dtypes_names_and_promotion():
    assert ts.complex64 is ts.cfloat and ts.complex128 is ts.cdouble
    assert ts.complex64.is_complex and not ts.complex64.is_floating_point and ts.complex64.itemsize == 8
    assert ts.complex128.itemsize == 16
    z = ts.tensor([1 + 2j])
    assert z.dtype == ts.complex64 and z.is_complex()
    assert (ts.ones(2, dtype=ts.float64) + z).dtype == ts.complex128   # float64 widens the parts
    assert (ts.ones(2, dtype=ts.int64) * z).dtype == ts.complex64
    assert (ts.ones(2) * 1j).dtype == ts.complex64
    assert (ts.ones(2, dtype=ts.float64) * 1j).dtype == ts.complex128
    assert ts.tensor([1, 2.5, 3j], dtype=ts.complex128).dtype == ts.complex128


def test_numpy_round_trip_and_items():
    a = crandn(3, 4, dtype=np.complex64)
    t = ts.from_numpy(a)
    assert t.dtype == ts.complex64
    np.testing.assert_array_equal(t.numpy(), a)
    assert ts.tensor(a).tolist() == a.tolist()
    assert complex(ts.tensor(2 - 3j)) == 2 - 3j and ts.tensor([2 - 3j]).item() == 2 - 3j


def test_repr_formats_parts():
    assert repr(ts.tensor([1 + 2j, 3 - 4j])) == "tensor([1.+2.j, 3.-4.j])"
    assert repr(ts.tensor([0.5 - 1j], dtype=ts.complex128)) == "tensor([0.5000-1.j], dtype=tessera.complex128)"  # as torch


# ---------------------------------------------------------------------------- element-wise and views
@pytest.mark.parametrize("np_dtype", [np.complex64, np.complex128])
def test_arithmetic_math_and_reductions_match_numpy(np_dtype):
    a, b = crandn(4, 5, dtype=np_dtype), crandn(5, dtype=np_dtype)
    x, y = ts.tensor(a), ts.tensor(b)
    rtol = 1e-5 if np_dtype == np.complex64 else 1e-12
    for got, want in [(x + y, a + b), (x - y, a - b), (x * y, a * b), (x / y, a / b), (-x, -a), (x ** 2, a ** 2),
                      (ts.exp(x), np.exp(a)), (ts.log(x), np.log(a)), (ts.sqrt(x), np.sqrt(a)),
                      (ts.sin(x), np.sin(a)), (ts.tanh(x), np.tanh(a)), (x.sum(1), a.sum(1)),
                      (x.mean(), a.mean()), (x.prod(0), a.prod(0)), (ts.conj(x), np.conj(a)),
                      (ts.sgn(x), a / np.abs(a))]:
        np.testing.assert_allclose(got.numpy(), want, rtol=rtol, atol=rtol)
    np.testing.assert_allclose(ts.abs(x).numpy(), np.abs(a), rtol=rtol)
    assert ts.abs(x).dtype == (ts.float32 if np_dtype == np.complex64 else ts.float64)
    np.testing.assert_allclose(ts.angle(x).numpy(), np.angle(a), rtol=rtol, atol=rtol)
    assert (x == x).all() and not (x != x).any() and not (x == y).all()


def test_real_imag_are_views_and_assignable():
    z = ts.tensor(crandn(3, dtype=np.complex64))
    base = z.numpy().copy()
    r = z.real
    r.mul_(2)   # writes the real parts of z
    np.testing.assert_allclose(z.numpy(), 2 * base.real + 1j * base.imag, rtol=1e-6)
    z.imag = ts.zeros(3)
    np.testing.assert_allclose(z.numpy(), 2 * base.real, rtol=1e-6)
    vr = ts.view_as_real(z)
    assert vr.shape == (3, 2) and vr.dtype == ts.float32 and vr._same_storage(z)
    back = ts.view_as_complex(vr)
    assert back._same_storage(z) and back.dtype == ts.complex64
    np.testing.assert_allclose(ts.complex(ts.tensor([1.0]), ts.tensor([2.0])).numpy(), [1 + 2j])
    np.testing.assert_allclose(ts.polar(ts.tensor([2.0]), ts.tensor([np.pi / 2])).numpy(), [2j], atol=1e-6)


def test_complex_bad_input():
    with pytest.raises(TypeError, match="imag"):
        ts.ones(2).imag
    with pytest.raises(ValueError, match="view_as_complex.*last dimension of size 2"):
        ts.view_as_complex(ts.ones(3, 3))
    with pytest.raises(ValueError, match="stride 1"):
        ts.view_as_complex(ts.ones(2, 4).mT)
    with pytest.raises(TypeError, match="complex numbers are not ordered"):
        ts.tensor([1j]) < ts.tensor([2j])
    with pytest.raises(TypeError, match="sgn"):
        ts.sign(ts.tensor([1j]))
    with pytest.raises(TypeError, match="can't be cast"):
        ts.add(ts.tensor([1j]), ts.ones(1), out=ts.empty(1))
    with pytest.raises(TypeError, match="complex"):
        ts.erf(ts.tensor([1j]))


# ---------------------------------------------------------------------------- products, scans, indexing
@pytest.mark.parametrize("np_dtype", [np.complex64, np.complex128])
def test_matrix_products_match_numpy(np_dtype):
    tol = 1e-5 if np_dtype == np.complex64 else 1e-12
    a, b, c = crandn(2, 5, 7, dtype=np_dtype), crandn(7, 3, dtype=np_dtype), crandn(5, 3, dtype=np_dtype)
    x, y = ts.tensor(a), ts.tensor(b)
    np.testing.assert_allclose(ts.matmul(x, y).numpy(), a @ b, rtol=tol, atol=tol)       # batch broadcast
    np.testing.assert_allclose(ts.bmm(x, ts.tensor(crandn(2, 7, 4, dtype=np_dtype))).shape, (2, 5, 4))
    at = ts.tensor(np.ascontiguousarray(a[0].T)).mT                                       # a transposed layout
    np.testing.assert_allclose(ts.mm(at, y).numpy(), a[0] @ b, rtol=tol, atol=tol)
    np.testing.assert_allclose(ts.addmm(ts.tensor(c), x[0], y, beta=2, alpha=0.5).numpy(), 2 * c + 0.5 * (a[0] @ b),
                               rtol=tol, atol=tol)
    np.testing.assert_allclose((x[0] @ ts.tensor(b[:, 0])).numpy(), a[0] @ b[:, 0], rtol=tol, atol=tol)  # mv
    np.testing.assert_allclose(ts.mm(ts.tensor(a[0][:, :0]), ts.tensor(b[:0])).numpy(), np.zeros((5, 3)))
    with pytest.raises(TypeError, match="same dtype"):
        ts.mm(x[0], ts.tensor(b.real.astype(np.float32)))


@pytest.mark.parametrize("np_dtype", [np.complex64, np.complex128])
def test_scans_and_indexed_writes_match_numpy(np_dtype):
    tol = 1e-5 if np_dtype == np.complex64 else 1e-12
    a = crandn(4, 6, dtype=np_dtype)
    x = ts.tensor(a)
    for d in (0, 1):
        np.testing.assert_allclose(ts.cumsum(x, d).numpy(), np.cumsum(a, d), rtol=tol, atol=tol)
        np.testing.assert_allclose(ts.cumprod(x, d).numpy(), np.cumprod(a, d), rtol=tol, atol=tol)
    assert ts.cumsum(x, 0).dtype == x.dtype
    idx = np.array([[0, 2, 2, 1, 0, 0]])
    want = np.zeros((3, 6), np_dtype)
    np.add.at(want, (idx[0], np.arange(6)), a[0])
    got = ts.zeros(3, 6, dtype=x.dtype).scatter_add(0, ts.tensor(idx), x[:1])
    np.testing.assert_allclose(got.numpy(), want, rtol=tol, atol=tol)
    z = ts.zeros(3, dtype=x.dtype)
    z.index_put_((ts.tensor([0, 0, 2]),), x[0, :3], accumulate=True)
    np.testing.assert_allclose(z.numpy(), [a[0, 0] + a[0, 1], 0, a[0, 2]], rtol=tol, atol=tol)
    z = ts.zeros(3, dtype=x.dtype).index_add(0, ts.tensor([1, 1]), x[0, :2], alpha=2)
    np.testing.assert_allclose(z.numpy(), [0, 2 * (a[0, 0] + a[0, 1]), 0], rtol=tol, atol=tol)
    # A scalar scattered into complex128 fills all 16 bytes of each element.
    filled = ts.zeros(2, 3, dtype=x.dtype).scatter(0, ts.tensor([[1, 0, 1]]), 1.5)
    np.testing.assert_array_equal(filled.numpy(), [[0, 1.5, 0], [1.5, 0, 1.5]])


PRODUCTS = {
    "matmul": lambda m: lambda t: m.matmul(m.complex(t[:3].mT, -t[:3].mT), t * 1j) ** 2,
    "mm": lambda m: lambda t: m.mm(m.complex(t, t.flip(0)), m.complex(t.mT, -t.mT)),
    "addmm": lambda m: lambda t: m.addmm(m.complex(t[:, :3], t[:, 3:6]), m.complex(t, t), m.complex(t.mT, t.mT)[:, :3]),
    "cumprod": lambda m: lambda t: m.cumprod(m.complex(t, t / 3), 1),
    "cumprod_zeros": lambda m: lambda t: m.cumprod(t * (t.abs() > 0.5), 1),
}


@pytest.mark.torch
@pytest.mark.parametrize("name", list(PRODUCTS))
def test_product_gradients_match_torch(name):
    import torch
    x = RNG.standard_normal((3, 8))
    x[1, 2] = x[2, 0] = x[2, 5] = 0.0  # zeros, for the cumprod formula's special case
    _compare_with_torch(PRODUCTS[name](ts), PRODUCTS[name](torch), x)


# ---------------------------------------------------------------------------- torch.fft vs NumPy
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [1, 7, 16, 30, 97])
def test_one_dim_transforms_match_numpy(dtype, n):
    x = RNG.standard_normal((3, n)).astype(dtype)
    z = crandn(3, n, dtype=np.complex64 if dtype == np.float32 else np.complex128)
    tol = 1e-4 if dtype == np.float32 else 1e-10
    X, Z = ts.tensor(x), ts.tensor(z)
    for norm in (None, "ortho", "forward"):
        np.testing.assert_allclose(ts.fft.fft(Z, norm=norm).numpy(), np.fft.fft(z, norm=norm), rtol=tol, atol=tol)
        np.testing.assert_allclose(ts.fft.ifft(Z, norm=norm).numpy(), np.fft.ifft(z, norm=norm), rtol=tol, atol=tol)
        np.testing.assert_allclose(ts.fft.fft(X, norm=norm).numpy(), np.fft.fft(x, norm=norm), rtol=tol, atol=tol)
        np.testing.assert_allclose(ts.fft.rfft(X, norm=norm).numpy(), np.fft.rfft(x, norm=norm), rtol=tol, atol=tol)
        np.testing.assert_allclose(ts.fft.irfft(Z, n=n, norm=norm).numpy(), np.fft.irfft(z, n=n, norm=norm),
                                   rtol=tol, atol=tol)
        np.testing.assert_allclose(ts.fft.hfft(Z, n=n, norm=norm).numpy(), np.fft.hfft(z, n=n, norm=norm),
                                   rtol=tol, atol=tol)
        np.testing.assert_allclose(ts.fft.ihfft(X, norm=norm).numpy(), np.fft.ihfft(x, norm=norm), rtol=tol, atol=tol)
    assert ts.fft.rfft(X).dtype == (ts.complex64 if dtype == np.float32 else ts.complex128)


def test_n_pads_or_cuts_and_dims_are_honoured():
    x = RNG.standard_normal((4, 6, 5))
    X = ts.tensor(x)
    np.testing.assert_allclose(ts.fft.fft(X, n=9, dim=1).numpy(), np.fft.fft(x, n=9, axis=1), atol=1e-10)
    np.testing.assert_allclose(ts.fft.fft(X, n=3, dim=0).numpy(), np.fft.fft(x, n=3, axis=0), atol=1e-10)
    np.testing.assert_allclose(ts.fft.fft2(X).numpy(), np.fft.fft2(x), atol=1e-10)
    np.testing.assert_allclose(ts.fft.fftn(X, s=(3, 8), dim=(0, 2)).numpy(), np.fft.fftn(x, s=(3, 8), axes=(0, 2)),
                               atol=1e-10)
    np.testing.assert_allclose(ts.fft.ifftn(X).numpy(), np.fft.ifftn(x), atol=1e-10)
    np.testing.assert_allclose(ts.fft.rfftn(X).numpy(), np.fft.rfftn(x), atol=1e-10)
    np.testing.assert_allclose(ts.fft.rfft2(X, norm="ortho").numpy(), np.fft.rfft2(x, norm="ortho"), atol=1e-10)
    spectrum = np.fft.rfftn(x)
    np.testing.assert_allclose(ts.fft.irfftn(ts.tensor(spectrum), s=x.shape).numpy(), x, atol=1e-10)
    np.testing.assert_allclose(ts.fft.irfft2(ts.tensor(spectrum), s=(6, 5)).numpy(), np.fft.irfft2(spectrum, s=(6, 5)),
                               atol=1e-10)
    # non-contiguous input, integer input (promoted to the default float)
    np.testing.assert_allclose(ts.fft.fft(X.transpose(0, 2)).numpy(), np.fft.fft(np.swapaxes(x, 0, 2)), atol=1e-10)
    ints = ts.arange(8)
    assert ts.fft.fft(ints).dtype == ts.complex64
    np.testing.assert_allclose(ts.fft.fft(ints).numpy(), np.fft.fft(np.arange(8)), atol=1e-4)


def test_shifts_and_frequencies():
    x = RNG.standard_normal((5, 6))
    np.testing.assert_array_equal(ts.fft.fftshift(ts.tensor(x)).numpy(), np.fft.fftshift(x))
    np.testing.assert_array_equal(ts.fft.ifftshift(ts.tensor(x), dim=1).numpy(), np.fft.ifftshift(x, axes=1))
    for n in (1, 6, 7):
        np.testing.assert_allclose(ts.fft.fftfreq(n, 0.25).numpy(), np.fft.fftfreq(n, 0.25), rtol=1e-6)
        np.testing.assert_allclose(ts.fft.rfftfreq(n).numpy(), np.fft.rfftfreq(n), rtol=1e-6)
    assert ts.fft.fftfreq(4, dtype=ts.float64).dtype == ts.float64


def test_large_transform_matches_numpy():
    x = RNG.standard_normal((8, 4096)).astype(np.float32)
    np.testing.assert_allclose(ts.fft.rfft(ts.tensor(x)).numpy(), np.fft.rfft(x), rtol=1e-3, atol=2e-3)
    y = ts.fft.irfft(ts.fft.rfft(ts.tensor(x)), n=4096)
    np.testing.assert_allclose(y.numpy(), x, atol=1e-4)


@pytest.mark.parametrize("n", [67, 1009, 2 * 10007, 65537])
def test_lengths_with_a_large_prime_factor_match_numpy(n):
    # Bluestein's algorithm (backends/cpu/src/fft_plan.h): as accurate as a power-of-two length.
    x = RNG.standard_normal((2, n))
    z = crandn(n, dtype=np.complex64)
    want = np.fft.fft(x)
    np.testing.assert_allclose(ts.fft.fft(ts.tensor(x)).numpy(), want, atol=1e-10 * np.abs(want).max())
    np.testing.assert_allclose(ts.fft.ifft(ts.tensor(z)).numpy(), np.fft.ifft(z), atol=1e-6)
    np.testing.assert_allclose(ts.fft.irfft(ts.fft.rfft(ts.tensor(x)), n=n).numpy(), x, atol=1e-12)


def test_fft_bad_input():
    with pytest.raises(ValueError, match="invalid normalization mode"):
        ts.fft.fft(ts.ones(4), norm="sideways")
    with pytest.raises(ValueError, match="invalid number of data points"):
        ts.fft.fft(ts.ones(4), n=0)
    with pytest.raises(TypeError, match="rfft.*real input"):
        ts.fft.rfft(ts.ones(4, dtype=ts.complex64))
    with pytest.raises(IndexError):
        ts.fft.fft(ts.ones(4), dim=3)
    with pytest.raises(ValueError, match="same length"):
        ts.fft.fftn(ts.ones(4, 4), s=(2, 2, 2), dim=(0, 1))
    with pytest.raises(ValueError, match="0-d"):
        ts.fft.fft(ts.tensor(1.0))
    with pytest.raises(TypeError, match="_fft_c2c: expected a complex"):
        ts.ops.aten._fft_c2c(ts.ones(4), [0], 0, True)


# ---------------------------------------------------------------------------- against PyTorch, with gradients
def _compare_with_torch(f_ts, f_torch, x):
    import torch
    a = ts.tensor(x, requires_grad=True)
    b = torch.tensor(x, requires_grad=True)
    ya, yb = f_ts(a), f_torch(b).resolve_conj()
    np.testing.assert_allclose(ya.detach().numpy(), yb.detach().numpy(), rtol=1e-9, atol=1e-9)
    weights = RNG.standard_normal(tuple(yb.shape) + ((2,) if yb.is_complex() else ()))
    real_a = ts.view_as_real(ya) if ya.is_complex() else ya
    real_b = torch.view_as_real(yb) if yb.is_complex() else yb
    (real_a * ts.tensor(weights)).sum().backward()
    (real_b * torch.tensor(weights)).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-9, atol=1e-9)


TRANSFORMS = {
    "fft": lambda m: m.fft.fft, "ifft_n": lambda m: lambda t: m.fft.ifft(t, n=11, norm="ortho"),
    "rfft": lambda m: m.fft.rfft, "irfft_of_rfft": lambda m: lambda t: m.fft.irfft(m.fft.rfft(t) * 2, n=9),
    "hfft": lambda m: lambda t: m.fft.hfft(m.fft.fft(t)), "ihfft": lambda m: m.fft.ihfft,
    "rfftn": lambda m: lambda t: m.fft.rfftn(t, norm="forward"), "fft2_s": lambda m: lambda t: m.fft.fft2(t, s=(4, 6)),
    "abs_fft": lambda m: lambda t: m.abs(m.fft.fft(t)), "angle_fft": lambda m: lambda t: m.angle(m.fft.fft(t)),
    "product": lambda m: lambda t: m.fft.fft(t) * m.fft.fft(t * 2) / (m.fft.fft(t) + 3),
    "holomorphic": lambda m: lambda t: m.tanh(m.exp(m.complex(t, -t / 2) / 4) ** 2),
    "imag_polar": lambda m: lambda t: m.polar(t.abs() + 0.1, t).imag,
}


@pytest.mark.torch
@pytest.mark.parametrize("name", list(TRANSFORMS))
def test_values_and_gradients_match_torch(name):
    import torch
    x = RNG.standard_normal((3, 8))
    _compare_with_torch(TRANSFORMS[name](ts), TRANSFORMS[name](torch), x)


def test_fft_gradient_is_the_adjoint():
    # <fft(x), w> = <x, fft^H(w)>: the gradient of Re<fft(x), w> is Re(fft^H(w)) = Re(N * ifft(w)).
    x = RNG.standard_normal(16)
    w = crandn(16)
    a = ts.tensor(x, requires_grad=True)
    y = ts.view_as_real(ts.fft.fft(a))
    (y * ts.tensor(np.stack([w.real, w.imag], -1))).sum().backward()
    np.testing.assert_allclose(to_np(a.grad), (16 * np.fft.ifft(w)).real, atol=1e-10)
