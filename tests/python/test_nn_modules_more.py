"""AdaptiveLogSoftmaxWithLoss, the lazy modules, AdaptiveMaxPool3d, MaxUnpool3d, LPPool3d,
FractionalMaxPool2d and CrossMapLRN2d (and their functional forms): values and gradients against
NumPy references written here, and against PyTorch on the same inputs when it is importable;
state_dict keys equal torch's; bad input raises torch's exception type."""
import copy
import math

import numpy as np
import pytest

import tessera as ts
from conftest import HAVE_TORCH, T, close, from_torch, load_torch_state, to_np

if HAVE_TORCH:
    import torch
else:  # pragma: no cover
    torch = None

F = ts.nn.functional
RNG = np.random.default_rng(2024)


# ---------------------------------------------------------------------------- AdaptiveLogSoftmaxWithLoss
def np_log_softmax(z):
    z = z - z.max(1, keepdims=True)
    return z - np.log(np.exp(z).sum(1, keepdims=True))


def test_adaptive_log_softmax_numpy_reference():
    m = ts.nn.AdaptiveLogSoftmaxWithLoss(8, 10, [3, 6], div_value=2.0)
    assert [tuple(p.shape) for p in m.parameters()] == [(5, 8), (4, 8), (3, 4), (2, 8), (4, 2)]
    x = RNG.standard_normal((6, 8)).astype(np.float32)
    y = np.array([0, 2, 3, 5, 6, 9])
    head = np_log_softmax(x @ to_np(m.head.weight).T)
    full = [head[:, :3]]
    for i, (i2h, h2o) in enumerate(m.tail):
        cluster = np_log_softmax(x @ to_np(i2h.weight).T @ to_np(h2o.weight).T)
        full.append(cluster + head[:, 3 + i:4 + i])
    full = np.concatenate(full, 1)
    out = m(T(x), ts.tensor(y))
    assert type(out).__name__ == "_ASMoutput" and out._fields == ("output", "loss")
    close(out.output, full[np.arange(6), y], 1e-5)
    close(out.loss, -full[np.arange(6), y].mean(), 1e-5)
    lp = m.log_prob(T(x))
    close(lp, full, 1e-5)
    np.testing.assert_allclose(np.exp(to_np(lp)).sum(1), np.ones(6), rtol=1e-5)
    assert m.predict(T(x)).tolist() == full.argmax(1).tolist()
    single = m(T(x[2]), ts.tensor(y[2]))  # 0-D target, 1-D input
    assert single.output.dim() == 0
    close(single.output, full[2, y[2]], 1e-5)


@pytest.mark.torch
@pytest.mark.parametrize("head_bias", [False, True])
def test_adaptive_log_softmax_matches_torch(head_bias):
    tm = torch.nn.AdaptiveLogSoftmaxWithLoss(16, 20, [4, 10, 15], div_value=2.0, head_bias=head_bias)
    sm = ts.nn.AdaptiveLogSoftmaxWithLoss(16, 20, [4, 10, 15], div_value=2.0, head_bias=head_bias)
    load_torch_state(sm, tm)
    assert repr(sm) == repr(tm)
    x = torch.randn(9, 16)
    y = torch.tensor([0, 3, 4, 9, 10, 14, 15, 19, 2])
    ot, os_ = tm(x, y), sm(from_torch(x), from_torch(y))
    close(os_.output, ot.output)
    close(os_.loss, ot.loss)
    ot.loss.backward()
    os_.loss.backward()
    for (name, p), (sname, q) in zip(tm.named_parameters(), sm.named_parameters()):
        assert name == sname
        close(q.grad, p.grad)
    close(sm.log_prob(from_torch(x)), tm.log_prob(x))
    assert sm.predict(from_torch(x)).tolist() == tm.predict(x).tolist()
    for bias in (10.0, -10.0):  # every row, then no row, predicted into a cluster by the head
        if head_bias:
            with torch.no_grad():
                tm.head.bias[4:] = bias
            load_torch_state(sm, tm)
            assert sm.predict(from_torch(x)).tolist() == tm.predict(x).tolist()


@pytest.mark.torch
@pytest.mark.filterwarnings("ignore:Initializing zero-element tensors is a no-op")  # a tail of width 8 // 16
def test_adaptive_log_softmax_bad_input_raises_like_torch():
    for cutoffs in ([], [5, 3], [0, 4], [4, 10], [3, 3]):
        with pytest.raises(ValueError):
            torch.nn.AdaptiveLogSoftmaxWithLoss(8, 10, cutoffs)
        with pytest.raises(ValueError, match="cutoffs should be a sequence"):
            ts.nn.AdaptiveLogSoftmaxWithLoss(8, 10, cutoffs)
    tm, sm = torch.nn.AdaptiveLogSoftmaxWithLoss(8, 10, [2, 5]), ts.nn.AdaptiveLogSoftmaxWithLoss(8, 10, [2, 5])
    x = RNG.standard_normal((3, 8)).astype(np.float32)
    for target, pattern in (([1, 2, 11], r"AdaptiveLogSoftmaxWithLoss: Target values should be in \[0, 9\], but "
                                         r"values in range \[1, 11\] were found"),
                            ([1, 2], "AdaptiveLogSoftmaxWithLoss: Input and target should have the same size in the "
                                     r"batch dimension, got input of shape \(3, 8\) and target of shape \(2,\)"),
                            ([[1, 2, 3]], "AdaptiveLogSoftmaxWithLoss: 0D or 1D target tensor expected, multi-target "
                                          r"not supported \(got a 2D target\)")):
        with pytest.raises(RuntimeError):
            tm(torch.tensor(x), torch.tensor(target))
        with pytest.raises(RuntimeError, match=pattern):
            sm(T(x), ts.tensor(target))


# ---------------------------------------------------------------------------- lazy modules
LAZY_CASES = [("LazyLinear", (3,), (2, 5)), ("LazyConv1d", (4, 3), (2, 3, 9)), ("LazyConv2d", (4, 3), (2, 3, 7, 7)),
              ("LazyConv2d", (4, 3), (3, 7, 7)), ("LazyConv3d", (2, 2), (1, 3, 4, 4, 4)),
              ("LazyConvTranspose1d", (4, 3), (2, 3, 9)), ("LazyConvTranspose2d", (4, 3), (2, 3, 5, 5)),
              ("LazyBatchNorm1d", (), (4, 3)), ("LazyBatchNorm2d", (), (4, 3, 5, 5)),
              ("LazyBatchNorm3d", (), (2, 3, 2, 2, 2)), ("LazyInstanceNorm1d", (), (2, 3, 5)),
              ("LazyInstanceNorm2d", (), (2, 3, 4, 4))]


def test_lazy_linear_materialises_on_first_forward():
    m = ts.nn.LazyLinear(3)
    assert isinstance(m.weight, ts.nn.UninitializedParameter) and repr(m.weight) == "<UninitializedParameter>"
    assert m.has_uninitialized_params() and list(m.state_dict()) == ["weight", "bias"]
    with pytest.raises(RuntimeError, match="Can't access the shape of an uninitialized parameter"):
        m.weight.shape
    x = RNG.standard_normal((4, 6)).astype(np.float32)
    y = m(T(x))
    assert type(m) is ts.nn.Linear and m.in_features == 6 and not m._forward_pre_hooks
    assert type(m.weight) is ts.nn.Parameter and tuple(m.weight.shape) == (3, 6) and m.weight.requires_grad
    bound = 1 / math.sqrt(6)  # Linear's initialisation: every value within 1/sqrt(in_features)
    assert np.abs(to_np(m.weight)).max() <= bound and np.abs(to_np(m.bias)).max() <= bound
    close(y, x @ to_np(m.weight).T + to_np(m.bias), 1e-5)


@pytest.mark.torch
@pytest.mark.parametrize("name,args,shape", LAZY_CASES, ids=[f"{c[0]}-{len(c[2])}d" for c in LAZY_CASES])
def test_lazy_modules_match_torch(name, args, shape):
    tm, sm = getattr(torch.nn, name)(*args), getattr(ts.nn, name)(*args)
    assert list(sm.state_dict()) == list(tm.state_dict())
    assert [repr(v) for v in sm.state_dict().values()] == [repr(v) for v in tm.state_dict().values()]
    x = torch.randn(*shape)
    tm(x)
    sm(from_torch(x))
    assert type(sm).__name__ == type(tm).__name__
    for k, v in tm.state_dict().items():
        assert tuple(sm.state_dict()[k].shape) == tuple(v.shape), k
    load_torch_state(sm, tm)
    x = torch.randn(*shape, requires_grad=True)
    xs = from_torch(x, requires_grad=True)
    yt, ys = tm(x), sm(xs)
    close(ys, yt, 1e-4)
    yt.square().sum().backward()
    ys.square().sum().backward()
    close(xs.grad, x.grad, 1e-3)
    close(sm.weight.grad, tm.weight.grad, 1e-3)


@pytest.mark.torch
def test_lazy_module_loads_a_state_dict_before_its_first_forward():
    tm = torch.nn.LazyConv2d(4, 3)
    tm(torch.randn(1, 2, 5, 5))
    sm = ts.nn.LazyConv2d(4, 3)
    sm.load_state_dict({k: from_torch(v) for k, v in tm.state_dict().items()})
    assert type(sm) is ts.nn.LazyConv2d and tuple(sm.weight.shape) == (4, 2, 3, 3)
    x = torch.randn(1, 2, 6, 6)
    close(sm(from_torch(x)), tm(x), 1e-5)
    loaded = torch.nn.LazyConv2d(4, 3)
    loaded.load_state_dict(tm.state_dict())
    loaded(x)
    # torch leaves in_channels 0 when the weights came from a state_dict (LazyLinear sets in_features)
    assert type(sm) is ts.nn.Conv2d and sm.in_channels == loaded.in_channels
    lin = ts.nn.LazyLinear(3)
    lin.load_state_dict(ts.nn.Linear(4, 3).state_dict())
    lin(ts.ones(2, 4))
    assert type(lin) is ts.nn.Linear and lin.in_features == 4


def test_lazy_state_dict_into_lazy_module_and_conversions():
    a, b = ts.nn.LazyLinear(3), ts.nn.LazyBatchNorm1d()
    assert str(ts.nn.LazyLinear(3).load_state_dict(a.state_dict())) == "<All keys matched successfully>"
    assert ts.nn.LazyBatchNorm1d().load_state_dict(b.state_dict()).missing_keys == []
    d = ts.nn.LazyLinear(2).double()
    assert isinstance(d.weight, ts.nn.UninitializedParameter) and d.weight.dtype == ts.float64
    d(ts.ones(1, 4, dtype=ts.float64))
    assert d.weight.dtype == ts.float64 and tuple(d.weight.shape) == (2, 4)
    c = copy.deepcopy(ts.nn.LazyConv1d(4, 3))
    c(ts.ones(1, 2, 5))
    assert type(c) is ts.nn.Conv1d and tuple(c.weight.shape) == (4, 2, 3)


@pytest.mark.torch
def test_lazy_bad_input_raises_like_torch():
    with pytest.raises(RuntimeError):
        torch.nn.LazyConv2d(4, 3)(torch.randn(2, 3))
    with pytest.raises(RuntimeError, match=r"Expected 3D \(unbatched\) or 4D \(batched\) input to LazyConv2d, but got "
                                           r"input of size: \[2, 3\]"):
        ts.nn.LazyConv2d(4, 3)(ts.randn(2, 3))
    with pytest.raises(ValueError):
        torch.nn.LazyConv2d(4, 3, groups=2)(torch.randn(1, 3, 5, 5))
    with pytest.raises(ValueError, match="LazyConv2d: in_channels must be divisible by groups, got in_channels 3 and "
                                         "groups 2"):
        ts.nn.LazyConv2d(4, 3, groups=2)(ts.randn(1, 3, 5, 5))
    with pytest.raises(ValueError):
        torch.nn.LazyBatchNorm2d()(torch.randn(2, 3, 4))
    with pytest.raises(ValueError, match=r"expected 4D input \(got 3D input\)"):
        ts.nn.LazyBatchNorm2d()(ts.randn(2, 3, 4))


# ---------------------------------------------------------------------------- 3-D pooling
def np_adaptive_max3d(x, out):
    *lead, D, H, W = x.shape
    res = np.empty(tuple(lead) + tuple(out), x.dtype)
    idx = np.empty(tuple(lead) + tuple(out), np.int64)

    def bounds(i, size, o):
        return (i * size) // o, -((-(i + 1) * size) // o)

    for a in range(out[0]):
        d0, d1 = bounds(a, D, out[0])
        for b in range(out[1]):
            h0, h1 = bounds(b, H, out[1])
            for c in range(out[2]):
                w0, w1 = bounds(c, W, out[2])
                win = x[..., d0:d1, h0:h1, w0:w1].reshape(*lead, -1)
                k = win.argmax(-1)
                res[..., a, b, c] = win.max(-1)
                kd, rem = np.divmod(k, (h1 - h0) * (w1 - w0))
                kh, kw = np.divmod(rem, w1 - w0)
                idx[..., a, b, c] = ((kd + d0) * H + kh + h0) * W + kw + w0
    return res, idx


@pytest.mark.parametrize("shape,out", [((2, 3, 7, 6, 5), (3, 2, 4)), ((3, 5, 5, 5), (2, 2, 2)),
                                       ((1, 2, 4, 4, 4), (6, 5, 4))])
def test_adaptive_max_pool3d_numpy(shape, out):
    x = RNG.standard_normal(shape).astype(np.float32)
    xs = T(x, requires_grad=True)
    o, i = F.adaptive_max_pool3d(xs, out, return_indices=True)
    ro, ri = np_adaptive_max3d(x, out)
    close(o, ro)
    assert i.dtype == ts.int64 and i.tolist() == ri.tolist()
    o.sum().backward()
    grad = np.zeros(x.size, np.float32).reshape(-1, x.shape[-3] * x.shape[-2] * x.shape[-1])
    for row, ids in zip(grad, ri.reshape(grad.shape[0], -1)):
        np.add.at(row, ids, 1.0)
    close(xs.grad, grad.reshape(x.shape))
    m = ts.nn.AdaptiveMaxPool3d(out)
    close(m(T(x)), ro)
    assert repr(m) == f"AdaptiveMaxPool3d(output_size={out})"


@pytest.mark.torch
@pytest.mark.parametrize("out", [(3, 2, 4), 2, (None, 3, 1)])
def test_adaptive_max_pool3d_matches_torch(out):
    x = torch.randn(2, 3, 6, 7, 5, requires_grad=True)
    xs = from_torch(x, requires_grad=True)
    o, i = torch.nn.AdaptiveMaxPool3d(out, return_indices=True)(x)
    os_, is_ = ts.nn.AdaptiveMaxPool3d(out, return_indices=True)(xs)
    close(os_, o)
    assert is_.tolist() == i.tolist()
    g = torch.randn(*o.shape)
    (o * g).sum().backward()
    (os_ * from_torch(g)).sum().backward()
    close(xs.grad, x.grad)


@pytest.mark.parametrize("k,s,p", [(2, 2, 0), (3, 2, 1), ((2, 3, 2), (2, 2, 1), (1, 1, 0))])
def test_max_unpool3d_puts_values_back_numpy(k, s, p):
    x = RNG.standard_normal((2, 3, 6, 7, 5)).astype(np.float32)
    pooled, idx = F.max_pool3d(T(x), k, s, p, return_indices=True)
    ps = ts.tensor(to_np(pooled), requires_grad=True)
    up = F.max_unpool3d(ps, idx, k, s, p, output_size=x.shape[-3:])
    expected = np.zeros((2, 3, 6 * 7 * 5), np.float32)
    np.put_along_axis(expected, to_np(idx).reshape(2, 3, -1), to_np(pooled).reshape(2, 3, -1), -1)
    close(up, expected.reshape(x.shape))
    g = RNG.standard_normal(x.shape).astype(np.float32)
    (up * T(g)).sum().backward()
    close(ps.grad, np.take_along_axis(g.reshape(2, 3, -1), to_np(idx).reshape(2, 3, -1), -1).reshape(pooled.shape))
    m = ts.nn.MaxUnpool3d(k, s, p)
    close(m(pooled, idx, output_size=x.shape), expected.reshape(x.shape))


@pytest.mark.torch
@pytest.mark.parametrize("k,s,p,size", [(2, 2, 0, None), (2, 2, 0, (7, 9, 7)), (3, 2, 1, (6, 7, 5))])
def test_max_unpool3d_matches_torch(k, s, p, size):
    x = torch.randn(2, 3, 6, 8, 6) if p == 0 else torch.randn(2, 3, 6, 7, 5)
    o, i = torch.nn.functional.max_pool3d(x, k, s, p, return_indices=True)
    o.requires_grad_(True)
    os_ = from_torch(o, requires_grad=True)
    u = torch.nn.MaxUnpool3d(k, s, p)(o, i, output_size=size)
    us = ts.nn.MaxUnpool3d(k, s, p)(os_, from_torch(i), output_size=size)
    close(us, u)
    g = torch.randn(*u.shape)
    (u * g).sum().backward()
    (us * from_torch(g)).sum().backward()
    close(os_.grad, o.grad)
    assert repr(ts.nn.MaxUnpool3d(k, s, p)) == repr(torch.nn.MaxUnpool3d(k, s, p))


def np_lp_pool3d(x, p, k, s):
    *lead, D, H, W = x.shape
    out = [(n - kk) // ss + 1 for n, kk, ss in zip((D, H, W), k, s)]
    res = np.empty(tuple(lead) + tuple(out))
    for a in range(out[0]):
        for b in range(out[1]):
            for c in range(out[2]):
                win = x[..., a * s[0]:a * s[0] + k[0], b * s[1]:b * s[1] + k[1], c * s[2]:c * s[2] + k[2]]
                res[..., a, b, c] = (win.astype(np.float64) ** p).sum((-3, -2, -1)) ** (1.0 / p)
    return res


@pytest.mark.parametrize("p,k,s", [(2, (2, 2, 2), (2, 2, 2)), (3, (2, 3, 2), (1, 2, 1)), (1.5, (3, 3, 3), (1, 1, 1))])
def test_lp_pool3d_numpy(p, k, s):
    x = RNG.uniform(0.1, 2.0, (2, 3, 6, 7, 5)).astype(np.float32)
    close(F.lp_pool3d(T(x), p, k, s), np_lp_pool3d(x, p, k, s), 1e-4)
    m = ts.nn.LPPool3d(p, k, s)
    close(m(T(x)), np_lp_pool3d(x, p, k, s), 1e-4)
    assert repr(m) == f"LPPool3d(norm_type={p}, kernel_size={k}, stride={s}, ceil_mode=False)"


@pytest.mark.torch
@pytest.mark.parametrize("p,k,s,ceil", [(2, 2, None, False), (3, (2, 3, 2), (1, 2, 1), True), (1.5, 2, 1, False),
                                        (math.inf, 2, 2, False)])
def test_lp_pool3d_matches_torch(p, k, s, ceil):
    x = (torch.rand(2, 3, 6, 7, 5) + 0.1).requires_grad_(True)
    xs = from_torch(x, requires_grad=True)
    o = torch.nn.LPPool3d(p, k, s, ceil)(x)
    os_ = ts.nn.LPPool3d(p, k, s, ceil)(xs)
    close(os_, o)
    g = torch.randn(*o.shape)
    (o * g).sum().backward()
    (os_ * from_torch(g)).sum().backward()
    close(xs.grad, x.grad, 1e-4)


@pytest.mark.torch
def test_3d_pool_bad_input_raises_like_torch():
    tf = torch.nn.functional
    cases = [
        (lambda: tf.adaptive_max_pool3d(torch.randn(3, 4, 4), 2),
         lambda: F.adaptive_max_pool3d(ts.randn(3, 4, 4), 2), RuntimeError,
         r"adaptive_max_pool3d\(\): Expected a non-empty 4D \(C, D, H, W\) or 5D \(N, C, D, H, W\) tensor, but got: "
         r"\[3, 4, 4\]"),
        (lambda: tf.max_unpool3d(torch.randn(3, 2, 2), torch.zeros(3, 2, 2, dtype=torch.long), 2),
         lambda: F.max_unpool3d(ts.randn(3, 2, 2), ts.zeros(3, 2, 2, dtype=ts.int64), 2), RuntimeError,
         "max_unpool3d: input should be a 4d or 5d Tensor, but got a tensor with 3 dimensions"),
        (lambda: tf.max_unpool3d(torch.randn(1, 3, 2, 2, 2), torch.full((1, 3, 2, 2, 2), 100), 2),
         lambda: F.max_unpool3d(ts.randn(1, 3, 2, 2, 2), ts.full((1, 3, 2, 2, 2), 100, dtype=ts.int64), 2),
         RuntimeError, r"max_unpool3d: found an invalid max index: 100 \(output volumes are of size 4x4x4\)"),
        (lambda: tf.max_unpool3d(torch.randn(1, 3, 2, 2, 2), torch.zeros(1, 3, 2, 2, 1, dtype=torch.long), 2),
         lambda: F.max_unpool3d(ts.randn(1, 3, 2, 2, 2), ts.zeros(1, 3, 2, 2, 1, dtype=ts.int64), 2),
         RuntimeError, r"max_unpool3d: expected shape of indices to be same as that of the input tensor "
                       r"\(\[1, 3, 2, 2, 2\]\) but got indices tensor with shape: \[1, 3, 2, 2, 1\]"),
        (lambda: tf.max_unpool3d(torch.randn(1, 3, 2, 2, 2), torch.zeros(1, 3, 2, 2, 2, dtype=torch.long), 2,
                                 output_size=(9, 9, 9)),
         lambda: F.max_unpool3d(ts.randn(1, 3, 2, 2, 2), ts.zeros(1, 3, 2, 2, 2, dtype=ts.int64), 2,
                                output_size=(9, 9, 9)),
         ValueError, r'invalid output_size "\(9, 9, 9\)" \(dim 0 must be between 2 and 6\)'),
        (lambda: tf.lp_pool3d(torch.randn(1, 3, 4, 4, 4), 0, 2),
         lambda: F.lp_pool3d(ts.randn(1, 3, 4, 4, 4), 0, 2), ValueError,
         "lp_pool3d: norm_type must be a non-zero value, but got 0"),
        (lambda: tf.lp_pool3d(torch.randn(3, 4, 4), 2, 2),
         lambda: F.lp_pool3d(ts.randn(3, 4, 4), 2, 2), RuntimeError,
         r"lp_pool3d\(\): Expected a non-empty 4D"),
    ]
    for torch_call, call, exc, pattern in cases:
        with pytest.raises(exc):
            torch_call()
        with pytest.raises(exc, match=pattern):
            call()


# ---------------------------------------------------------------------------- FractionalMaxPool2d
def np_intervals(u, in_size, out_size, pool):
    """torch's generate_intervals in float32."""
    u = np.float32(u)
    seq = []
    if out_size > 1:
        alpha = np.float32(in_size - pool) / np.float32(out_size - 1)
        seq = [int(np.float32(np.float32(i) + u) * alpha) - int(u * alpha) for i in range(out_size - 1)]
    return seq + [in_size - pool]


@pytest.mark.parametrize("shape,k,out", [((2, 3, 11, 9), 2, (5, 4)), ((3, 10, 10), 3, (6, 6)),
                                         ((1, 2, 25, 17), (3, 2), (7, 13))])
def test_fractional_max_pool2d_numpy(shape, k, out):
    x = RNG.standard_normal(shape).astype(np.float32)
    batched = len(shape) == 4
    n, c = (shape[0] if batched else 1), shape[-3]
    samples = RNG.random((n, c, 2)).astype(np.float32)
    kh, kw = (k, k) if isinstance(k, int) else k
    xs = T(x, requires_grad=True)
    o, i = F.fractional_max_pool2d(xs, k, out, return_indices=True, _random_samples=T(samples))
    xb = x if batched else x[None]
    ro, ri = np.empty((n, c) + out, np.float32), np.empty((n, c) + out, np.int64)
    for b in range(n):
        for ch in range(c):
            rows = np_intervals(samples[b, ch, 1], shape[-2], out[0], kh)
            cols = np_intervals(samples[b, ch, 0], shape[-1], out[1], kw)
            for a, r in enumerate(rows):
                for e, q in enumerate(cols):
                    win = xb[b, ch, r:r + kh, q:q + kw]
                    j = win.argmax()
                    ro[b, ch, a, e] = win.max()
                    ri[b, ch, a, e] = (r + j // kw) * shape[-1] + q + j % kw
    if not batched:
        ro, ri = ro[0], ri[0]
    close(o, ro)
    assert i.tolist() == ri.tolist()
    o.sum().backward()
    grad = np.zeros((n * c, shape[-2] * shape[-1]), np.float32)
    for row, ids in zip(grad, ri.reshape(n * c, -1)):
        np.add.at(row, ids, 1.0)
    close(xs.grad, grad.reshape(shape))
    # the module: its samples are a buffer
    m = ts.nn.FractionalMaxPool2d(k, output_size=out, _random_samples=T(samples))
    assert list(m.state_dict()) == ["_random_samples"]
    close(m(T(x)), ro)


@pytest.mark.torch
@pytest.mark.parametrize("shape,k,out,ratio", [((2, 3, 11, 9), 2, (5, 4), None), ((3, 10, 10), 3, None, (0.5, 0.5)),
                                               ((2, 4, 25, 17), (3, 2), (7, 13), None), ((1, 2, 9, 9), 2, 8, None)])
def test_fractional_max_pool2d_matches_torch(shape, k, out, ratio):
    x = torch.randn(*shape, requires_grad=True)
    xs = from_torch(x, requires_grad=True)
    samples = torch.rand(1 if len(shape) == 3 else shape[0], shape[-3], 2)
    tm = torch.nn.FractionalMaxPool2d(k, out, ratio, return_indices=True, _random_samples=samples)
    sm = ts.nn.FractionalMaxPool2d(k, out, ratio, return_indices=True, _random_samples=from_torch(samples))
    assert list(sm.state_dict()) == list(tm.state_dict())
    (o, i), (os_, is_) = tm(x), sm(xs)
    close(os_, o)
    assert is_.tolist() == i.tolist()
    g = torch.randn(*o.shape)
    (o * g).sum().backward()
    (os_ * from_torch(g)).sum().backward()
    close(xs.grad, x.grad)
    # float64 computes the steps in float64, as torch
    x64, s64 = x.detach().double(), samples.double()
    i64 = torch.nn.functional.fractional_max_pool2d(x64, k, out, ratio, True, _random_samples=s64)[1]
    is64 = F.fractional_max_pool2d(from_torch(x64), k, out, ratio, True, _random_samples=from_torch(s64))[1]
    assert is64.tolist() == i64.tolist()


@pytest.mark.torch
def test_fractional_max_pool2d_random_steps_match_torch_intervals():
    rng = np.random.default_rng(7)
    for _ in range(60):
        h, w, k = int(rng.integers(5, 60)), int(rng.integers(5, 60)), int(rng.integers(1, 4))
        oh, ow = int(rng.integers(1, h - k + 2)), int(rng.integers(1, w - k + 2))
        x, samples = torch.randn(1, 2, h, w), torch.rand(1, 2, 2)
        i = torch.nn.functional.fractional_max_pool2d(x, k, (oh, ow), return_indices=True, _random_samples=samples)[1]
        si = F.fractional_max_pool2d(from_torch(x), k, (oh, ow), return_indices=True,
                                     _random_samples=from_torch(samples))[1]
        assert si.tolist() == i.tolist(), (h, w, k, oh, ow)


def test_fractional_max_pool2d_draws_its_own_samples():
    x = T(RNG.standard_normal((2, 3, 10, 10)))
    o, i = F.fractional_max_pool2d(x, 2, output_ratio=(0.5, 0.5), return_indices=True)
    assert tuple(o.shape) == (2, 3, 5, 5)
    close(o, np.take_along_axis(to_np(x).reshape(2, 3, -1), to_np(i).reshape(2, 3, -1), -1).reshape(2, 3, 5, 5))


@pytest.mark.torch
def test_fractional_max_pool2d_bad_input_raises_like_torch():
    tf = torch.nn.functional
    cases = [
        (lambda: tf.fractional_max_pool2d(torch.randn(1, 3, 8, 8), 2),
         lambda: F.fractional_max_pool2d(ts.randn(1, 3, 8, 8), 2), ValueError,
         "fractional_max_pool2d requires specifying either an output_size or an output_ratio"),
        (lambda: tf.fractional_max_pool2d(torch.randn(1, 3, 8, 8), 2, output_size=8),
         lambda: F.fractional_max_pool2d(ts.randn(1, 3, 8, 8), 2, output_size=8), RuntimeError,
         r"fractional_max_pool2d\(\): pool height 2 too large relative to input height 8"),
        (lambda: tf.fractional_max_pool2d(torch.randn(8, 8), 2, output_size=4),
         lambda: F.fractional_max_pool2d(ts.randn(8, 8), 2, output_size=4), IndexError,
         r"fractional_max_pool2d\(\): Dimension out of range: expected a 3D \(C, H, W\) or 4D \(N, C, H, W\) input, "
         r"got 2D input"),
        (lambda: tf.fractional_max_pool2d(torch.randn(2, 3, 3, 8, 8), 2, output_size=4),
         lambda: F.fractional_max_pool2d(ts.randn(2, 3, 3, 8, 8), 2, output_size=4), RuntimeError,
         r"fractional_max_pool2d\(\): Expected 3D or 4D tensor, but got: \[2, 3, 3, 8, 8\]"),
        (lambda: tf.fractional_max_pool2d(torch.randn(1, 3, 8, 8), 2, output_size=4,
                                          _random_samples=torch.rand(1, 2, 2)),
         lambda: F.fractional_max_pool2d(ts.randn(1, 3, 8, 8), 2, output_size=4, _random_samples=ts.rand(1, 2, 2)),
         RuntimeError, r"expected _random_samples.size\(1\) to equal the input channel size 3, got 2"),
        (lambda: tf.fractional_max_pool2d(torch.randn(2, 3, 8, 8), 2, output_size=4,
                                          _random_samples=torch.rand(1, 3, 2)),
         lambda: F.fractional_max_pool2d(ts.randn(2, 3, 8, 8), 2, output_size=4, _random_samples=ts.rand(1, 3, 2)),
         RuntimeError, r"expected _random_samples.size\(0\) no less than the input batch size 2, got 1"),
        (lambda: torch.nn.FractionalMaxPool2d(2, output_ratio=1.5),
         lambda: ts.nn.FractionalMaxPool2d(2, output_ratio=1.5), ValueError,
         r"output_ratio must be between 0 and 1 \(got 1.5\)"),
        (lambda: torch.nn.FractionalMaxPool2d(2, output_ratio=0.5, output_size=3),
         lambda: ts.nn.FractionalMaxPool2d(2, output_ratio=0.5, output_size=3), ValueError,
         "only one of output_size and output_ratio may be specified"),
    ]
    for torch_call, call, exc, pattern in cases:
        with pytest.raises(exc):
            torch_call()
        with pytest.raises(exc, match=pattern):
            call()


# ---------------------------------------------------------------------------- CrossMapLRN2d
def np_cross_map_lrn2d(x, size, alpha, beta, k):
    """torch's forward, as its running sum over the channels (channel 0 stays in every window)."""
    c = x.shape[1]
    sq = x.astype(np.float64) ** 2
    pre_pad = int((size - 1) / 2 + 1)
    scale = np.zeros_like(sq)
    for j in range(min(pre_pad, c)):
        scale[:, 0] += sq[:, j]
    for ch in range(1, c):
        scale[:, ch] = scale[:, ch - 1]
        if ch < c - pre_pad + 1:
            scale[:, ch] += sq[:, ch + pre_pad - 1]
        if ch > pre_pad:
            scale[:, ch] -= sq[:, ch - pre_pad]
    return x * (scale * alpha / size + k) ** -beta


@pytest.mark.parametrize("c,size,alpha,beta,k", [(8, 3, 1.0, 1.0, 1.0), (7, 5, 1e-2, 0.75, 2.0), (3, 5, 0.5, 0.5, 1.0)])
def test_cross_map_lrn2d_numpy(c, size, alpha, beta, k):
    x = RNG.standard_normal((2, c, 3, 4)).astype(np.float32)
    m = ts.nn.CrossMapLRN2d(size, alpha, beta, k)
    close(m(T(x)), np_cross_map_lrn2d(x, size, alpha, beta, k), 1e-5)
    assert repr(m) == f"CrossMapLRN2d({size}, alpha={alpha}, beta={beta}, k={k})"


@pytest.mark.torch
@pytest.mark.parametrize("c,size,alpha,beta,k", [(8, 3, 1.0, 1.0, 1.0), (7, 5, 1e-2, 0.75, 2.0), (3, 5, 0.5, 0.5, 1.0),
                                                 (10, 4, 0.1, 0.6, 1.0)])
def test_cross_map_lrn2d_matches_torch(c, size, alpha, beta, k):
    x = torch.randn(2, c, 3, 4, requires_grad=True)
    xs = from_torch(x, requires_grad=True)
    tm, sm = torch.nn.CrossMapLRN2d(size, alpha, beta, k), ts.nn.CrossMapLRN2d(size, alpha, beta, k)
    assert repr(sm) == repr(tm)
    y, ys = tm(x), sm(xs)
    close(ys, y)
    g = torch.randn(*y.shape)
    (y * g).sum().backward()
    (ys * from_torch(g)).sum().backward()
    close(xs.grad, x.grad)  # torch's hand-written backward


@pytest.mark.torch
def test_cross_map_lrn2d_bad_input_raises_like_torch():
    with pytest.raises(ValueError):
        torch.nn.CrossMapLRN2d(3)(torch.randn(3, 4, 4))
    with pytest.raises(ValueError, match="CrossMapLRN2d: Expected input to be 4D, got 3D instead."):
        ts.nn.CrossMapLRN2d(3)(ts.randn(3, 4, 4))


# ---------------------------------------------------------------------------- where torch exports them
@pytest.mark.torch
def test_exported_where_torch_exports_them():
    import importlib
    names = {"adaptive": ["AdaptiveLogSoftmaxWithLoss"], "pooling": ["AdaptiveMaxPool3d", "MaxUnpool3d", "LPPool3d",
                                                                     "FractionalMaxPool2d"],
             "normalization": ["CrossMapLRN2d"], "linear": ["LazyLinear"],
             "conv": ["LazyConv1d", "LazyConv2d", "LazyConv3d", "LazyConvTranspose1d", "LazyConvTranspose2d",
                      "LazyConvTranspose3d"],
             "batchnorm": ["LazyBatchNorm1d", "LazyBatchNorm2d", "LazyBatchNorm3d"],
             "instancenorm": ["LazyInstanceNorm1d", "LazyInstanceNorm2d", "LazyInstanceNorm3d"]}
    for family, classes in names.items():
        family_module = importlib.import_module(f"tessera.nn.modules.{family}")
        for name in classes:
            assert hasattr(getattr(torch.nn.modules, family), name)
            assert getattr(family_module, name) is getattr(ts.nn, name) is getattr(ts.nn.modules, name)
            assert name in ts.nn.modules.__all__
    for name in ["adaptive_max_pool3d", "adaptive_max_pool3d_with_indices", "max_unpool3d", "lp_pool3d",
                 "fractional_max_pool2d", "fractional_max_pool2d_with_indices"]:
        assert hasattr(torch.nn.functional, name) and callable(getattr(F, name))
    assert importlib.import_module("tessera.nn.modules.lazy").LazyModuleMixin is not None
    for name in ["UninitializedParameter", "UninitializedBuffer"]:
        assert hasattr(torch.nn, name) and name in ts.nn.__all__
