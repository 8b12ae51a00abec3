"""Property-based tests (hypothesis) against NumPy semantics, taking PyTorch's rules where the two
differ: broadcasting of binary ops, basic and advanced indexing (and assignment), and type
promotion between tensors, 0-dim tensors and Python numbers."""
import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tessera as ts
from conftest import ALL_DTYPES, assert_close, from_np, np_dtype, round_bf16, to_np, torch_promote

SETTINGS = settings(max_examples=150, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
DTYPES = st.sampled_from(ALL_DTYPES)


def values_for(dtype, shape, draw):
    """NumPy values of `shape` that `dtype` holds exactly (small, so sums and products do not overflow)."""
    if dtype == ts.bool:
        return draw(hnp.arrays(np.bool_, shape))
    if dtype.is_floating_point:
        ints = draw(hnp.arrays(np.int64, shape, elements=st.integers(-16, 16)))
        return (ints / 4.0).astype(np_dtype(dtype))  # quarters: exact in every float dtype
    lo = 0 if dtype == ts.uint8 else -5
    return draw(hnp.arrays(np.int64, shape, elements=st.integers(lo, 5))).astype(np_dtype(dtype))


def as_dtype(values, dtype):
    values = np.asarray(values)
    if dtype == ts.bool:
        return values != 0
    if dtype == ts.bfloat16:
        return round_bf16(values.astype(np.float32))
    if not dtype.is_floating_point:
        return values.astype(np.int64).astype(np_dtype(dtype))
    return values.astype(np_dtype(dtype))


# ---------------------------------------------------------------------------- broadcasting
@st.composite
def broadcast_operands(draw):
    shapes = draw(hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=4, min_side=0, max_side=4))
    dtype = draw(st.sampled_from([ts.int32, ts.int64, ts.float32, ts.float64]))
    a = values_for(dtype, shapes.input_shapes[0], draw)
    b = values_for(dtype, shapes.input_shapes[1], draw)
    transpose = draw(st.booleans())
    return dtype, a, b, shapes.result_shape, transpose


@SETTINGS
@given(broadcast_operands(), st.sampled_from(["add", "sub", "mul", "maximum", "minimum", "eq", "lt"]))
def test_binary_broadcasting(operands, name):
    dtype, a, b, result_shape, transpose = operands
    x, y = from_np(a, dtype), from_np(b, dtype)
    if transpose and a.ndim >= 2:  # the same values through a non-contiguous view
        x = from_np(np.ascontiguousarray(np.swapaxes(a, 0, 1)), dtype).transpose(0, 1)
    ref = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "maximum": np.maximum, "minimum": np.minimum,
           "eq": np.equal, "lt": np.less}[name](a, b)
    r = getattr(ts, name)(x, y)
    assert tuple(r.shape) == result_shape
    assert_close(r, ref, ts.bool if name in ("eq", "lt") else dtype)


@SETTINGS
@given(hnp.mutually_broadcastable_shapes(num_shapes=3, max_dims=3, max_side=3))
def test_where_broadcasts_three_ways(shapes):
    rng = np.random.default_rng(0)
    c = rng.random(shapes.input_shapes[0]) < 0.5
    a = rng.integers(-5, 5, shapes.input_shapes[1])
    b = rng.integers(-5, 5, shapes.input_shapes[2])
    r = ts.where(from_np(c), from_np(a), from_np(b))
    assert_close(r, np.where(c, a, b), ts.int64)


@SETTINGS
@given(hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=4), st.data())
def test_expand_matches_broadcast_to(shape, data):
    target = data.draw(hnp.broadcastable_shapes(shape, min_dims=len(shape), max_dims=len(shape) + 2, min_side=0, max_side=4))
    full = np.broadcast_shapes(shape, target)  # a shape `shape` expands to
    a = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    r = from_np(a).expand(*full)
    assert_close(r, np.broadcast_to(a, full))


# ---------------------------------------------------------------------------- type promotion
def result_type_oracle(operands):
    """PyTorch's result type: dimensioned tensors, then 0-dim tensors, then Python numbers, where a
    lower group counts only when it is of a higher category (bool < integer < floating)."""
    groups = {"tensor": None, "zerodim": None, "scalar": None}
    for kind, dtype in operands:
        cur = groups[kind]
        groups[kind] = dtype if cur is None else torch_promote(cur, dtype)

    def combine(higher, lower):
        if higher is None:
            return lower
        if lower is None or higher.is_floating_point:
            return higher
        if higher == ts.bool or lower.is_floating_point:
            return torch_promote(higher, lower)
        return higher

    return combine(groups["tensor"], combine(groups["zerodim"], groups["scalar"]))


@st.composite
def promotion_operands(draw):
    kinds = []
    for _ in range(2):
        kind = draw(st.sampled_from(["tensor", "zerodim", "scalar"]))
        if kind == "scalar":
            value = draw(st.one_of(st.booleans(), st.integers(-3, 3), st.sampled_from([-1.5, 0.25, 2.0])))
            kinds.append(("scalar", value))
        else:
            kinds.append((kind, draw(DTYPES)))
    assume(any(k != "scalar" for k, _ in kinds))
    return kinds


def scalar_dtype(value):
    if isinstance(value, bool):
        return ts.bool
    if isinstance(value, int):
        return ts.int64
    return ts.get_default_dtype()


@SETTINGS
@given(promotion_operands(), st.sampled_from(["add", "mul", "maximum", "where"]), st.data())
def test_type_promotion(operands, op, data):
    if op in ("maximum", "where") and any(k == "scalar" for k, _ in operands):
        op = "add"  # maximum has no Scalar overload in PyTorch either
    tensors, numpy_vals, oracle_in = [], [], []
    for kind, spec in operands:
        if kind == "scalar":
            tensors.append(spec)
            numpy_vals.append(np.float64(spec))
            oracle_in.append(("scalar", scalar_dtype(spec)))
        else:
            shape = (3,) if kind == "tensor" else ()
            v = values_for(spec, shape, data.draw)
            tensors.append(from_np(v, spec))
            numpy_vals.append(v.astype(np.float64))
            oracle_in.append((kind, spec))
    want = result_type_oracle(oracle_in)
    x, y = tensors
    if op == "add":
        if not isinstance(x, ts.Tensor):
            x, y = y, x
        r = x + y
        ref = numpy_vals[0] + numpy_vals[1]
    elif op == "mul":
        if not isinstance(x, ts.Tensor):
            x, y = y, x
        r = x * y
        ref = numpy_vals[0] * numpy_vals[1]
    elif op == "maximum":
        r = ts.maximum(x, y)
        # Compared in the result dtype, as PyTorch does: an int8 -1 against uint8 values is 255.
        ref = np.maximum(as_dtype(numpy_vals[0], want), as_dtype(numpy_vals[1], want))
    else:
        cond = ts.tensor([True, False, True])
        r = ts.where(cond, x, y)
        ref = np.where([True, False, True], numpy_vals[0], numpy_vals[1])
    if want == ts.bool and op == "add":
        ref = ref != 0  # bool + bool is logical or
    if want == ts.bool and op == "mul":
        ref = ref != 0
    assert r.dtype == want, (operands, op, r.dtype, want)
    assert_close(r, as_dtype(np.broadcast_to(ref, r.shape), want), want, check_dtype=False)


@SETTINGS
@given(DTYPES, DTYPES)
def test_promote_types_matches_pytorch_table(a, b):
    assert ts.promote_types(a, b) == torch_promote(a, b)
    assert ts.promote_types(a, b) == ts.promote_types(b, a)


@SETTINGS
@given(DTYPES, DTYPES)
def test_cat_promotes(a, b):
    x = ts.tensor([1, 0], dtype=a)
    y = ts.tensor([1], dtype=b)
    assert ts.cat([x, y]).dtype == torch_promote(a, b)


# ---------------------------------------------------------------------------- indexing
@st.composite
def basic_index(draw, shape):
    """A basic index for `shape`: ints (in range), slices with positive steps, None, one Ellipsis."""
    key = []
    dims = list(shape)
    i = 0
    used_ellipsis = False
    while i < len(dims):
        # after an Ellipsis the key covers every remaining dim, so the Ellipsis spans exactly `skip`
        choices = ["int", "slice", "slice", "none"] + ([] if used_ellipsis else ["ellipsis", "stop"])
        choice = draw(st.sampled_from(choices))
        n = dims[i]
        if choice == "stop":
            break
        if choice == "int" and n > 0:
            key.append(draw(st.integers(-n, n - 1)))
            i += 1
        elif choice == "none":
            key.append(None)
        elif choice == "ellipsis" and not used_ellipsis:
            used_ellipsis = True
            skip = draw(st.integers(0, len(dims) - i))
            key.append(Ellipsis)
            i += skip
        else:
            start = draw(st.one_of(st.none(), st.integers(-n - 2, n + 2)))
            stop = draw(st.one_of(st.none(), st.integers(-n - 2, n + 2)))
            step = draw(st.one_of(st.none(), st.integers(1, 3)))
            key.append(slice(start, stop, step))
            i += 1
    return tuple(key)


SHAPES = hnp.array_shapes(min_dims=1, max_dims=4, min_side=0, max_side=5)


@SETTINGS
@given(SHAPES, st.data())
def test_basic_indexing_matches_numpy(shape, data):
    a = np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape)
    key = data.draw(basic_index(shape))
    x = from_np(a)
    r = x[key]
    assert_close(r, a[key], ts.int64)
    assert r._same_storage(x)


@SETTINGS
@given(SHAPES, st.data())
def test_basic_setitem_matches_numpy(shape, data):
    a = np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape)
    key = data.draw(basic_index(shape))
    x = from_np(a)
    value = data.draw(st.one_of(st.integers(-9, 9), st.sampled_from(["row"])))
    a2 = a.copy()
    if value == "row":
        target = a2[key].shape
        v = np.arange(target[-1], dtype=np.float64) - 100 if target else np.float64(-100)
        a2[key] = v
        x[key] = from_np(np.asarray(v))
    else:
        a2[key] = value
        x[key] = value
    assert_close(x, a2, ts.float64)


@st.composite
def advanced_index(draw, shape):
    """Slices everywhere except one or two adjacent dims indexed by integer arrays (which
    broadcast together), or one boolean mask over a run of dims."""
    nd = len(shape)
    kind = draw(st.sampled_from(["int", "int2", "mask"]))
    start = draw(st.integers(0, nd - 1))
    key = [slice(None)] * start
    if kind == "mask":
        k = draw(st.integers(1, nd - start))
        mask = draw(hnp.arrays(np.bool_, shape[start:start + k]))
        key.append(mask)
        consumed = start + k
    else:
        count = 2 if kind == "int2" and start + 1 < nd else 1
        idx_shape = draw(hnp.array_shapes(min_dims=1, max_dims=2, min_side=1, max_side=3))
        for d in range(start, start + count):
            n = shape[d]
            assume(n > 0)
            key.append(draw(hnp.arrays(np.int64, idx_shape, elements=st.integers(-n, n - 1))))
        consumed = start + count
    if draw(st.booleans()) and consumed < nd:
        key.append(slice(None, None, 2))
    return tuple(key)


ADV_SHAPES = hnp.array_shapes(min_dims=1, max_dims=4, min_side=1, max_side=4)


def _ts_key(key):
    return tuple(from_np(k) if isinstance(k, np.ndarray) else k for k in key)


@SETTINGS
@given(ADV_SHAPES, st.data())
def test_advanced_indexing_matches_numpy(shape, data):
    a = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    key = data.draw(advanced_index(shape))
    x = from_np(a)
    assert_close(x[_ts_key(key)], a[key], ts.float32)


@SETTINGS
@given(ADV_SHAPES, st.data())
def test_advanced_setitem_matches_numpy(shape, data):
    a = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    key = data.draw(advanced_index(shape))  # one value for every element: duplicates do not matter
    x = from_np(a)
    a2 = a.copy()
    a2[key] = -1
    x[_ts_key(key)] = -1
    assert_close(x, a2, ts.float32)


@SETTINGS
@given(ADV_SHAPES, st.data())
def test_advanced_setitem_unique_indices(shape, data):
    a = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    d = data.draw(st.integers(0, len(shape) - 1))
    n = shape[d]
    idx = np.array(data.draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=n, unique=True)), dtype=np.int64)
    key = (slice(None),) * d + (idx,)
    x = from_np(a)
    a2 = a.copy()
    vals = -np.arange(a2[key].size, dtype=np.float32).reshape(a2[key].shape) - 1
    a2[key] = vals
    x[_ts_key(key)] = from_np(vals)
    assert_close(x, a2, ts.float32)


def test_property_module_imports():
    assert to_np(ts.tensor([1])).tolist() == [1]
    pytest.importorskip("hypothesis")
