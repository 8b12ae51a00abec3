"""The normalization family against NumPy: native batch / layer / group norm and their backwards
(gradients against central finite differences of a NumPy forward), native_dropout, embedding
and its dense backward, scatter_add / index_add (every dtype, in place), slice_backward and
select_backward. float32 and float64, batched and unbatched shapes, non-contiguous inputs,
zero-size inputs and the errors; PyTorch cross-checks when it is installed."""
import numpy as np
import pytest

import tessera as ts
from conftest import ALL_DTYPES, assert_close, from_np, np_dtype, sample, to_np

aten = ts.ops.aten
FLOATS = [ts.float32, ts.float64]
TOL = {ts.float32: dict(rtol=2e-5, atol=2e-5), ts.float64: dict(rtol=1e-11, atol=1e-11)}


def version(t):
    """The tensor's version counter, or None where it is not readable (the autograd plugin that
    exposes it to Python is not built); the C++ suite checks the bumps in any case."""
    try:
        return t._version
    except RuntimeError:
        return None


def rng(seed=0):
    return np.random.default_rng(seed)


def values(shape, seed=0):
    return rng(seed).uniform(-2, 2, size=shape)


# ---------------------------------------------------------------------------- NumPy references
def np_batch_norm(x, w, b, eps, mean=None, var=None):
    axes = (0,) + tuple(range(2, x.ndim))
    if mean is None:
        mean, var = x.mean(axis=axes), x.var(axis=axes)
    shape = (1, -1) + (1,) * (x.ndim - 2)
    y = (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + eps)
    if w is not None:
        y = y * w.reshape(shape)
    if b is not None:
        y = y + b.reshape(shape)
    return y


def np_layer_norm(x, k, w, b, eps):
    axes = tuple(range(x.ndim - k, x.ndim))
    mean, var = x.mean(axis=axes, keepdims=True), x.var(axis=axes, keepdims=True)
    y = (x - mean) / np.sqrt(var + eps)
    if w is not None:
        y = y * w
    if b is not None:
        y = y + b
    return y


def np_group_norm(x, g, w, b, eps):
    n, c = x.shape[:2]
    if x.size == 0:
        return x.copy()
    xr = x.reshape(n, g, -1)
    mean, var = xr.mean(axis=2, keepdims=True), xr.var(axis=2, keepdims=True)
    y = ((xr - mean) / np.sqrt(var + eps)).reshape(x.shape)
    shape = (1, c) + (1,) * (x.ndim - 2)
    if w is not None:
        y = y * w.reshape(shape)
    if b is not None:
        y = y + b.reshape(shape)
    return y


def numeric_grad(f, x, g, h=1e-6):
    """d sum(f(x) * g) / dx by central differences."""
    x = x.copy()
    out = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        keep = x[i]
        x[i] = keep + h
        up = (f(x) * g).sum()
        x[i] = keep - h
        down = (f(x) * g).sum()
        x[i] = keep
        out[i] = (up - down) / (2 * h)
    return out


# ---------------------------------------------------------------------------- batch norm
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("shape", [(8, 3), (4, 3, 5), (2, 3, 4, 5)], ids=str)
def test_batch_norm_training(dtype, shape):
    x = values(shape, 1).astype(np_dtype(dtype))
    c = shape[1]
    w, b = values(c, 2), values(c, 3)
    rm0, rv0 = values(c, 4), np.abs(values(c, 5)) + 0.5
    rm, rv = from_np(rm0, dtype), from_np(rv0, dtype)
    v0 = version(rm)
    out, save_mean, save_invstd = aten.native_batch_norm(from_np(x, dtype), from_np(w, dtype), from_np(b, dtype),
                                                         rm, rv, True, 0.1, 1e-5)
    xd = x.astype(np.float64)
    assert_close(out, np_batch_norm(xd, w, b, 1e-5), dtype, **TOL[dtype])
    axes = (0,) + tuple(range(2, x.ndim))
    n = xd.size // c
    assert_close(save_mean, xd.mean(axis=axes), dtype, **TOL[dtype])
    assert_close(save_invstd, 1 / np.sqrt(xd.var(axis=axes) + 1e-5), dtype, **TOL[dtype])
    assert_close(rm, 0.9 * rm0 + 0.1 * xd.mean(axis=axes), dtype, **TOL[dtype])
    assert_close(rv, 0.9 * rv0 + 0.1 * xd.var(axis=axes) * n / (n - 1), dtype, **TOL[dtype])
    if v0 is not None:
        assert version(rm) > v0 and version(rv) > v0


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_batch_norm_eval_and_non_contiguous(dtype):
    base = values((5, 3, 4), 1)
    x = from_np(base, dtype).permute(2, 1, 0)  # (4, 3, 5), not contiguous
    assert not x.is_contiguous()
    a = base.transpose(2, 1, 0)
    rm, rv = values(3, 2), np.abs(values(3, 3)) + 0.5
    out, sm, si = aten.native_batch_norm(x, None, None, from_np(rm, dtype), from_np(rv, dtype), False, 0.1, 1e-3)
    assert_close(out, np_batch_norm(a, None, None, 1e-3, rm, rv), dtype, **TOL[dtype])
    assert tuple(sm.shape) == (0,) and tuple(si.shape) == (0,)
    out, _, _ = aten.native_batch_norm(x, None, None, None, None, True, 0.1, 1e-5)
    assert_close(out, np_batch_norm(a, None, None, 1e-5), dtype, **TOL[dtype])
    empty, _, _ = aten.native_batch_norm(ts.zeros(0, 3, dtype=dtype), None, None, None, None, True, 0.1, 1e-5)
    assert tuple(empty.shape) == (0, 3)


@pytest.mark.parametrize("train", [True, False])
@pytest.mark.parametrize("shape", [(5, 2), (3, 2, 3)], ids=str)
def test_batch_norm_backward(train, shape):
    x, g = values(shape, 1), values(shape, 2)
    c = shape[1]
    w, b = values(c, 3), values(c, 4)
    rm, rv = values(c, 5), np.abs(values(c, 6)) + 0.5
    tx, tw = from_np(x), from_np(w)
    _, sm, si = aten.native_batch_norm(tx, tw, from_np(b), from_np(rm), from_np(rv), train, 0.1, 1e-5)

    def fwd(x_, w_, b_):
        return np_batch_norm(x_, w_, b_, 1e-5) if train else np_batch_norm(x_, w_, b_, 1e-5, rm, rv)

    gi, gw, gb = aten.native_batch_norm_backward(from_np(g), tx, tw, from_np(rm), from_np(rv), sm, si, train, 1e-5)
    assert_close(gi, numeric_grad(lambda v: fwd(v, w, b), x, g), ts.float64, rtol=1e-6, atol=1e-6)
    assert_close(gw, numeric_grad(lambda v: fwd(x, v, b), w, g), ts.float64, rtol=1e-6, atol=1e-6)
    assert_close(gb, numeric_grad(lambda v: fwd(x, w, v), b, g), ts.float64, rtol=1e-6, atol=1e-6)
    gi, gw, gb = aten.native_batch_norm_backward(from_np(g), tx, None, from_np(rm), from_np(rv), sm, si, train, 1e-5)
    assert tuple(gw.shape) == (0,)
    assert_close(gi, numeric_grad(lambda v: fwd(v, None, None), x, g), ts.float64, rtol=1e-6, atol=1e-6)


def test_batch_norm_errors():
    with pytest.raises(ValueError, match="native_batch_norm.*at least 2 dimensions"):
        aten.native_batch_norm(ts.zeros(4), None, None, None, None, True, 0.1, 1e-5)
    with pytest.raises(ValueError, match=r"native_batch_norm.*weight of shape \[3\], got \[4\]"):
        aten.native_batch_norm(ts.zeros(4, 3), ts.zeros(4), None, None, None, True, 0.1, 1e-5)
    with pytest.raises(TypeError, match="native_batch_norm.*int64"):
        aten.native_batch_norm(ts.zeros(4, 3, dtype=ts.int64), None, None, None, None, True, 0.1, 1e-5)
    with pytest.raises(ValueError, match="native_batch_norm.*running_mean"):
        aten.native_batch_norm(ts.zeros(4, 3), None, None, None, None, False, 0.1, 1e-5)
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        aten.native_batch_norm(ts.zeros(1, 3), None, None, None, None, True, 0.1, 1e-5)


# ---------------------------------------------------------------------------- layer norm
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("shape,k", [((6,), 1), ((3, 8), 1), ((2, 3, 4), 2), ((2, 2, 3, 5), 1), ((0, 4), 1)], ids=str)
@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm_forward(dtype, shape, k, affine):
    x = values(shape, 1)
    normalized = list(shape[len(shape) - k:])
    w, b = (values(normalized, 2), values(normalized, 3)) if affine else (None, None)
    out, mean, rstd = aten.native_layer_norm(from_np(x, dtype), normalized, None if w is None else from_np(w, dtype),
                                             None if b is None else from_np(b, dtype), 1e-5)
    xd = to_np(from_np(x, dtype)).astype(np.float64)
    assert_close(out, np_layer_norm(xd, k, w, b, 1e-5), dtype, **TOL[dtype])
    axes = tuple(range(len(shape) - k, len(shape)))
    if xd.size:
        assert_close(mean, xd.mean(axis=axes, keepdims=True), dtype, **TOL[dtype])
        assert_close(rstd, 1 / np.sqrt(xd.var(axis=axes, keepdims=True) + 1e-5), dtype, **TOL[dtype])
    assert tuple(mean.shape) == shape[: len(shape) - k] + (1,) * k


def test_layer_norm_non_contiguous_and_accuracy():
    base = values((6, 4), 1)
    out, _, _ = aten.native_layer_norm(from_np(base, ts.float32).t(), [6], None, None, 1e-5)
    assert_close(out, np_layer_norm(base.T.astype(np.float32).astype(np.float64), 1, None, None, 1e-5), ts.float32,
                 rtol=2e-5, atol=2e-5)
    # float32 statistics accumulate in double: a long row with a large offset.
    row = (1000.0 + (np.arange(200000) % 5) * 0.5).astype(np.float32)
    _, mean, rstd = aten.native_layer_norm(from_np(row).reshape(1, -1), [200000], None, None, 0.0)
    assert abs(mean.item() - row.astype(np.float64).mean()) < 1e-4
    assert abs(rstd.item() - 1 / row.astype(np.float64).std()) < 1e-4


@pytest.mark.parametrize("shape,k", [((3, 4), 1), ((2, 3, 2), 2), ((17, 3), 1)], ids=str)
def test_layer_norm_backward(shape, k):
    x, g = values(shape, 1), values(shape, 2)
    normalized = list(shape[len(shape) - k:])
    w, b = values(normalized, 3), values(normalized, 4)
    tx, tw, tb = from_np(x), from_np(w), from_np(b)
    _, mean, rstd = aten.native_layer_norm(tx, normalized, tw, tb, 1e-5)
    gi, gw, gb = aten.native_layer_norm_backward(from_np(g), tx, normalized, mean, rstd, tw, tb)
    f = np_layer_norm
    assert_close(gi, numeric_grad(lambda v: f(v, k, w, b, 1e-5), x, g), ts.float64, rtol=1e-6, atol=1e-6)
    assert_close(gw, numeric_grad(lambda v: f(x, k, v, b, 1e-5), w, g), ts.float64, rtol=1e-6, atol=1e-6)
    assert_close(gb, numeric_grad(lambda v: f(x, k, w, v, 1e-5), b, g), ts.float64, rtol=1e-6, atol=1e-6)
    gi, gw, gb = aten.native_layer_norm_backward(from_np(g), tx, normalized, mean, rstd, None, None)
    assert tuple(gw.shape) == (0,) and tuple(gb.shape) == (0,)
    assert_close(gi, numeric_grad(lambda v: f(v, k, None, None, 1e-5), x, g), ts.float64, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("shape,k", [((5, 37), 1), ((3, 4, 24), 2), ((64, 384), 1)], ids=str)
@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("grad", ["dense", "repeated_row", "expanded_scalar"])
def test_layer_norm_backward_float32_vector_kernels(shape, k, affine, grad):
    """float32 rows go through the vector kernels (the weight / bias gradients in the same pass,
    row tails shorter than a vector); a grad_out repeated over the rows (one row expanded, or the
    expanded scalar sum().backward() hands down) is read in place, not copied: all against the
    float64 kernel, which the test above checks against finite differences."""
    x = values(shape, 1)
    normalized = list(shape[len(shape) - k:])
    if grad == "dense":
        g = values(shape, 2)
        g32 = from_np(g, ts.float32)
    elif grad == "repeated_row":
        row = values(normalized, 2)
        g = np.broadcast_to(row, shape)
        g32 = from_np(row, ts.float32).expand(*shape)
    else:
        g = np.full(shape, 0.7)
        g32 = ts.tensor(0.7, dtype=ts.float32).expand(*shape)
    w, b = (values(normalized, 3), values(normalized, 4)) if affine else (None, None)

    def run(dtype, grad_out):
        opt = (lambda v: None if v is None else from_np(v, dtype))
        tx = from_np(x.astype(np.float32).astype(np.float64), dtype)
        _, mean, rstd = aten.native_layer_norm(tx, normalized, opt(w), opt(b), 1e-5)
        return aten.native_layer_norm_backward(grad_out, tx, normalized, mean, rstd, opt(w), opt(b))

    got = run(ts.float32, g32)
    want = run(ts.float64, from_np(np.ascontiguousarray(g).astype(np.float32).astype(np.float64), ts.float64))
    for ours, ref in zip(got, want):
        assert ours.dtype == ts.float32
        np.testing.assert_allclose(to_np(ours), to_np(ref), rtol=2e-4, atol=2e-4)


def test_layer_norm_errors():
    with pytest.raises(ValueError, match=r"native_layer_norm.*\[2, 3\]"):
        aten.native_layer_norm(ts.zeros(2, 3), [4], None, None, 1e-5)
    with pytest.raises(ValueError, match="native_layer_norm.*weight"):
        aten.native_layer_norm(ts.zeros(2, 3), [3], ts.zeros(4), None, 1e-5)
    with pytest.raises(ValueError, match="at least 1-dimensional"):
        aten.native_layer_norm(ts.zeros(2, 3), [], None, None, 1e-5)
    with pytest.raises(TypeError, match="native_layer_norm.*int32"):
        aten.native_layer_norm(ts.zeros(2, 3, dtype=ts.int32), [3], None, None, 1e-5)


# ---------------------------------------------------------------------------- group norm
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("shape,groups", [((2, 4, 3), 2), ((3, 6), 3), ((2, 6, 2, 2), 1), ((1, 4, 5), 4),
                                          ((0, 4, 2), 2)], ids=str)
def test_group_norm_forward(dtype, shape, groups):
    x = values(shape, 1)
    n, c = shape[:2]
    hw = int(np.prod(shape[2:]))
    w, b = values(c, 2), values(c, 3)
    out, mean, rstd = aten.native_group_norm(from_np(x, dtype), from_np(w, dtype), from_np(b, dtype), n, c, hw,
                                             groups, 1e-5)
    xd = to_np(from_np(x, dtype)).astype(np.float64)
    assert_close(out, np_group_norm(xd, groups, w, b, 1e-5), dtype, **TOL[dtype])
    assert tuple(mean.shape) == (n, groups)
    if xd.size:
        assert_close(mean, xd.reshape(n, groups, -1).mean(axis=2), dtype, **TOL[dtype])


@pytest.mark.parametrize("shape,groups", [((2, 4, 3), 2), ((3, 6), 3), ((2, 4, 2, 2), 1)], ids=str)
def test_group_norm_backward(shape, groups):
    x, g = values(shape, 1), values(shape, 2)
    n, c = shape[:2]
    hw = int(np.prod(shape[2:]))
    w, b = values(c, 3), values(c, 4)
    tx, tw = from_np(x), from_np(w)
    _, mean, rstd = aten.native_group_norm(tx, tw, from_np(b), n, c, hw, groups, 1e-5)
    gi, gw, gb = aten.native_group_norm_backward(from_np(g), tx, mean, rstd, tw, n, c, hw, groups)
    f = np_group_norm
    assert_close(gi, numeric_grad(lambda v: f(v, groups, w, b, 1e-5), x, g), ts.float64, rtol=1e-6, atol=1e-6)
    assert_close(gw, numeric_grad(lambda v: f(x, groups, v, b, 1e-5), w, g), ts.float64, rtol=1e-6, atol=1e-6)
    assert_close(gb, numeric_grad(lambda v: f(x, groups, w, v, 1e-5), b, g), ts.float64, rtol=1e-6, atol=1e-6)
    gi, gw, gb = aten.native_group_norm_backward(from_np(g), tx, mean, rstd, None, n, c, hw, groups)
    assert tuple(gw.shape) == (0,)
    assert_close(gi, numeric_grad(lambda v: f(v, groups, None, None, 1e-5), x, g), ts.float64, rtol=1e-6, atol=1e-6)


def test_group_norm_errors():
    with pytest.raises(ValueError, match="native_group_norm.*divide.*C = 6.*group = 4"):
        aten.native_group_norm(ts.zeros(2, 6, 3), None, None, 2, 6, 3, 4, 1e-5)
    with pytest.raises(ValueError, match=r"native_group_norm.*HxW = 4.*\[2, 6, 3\]"):
        aten.native_group_norm(ts.zeros(2, 6, 3), None, None, 2, 6, 4, 2, 1e-5)
    with pytest.raises(ValueError, match="native_group_norm.*weight"):
        aten.native_group_norm(ts.zeros(2, 6, 3), ts.zeros(3), None, 2, 6, 3, 2, 1e-5)


# ---------------------------------------------------------------------------- dropout
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_dropout(dtype):
    x = from_np(values((64, 50), 1), dtype)
    xn = to_np(x)
    for p, train in [(0.5, False), (0.0, True), (0.0, None)]:
        out, mask = aten.native_dropout(x, p, train)
        assert_close(out, xn, dtype, rtol=0, atol=0)
        assert mask.dtype == ts.bool and to_np(mask).all()
    out, mask = aten.native_dropout(x, 1.0, True)
    assert not to_np(out).any() and not to_np(mask).any()
    ts.manual_seed(7)
    out, mask = aten.native_dropout(x, 0.25, None)  # train=None means training
    m = to_np(mask)
    assert abs(m.mean() - 0.75) < 0.03
    assert_close(out, np.where(m, xn / 0.75, 0), dtype, **TOL[dtype])
    ts.manual_seed(7)
    _, again = aten.native_dropout(x, 0.25, True)
    assert (to_np(again) == m).all()
    _, other = aten.native_dropout(x, 0.25, True)
    assert (to_np(other) != m).any()
    g = from_np(values((64, 50), 2), dtype)
    assert_close(aten.native_dropout_backward(g, mask, 1 / 0.75), np.where(m, to_np(g) / 0.75, 0), dtype, **TOL[dtype])


def test_dropout_shapes_and_errors():
    x = from_np(values((5, 4), 1))
    out, mask = aten.native_dropout(x.t(), 0.0, True)
    assert_close(out, to_np(x).T, ts.float64)
    out, mask = aten.native_dropout(ts.zeros(0, 3), 0.5, True)
    assert tuple(out.shape) == (0, 3) and tuple(mask.shape) == (0, 3)
    with pytest.raises(ValueError, match=r"native_dropout.*\[0, 1\]"):
        aten.native_dropout(x, -0.1, True)
    with pytest.raises(TypeError, match="native_dropout.*int64"):
        aten.native_dropout(ts.zeros(3, dtype=ts.int64), 0.5, True)
    with pytest.raises(TypeError, match="native_dropout_backward.*bool"):
        aten.native_dropout_backward(x, x, 2.0)


# ---------------------------------------------------------------------------- embedding
@pytest.mark.parametrize("index_dtype", [ts.int64, ts.int32], ids=str)
@pytest.mark.parametrize("dtype", [ts.float32, ts.float64, ts.int64, ts.float16], ids=str)
def test_embedding(dtype, index_dtype):
    w = sample((7, 5), dtype, rng(1))
    idx = np.array([[6, 0, 3], [3, 3, 1]])
    out = ts.embedding(from_np(w, dtype), from_np(idx, index_dtype))
    assert_close(out, w[idx], dtype)
    # A transposed weight and a 0-d index.
    wt = from_np(np.ascontiguousarray(w.T), dtype).t()
    assert_close(ts.embedding(wt, from_np(idx, index_dtype)), w[idx], dtype)
    assert_close(ts.embedding(from_np(w, dtype), ts.tensor(2)), w[2], dtype)
    assert tuple(ts.embedding(from_np(w, dtype), ts.zeros(0, dtype=ts.int64)).shape) == (0, 5)


def test_embedding_errors():
    w = ts.zeros(4, 3)
    with pytest.raises(IndexError, match="embedding: index 4 is out of range"):
        ts.embedding(w, ts.tensor([0, 4]))
    with pytest.raises(TypeError, match="embedding.*int64 or int32"):
        ts.embedding(w, ts.tensor([0.0]))
    with pytest.raises(ValueError, match="embedding.*2-D"):
        ts.embedding(ts.zeros(4), ts.tensor([0]))


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("scale_by_freq", [False, True])
@pytest.mark.parametrize("padding_idx", [-1, 2])
def test_embedding_dense_backward(dtype, scale_by_freq, padding_idx):
    idx = np.array([[2, 0, 2], [4, 2, 1]])
    g = values((2, 3, 4), 3)
    out = aten.embedding_dense_backward(from_np(g, dtype), from_np(idx), 6, padding_idx, scale_by_freq)
    gd = to_np(from_np(g, dtype)).astype(np.float64).reshape(-1, 4)
    flat = idx.reshape(-1)
    counts = np.bincount(flat, minlength=6)
    want = np.zeros((6, 4))
    for p, r in enumerate(flat):
        if r != padding_idx:
            want[r] += gd[p] / (counts[r] if scale_by_freq else 1)
    assert_close(out, want, dtype, **TOL[dtype])


# ---------------------------------------------------------------------------- scatter_add / index_add
def np_scatter_add(self, dim, index, src):
    out = self.copy()
    for pos in np.ndindex(index.shape):
        target = list(pos)
        target[dim] = index[pos]
        out[tuple(target)] = out[tuple(target)] + src[pos] if out.dtype != np.bool_ else out[tuple(target)] | src[pos]
    return out


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_scatter_add_every_dtype(dtype):
    r = rng(2)
    self_ = sample((3, 5), dtype, r, low=-3, high=3)
    src = sample((4, 5), dtype, r, low=-3, high=3)
    index = r.integers(0, 3, size=(4, 4))
    got = ts.scatter_add(from_np(self_, dtype), 0, from_np(index), from_np(src, dtype))
    assert_close(got, np_scatter_add(self_, 0, index, src), dtype, atol=0.1, rtol=0.02)
    index1 = r.integers(0, 5, size=(3, 2))
    got = from_np(self_, dtype).scatter_add(1, from_np(index1, ts.int32), from_np(src, dtype)[:3])
    assert_close(got, np_scatter_add(self_, 1, index1, src[:3]), dtype, atol=0.1, rtol=0.02)


def test_scatter_add_in_place_non_contiguous_and_errors():
    base = ts.zeros(5, 3, dtype=ts.float64)
    view = base.t()  # (3, 5)
    index = np.array([[0, 2, 1, 2, 0], [2, 2, 2, 0, 1]])
    src = values((2, 5), 1)
    v0 = version(base)
    r = view.scatter_add_(0, from_np(index), from_np(src))
    assert r is view or r._same_storage(view)
    assert v0 is None or version(base) > v0
    assert_close(view, np_scatter_add(np.zeros((3, 5)), 0, index, src), ts.float64)
    keep = ts.zeros(3, 4)
    with pytest.raises(IndexError, match="scatter_add_: index 3 is out of range for dimension 0 with size 3"):
        keep.scatter_add_(0, ts.tensor([[0, 3]]), ts.ones(1, 2))
    assert not to_np(keep).any()
    with pytest.raises(TypeError, match="scatter_add.*float64"):
        ts.scatter_add(keep, 0, ts.tensor([[0]]), ts.ones(1, 1, dtype=ts.float64))
    with pytest.raises(ValueError, match="scatter_add.*src"):
        ts.scatter_add(keep, 0, ts.tensor([[0, 1]]), ts.ones(1, 1))


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_index_add_every_dtype(dtype):
    r = rng(3)
    self_ = sample((4, 3, 2), dtype, r, low=-3, high=3)
    src = sample((5, 3, 2), dtype, r, low=-3, high=3)
    index = np.array([3, 0, 3, 1, 3])
    alpha = True if dtype == ts.bool else 2
    want = self_.copy()
    if dtype == ts.bool:
        for i, t in enumerate(index):
            want[t] |= src[i]
    else:
        np.add.at(want, index, (src * alpha).astype(want.dtype))
    got = ts.index_add(from_np(self_, dtype), 0, from_np(index), from_np(src, dtype), alpha=alpha)
    assert_close(got, want, dtype, atol=0.1, rtol=0.02)


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_index_add_dims_in_place_and_large(dtype):
    x = values((4, 6, 3), 1)
    src = values((2, 4, 3), 2)
    index = np.array([5, 1])
    want = x.copy()
    np.add.at(want, (slice(None), index), 0.5 * src.transpose(1, 0, 2))
    t = from_np(x, dtype)
    v0 = version(t)
    t.index_add_(1, from_np(index), from_np(src, dtype).permute(1, 0, 2), alpha=0.5)  # non-contiguous source
    assert v0 is None or version(t) > v0
    assert_close(t, want, dtype, **TOL[dtype])
    # An embedding-style update: many rows, wide slices, split over threads.
    idx = (np.arange(300) * 7) % 40
    src = values((300, 2000), 3)
    want = np.zeros((40, 2000))
    np.add.at(want, idx, to_np(from_np(src, dtype)).astype(np.float64))
    got = ts.zeros(40, 2000, dtype=dtype).index_add(0, from_np(idx), from_np(src, dtype))
    assert_close(got, want, dtype, rtol=1e-5, atol=1e-4)


def test_index_add_errors():
    x = ts.zeros(5, 3)
    with pytest.raises(IndexError, match="index_add: index 5 is out of range for dimension 0 with size 5"):
        x.index_add(0, ts.tensor([5]), ts.ones(1, 3))
    with pytest.raises(ValueError, match="index_add.*source"):
        x.index_add(0, ts.tensor([0, 1]), ts.ones(3, 3))
    with pytest.raises(TypeError, match="index_add.*float64"):
        x.index_add(0, ts.tensor([0]), ts.ones(1, 3, dtype=ts.float64))
    with pytest.raises(TypeError, match="index_add.*alpha"):
        ts.zeros(3, dtype=ts.int64).index_add(0, ts.tensor([0]), ts.ones(1, dtype=ts.int64), alpha=0.5)


# ---------------------------------------------------------------------------- view backwards
@pytest.mark.parametrize("dtype", [ts.float32, ts.float64, ts.int32, ts.bool], ids=str)
def test_slice_and_select_backward(dtype):
    a = np.zeros((4, 7), dtype=np_dtype(dtype))
    g = sample((4, 3), dtype, rng(4))
    a[:, 1:7:2] = g
    assert_close(aten.slice_backward(from_np(g, dtype), [4, 7], 1, 1, 7, 2), a, dtype)
    b = np.zeros((2, 4, 3), dtype=np_dtype(dtype))
    gs = sample((2, 3), dtype, rng(5))
    b[:, -1] = gs
    assert_close(aten.select_backward(from_np(gs, dtype), [2, 4, 3], 1, -1), b, dtype)
    # A non-contiguous grad.
    gt = from_np(np.ascontiguousarray(gs.T), dtype).t()
    assert_close(aten.select_backward(gt, [2, 4, 3], 1, 3), b, dtype)


def test_view_backward_errors():
    with pytest.raises(ValueError, match=r"slice_backward.*\[2\].*\[3\]"):
        aten.slice_backward(ts.zeros(3), [5], 0, 0, 4, 2)
    with pytest.raises(IndexError, match="select_backward: index 4 is out of range for dimension 0 with size 4"):
        aten.select_backward(ts.zeros(3), [4, 3], 0, 4)


# ---------------------------------------------------------------------------- PyTorch cross-checks
@pytest.mark.torch
def test_against_torch():
    torch = pytest.importorskip("torch")
    x = values((4, 3, 5), 1)
    w, b = values(3, 2), values(3, 3)
    want = torch.native_batch_norm(torch.tensor(x), torch.tensor(w), torch.tensor(b), None, None, True, 0.1, 1e-5)
    got = aten.native_batch_norm(from_np(x), from_np(w), from_np(b), None, None, True, 0.1, 1e-5)
    for g_, w_ in zip(got, want):
        assert_close(g_, w_.numpy(), ts.float64)
    want = torch.native_layer_norm(torch.tensor(x), [5], None, None, 1e-5)
    got = aten.native_layer_norm(from_np(x), [5], None, None, 1e-5)
    for g_, w_ in zip(got, want):
        assert_close(g_, w_.numpy(), ts.float64)
    want = torch.native_group_norm(torch.tensor(x), None, None, 4, 3, 5, 3, 1e-5)
    got = aten.native_group_norm(from_np(x), None, None, 4, 3, 5, 3, 1e-5)
    for g_, w_ in zip(got, want):
        assert_close(g_, w_.numpy(), ts.float64)
