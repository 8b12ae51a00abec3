"""tessera.special's Bessel, Airy, erfcx, zeta, incomplete-gamma, polygamma and orthogonal-polynomial
functions (tessera/_special_functions.py) against scipy.special (the accurate reference) and torch
(dtypes, edge values, gradients), over wide ranges with negatives, zero, large arguments, inf and NaN.

Tolerances: the Chebyshev series are a few ulps on their ranges, so float64 is held to 1e-12 relative
against scipy (absolute 1e-13 for the oscillating J, Y, Ai near their zeros and at large |x|, where the
phase x mod 2 pi itself carries that much rounding). torch's own J, Y and Ai are only good to about
5e-6 relative (2e-6 absolute), so the comparisons with torch use that; float32 results are held to
1e-5 relative (the float32 rounding of torch's result and ours)."""
import math

import numpy as np
import pytest

import tessera as ts
from tessera.autograd import gradcheck

try:
    import scipy.special as sp
except ImportError:  # the scipy comparisons are skipped
    sp = None

needs_scipy = pytest.mark.skipif(sp is None, reason="scipy is not installed")


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


EDGES = [0.0, -0.0, 1e-300, -1e-300, 1e-8, -1e-8, 0.5, 2.0, 7.99, 8.0, 8.01, 50.0, 1e3, -1e3, 700.0, -700.0,
         1e5, math.inf, -math.inf, math.nan]
X = np.concatenate([np.linspace(-60.0, 60.0, 481), EDGES])

# name: (scipy reference, rtol, atol against scipy, atol against torch)
OSC = 1e-13
UNARY = {
    "i0": ("i0", 1e-12, 0.0, 0.0),
    "i0e": ("i0e", 1e-12, 0.0, 0.0),
    "i1": ("i1", 1e-12, 0.0, 0.0),
    "i1e": ("i1e", 1e-12, 0.0, 0.0),
    "modified_bessel_i0": ("i0", 1e-12, 0.0, 0.0),
    "modified_bessel_i1": ("i1", 1e-12, 0.0, 0.0),
    "modified_bessel_k0": ("k0", 1e-12, 0.0, 0.0),
    "modified_bessel_k1": ("k1", 1e-12, 0.0, 0.0),
    "scaled_modified_bessel_k0": ("k0e", 1e-12, 0.0, 0.0),
    "scaled_modified_bessel_k1": ("k1e", 1e-12, 0.0, 0.0),
    "erfcx": ("erfcx", 1e-12, 0.0, 0.0),
    "spherical_bessel_j0": (lambda x: sp.spherical_jn(0, x), 1e-12, 1e-16, 0.0),
    "bessel_j0": ("j0", 1e-11, OSC, 2e-6),
    "bessel_j1": ("j1", 1e-11, OSC, 2e-6),
    "bessel_y0": ("y0", 1e-11, OSC, 2e-6),
    "bessel_y1": ("y1", 1e-11, OSC, 2e-6),
    "airy_ai": (lambda x: sp.airy(x)[0], 1e-11, OSC, 2e-6),
}


def test_every_torch_special_function_exists(torch):
    names = [n for n in dir(torch.special) if not n.startswith("_") and callable(getattr(torch.special, n))]
    missing = [n for n in names if n != "Tensor" and not hasattr(ts.special, n)]
    assert not missing, missing


def test_shared_with_top_level():
    """One implementation each: the special names are the top-level functions."""
    assert ts.special.i0 is ts.i0
    assert ts.special.polygamma is ts.polygamma
    assert ts.special.multigammaln is ts.mvlgamma
    assert ts.special.gammainc is ts.igamma and ts.special.gammaincc is ts.igammac


@needs_scipy
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_against_scipy(name):
    ref, rtol, atol, _ = UNARY[name]
    ref = getattr(sp, ref) if isinstance(ref, str) else ref
    x = X[np.isfinite(X)]
    with np.errstate(all="ignore"):
        exp = ref(x)
    got = getattr(ts.special, name)(ts.tensor(x)).numpy()
    # relative to 1e-12 (absolute OSC |x| for J, Y and Ai, whose phase at large |x| is only that exact)
    with np.errstate(all="ignore"):
        ok = (got == exp) | (np.isnan(got) & np.isnan(exp)) | (
            np.abs(got - exp) <= rtol * np.abs(exp) + atol * np.maximum(1.0, np.abs(x)))
    assert ok.all(), list(zip(x[~ok][:5], got[~ok][:5], exp[~ok][:5]))


@pytest.mark.torch
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_against_torch(torch, name):
    _, _, _, atol = UNARY[name]
    rtol = 5e-6 if atol else 1e-12
    got = getattr(ts.special, name)(ts.tensor(X))
    exp = getattr(torch.special, name)(torch.tensor(X))
    assert got.dtype == ts.float64
    np.testing.assert_allclose(got.numpy(), exp.numpy(), rtol=rtol, atol=atol, equal_nan=True)
    # float32 in, float32 out (large arguments overflow alike)
    x32 = X[np.abs(np.nan_to_num(X)) <= 80].astype(np.float32)
    got = getattr(ts.special, name)(ts.tensor(x32))
    exp = getattr(torch.special, name)(torch.tensor(x32))
    assert got.dtype == ts.float32
    np.testing.assert_allclose(got.numpy(), exp.numpy(), rtol=1e-5, atol=max(atol, 1e-6) * 5, equal_nan=True)
    # integers promote to the default float dtype
    got = getattr(ts.special, name)(ts.tensor([1, 2, 3, 9]))
    exp = getattr(torch.special, name)(torch.tensor([1, 2, 3, 9]))
    assert got.dtype == ts.float32
    np.testing.assert_allclose(got.numpy(), exp.numpy(), rtol=1e-5, atol=1e-6)


def test_edge_values():
    """inf, 0 and negative arguments as torch: poles, NaN outside the domain, limits at infinity."""
    sp_ = ts.special
    t = ts.tensor([0.0, -1.0, math.inf, -math.inf, math.nan], dtype=ts.float64)
    nan, inf = math.nan, math.inf
    np.testing.assert_array_equal(sp_.bessel_y0(t).numpy(), [-inf, nan, nan, nan, nan])
    np.testing.assert_array_equal(sp_.modified_bessel_k1(t).numpy(), [inf, nan, 0.0, nan, nan])
    np.testing.assert_array_equal(sp_.i0e(t).numpy()[[0, 2, 3, 4]], [1.0, 0.0, 0.0, nan])
    np.testing.assert_array_equal(sp_.erfcx(t).numpy()[[0, 2, 3]], [1.0, 0.0, inf])
    np.testing.assert_array_equal(sp_.spherical_bessel_j0(t).numpy()[[0, 2, 3]], [1.0, 0.0, 0.0])
    np.testing.assert_array_equal(np.isnan(sp_.airy_ai(t).numpy()), [False, False, True, True, True])
    out = ts.empty(5, dtype=ts.float64)
    assert sp_.bessel_j1(t, out=out) is out and out[0].item() == 0.0


@needs_scipy
def test_zeta_against_scipy():
    s, q = np.meshgrid([1.5, 2.0, 3.0, 4.5, 10.0, 30.0, 60.0], [1e-3, 0.3, 1.0, 2.5, 10.0, 1e3])
    got = ts.special.zeta(ts.tensor(s.ravel()), ts.tensor(q.ravel())).numpy()
    np.testing.assert_allclose(got, sp.zeta(s.ravel(), q.ravel()), rtol=1e-12)


@pytest.mark.torch
def test_zeta_against_torch(torch):
    s = [1.0, 0.5, 2.0, 3.0, 3.0, 2.5, 2.0, 4.5, 200.0, 1.0001, 2.0, 3.0, math.nan, 2.0, math.inf, 2.0]
    q = [1.0, 1.0, 1.0, -2.0, -2.5, -2.5, 0.0, 0.3, 1.5, 1.0, 1e6, -7.25, 1.0, math.nan, 2.0, math.inf]
    got = ts.special.zeta(ts.tensor(s), ts.tensor(q))
    exp = torch.special.zeta(torch.tensor(s), torch.tensor(q))
    assert got.dtype == ts.float32
    np.testing.assert_allclose(got.numpy(), exp.numpy(), rtol=1e-6, equal_nan=True)
    got = ts.special.zeta(ts.tensor(s, dtype=ts.float64), ts.tensor(q, dtype=ts.float64))
    exp = torch.special.zeta(torch.tensor(s, dtype=torch.float64), torch.tensor(q, dtype=torch.float64))
    np.testing.assert_allclose(got.numpy(), exp.numpy(), rtol=1e-13, equal_nan=True)
    # numbers in either place, integers promote
    for a, b in [(2.0, ts.tensor([1.0, 2.0])), (ts.tensor([2.0, 3.0]), 1.0), (ts.tensor([2, 3]), ts.tensor([1]))]:
        tb = lambda v: torch.tensor(v.tolist()) if isinstance(v, ts.Tensor) else v  # noqa: E731
        got, exp = ts.special.zeta(a, b), torch.special.zeta(tb(a), tb(b))
        assert got.dtype == ts.float32
        np.testing.assert_allclose(got.numpy(), exp.numpy(), rtol=1e-6)


def test_zeta_gradient_in_q():
    """d/dq zeta(s, q) = -s zeta(s + 1, q) (torch has no derivative for zeta)."""
    s = ts.tensor([2.0, 3.5, 6.0], dtype=ts.float64)
    q = ts.tensor([0.7, 2.0, 11.0], dtype=ts.float64, requires_grad=True)
    ts.special.zeta(s, q).sum().backward()
    np.testing.assert_allclose(q.grad.numpy(), (-s * ts.special.zeta(s + 1.0, q.detach())).numpy(), rtol=1e-10)


@pytest.mark.torch
def test_gammainc_polygamma_multigammaln(torch):
    a = np.array([0.1, 0.5, 1.0, 3.0, 10.0, 100.0, 0.0, -1.0, math.inf, math.nan])
    x = np.array([0.01, 0.5, 2.0, 3.0, 12.0, 90.0, 1.0, 1.0, 1.0, 1.0])
    for name in ("gammainc", "gammaincc"):
        got = getattr(ts.special, name)(ts.tensor(a), ts.tensor(x))
        exp = getattr(torch.special, name)(torch.tensor(a), torch.tensor(x))
        # torch's own value at a = 100 is 7e-10 off scipy's and mpmath's; ours is within 1e-10 of them
        np.testing.assert_allclose(got.numpy(), exp.numpy(), rtol=1e-8, atol=1e-14, equal_nan=True)
        if sp is not None:
            np.testing.assert_allclose(got.numpy()[:6], getattr(sp, name)(a[:6], x[:6]), rtol=1e-10)
    xs = np.array([-2.5, -0.5, 0.3, 1.0, 4.7, 30.0, 1e3])
    for n in range(5):
        got = ts.special.polygamma(n, ts.tensor(xs))
        exp = torch.special.polygamma(n, torch.tensor(xs))
        np.testing.assert_allclose(got.numpy(), exp.numpy(), rtol=1e-9, atol=1e-12)
    for p in (1, 2, 4):
        xp = np.array([2.0, 3.7, 10.0, 100.0]) + (p - 1) / 2.0
        got = ts.special.multigammaln(ts.tensor(xp), p)
        exp = torch.special.multigammaln(torch.tensor(xp), p)
        np.testing.assert_allclose(got.numpy(), exp.numpy(), rtol=1e-12)


def _grad_pair(torch, ts_fn, torch_fn, x):
    a = ts.tensor(x, requires_grad=True)
    ts_fn(a).sum().backward()
    t = torch.tensor(x, requires_grad=True)
    torch_fn(t).sum().backward()
    return a.grad.numpy(), t.grad.numpy()


# torch's derivatives are built from its own J / Y, good to about 1e-6; the others to ulps
GRADS = {"i0": 1e-12, "i0e": 1e-12, "i1": 1e-12, "i1e": 1e-12, "erfcx": 1e-11, "modified_bessel_i0": 1e-12,
         "modified_bessel_i1": 1e-12, "modified_bessel_k0": 1e-12, "modified_bessel_k1": 1e-12,
         "bessel_j0": 1e-5, "bessel_j1": 1e-5, "bessel_y0": 1e-5, "bessel_y1": 1e-5}


@pytest.mark.torch
@pytest.mark.parametrize("name", sorted(GRADS))
def test_gradients_against_torch(torch, name):
    x = np.array([-20.0, -9.0, -3.3, -1.0, -0.2, 0.0, 0.3, 1.7, 2.0, 5.0, 8.0, 9.5, 30.0])
    if name.startswith(("bessel_y", "modified_bessel_k")):
        x = np.abs(x) + 0.1
    got, exp = _grad_pair(torch, getattr(ts.special, name), getattr(torch.special, name), x)
    np.testing.assert_allclose(got, exp, rtol=GRADS[name], atol=GRADS[name] * 1e-2)


@pytest.mark.torch
def test_polygamma_multigammaln_gradients(torch):
    x = np.array([0.4, 1.3, 2.0, 7.5])
    for n in (1, 2):  # not 0: digamma has no derivative in the core yet
        got, exp = _grad_pair(torch, lambda v: ts.special.polygamma(n, v), lambda v: torch.special.polygamma(n, v), x)
        np.testing.assert_allclose(got, exp, rtol=1e-8)
    got, exp = _grad_pair(torch, lambda v: ts.special.multigammaln(v, 3), lambda v: torch.special.multigammaln(v, 3),
                          x + 1.5)
    np.testing.assert_allclose(got, exp, rtol=1e-10)


def test_gradients_where_torch_has_none():
    """scaled K, Ai and spherical j0 are differentiable composites: checked by finite differences."""
    for fn, x in [(ts.special.scaled_modified_bessel_k0, [0.3, 1.9, 2.1, 9.0]),
                  (ts.special.scaled_modified_bessel_k1, [0.3, 1.9, 2.1, 9.0]),
                  (ts.special.airy_ai, [-9.0, -3.0, 0.0, 1.5, 2.5, 6.0]),
                  (ts.special.spherical_bessel_j0, [-3.0, -0.2, 0.0, 0.4, 0.6, 12.0])]:
        assert gradcheck(fn, (ts.tensor(x, dtype=ts.float64, requires_grad=True),))


POLYS = ["chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v", "chebyshev_polynomial_w",
         "shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
         "shifted_chebyshev_polynomial_w", "hermite_polynomial_h", "hermite_polynomial_he", "laguerre_polynomial_l",
         "legendre_polynomial_p"]


@pytest.mark.torch
@pytest.mark.parametrize("name", POLYS)
def test_polynomials_against_torch(torch, name):
    """Every n convention (negative, fractional, NaN, past the trigonometric threshold, past hermite's limit)
    over |x| < 1, |x| == 1 and beyond, inf and NaN."""
    x = np.concatenate([np.linspace(-2.5, 2.5, 51), [-1.0, 1.0, 0.0, 0.5, math.inf, -math.inf, math.nan, 1e3]])
    ns = [-3, -1, 0, 1, 2, 3, 5, 7, 8, 9, 10, 12, 20, 50, 200, 600, 2.7, -0.5, math.nan, math.inf]
    xx, nn = (v.ravel() for v in np.meshgrid(x, np.array(ns, dtype=float)))
    got = getattr(ts.special, name)(ts.tensor(xx), ts.tensor(nn))
    exp = getattr(torch.special, name)(torch.tensor(xx), torch.tensor(nn))
    assert got.dtype == ts.float64
    # the recurrence in the same order as torch: rounding differs only past 1e-9 relative
    np.testing.assert_allclose(got.numpy(), exp.numpy(), rtol=1e-9, atol=1e-12, equal_nan=True)
    # a number n, float32 x; integer x with an integer n gives the default float dtype
    x32 = x.astype(np.float32)
    got = getattr(ts.special, name)(ts.tensor(x32), 3)
    exp = getattr(torch.special, name)(torch.tensor(x32), 3)
    assert got.dtype == ts.float32
    np.testing.assert_allclose(got.numpy(), exp.numpy(), rtol=1e-5, atol=1e-5, equal_nan=True)
    got = getattr(ts.special, name)(ts.tensor([0, 1, 2]), ts.tensor([4]))
    exp = getattr(torch.special, name)(torch.tensor([0, 1, 2]), torch.tensor([4]))
    assert got.dtype == ts.float32
    np.testing.assert_allclose(got.numpy(), exp.numpy(), rtol=1e-6)


@needs_scipy
def test_polynomials_against_scipy():
    x = np.linspace(-0.99, 0.99, 41)
    ref = {"chebyshev_polynomial_t": sp.eval_chebyt, "chebyshev_polynomial_u": sp.eval_chebyu,
           "legendre_polynomial_p": sp.eval_legendre, "hermite_polynomial_h": sp.eval_hermite,
           "hermite_polynomial_he": sp.eval_hermitenorm, "laguerre_polynomial_l": sp.eval_laguerre,
           "shifted_chebyshev_polynomial_t": lambda n, v: sp.eval_sh_chebyt(n, v)}
    for name, fn in ref.items():
        for n in (0, 1, 4, 9, 15):
            got = getattr(ts.special, name)(ts.tensor(x), n).numpy()
            np.testing.assert_allclose(got, fn(n, x), rtol=1e-10, atol=1e-10 * max(1.0, np.abs(fn(n, x)).max()))
