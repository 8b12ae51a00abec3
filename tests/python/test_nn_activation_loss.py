"""Activations, their element-wise backward formulas, softmax backward and losses
(gelu, silu, *_backward, _softmax_backward_data, nll_loss_forward/backward, mse_loss, l1_loss,
binary_cross_entropy_with_logits) against NumPy references, and against PyTorch when it is
importable: float32 and float64 (16-bit floats where it is cheap), batched and unbatched
shapes, strided views, empty tensors, and the errors."""
import math

import numpy as np
import pytest

import tessera as ts
from conftest import HAVE_TORCH, assert_close, from_np, to_np

FLOATS = [ts.float32, ts.float64]
NP_OF = {ts.float32: np.float32, ts.float64: np.float64, ts.float16: np.float16}
aten = ts.ops.aten

_erf = np.vectorize(math.erf, otypes=[np.float64])


def rand(shape, dtype, seed, low=-4.0, high=4.0):
    """Random values, multiples of 1/8 (exact in every float dtype), as a tessera tensor and the
    float64 NumPy array it holds."""
    a = np.round(np.random.default_rng(seed).uniform(low, high, size=shape) * 8) / 8
    return from_np(a, dtype), a


def transposed(shape, dtype, seed, low=-4.0, high=4.0):
    """A strided tensor of `shape` (its last two dims swapped in memory) and its values."""
    s = list(shape)
    s[-1], s[-2] = s[-2], s[-1]
    t, a = rand(s, dtype, seed, low, high)
    t = t.transpose(-1, -2)
    assert not t.is_contiguous()
    return t, np.swapaxes(a, -1, -2)


def gelu_ref(x, approximate="none"):
    if approximate == "none":
        return 0.5 * x * (1 + _erf(x / math.sqrt(2)))
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def sigmoid_ref(x):
    return 1 / (1 + np.exp(-x))


def derivative(f, x, h=1e-5):
    return (f(x + h) - f(x - h)) / (2 * h)


def reduce_ref(loss, reduction):
    if reduction == 0:
        return loss
    if reduction == 2:
        return np.array(loss.sum())
    return np.array(loss.mean() if loss.size else np.nan)


SHAPES = [(), (0,), (7,), (3, 5), (2, 3, 4)]


# ---------------------------------------------------------------------------- activations
@pytest.mark.parametrize("dtype", FLOATS + [ts.float16])
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu(dtype, shape, approximate):
    x, a = rand(shape, dtype, 1)
    out = ts.gelu(x, approximate=approximate)
    assert_close(out, gelu_ref(a, approximate), dtype, rtol=4e-3 if dtype == ts.float16 else None,
                 atol=4e-3 if dtype == ts.float16 else None)
    assert_close(x.gelu(approximate=approximate), to_np(out), dtype)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", SHAPES)
def test_silu(dtype, shape):
    x, a = rand(shape, dtype, 2)
    assert_close(ts.silu(x), a * sigmoid_ref(a), dtype)


@pytest.mark.parametrize("dtype", FLOATS)
def test_activation_strided_and_inplace(dtype):
    x, a = transposed((4, 6), dtype, 3)
    assert_close(ts.gelu(x), gelu_ref(a), dtype)
    assert_close(ts.silu(x), a * sigmoid_ref(a), dtype)
    base, b = rand((6, 4), dtype, 4)
    view = base.T
    r = view.gelu_(approximate="tanh")
    assert r is view or r._same_storage(view)
    assert_close(base, gelu_ref(b, "tanh"), dtype)
    y, c = rand((2, 5), dtype, 5)
    y[:, ::2].silu_()
    c[:, ::2] = c[:, ::2] * sigmoid_ref(c[:, ::2])
    assert_close(y, c, dtype)


def test_activation_extremes_are_finite():
    x = ts.tensor([-1000.0, -50.0, 0.0, 50.0, 1000.0])
    assert np.all(np.isfinite(to_np(ts.silu(x))))
    assert_close(ts.gelu(x), [0, 0, 0, 50, 1000], ts.float32)
    assert_close(ts.gelu(x, approximate="tanh"), [0, 0, 0, 50, 1000], ts.float32)


def test_activation_errors():
    xi = ts.tensor([1, 2])
    with pytest.raises(TypeError, match="gelu.*floating.*int64"):
        ts.gelu(xi)
    with pytest.raises(TypeError, match="silu"):
        ts.silu(xi)
    with pytest.raises(ValueError, match="gelu.*'none' or 'tanh'.*bogus"):
        ts.gelu(ts.ones(3), approximate="bogus")
    with pytest.raises(ValueError, match="gelu_backward"):
        ts.gelu_backward(ts.ones(3), ts.ones(3), approximate="bogus")


# ---------------------------------------------------------------------------- element-wise backward
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", [(), (0,), (9,), (3, 4)])
def test_gelu_silu_backward_match_numeric_derivatives(dtype, shape):
    x, a = rand(shape, dtype, 7)
    g, gv = rand(shape, dtype, 8, -2, 2)
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == ts.float32 else dict(rtol=1e-7, atol=1e-8)
    for ap in ("none", "tanh"):
        assert_close(ts.gelu_backward(g, x, approximate=ap), gv * derivative(lambda u: gelu_ref(u, ap), a), dtype, **tol)
    assert_close(ts.silu_backward(g, x), gv * derivative(lambda u: u * sigmoid_ref(u), a), dtype, **tol)


def test_vector_kernels_on_strided_and_broadcast_operands():
    """float32 operands that are not contiguous (a transposed input, the stride-0 gradient that
    sum().backward() hands down, a strided output) run the vector kernels a chunk at a time; rows
    longer than a chunk and not a multiple of it."""
    a = np.random.default_rng(3).uniform(-4, 4, (37, 700)).astype(np.float32)
    x = ts.tensor(a.T.copy()).mT  # [37, 700] read with strides (1, 37)
    ones = ts.ones(()).expand(37, 700)
    g = np.random.default_rng(4).uniform(-2, 2, (700,)).astype(np.float32)
    for ap in ("none", "tanh"):
        np.testing.assert_allclose(to_np(ts.gelu(x, approximate=ap)), gelu_ref(a.astype(np.float64), ap), rtol=1e-5,
                                   atol=1e-6)
        want = derivative(lambda u: gelu_ref(u, ap), a.astype(np.float64))
        np.testing.assert_allclose(to_np(ts.gelu_backward(ones, x, approximate=ap)), want, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(to_np(ts.gelu_backward(ts.tensor(g).expand(37, 700), x, approximate=ap)),
                                   g * want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(to_np(ts.silu_backward(ones, x)),
                               derivative(lambda u: u * sigmoid_ref(u), a.astype(np.float64)), rtol=1e-5, atol=1e-6)
    # a transposed grad beside a contiguous input: the operands disagree on which dim is inner
    gt = np.random.default_rng(5).uniform(-2, 2, (37, 700)).astype(np.float32)
    np.testing.assert_allclose(to_np(ts.gelu_backward(ts.tensor(gt.T.copy()).mT, ts.tensor(a))),
                               gt * derivative(lambda u: gelu_ref(u, "none"), a.astype(np.float64)), rtol=1e-5,
                               atol=1e-6)
    inplace = ts.tensor(a.T.copy()).mT
    ts.nn.functional.silu(inplace, inplace=True)  # written through its strides
    np.testing.assert_allclose(to_np(inplace), a / (1 + np.exp(-a.astype(np.float64))), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", FLOATS)
def test_sigmoid_tanh_backward(dtype):
    y, yv = rand((4, 5), dtype, 9, -1, 1)
    g, gv = rand((4, 5), dtype, 10)
    assert_close(ts.sigmoid_backward(g, y), gv * yv * (1 - yv), dtype)
    assert_close(ts.tanh_backward(g, y), gv * (1 - yv * yv), dtype)
    # Strided output, broadcast gradient.
    ys, ysv = transposed((4, 6), dtype, 11, -1, 1)
    gb, gbv = rand((6,), dtype, 12)
    assert_close(ts.tanh_backward(gb, ys), gbv * (1 - ysv * ysv), dtype)
    # Against the forward: d sigmoid(x)/dx = sigmoid_backward(1, sigmoid(x)).
    x, xv = rand((11,), ts.float64, 13)
    assert_close(ts.sigmoid_backward(ts.ones(11, dtype=ts.float64), ts.sigmoid(x)), derivative(sigmoid_ref, xv),
                 ts.float64, rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize("dtype", FLOATS + [ts.int64, ts.int32])
@pytest.mark.parametrize("threshold", [0, 0.5, -1.0])
def test_threshold_backward(dtype, threshold):
    x, a = rand((3, 7), dtype, 14)
    g, gv = rand((3, 7), dtype, 15)
    a, gv = to_np(x).astype(np.float64), to_np(g).astype(np.float64)
    assert_close(ts.threshold_backward(g, x, threshold), np.where(a <= threshold, 0, gv), dtype)


def test_threshold_backward_nan_passes_gradient():
    x = ts.tensor([-1.0, 0.0, 2.0, float("nan")])
    assert_close(ts.threshold_backward(ts.ones(4), x, 0), [0, 0, 1, 1], ts.float32)


def test_backward_errors():
    xi = ts.tensor([1, 2])
    for op in (ts.sigmoid_backward, ts.tanh_backward, ts.silu_backward, ts.gelu_backward):
        with pytest.raises(TypeError, match="floating"):
            op(xi, xi)
    b = ts.tensor([True, False])
    with pytest.raises(TypeError, match="threshold_backward.*bool"):
        ts.threshold_backward(b, b, 0)
    with pytest.raises(ValueError, match="tanh_backward.*broadcast"):
        ts.tanh_backward(ts.ones(3), ts.ones(4))


# ---------------------------------------------------------------------------- softmax backward
def softmax_backward_ref(g, y, dim, log):
    if log:
        return g - np.exp(y) * g.sum(axis=dim, keepdims=True)
    return y * (g - (g * y).sum(axis=dim, keepdims=True))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", [(5,), (4, 6), (3, 4, 5), (2, 0, 3), (3, 70, 80)])
@pytest.mark.parametrize("log", [False, True])
def test_softmax_backward(dtype, shape, log):
    for dim in range(-len(shape), len(shape)):
        x, _ = rand(shape, dtype, 20)
        y = ts.log_softmax(x, dim) if log else ts.softmax(x, dim)
        g, gv = rand(shape, dtype, 21)
        op = aten._log_softmax_backward_data if log else aten._softmax_backward_data
        want = softmax_backward_ref(gv, to_np(y).astype(np.float64), dim, log)
        assert_close(op(g, y, dim, dtype), want, dtype, rtol=1e-4 if dtype == ts.float32 else None,
                     atol=1e-5 if dtype == ts.float32 else None)


@pytest.mark.parametrize("log", [False, True])
def test_softmax_backward_zero_dim_strided_and_input_dtype(log):
    op = aten._log_softmax_backward_data if log else aten._softmax_backward_data
    g = ts.tensor(2.5, dtype=ts.float64)
    y = ts.tensor(0.0 if log else 1.0, dtype=ts.float64)
    assert_close(op(g, y, 0, ts.float64), np.array(0.0), ts.float64)
    gs, gsv = transposed((5, 130), ts.float64, 22)
    ys, ysv = transposed((5, 130), ts.float64, 23, 0, 1)
    for dim in (0, 1):
        assert_close(op(gs, ys, dim, ts.float64), softmax_backward_ref(gsv, ysv, dim, log), ts.float64)
    # softmax run in float32 on a float16 input: the gradient comes back as float16.
    r = op(gs.float(), ys.float(), 1, ts.float16)
    assert r.dtype == ts.float16
    assert_close(r, softmax_backward_ref(gsv, ysv, 1, log), ts.float16, rtol=4e-3, atol=4e-3)


def test_softmax_backward_errors():
    a, b = ts.ones(3, 4), ts.ones(4, 3)
    with pytest.raises(ValueError, match="_softmax_backward_data.*same shape"):
        aten._softmax_backward_data(a, b, 1, ts.float32)
    with pytest.raises(IndexError, match="_log_softmax_backward_data.*out of range"):
        aten._log_softmax_backward_data(a, a, 2, ts.float32)
    with pytest.raises(TypeError, match="_softmax_backward_data.*int64"):
        aten._softmax_backward_data(ts.tensor([1, 2]), ts.tensor([1, 2]), 0, ts.float32)


# ---------------------------------------------------------------------------- nll_loss
def nll_ref(x, target, weight, reduction, ignore_index):
    """x of shape (C,), (N, C) or (N, C, d...), log-probabilities; returns (out, total_weight,
    grad for a grad_output of ones). Every target ignored gives 0 / 0 = NaN for mean, as PyTorch."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return _nll_ref(x, target, weight, reduction, ignore_index)


def _nll_ref(x, target, weight, reduction, ignore_index):
    unbatched = x.ndim == 1
    xb = x[None] if unbatched else x
    tb = np.asarray(target)[None] if unbatched else np.asarray(target)
    C = xb.shape[1]
    w = np.ones(C) if weight is None else weight
    keep = tb != ignore_index
    safe = np.where(keep, tb, 0)
    picked = np.take_along_axis(xb, safe[:, None], axis=1)[:, 0]
    wt = np.where(keep, w[safe], 0.0)
    loss = -wt * picked
    total = wt.sum()
    grad = np.zeros_like(xb)
    scale = 1 / total if reduction == 1 else 1.0
    np.put_along_axis(grad, safe[:, None], (np.where(keep, -wt * scale, 0.0))[:, None], axis=1)
    if unbatched:
        loss, grad = loss[0], grad[0]
    if reduction == 0:
        out = loss
    else:
        out = np.array(loss.sum() / total if reduction == 1 else loss.sum())
    return out, total, grad


CASES = [((5,), ()), ((4, 5), (4,)), ((3, 4, 2, 3), (3, 2, 3)), ((0, 3), (0,)), ((257, 10), (257,))]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("reduction", [0, 1, 2])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("ignore_index", [-100, 2])
def test_nll_loss(dtype, case, reduction, weighted, ignore_index):
    in_shape, t_shape = case
    C = in_shape[0] if len(in_shape) == 1 else in_shape[1]
    x = ts.log_softmax(rand(in_shape, dtype, 30)[0], 0 if len(in_shape) == 1 else 1)
    xv = to_np(x).astype(np.float64)
    rng = np.random.default_rng(31)
    tv = rng.integers(0, C, size=t_shape)
    if tv.size > 2:
        tv.flat[1] = ignore_index
    t = ts.tensor(tv.tolist(), dtype=ts.int64).reshape(t_shape)
    w, wv = rand((C,), dtype, 32, 0.25, 2) if weighted else (None, None)
    out, total = aten.nll_loss_forward(x, t, w, reduction, ignore_index)
    want, want_total, want_grad = nll_ref(xv, tv, wv, reduction, ignore_index)
    assert_close(out, want, dtype)
    assert_close(total, np.array(want_total), dtype)
    g = ts.ones(want.shape, dtype=dtype) if reduction == 0 else ts.tensor(1.0, dtype=dtype)
    assert_close(aten.nll_loss_backward(g, x, t, w, reduction, ignore_index, total), want_grad, dtype)


@pytest.mark.parametrize("dtype", FLOATS)
def test_nll_loss_strided(dtype):
    x, xv = transposed((6, 4), dtype, 33)
    tbase = ts.tensor([0, 3, 1, 2, 2, 0, 3, 1, 1, 1, 0, 2])
    t = tbase[::2]
    tv = to_np(t)
    for reduction in (0, 1, 2):
        out, total = aten.nll_loss_forward(x, t, None, reduction, -100)
        want, _, grad = nll_ref(xv, tv, None, reduction, -100)
        assert_close(out, want, dtype)
        g = ts.ones(6, dtype=dtype) if reduction == 0 else ts.tensor(1.0, dtype=dtype)
        assert_close(aten.nll_loss_backward(g, x, t, None, reduction, -100, total), grad, dtype)


def test_nll_loss_all_ignored_and_empty():
    x = ts.log_softmax(ts.randn(2, 3), 1)
    t = ts.tensor([-1, -1])
    out, total = aten.nll_loss_forward(x, t, None, 1, -1)
    assert math.isnan(out.item()) and total.item() == 0
    assert aten.nll_loss_forward(x, t, None, 2, -1)[0].item() == 0
    e = aten.nll_loss_forward(ts.empty(0, 3), ts.tensor([], dtype=ts.int64), None, 1, -100)[0]
    assert math.isnan(e.item())


def test_nll_loss_errors():
    x = ts.randn(2, 3)
    with pytest.raises(TypeError, match="nll_loss_forward.*int64.*int32"):
        aten.nll_loss_forward(x, ts.tensor([0, 1], dtype=ts.int32), None, 1, -100)
    with pytest.raises(IndexError, match="nll_loss_forward: target 3 is out of bounds"):
        aten.nll_loss_forward(x, ts.tensor([0, 3]), None, 1, -100)
    with pytest.raises(IndexError, match="nll_loss_backward: target -2"):
        aten.nll_loss_backward(ts.tensor(1.0), x, ts.tensor([0, -2]), None, 1, -100, ts.tensor(2.0))
    with pytest.raises(ValueError, match=r"target of shape \[2\]"):
        aten.nll_loss_forward(x, ts.tensor([0, 1, 2]), None, 1, -100)
    with pytest.raises(ValueError, match=r"weight of shape \[3\]"):
        aten.nll_loss_forward(x, ts.tensor([0, 1]), ts.ones(2), 1, -100)
    with pytest.raises(ValueError, match="reduction"):
        aten.nll_loss_forward(x, ts.tensor([0, 1]), None, 7, -100)
    with pytest.raises(ValueError, match="grad_output"):
        aten.nll_loss_backward(ts.ones(3), x, ts.tensor([0, 1]), None, 0, -100, ts.tensor(2.0))


# ---------------------------------------------------------------------------- element-wise losses
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", SHAPES + [(2, 0, 3)])
@pytest.mark.parametrize("reduction", [0, 1, 2])
def test_mse_l1(dtype, shape, reduction):
    x, a = rand(shape, dtype, 40)
    y, b = rand(shape, dtype, 41)
    assert_close(ts.mse_loss(x, y, reduction), reduce_ref((a - b) ** 2, reduction), dtype)
    assert_close(ts.l1_loss(x, y, reduction=reduction), reduce_ref(np.abs(a - b), reduction), dtype)
    g, gv = rand(shape, dtype, 42) if reduction == 0 else (ts.tensor(1.5, dtype=dtype), 1.5)
    n = max(a.size, 1) if reduction == 1 else 1
    assert_close(aten.mse_loss_backward(g, x, y, reduction), gv * 2 * (a - b) / n, dtype)


def test_mse_default_reduction_broadcast_strided_and_large():
    x, a = transposed((3, 4), ts.float64, 43)
    y, b = rand((4,), ts.float64, 44)
    assert_close(ts.mse_loss(x, y), np.array(((a - b) ** 2).mean()), ts.float64)
    assert_close(ts.mse_loss(x, y, 0), (a - b) ** 2, ts.float64)
    p, pv = rand((1000, 300), ts.float32, 45)
    q, qv = rand((1000, 300), ts.float32, 46)
    assert_close(ts.mse_loss(p, q, 2), np.array(((pv - qv) ** 2).sum()), ts.float32, rtol=1e-6)


def bce_ref(x, t, w=None, pw=None):
    s = sigmoid_ref(x)
    pw = 1.0 if pw is None else pw
    w = 1.0 if w is None else w
    return -w * (pw * t * np.log(s) + (1 - t) * np.log1p(-s))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", [(), (0,), (6,), (3, 4)])
@pytest.mark.parametrize("reduction", [0, 1, 2])
@pytest.mark.parametrize("variant", ["plain", "weight", "pos_weight", "both"])
def test_bce_with_logits(dtype, shape, reduction, variant):
    x, xv = rand(shape, dtype, 50, -6, 6)
    t, tv = rand(shape, dtype, 51, 0, 1)
    w, wv = rand(shape, dtype, 52, 0.5, 2) if variant in ("weight", "both") else (None, None)
    last = shape[-1:] if shape else ()
    pw, pwv = rand(last, dtype, 53, 0.5, 3) if variant in ("pos_weight", "both") else (None, None)
    out = ts.binary_cross_entropy_with_logits(x, t, w, pw, reduction)
    assert_close(out, reduce_ref(bce_ref(xv, tv, wv, pwv), reduction), dtype,
                 rtol=1e-5 if dtype == ts.float32 else 1e-10, atol=1e-6 if dtype == ts.float32 else 1e-12)


def test_bce_with_logits_keywords_stability_and_strides():
    x = ts.tensor([-200.0, -40.0, 40.0, 200.0])
    t = ts.tensor([1.0, 0.0, 0.0, 1.0])
    out = ts.binary_cross_entropy_with_logits(x, t, reduction=0)
    assert np.all(np.isfinite(to_np(out)))
    assert_close(out, [200, 0, 40, 0], ts.float32)
    xs, xv = transposed((3, 5), ts.float64, 54)
    ts_, tv = rand((3, 5), ts.float64, 55, 0, 1)
    assert_close(ts.binary_cross_entropy_with_logits(xs, ts_, pos_weight=ts.full((5,), 2.0, dtype=ts.float64)),
                 np.array(bce_ref(xv, tv, pw=2.0).mean()), ts.float64)


def test_loss_errors():
    a, b = ts.ones(3), ts.ones(4)
    with pytest.raises(ValueError, match="mse_loss.*broadcast"):
        ts.mse_loss(a, b)
    with pytest.raises(TypeError, match="l1_loss.*floating.*int64"):
        ts.l1_loss(ts.tensor([1, 2]), ts.tensor([1, 2]))
    with pytest.raises(ValueError, match="mse_loss.*reduction"):
        ts.mse_loss(a, a, 4)
    with pytest.raises(ValueError, match=r"binary_cross_entropy_with_logits.*\[3\].*\[4\]"):
        ts.binary_cross_entropy_with_logits(a, b)
    with pytest.raises(ValueError, match="mse_loss_backward.*one element"):
        aten.mse_loss_backward(ts.ones(3), a, a, 1)


# ---------------------------------------------------------------------------- PyTorch
@pytest.mark.torch
def test_against_torch():
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    rng = np.random.default_rng(60)
    a = rng.standard_normal((4, 5, 3))
    t3 = rng.integers(0, 5, size=(4, 3))
    x, xt = from_np(a, ts.float64), torch.tensor(a)
    for ap in ("none", "tanh"):
        np.testing.assert_allclose(to_np(ts.gelu(x, approximate=ap)), F.gelu(xt, approximate=ap).numpy(), rtol=1e-12)
    np.testing.assert_allclose(to_np(ts.silu(x)), F.silu(xt).numpy(), rtol=1e-12)
    lp, lpt = ts.log_softmax(x, 1), torch.log_softmax(xt, 1)
    tgt = ts.tensor(t3.tolist())
    w = rng.uniform(0.5, 2, size=5)
    for reduction, name in ((0, "none"), (1, "mean"), (2, "sum")):
        out, _ = aten.nll_loss_forward(lp, tgt, from_np(w), reduction, 1)
        ref = F.nll_loss(lpt, torch.tensor(t3), weight=torch.tensor(w), reduction=name, ignore_index=1)
        np.testing.assert_allclose(to_np(out), ref.numpy(), rtol=1e-12)
        y = rng.uniform(0, 1, size=a.shape)
        np.testing.assert_allclose(
            to_np(ts.binary_cross_entropy_with_logits(x, from_np(y), None, from_np(w[:3] * 0 + 2), reduction)),
            F.binary_cross_entropy_with_logits(xt, torch.tensor(y), pos_weight=torch.full((3,), 2.0, dtype=torch.float64),
                                               reduction=name).numpy(), rtol=1e-12)
        np.testing.assert_allclose(to_np(ts.mse_loss(x, from_np(y), reduction)),
                                   F.mse_loss(xt, torch.tensor(y), reduction=name).numpy(), rtol=1e-12)
    g = rng.standard_normal(a.shape)
    y = torch.softmax(xt, 2)
    np.testing.assert_allclose(
        to_np(aten._softmax_backward_data(from_np(g), from_np(y.numpy()), 2, ts.float64)),
        torch.ops.aten._softmax_backward_data(torch.tensor(g), y, 2, torch.float64).numpy(), rtol=1e-10)
