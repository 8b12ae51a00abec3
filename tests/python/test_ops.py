"""Every operator through the Python package, against NumPy as the oracle: dtypes, broadcast
shapes, non-contiguous inputs (transposed, strided slices), zero-size tensors, in-place and out=
variants, factories, and the errors (type, value, index) that name the operator."""
import math

import numpy as np
import pytest

import tessera as ts
from conftest import (ALL_DTYPES, FLOAT_DTYPES, INT_DTYPES, NUMERIC_DTYPES, assert_close, from_np, np_dtype,
                      round_bf16, sample, to_np, torch_promote)

RNG = np.random.default_rng(1234)

# Layouts: (name, numpy shape of the base array, function making the view, in numpy and tessera)
LAYOUTS = [
    ("scalar", (), lambda a: a),
    ("empty", (0,), lambda a: a),
    ("empty2d", (0, 3), lambda a: a),
    ("vector", (5,), lambda a: a),
    ("matrix", (3, 4), lambda a: a),
    ("transposed", (4, 3), lambda a: a.T),
    ("strided", (4, 6), lambda a: a[::2, 1::2]),
    ("3d-permuted", (2, 3, 4), lambda a: a.transpose(2, 0, 1) if isinstance(a, np.ndarray) else a.permute(2, 0, 1)),
]


def make(shape, dtype, layout=lambda a: a, **kw):
    """(tensor, numpy array) with the same values and the same (possibly non-contiguous) view."""
    base = sample(shape, dtype, RNG, **kw)
    t = from_np(base, dtype)
    if dtype in (ts.float16, ts.bfloat16):
        base = to_np(t)  # the values as rounded to 16 bits
    return layout(t), layout(base)


def expected_in(dtype, values):
    """NumPy values as the tensor's dtype would hold them."""
    if dtype == ts.bfloat16:
        return round_bf16(values)
    return np.asarray(values).astype(np_dtype(dtype))


# ---------------------------------------------------------------------------- unary
UNARY_FLOAT = {
    "exp": np.exp, "log": np.log, "log1p": np.log1p, "sqrt": np.sqrt, "rsqrt": lambda x: 1 / np.sqrt(x),
    "sin": np.sin, "cos": np.cos, "tanh": np.tanh, "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    "erf": np.vectorize(math.erf, otypes=[np.float64]),
}
UNARY_KEEP = {"neg": np.negative, "abs": np.abs, "sign": np.sign, "relu": lambda x: np.maximum(x, 0)}
POSITIVE_ONLY = {"log", "log1p", "sqrt", "rsqrt"}


@pytest.mark.parametrize("layout", LAYOUTS, ids=[x[0] for x in LAYOUTS])
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("name", sorted(UNARY_FLOAT))
def test_unary_float(name, dtype, layout):
    _, shape, view = layout
    low = 0.1 if name in POSITIVE_ONLY else -3
    x, a = make(shape, dtype, view, low=low, high=3)
    r = getattr(ts, name)(x)
    expected = UNARY_FLOAT[name](a.astype(np.float64))
    assert_close(r, expected, dtype)
    assert_close(getattr(x, name)(), expected, dtype)


@pytest.mark.parametrize("dtype", INT_DTYPES + [ts.bool], ids=lambda d: d.name)
@pytest.mark.parametrize("name", sorted(UNARY_FLOAT))
def test_unary_float_of_integers_is_float32(name, dtype):
    x, a = make((2, 3), dtype, low=1, high=5)
    r = getattr(ts, name)(x)
    assert r.dtype == ts.float32
    with np.errstate(divide="ignore"):  # log(0) and rsqrt(0) of False are -inf / inf
        expected = UNARY_FLOAT[name](a.astype(np.float64))
    assert_close(r, expected, ts.float32)


@pytest.mark.parametrize("layout", LAYOUTS, ids=[x[0] for x in LAYOUTS])
@pytest.mark.parametrize("dtype", [ts.int8, ts.int32, ts.int64, ts.float16, ts.bfloat16, ts.float32, ts.float64],
                         ids=lambda d: d.name)
@pytest.mark.parametrize("name", sorted(UNARY_KEEP))
def test_unary_keep_dtype(name, dtype, layout):
    _, shape, view = layout
    x, a = make(shape, dtype, view)
    r = getattr(ts, name)(x)
    assert_close(r, UNARY_KEEP[name](a), dtype)


@pytest.mark.parametrize("name", sorted(set(UNARY_FLOAT) | set(UNARY_KEEP)))
def test_unary_inplace_and_out(name):
    fn = {**UNARY_FLOAT, **UNARY_KEEP}[name]
    x, a = make((3, 4), ts.float32, low=0.5, high=2)
    expected = fn(a.astype(np.float64))
    y = x.clone()
    v = y._version
    r = getattr(y, name + "_")()
    assert r._same_storage(y)
    assert y._version > v
    assert_close(y, expected, ts.float32)
    if name != "relu":  # relu has no out= variant in ops.yaml
        out = ts.empty(3, 4)
        r = getattr(ts, name)(x, out=out)
        assert r._same_storage(out)
        assert_close(out, expected, ts.float32)


def test_unary_inplace_on_a_view_writes_through():
    x, a = make((4, 4), ts.float32)
    x.T[1:3].neg_()
    a.T[1:3] *= -1
    assert_close(x, a)


def test_logical_not():
    for dtype in (ts.bool, ts.int32, ts.float32):
        x, a = make((3, 4), dtype, low=-1, high=1)
        assert_close(ts.logical_not(x), np.logical_not(a), ts.bool)


def test_neg_of_bool_is_an_error():
    with pytest.raises(TypeError, match="neg"):
        -ts.tensor([True, False])


# ---------------------------------------------------------------------------- binary
BROADCAST_SHAPES = [
    ((), ()), ((3,), (3,)), ((2, 3), (3,)), ((2, 1), (1, 3)), ((4, 1, 3), (2, 1)), ((), (2, 3)),
    ((0, 3), (1, 3)), ((2, 0), (2, 1)), ((1,), (5,)),
]
BINARY = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": lambda a, b: a / b,
    "maximum": np.maximum, "minimum": np.minimum,
}


@pytest.mark.parametrize("shapes", BROADCAST_SHAPES, ids=str)
@pytest.mark.parametrize("dtype", NUMERIC_DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_broadcast(name, dtype, shapes):
    x, a = make(shapes[0], dtype, low=1, high=9)
    y, b = make(shapes[1], dtype, low=1, high=9)
    r = getattr(ts, name)(x, y)
    expected_dtype = ts.float32 if name == "div" and not dtype.is_floating_point else dtype
    expected = BINARY[name](a.astype(np.float64), b.astype(np.float64))
    if not expected_dtype.is_floating_point:
        expected = expected.astype(np.int64).astype(np_dtype(dtype))  # wraps as the tensor does
    assert_close(r, expected, expected_dtype)


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_non_contiguous(name):
    x, a = make((4, 3), ts.float32, lambda t: t.T, low=1, high=9)
    y, b = make((3, 8), ts.float32, lambda t: t[:, ::2], low=1, high=9)
    assert not x.is_contiguous() and not y.is_contiguous()
    assert_close(getattr(ts, name)(x, y), BINARY[name](a.astype(np.float64), b.astype(np.float64)), ts.float32)


PROMOTION_PAIRS = [
    (ts.int32, ts.float32), (ts.uint8, ts.int8), (ts.uint8, ts.int16), (ts.int8, ts.int64), (ts.bool, ts.int32),
    (ts.bool, ts.float16), (ts.int64, ts.float16), (ts.float16, ts.bfloat16), (ts.float16, ts.float32),
    (ts.bfloat16, ts.float64), (ts.int16, ts.int32), (ts.float32, ts.float64),
]


@pytest.mark.parametrize("pair", PROMOTION_PAIRS, ids=lambda p: f"{p[0].name}-{p[1].name}")
@pytest.mark.parametrize("name", ["add", "mul", "maximum"])
def test_binary_type_promotion(name, pair):
    x, a = make((2, 3), pair[0], low=0, high=5)
    y, b = make((3,), pair[1], low=0, high=5)
    want = torch_promote(*pair)
    for r in (getattr(ts, name)(x, y), getattr(ts, name)(y, x)):
        assert r.dtype == want
        assert_close(r, expected_in(want, BINARY[name](a.astype(np.float64), b.astype(np.float64))), want)


def test_zero_dim_tensor_does_not_promote_within_category():
    x = ts.tensor([1, 2, 3], dtype=ts.int8)
    assert (x + ts.tensor(1000)).dtype == ts.int8  # 0-dim int64 does not widen an int8 tensor
    assert (x + ts.tensor(1.5)).dtype == ts.float32  # a higher category does
    h = ts.tensor([1.0, 2.0], dtype=ts.float16)
    assert (h * ts.tensor(2.0, dtype=ts.float64)).dtype == ts.float16
    assert (ts.tensor(1, dtype=ts.int16) + ts.tensor(2, dtype=ts.int32)).dtype == ts.int32  # both 0-dim


SCALAR_CASES = [
    # (tensor dtype, python scalar, expected result dtype) for tensor + scalar (PyTorch's table)
    (ts.int32, 2, ts.int32), (ts.int32, 2.5, ts.float32), (ts.uint8, 3, ts.uint8), (ts.bool, 1, ts.int64),
    (ts.bool, True, ts.bool), (ts.bool, 1.5, ts.float32), (ts.float16, 2, ts.float16),
    (ts.float16, 2.5, ts.float16), (ts.bfloat16, 1.5, ts.bfloat16), (ts.float64, 1, ts.float64),
    (ts.int64, False, ts.int64), (ts.int8, 2.0, ts.float32),
]


@pytest.mark.parametrize("case", SCALAR_CASES, ids=lambda c: f"{c[0].name}-{c[1]!r}")
def test_python_scalar_promotion(case):
    dtype, s, want = case
    x, a = make((2, 3), dtype, low=0, high=4)
    for r in (x + s, s + x, x * s, s * x, ts.add(x, s), x.add(s), ts.mul(x, s)):
        assert r.dtype == want, (r.dtype, want)
    assert_close(x + s, expected_in(want, a.astype(np.float64) + float(s)), want)
    assert_close(s * x, expected_in(want, a.astype(np.float64) * float(s)), want)


def test_scalar_operators_values():
    x, a = make((2, 3), ts.float32, low=1, high=4)
    af = a.astype(np.float64)
    assert_close(x - 2, af - 2)
    assert_close(2 - x, 2 - af)
    assert_close(x / 4, af / 4)
    assert_close(3 / x, 3 / af)
    assert_close(x ** 2, af ** 2)
    assert_close(2 ** x, 2 ** af)
    assert_close(x ** 0.5, np.sqrt(af))
    assert_close(x // 2, np.floor_divide(af, 2))
    assert_close(7 // x, np.floor_divide(7, af))
    assert_close(-x, -af)
    assert_close(abs(-x), af)
    assert_close(+x, af)


def test_reflected_operators_follow_promotion():
    i = ts.tensor([1, 2, 4], dtype=ts.int32)
    assert (2 - i).dtype == ts.int32 and (2 - i).tolist() == [1, 0, -2]
    assert (2.5 - i).dtype == ts.float32
    assert (1 / i).dtype == ts.float32 and (1 / i).tolist() == [1.0, 0.5, 0.25]
    assert (2 ** i).dtype == ts.int32 and (2 ** i).tolist() == [2, 4, 16]
    assert (9 // i).tolist() == [9, 4, 2]
    h = ts.tensor([1.0, 2.0], dtype=ts.float16)
    assert (1 - h).dtype == ts.float16
    assert (2.0 / h).dtype == ts.float16


def test_tensor_operators():
    x, a = make((3, 4), ts.float32, low=1, high=5)
    y, b = make((4,), ts.float32, low=1, high=5)
    af, bf = a.astype(np.float64), b.astype(np.float64)
    assert_close(x + y, af + bf)
    assert_close(x - y, af - bf)
    assert_close(x * y, af * bf)
    assert_close(x / y, af / bf)
    assert_close(x // y, np.floor_divide(af, bf))
    assert_close(x ** y, af ** bf, rtol=1e-4)
    m, c = make((4, 2), ts.float32)
    assert_close(x @ m, af @ c.astype(np.float64), rtol=1e-5, atol=1e-4)


def test_inplace_operators_keep_identity_and_storage():
    x = ts.tensor([1.0, 2.0, 3.0])
    ptr = x.data_ptr()
    y = x
    y += 1
    y -= ts.tensor([1.0, 1.0, 1.0])
    y *= 2
    y /= 4
    y **= 2
    assert y is x and x.data_ptr() == ptr
    assert x.tolist() == [0.25, 1.0, 2.25]
    i = ts.tensor([7, 8, 9])
    i //= 2
    assert i.tolist() == [3, 4, 4]


def test_inplace_type_errors():
    i = ts.tensor([1, 2, 3])
    with pytest.raises(TypeError, match="float.*int64|int64.*float|can't be cast"):
        i += 1.5
    with pytest.raises(TypeError, match="div"):
        i /= 2  # true division of an integer tensor in place: float result into int64


def test_subtraction_with_bool_is_an_error():
    b = ts.tensor([True, False])
    with pytest.raises(TypeError, match="sub"):
        b - b
    with pytest.raises(TypeError, match="sub"):
        1 - b


def test_add_alpha_and_out():
    x, a = make((2, 3), ts.float32)
    y, b = make((2, 3), ts.float32)
    assert_close(ts.add(x, y, alpha=2), a + 2 * b)
    assert_close(ts.sub(x, y, alpha=0.5), a - 0.5 * b)
    assert_close(x.add(3, 2), a + 6)
    out = ts.empty(2, 3)
    r = ts.add(x, y, out=out)
    assert r._same_storage(out)
    assert_close(out, a + b)
    o2 = ts.empty(0)
    ts.mul(x, y, out=o2)  # out= is resized
    assert_close(o2, a * b)
    x2 = x.clone()
    x2.add_(y, alpha=-1)
    assert_close(x2, a - b)


def test_div_rounding_modes():
    x = ts.tensor([-7.0, -3.5, 3.5, 7.0])
    y = ts.tensor([2.0, 2.0, -2.0, 2.0])
    assert ts.div(x, y, rounding_mode="trunc").tolist() == [-3.0, -1.0, -1.0, 3.0]
    assert ts.div(x, y, rounding_mode="floor").tolist() == [-4.0, -2.0, -2.0, 3.0]
    assert ts.div(x, y, rounding_mode=None).tolist() == [-3.5, -1.75, -1.75, 3.5]
    i = ts.tensor([-7, 7])
    assert ts.div(i, ts.tensor([2, 2]), rounding_mode="floor").tolist() == [-4, 3]
    assert ts.floor_divide(i, ts.tensor([2, -2])).tolist() == [-4, -4]
    with pytest.raises(ValueError, match="rounding_mode"):
        ts.div(x, y, rounding_mode="round")


def test_integer_division_by_zero_raises():
    with pytest.raises(ValueError, match="ZeroDivisionError"):
        ts.tensor([1, 2]) // ts.tensor([1, 0])


def test_pow_overloads():
    x = ts.tensor([1.0, 2.0, 3.0])
    assert ts.pow(x, 2).tolist() == [1.0, 4.0, 9.0]
    assert ts.pow(x, ts.tensor([0.0, 1.0, 2.0])).tolist() == [1.0, 2.0, 9.0]
    i = ts.tensor([2, 3])
    assert (i ** 3).tolist() == [8, 27]
    with pytest.raises(ValueError, match="negative"):
        i ** -1


# PyTorch computes these scalar exponents as products and square roots, not pow: the special
# values follow (sqrt(-0.0) is -0.0, (-inf) ** 0.5 is NaN, where C's pow says +0.0 and +inf).
POWER_FORMS = {2: lambda a: a * a, 3: lambda a: a * a * a, 0.5: np.sqrt, -0.5: lambda a: 1 / np.sqrt(a),
               -1: lambda a: 1 / a, -2: lambda a: 1 / (a * a)}


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("exponent", [2, 3, 0.5, -0.5, -1, -2, 2.0, 1.5])
def test_pow_common_scalar_exponents(exponent, dtype):
    """Against NumPy's evaluation of PyTorch's forms in the compute type (float32 for the half
    types, rounded once to the dtype), with zeros of both signs, infinities, NaN, negative bases
    and a strided base; against PyTorch itself when it is importable."""
    values = np.array([0.0, -0.0, 1.0, -1.0, 2.5, -3.0, 0.25, np.inf, -np.inf, np.nan, 1e-3, 7.0])
    base = np.concatenate([values, RNG.uniform(-4, 4, 36)]).reshape(6, 8)
    x = from_np(base, dtype)
    compute = np.float64 if dtype == ts.float64 else np.float32
    held = to_np(x).astype(compute)  # the base as the dtype holds it
    with np.errstate(all="ignore"):
        form = POWER_FORMS.get(exponent, lambda a: np.power(a, compute(exponent)))
        expected = to_np(from_np(form(held), dtype)).astype(np.float64)  # rounded once to the dtype
    got = x ** exponent
    assert got.dtype == dtype
    rtol = 0 if exponent in POWER_FORMS else 4e-3 if dtype in (ts.float16, ts.bfloat16) else 2e-7
    np.testing.assert_allclose(to_np(got).astype(np.float64), expected, rtol=rtol, equal_nan=True)
    assert np.array_equal(np.signbit(to_np(got)), np.signbit(expected))  # -0.0 and -inf where torch has them
    xt = from_np(base.T.copy(), dtype).T  # a strided view of the same values
    np.testing.assert_array_equal(to_np(ts.pow(xt, exponent)), to_np(got))
    torch = pytest.importorskip("torch") if dtype == ts.float32 else None
    if torch is not None:
        want = torch.from_numpy(held).pow(exponent).numpy()  # within an ulp: its 0.5 is not always sqrt's rounding
        np.testing.assert_allclose(to_np(got), want, rtol=2.5e-7, equal_nan=True)


# ---------------------------------------------------------------------------- comparisons and logic
COMPARE = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater,
           "ge": np.greater_equal}
OPERATOR = {"eq": "__eq__", "ne": "__ne__", "lt": "__lt__", "le": "__le__", "gt": "__gt__", "ge": "__ge__"}


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("name", sorted(COMPARE))
def test_comparisons(name, dtype):
    x, a = make((3, 4), dtype, low=0, high=3)
    y, b = make((4,), dtype, low=0, high=3)
    assert_close(getattr(ts, name)(x, y), COMPARE[name](a, b), ts.bool)
    assert_close(getattr(x, OPERATOR[name])(y), COMPARE[name](a, b), ts.bool)
    assert_close(getattr(x, name)(1), COMPARE[name](a, 1), ts.bool)
    xt, at = make((4, 3), dtype, lambda t: t.T, low=0, high=3)
    assert_close(getattr(ts, name)(xt, y), COMPARE[name](at, b), ts.bool)


def test_comparison_with_other_types():
    x = ts.tensor([1, 2])
    assert (x == None) is False  # noqa: E711  (identity fallback, as PyTorch)
    assert (x != "a") is True
    with pytest.raises(TypeError):
        x < "a"


def test_logical_ops_and_bool_operators():
    p, a = make((2, 5), ts.bool)
    q, b = make((5,), ts.bool)
    assert_close(ts.logical_and(p, q), a & b, ts.bool)
    assert_close(ts.logical_or(p, q), a | b, ts.bool)
    assert_close(p & q, a & b, ts.bool)
    assert_close(p | q, a | b, ts.bool)
    assert_close(p ^ q, a ^ b, ts.bool)
    assert_close(~p, ~a, ts.bool)
    assert_close(p & True, a & True, ts.bool)
    assert_close(ts.logical_and(ts.tensor([0, 1, 2]), ts.tensor([1.0, 0.0, 3.0])), [False, False, True], ts.bool)


def test_invert_of_integers_and_errors():
    assert (~ts.tensor([0, 5, -3])).tolist() == [-1, -6, 2]
    assert (~ts.tensor([0, 200], dtype=ts.uint8)).tolist() == [255, 55]
    with pytest.raises(TypeError):
        ~ts.tensor([1.0])
    assert (ts.tensor([1, 6]) & ts.tensor([3, 4])).tolist() == [1, 4]  # integers: bitwise
    assert (ts.tensor([1, 6]) << 2).tolist() == [4, 24] and (ts.tensor([7, -7]) % 3).tolist() == [1, 2]
    with pytest.raises(TypeError, match="bitwise_and"):
        ts.tensor([1.0]) & ts.tensor([3.0])


@pytest.mark.parametrize("dtype", [ts.int32, ts.float32, ts.float16], ids=lambda d: d.name)
def test_where_clamp_masked_fill(dtype):
    c, cm = make((3, 4), ts.bool)
    x, a = make((3, 4), dtype)
    y, b = make((4,), dtype)
    assert_close(ts.where(c, x, y), np.where(cm, a, b), dtype)
    assert_close(x.where(c, y), np.where(cm, a, b), dtype)
    assert_close(ts.clamp(x, -2, 3), np.clip(a, -2, 3), dtype)
    assert_close(ts.clamp(x, min=-1), np.maximum(a, -1), dtype)
    assert_close(x.clamp(max=2), np.minimum(a, 2), dtype)
    assert_close(x.clip(-1, 1), np.clip(a, -1, 1), dtype)
    z = x.clone()
    z.clamp_(0, 1)
    assert_close(z, np.clip(a, 0, 1), dtype)
    assert_close(x.masked_fill(c, 7), np.where(cm, 7, a), dtype)
    z = x.clone()
    z.masked_fill_(c, -1)
    assert_close(z, np.where(cm, -1, a), dtype)


def test_clamp_nan_inputs_and_bounds():
    # NaN inputs stay NaN; a NaN bound makes every element NaN (np.clip and torch agree).
    x = ts.tensor([-2.0, 0.5, float("nan"), 4.0])
    a = to_np(x)
    nan = float("nan")
    for lo, hi in [(-1.0, 1.0), (nan, None), (None, nan), (0.0, nan), (nan, 1.0)]:
        want = np.clip(a, -np.inf if lo is None else lo, np.inf if hi is None else hi)
        np.testing.assert_array_equal(to_np(ts.clamp(x, lo, hi)), want)


def test_where_with_scalars():
    c = ts.tensor([True, False, True])
    x = ts.tensor([1, 2, 3], dtype=ts.int16)
    r = ts.where(c, x, 0)
    assert r.dtype == ts.int16 and r.tolist() == [1, 0, 3]
    r = ts.where(c, 1.5, x)
    assert r.dtype == ts.float32 and r.tolist() == [1.5, 2.0, 1.5]
    r = ts.where(c, 1.0, 0.0)
    assert r.dtype == ts.float32 and r.tolist() == [1.0, 0.0, 1.0]
    r = ts.where(c, 1, 0)
    assert r.dtype == ts.int64


# ---------------------------------------------------------------------------- reductions
REDUCE_DIMS = [None, 0, 1, -1, (0, 1), [0, 2]]


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dim", REDUCE_DIMS, ids=str)
@pytest.mark.parametrize("dtype", [ts.int32, ts.float32, ts.float64, ts.bfloat16], ids=lambda d: d.name)
def test_sum_prod(dtype, dim, keepdim):
    x, a = make((2, 3, 4), dtype, low=-2, high=2)
    axis = tuple(dim) if isinstance(dim, list) else dim
    want = ts.int64 if not dtype.is_floating_point else dtype
    r = ts.sum(x) if dim is None and not keepdim else ts.sum(x, dim, keepdim)
    expected = np.sum(a.astype(np.float64), axis=axis, keepdims=keepdim)
    assert_close(r, expected_in(want, expected), want, rtol=1e-2 if dtype == ts.bfloat16 else None)
    r = x.prod(dim, keepdim) if dim is not None else x.prod()
    expected = np.prod(a.astype(np.float64), axis=axis, keepdims=keepdim if dim is not None else False)
    assert_close(r, expected_in(want, expected), want, rtol=1e-2 if dtype == ts.bfloat16 else None)


@pytest.mark.parametrize("dim", REDUCE_DIMS, ids=str)
@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
def test_mean_var_std(dim, layout):
    x, a = make((2, 3, 4), ts.float64)
    if layout == "transposed":
        x, a = x.permute(2, 1, 0), a.transpose(2, 1, 0)
        if dim is not None and not isinstance(dim, int):
            dim = [d for d in dim]
    axis = tuple(dim) if isinstance(dim, list) else dim
    assert_close(x.mean(dim) if dim is not None else x.mean(), np.mean(a, axis=axis))
    assert_close(ts.var(x, dim), np.var(a, axis=axis, ddof=1))
    assert_close(ts.std(x, dim, keepdim=True), np.std(a, axis=axis, ddof=1, keepdims=True))
    assert_close(x.var(dim, unbiased=False), np.var(a, axis=axis))
    assert_close(x.std(dim, correction=0), np.std(a, axis=axis))


@pytest.mark.parametrize("shape,dims", [((8, 256, 1536), (0, 1)), ((2048, 384), (0,)), ((3, 5, 65), (0,)),
                                        ((1000, 7), (0,)), ((4, 3, 2, 1030), (0, 1, 2))], ids=str)
@pytest.mark.parametrize("dtype", [ts.float32, ts.float64], ids=lambda d: d.name)
def test_sum_and_mean_over_leading_dims(shape, dims, dtype):
    # The column-block path (bias gradients): blocks split among threads, partial last blocks.
    x, a = make(shape, dtype, low=-2, high=2)
    expected = np.sum(a.astype(np.float64), axis=dims, keepdims=True)
    tol = 1e-5 if dtype == ts.float32 else None
    assert_close(x.sum(list(dims), keepdim=True), expected.astype(a.dtype), dtype, rtol=tol, atol=tol)
    assert_close(x.mean(list(dims)), (expected / np.prod([shape[d] for d in dims])).squeeze(dims).astype(a.dtype),
                 dtype, rtol=tol, atol=tol)
    out = ts.empty(0, dtype=dtype)
    ts.sum(x, list(dims), out=out)
    assert_close(out, expected.squeeze(dims).astype(a.dtype), dtype, rtol=tol, atol=tol)


def test_mean_of_integers_needs_a_dtype():
    x = ts.tensor([1, 2, 4])
    with pytest.raises(TypeError, match="mean"):
        x.mean()
    assert x.mean(dtype=ts.float64).item() == pytest.approx(7 / 3)
    assert x.sum(dtype=ts.float32).dtype == ts.float32


def test_sum_of_bool_counts():
    b = ts.tensor([[True, False, True], [True, True, True]])
    assert b.sum().item() == 5 and b.sum().dtype == ts.int64
    assert b.sum(1).tolist() == [2, 3]


@pytest.mark.parametrize("dtype", [ts.int16, ts.int64, ts.float32, ts.float16], ids=lambda d: d.name)
def test_amax_amin_argmax_argmin_max_min(dtype):
    x, a = make((3, 5), dtype, low=-50, high=50)
    assert_close(ts.amax(x), np.max(a), dtype)
    assert_close(ts.amin(x, 1), np.min(a, 1), dtype)
    assert_close(x.amax(0, keepdim=True), np.max(a, 0, keepdims=True), dtype)
    assert_close(ts.amax(x, (0, 1)), np.max(a), dtype)
    assert_close(ts.argmax(x), np.argmax(a), ts.int64)
    assert_close(x.argmin(1), np.argmin(a, 1), ts.int64)
    assert_close(x.argmax(0, keepdim=True), np.argmax(a, 0)[None], ts.int64)
    assert_close(ts.max(x), np.max(a), dtype)
    values, indices = ts.max(x, 1)
    assert_close(values, np.max(a, 1), dtype)
    assert_close(indices, np.argmax(a, 1), ts.int64)
    r = x.min(0, keepdim=True)
    assert repr(r).startswith("tessera.return_types.min(\nvalues=tensor(")
    assert_close(r.values, np.min(a, 0, keepdims=True), dtype)
    assert_close(r.indices, np.argmin(a, 0)[None], ts.int64)
    y, b = make((5,), dtype)
    assert_close(ts.max(x, y), np.maximum(a, b), dtype)


def test_reductions_of_empty_tensors():
    e = ts.zeros(0, 3)
    assert_close(e.sum(), np.float64(0), ts.float32)
    assert_close(e.sum(0), np.zeros(3), ts.float32)
    assert_close(e.prod(0), np.ones(3), ts.float32)
    assert_close(e.amax(1), np.zeros((0,)), ts.float32)
    with pytest.raises(ValueError, match="amax"):
        e.amax(0)
    with pytest.raises(ValueError, match="max"):
        ts.max(e)


def test_logsumexp_softmax_log_softmax():
    x, a = make((3, 4), ts.float32)
    af = a.astype(np.float64)
    lse = np.log(np.sum(np.exp(af), axis=1))
    assert_close(ts.logsumexp(x, 1), lse)
    assert_close(x.logsumexp([0, 1], keepdim=True), np.log(np.sum(np.exp(af))).reshape(1, 1))
    sm = np.exp(af - lse[:, None])
    assert_close(ts.softmax(x, -1), sm)
    assert_close(x.softmax(dim=1), sm)
    assert_close(ts.log_softmax(x, 1), af - lse[:, None])
    assert ts.softmax(x, 0, dtype=ts.float64).dtype == ts.float64
    xt, at = make((4, 3), ts.float64, lambda t: t.T)
    e = np.exp(at - at.max(axis=0))
    assert_close(ts.softmax(xt, 0), e / e.sum(axis=0))


def test_all_any():
    x = ts.tensor([[1, 0, 2], [3, 4, 5]])
    assert ts.all(x).item() is False and ts.any(x).item() is True
    assert x.all(1).tolist() == [False, True]
    assert x.any(0).tolist() == [True, True, True]
    assert ts.all(ts.tensor([float("nan")])).item() is True


# ---------------------------------------------------------------------------- shapes and views
def test_view_ops_share_storage():
    x, a = make((2, 3, 4), ts.float32)
    cases = [
        (x.reshape(6, 4), a.reshape(6, 4)), (x.reshape((4, -1)), a.reshape(4, -1)),
        (x.view(-1), a.reshape(-1)), (x.view(2, 12), a.reshape(2, 12)),
        (x.permute(2, 0, 1), a.transpose(2, 0, 1)), (x.permute((1, 0, 2)), a.transpose(1, 0, 2)),
        (x.transpose(0, 2), a.swapaxes(0, 2)), (ts.transpose(x, 1, -1), a.swapaxes(1, 2)),
        (x.unsqueeze(1), a[:, None]), (ts.unsqueeze(x, -1), a[..., None]), (x.flatten(), a.reshape(-1)),
        (x.flatten(1), a.reshape(2, 12)), (ts.flatten(x, 0, 1), a.reshape(6, 4)), (x.narrow(2, 1, 2), a[:, :, 1:3]),
        (x.select(1, -1), a[:, -1]), (x[:, :1].squeeze(1), a[:, 0]), (x.mT, a.swapaxes(-1, -2)),
        (x.unsqueeze(0).expand(3, 2, 3, 4), np.broadcast_to(a, (3, 2, 3, 4))), (x.detach(), a),
        (x.expand(2, 3, 4), a), (x.swapaxes(0, 1), a.swapaxes(0, 1)), (x.T, a.T), (x.ravel(), a.reshape(-1)),
    ]
    for r, expected in cases:
        assert r._same_storage(x)
        assert_close(r, expected, ts.float32)


def test_squeeze_variants():
    x = ts.zeros(1, 3, 1, 2)
    assert x.squeeze().shape == (3, 2)
    assert x.squeeze(0).shape == (3, 1, 2)
    assert x.squeeze(1).shape == (1, 3, 1, 2)
    assert ts.squeeze(x, 2).shape == (1, 3, 2)
    assert x.squeeze((0, 2)).shape == (3, 2)


def test_t_and_transpose_properties():
    m, a = make((2, 3), ts.float32)
    assert_close(m.t(), a.T)
    assert_close(ts.t(m), a.T)
    v = ts.arange(3)
    assert v.t().shape == (3,) and v.T.shape == (3,)
    with pytest.raises(ValueError, match="t\\(\\)"):
        ts.zeros(2, 2, 2).t()
    with pytest.raises(RuntimeError, match="mT"):
        ts.zeros(3).mT


def test_view_of_incompatible_strides_fails_but_reshape_copies():
    x = ts.arange(6).reshape(2, 3).T
    with pytest.raises(ValueError, match="view"):
        x.view(6)
    r = x.reshape(6)
    assert not r._same_storage(x)
    assert r.tolist() == [0, 3, 1, 4, 2, 5]


def test_contiguous_and_clone():
    x, a = make((3, 4), ts.float32, lambda t: t.T)
    assert not x.is_contiguous()
    c = x.contiguous()
    assert c.is_contiguous() and not c._same_storage(x)
    assert_close(c, a)
    assert c.contiguous()._same_storage(c)
    cl = x.clone()
    assert not cl._same_storage(x)
    assert_close(cl, a)


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cat_stack(dim):
    tensors, arrays = zip(*(make((2, 3), ts.float32) for _ in range(3)))
    assert_close(ts.cat(tensors, dim), np.concatenate(arrays, dim))
    assert_close(ts.cat(list(tensors), dim=dim), np.concatenate(arrays, dim))
    assert_close(ts.stack(tensors, dim), np.stack(arrays, dim))
    assert_close(ts.concat([tensors[0].T, tensors[1].T], dim), np.concatenate([arrays[0].T, arrays[1].T], dim))
    out = ts.empty(0)
    ts.stack(tensors, dim, out=out)
    assert_close(out, np.stack(arrays, dim))


def test_cat_promotes_and_accepts_empty():
    r = ts.cat([ts.tensor([1, 2]), ts.tensor([0.5])])
    assert r.dtype == ts.float32 and r.tolist() == [1.0, 2.0, 0.5]
    r = ts.cat([ts.zeros(0, 3), ts.ones(2, 3)])
    assert r.shape == (2, 3)


def test_split_chunk_unbind():
    x, a = make((7, 2), ts.float32)
    parts = ts.split(x, 3)
    assert [p.shape[0] for p in parts] == [3, 3, 1]
    for p, e in zip(parts, np.split(a, [3, 6])):
        assert_close(p, e)
    assert [p.shape[0] for p in x.split([2, 5])] == [2, 5]
    assert [p.shape[0] for p in ts.chunk(x, 3)] == [3, 3, 1]
    rows = ts.unbind(x)
    assert len(rows) == 7
    assert_close(rows[4], a[4])
    assert [c.tolist() for c in x.unbind(1)] == [a[:, 0].tolist(), a[:, 1].tolist()]


# ---------------------------------------------------------------------------- copies and conversions
@pytest.mark.parametrize("src", ALL_DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("dst", ALL_DTYPES, ids=lambda d: d.name)
def test_to_dtype(src, dst):
    x, a = make((2, 3), src, low=0, high=100)
    r = x.to(dst)
    assert r.dtype == dst
    if src == dst:
        assert r is x
    if dst == ts.bool:
        expected = a != 0
    elif dst == ts.bfloat16:
        expected = round_bf16(a.astype(np.float32))
    else:
        expected = a.astype(np_dtype(dst))
    assert_close(r, expected, dst)


def test_to_variants():
    x = ts.tensor([1.5, -2.5])
    assert x.to(ts.float64).dtype == ts.float64
    assert x.to(dtype=ts.int32).tolist() == [1, -2]
    assert x.to("cpu") is x
    assert x.to(ts.device("cpu")) is x
    assert x.to("cpu", ts.float16).dtype == ts.float16
    assert x.to(ts.tensor([1])).dtype == ts.int64
    c = x.to(ts.float32, copy=True)
    assert c is not x and not c._same_storage(x)
    assert x.float() is x
    assert x.double().dtype == ts.float64
    assert x.half().dtype == ts.float16
    assert x.bfloat16().dtype == ts.bfloat16
    assert x.long().tolist() == [1, -2]
    assert x.int().dtype == ts.int32
    assert x.short().dtype == ts.int16
    assert x.char().dtype == ts.int8
    assert x.byte().dtype == ts.uint8
    assert x.bool().tolist() == [True, True]
    assert x.type() == "tessera.FloatTensor"
    assert x.type(ts.int64).dtype == ts.int64
    assert x.type("tessera.DoubleTensor").dtype == ts.float64
    assert x.type_as(ts.tensor([1], dtype=ts.int16)).dtype == ts.int16
    assert x.cpu() is x
    with pytest.raises(TypeError, match="to\\(\\)"):
        x.to(3.5)


def test_copy_and_fill():
    x, a = make((3, 4), ts.float32)
    y = ts.zeros(3, 4)
    r = y.copy_(x)
    assert r._same_storage(y)
    assert_close(y, a)
    y.copy_(ts.tensor([1, 2, 3, 4]))  # broadcast, and converted
    assert_close(y, np.tile([1.0, 2, 3, 4], (3, 1)))
    y.T[0].fill_(9)
    assert y[:, 0].tolist() == [9.0, 9.0, 9.0]
    y.zero_()
    assert y.sum().item() == 0
    with pytest.raises(ValueError, match="copy_"):
        y.copy_(ts.zeros(2))


# ---------------------------------------------------------------------------- indexing ops
def test_index_select_gather_scatter():
    x, a = make((4, 5), ts.float32)
    idx = ts.tensor([3, 0, 3])
    assert_close(ts.index_select(x, 0, idx), a[[3, 0, 3]])
    assert_close(x.index_select(1, idx), a[:, [3, 0, 3]])
    gi = np.array([[0, 4], [1, 1], [2, 0], [3, 3]])
    assert_close(ts.gather(x, 1, from_np(gi)), np.take_along_axis(a, gi, 1))
    src, s = make((4, 2), ts.float32)
    expected = a.copy()
    np.put_along_axis(expected, gi[:, :1], s[:, :1], 1)
    assert_close(x.scatter(1, from_np(gi[:, :1]), src[:, :1]), expected)
    expected = a.copy()
    np.put_along_axis(expected, gi[:, :1], 5.0, 1)
    z = x.clone()
    z.scatter_(1, from_np(gi[:, :1]), 5.0)
    assert_close(z, expected)
    with pytest.raises(IndexError, match="index_select"):
        ts.index_select(x, 0, ts.tensor([4]))


# ---------------------------------------------------------------------------- linear algebra
@pytest.mark.parametrize("dtype", [ts.float32, ts.float64, ts.int64, ts.float16], ids=lambda d: d.name)
def test_matmul_mm_bmm_addmm(dtype):
    x, a = make((3, 4), dtype, low=-3, high=3)
    y, b = make((4, 5), dtype, low=-3, high=3)
    af, bf = a.astype(np.float64), b.astype(np.float64)
    tol = dict(rtol=1e-2, atol=1e-2) if dtype == ts.float16 else dict(rtol=1e-5, atol=1e-5)
    assert_close(ts.matmul(x, y), af @ bf, dtype, **tol)
    assert_close(x.mm(y), af @ bf, dtype, **tol)
    assert_close(x @ y.T.T, af @ bf, dtype, **tol)
    bx, ba = make((2, 3, 4), dtype, low=-3, high=3)
    by, bb = make((2, 4, 2), dtype, low=-3, high=3)
    assert_close(ts.bmm(bx, by), ba.astype(np.float64) @ bb.astype(np.float64), dtype, **tol)
    v, c = make((4,), dtype, low=-3, high=3)
    assert_close(x @ v, af @ c.astype(np.float64), dtype, **tol)
    assert_close(v @ y, c.astype(np.float64) @ bf, dtype, **tol)
    assert_close(bx @ y, ba.astype(np.float64) @ bf, dtype, **tol)
    m, d = make((3, 5), dtype, low=-3, high=3)
    assert_close(ts.addmm(m, x, y, beta=2, alpha=3), 2 * d.astype(np.float64) + 3 * (af @ bf), dtype, **tol)


@pytest.mark.parametrize("m,k,n", [(12, 70, 400), (16, 70, 400), (40, 70, 400), (96, 70, 400), (97, 70, 400),
                                   (200, 300, 150), (200, 300, 151)])
def test_linear_shaped_products(m, k, n):
    # x @ w.t() takes other routes through oneDNN with 16-96 rows (the transposed product,
    # transposed back) and with w at least twice as wide as tall (w copied row-major first);
    # results, addmm's beta and alpha, and a strided output must not change.
    rng = np.random.default_rng(m + k + n)
    a, w = rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((n, k)).astype(np.float32)
    c = rng.standard_normal((m, n)).astype(np.float32)
    ta, tw, tc = from_np(a), from_np(w), from_np(c)
    want = a.astype(np.float64) @ w.T.astype(np.float64)
    np.testing.assert_allclose(to_np(ts.mm(ta, tw.t())), want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(to_np(ts.nn.functional.linear(ta[None], tw))[0], want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(to_np(ts.addmm(tc, ta, tw.t(), beta=0.5, alpha=2.0)), 0.5 * c + 2 * want,
                               rtol=1e-4, atol=1e-4)
    out = ts.full((m, 2 * n), float("nan"))[:, ::2]  # a strided output holding NaN: overwritten
    ts.mm(ta, tw.t(), out=out)
    np.testing.assert_allclose(to_np(out), want, rtol=1e-4, atol=1e-4)


def test_matmul_non_contiguous_and_empty():
    x, a = make((4, 3), ts.float32, lambda t: t.T)
    y, b = make((5, 4), ts.float32, lambda t: t.T)
    assert_close(x @ y, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-5, atol=1e-5)
    assert_close(ts.zeros(2, 0) @ ts.zeros(0, 3), np.zeros((2, 3)))
    with pytest.raises(ValueError, match="matmul|mm"):
        ts.zeros(2, 3) @ ts.zeros(2, 3)


# ---------------------------------------------------------------------------- factories
def test_factories_shapes_and_dtypes():
    assert ts.zeros(2, 3).shape == (2, 3) and ts.zeros(2, 3).dtype == ts.float32
    assert ts.zeros((2, 3)).shape == (2, 3)
    assert ts.zeros([4]).shape == (4,)
    assert ts.zeros(()).shape == ()
    assert ts.zeros(size=(1, 2)).shape == (1, 2)
    assert ts.ones(3, dtype=ts.int32).tolist() == [1, 1, 1]
    assert ts.empty(2, 2).shape == (2, 2)
    assert ts.full((2,), 7).dtype == ts.int64
    assert ts.full((2,), True).dtype == ts.bool
    assert ts.full((2,), 1.5).tolist() == [1.5, 1.5]
    assert ts.full((2,), 3, dtype=ts.float64).dtype == ts.float64
    assert ts.arange(5).tolist() == [0, 1, 2, 3, 4] and ts.arange(5).dtype == ts.int64
    assert ts.arange(1, 4).tolist() == [1, 2, 3]
    assert ts.arange(0, 1, 0.25).tolist() == [0.0, 0.25, 0.5, 0.75]
    assert ts.arange(0, 1, 0.25).dtype == ts.float32
    assert ts.arange(5.0).dtype == ts.float32
    assert ts.arange(10, 0, -3).tolist() == [10, 7, 4, 1]
    assert_close(ts.linspace(0, 1, 5), np.linspace(0, 1, 5), ts.float32)
    assert_close(ts.eye(3), np.eye(3), ts.float32)
    assert_close(ts.eye(2, 3, dtype=ts.int64), np.eye(2, 3), ts.int64)
    assert ts.zeros_like(ts.ones(2, dtype=ts.int8)).dtype == ts.int8
    assert ts.ones_like(ts.ones(2, 3)).tolist() == [[1.0] * 3] * 2
    assert ts.full_like(ts.ones(2), 4).tolist() == [4.0, 4.0]
    assert ts.empty_like(ts.ones(2, 3), dtype=ts.float64).dtype == ts.float64


def test_random_factories_seeded():
    ts.manual_seed(0)
    a = ts.rand(100)
    b = ts.randn(3, 4)
    c = ts.randint(0, 10, (50,))
    ts.manual_seed(0)
    assert ts.rand(100).tolist() == a.tolist()
    assert ts.randn(3, 4).tolist() == b.tolist()
    assert ts.randint(0, 10, (50,)).tolist() == c.tolist()
    v = a.tolist()
    assert all(0.0 <= e < 1.0 for e in v)
    assert c.dtype == ts.int64 and all(0 <= e < 10 for e in c.tolist())
    assert ts.randint(5, (2, 2)).shape == (2, 2)
    assert ts.randint(3, 5, size=(4,)).shape == (4,)
    assert ts.rand_like(ts.zeros(2, dtype=ts.float64)).dtype == ts.float64
    n = ts.randn(20000, dtype=ts.float64)
    assert abs(n.mean().item()) < 0.05 and abs(n.std().item() - 1) < 0.05


def test_default_dtype_drives_float_factories():
    ts.set_default_dtype(ts.float64)
    assert ts.get_default_dtype() == ts.float64
    for t in (ts.zeros(2), ts.ones(2), ts.empty(2), ts.rand(2), ts.randn(2), ts.eye(2), ts.linspace(0, 1, 3),
              ts.full((2,), 0.5), ts.arange(0.0, 1.0, 0.5), ts.tensor([1.0, 2.0]), ts.tensor(1.5)):
        assert t.dtype == ts.float64, t
    assert ts.arange(3).dtype == ts.int64
    assert ts.full((1,), 2).dtype == ts.int64
    assert ts.tensor([1, 2]).dtype == ts.int64
    with pytest.raises(TypeError):
        ts.set_default_dtype(ts.int32)


def test_factory_errors():
    with pytest.raises(TypeError, match="zeros"):
        ts.zeros()
    with pytest.raises(TypeError, match="size"):
        ts.zeros("a")
    with pytest.raises(ValueError, match="arange"):
        ts.arange(0, 10, 0)
    with pytest.raises(ValueError):
        ts.zeros(-1)
    assert ts.zeros(2, requires_grad=True).requires_grad  # factories make leaves that require grad
    with pytest.raises(RuntimeError, match="floating point"):
        ts.zeros(2, dtype=ts.int64, requires_grad=True)


# ---------------------------------------------------------------------------- errors name the operator
def test_invalid_arguments_type_error_lists_schemas():
    x = ts.zeros(2)
    with pytest.raises(TypeError) as e:
        ts.add(x, "a")
    msg = str(e.value)
    assert "add" in msg and "str" in msg
    assert "Tensor other" in msg and "Scalar other" in msg  # the candidate schemas
    with pytest.raises(TypeError, match="sum"):
        ts.sum(x, dim="x")
    with pytest.raises(TypeError, match="transpose"):
        x.transpose(0)
    with pytest.raises(TypeError, match="softmax"):
        ts.softmax(x)  # dim is required
    with pytest.raises(TypeError, match="dim"):
        ts.softmax(x)
    with pytest.raises(TypeError, match="reshape"):
        x.reshape(1.5)


def test_value_and_index_errors_name_the_operator():
    with pytest.raises(ValueError, match="add"):
        ts.zeros(2, 3) + ts.zeros(4)
    with pytest.raises(ValueError, match="reshape"):
        ts.zeros(6).reshape(4, 2)
    with pytest.raises(IndexError, match="transpose|dim"):
        ts.zeros(2, 3).transpose(0, 5)
    with pytest.raises(IndexError, match="select"):
        ts.zeros(2, 3).select(0, 2)
    with pytest.raises(ValueError, match="permute"):
        ts.zeros(2, 3).permute(0, 0)
    with pytest.raises(ValueError, match="cat"):
        ts.cat([ts.zeros(2, 3), ts.zeros(2, 4)])


def test_item_and_conversions_errors():
    with pytest.raises(ValueError, match="6 elements"):
        ts.zeros(2, 3).item()
    with pytest.raises(RuntimeError, match="ambiguous"):
        bool(ts.zeros(2))
    with pytest.raises(RuntimeError, match="ambiguous"):
        bool(ts.zeros(0))
    with pytest.raises(TypeError, match="index"):
        [1, 2][ts.tensor(1.0)]


# ---------------------------------------------------------------------------- tessera.ops
def test_ops_namespace():
    x = ts.tensor([1.0, 2.0])
    assert ts.ops.aten.add(x, x).tolist() == [2.0, 4.0]
    assert ts.ops.aten.add_(x.clone(), 1).tolist() == [2.0, 3.0]
    assert ts.ops.aten.slice(ts.arange(6), 0, 1, 5, 2).tolist() == [1, 3]
    assert "add" in dir(ts.ops.aten)
    assert "aten" in dir(ts.ops)
    schemas = ts.ops.aten.add.schemas
    assert any(s.startswith("add.Tensor(") or "add.Tensor(" in s for s in schemas)
    assert "Tensor" in ts.ops.aten.add.overloads() and "Scalar" in ts.ops.aten.add.overloads()
    with pytest.raises(AttributeError, match="no_such_op"):
        ts.ops.aten.no_such_op
    with pytest.raises(AttributeError):
        ts.ops.nonexistent_namespace.foo


def test_every_operator_is_reachable():
    from tessera import _C, _generated_ops

    names = set(_C.op_names())
    assert names >= set(_generated_ops.OPERATORS)
    for n in _generated_ops.OPERATORS:
        assert callable(getattr(ts.ops.aten, n))
    for n in _generated_ops.FUNCTIONS:
        assert callable(getattr(ts, n)), n
    for n in _generated_ops.METHODS:  # real / imag are properties, as in PyTorch
        assert callable(getattr(ts.Tensor, n)) or isinstance(getattr(ts.Tensor, n), property), n
    assert _C.op_names() == sorted(_C.op_names())


def test_generated_wrappers_are_thin():
    from tessera import _generated_ops

    assert ts.add is _generated_ops.add
    assert ts.Tensor.add is _generated_ops.add
    assert "add.Tensor(" in ts.add.__doc__
