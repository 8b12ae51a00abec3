"""Memory formats (ts.channels_last and friends): the layout API against PyTorch's rules (strides
compared with torch when it is importable, with the NHWC strides written out here otherwise),
element-wise results keeping their input's layout, convolution forward and backward on the NHWC
path against the NCHW results, pooling keeping channels-last, and a channels-last training step
matching the row-major one."""
import pickle

import numpy as np
import pytest

import tessera as ts

try:
    import torch
except ImportError:
    torch = None

F = ts.nn.functional


def nhwc(n, c, h, w):
    return (h * w * c, 1, w * c, c)


def test_formats_and_layout_api():
    x = ts.randn(2, 3, 4, 5)
    assert repr(ts.channels_last) == "tessera.channels_last"
    assert pickle.loads(pickle.dumps(ts.channels_last)) is ts.channels_last
    y = x.contiguous(memory_format=ts.channels_last)
    assert y.stride() == nhwc(2, 3, 4, 5)
    assert y.is_contiguous(memory_format=ts.channels_last) and not y.is_contiguous()
    assert x.is_contiguous() and not x.is_contiguous(memory_format=ts.channels_last)
    np.testing.assert_array_equal(y.numpy(), x.numpy())  # a layout, not a different tensor
    assert y.contiguous(memory_format=ts.channels_last) is y
    assert x.to(memory_format=ts.channels_last).stride() == nhwc(2, 3, 4, 5)
    assert y.contiguous().stride() == (60, 20, 5, 1)
    # preserve_format keeps channels-last through clone, *_like, dtype conversions and copies
    for made in (y.clone(), ts.empty_like(y), ts.zeros_like(y), ts.ones_like(y), ts.full_like(y, 2.0),
                 ts.rand_like(y), ts.randn_like(y), y.double(), y.to(ts.float64), y.to(copy=True)):
        assert made.stride() == nhwc(2, 3, 4, 5)
    assert y.clone(memory_format=ts.contiguous_format).stride() == (60, 20, 5, 1)
    assert ts.zeros_like(x, memory_format=ts.channels_last).stride() == nhwc(2, 3, 4, 5)
    assert ts.empty(2, 3, 4, 5, memory_format=ts.channels_last).stride() == nhwc(2, 3, 4, 5)
    z = ts.randn(2, 3, 4, 5, 6).contiguous(memory_format=ts.channels_last_3d)
    assert z.stride() == (360, 1, 90, 18, 3)
    # a size-1 dim may hold any stride
    one = ts.randn(2, 1, 4, 5).contiguous(memory_format=ts.channels_last)
    assert one.is_contiguous(memory_format=ts.channels_last) and one.is_contiguous()


def test_layout_errors():
    with pytest.raises(RuntimeError, match="required rank 4 tensor to use channels_last format"):
        ts.randn(2, 3).contiguous(memory_format=ts.channels_last)
    with pytest.raises(RuntimeError, match="required rank 5 tensor to use channels_last_3d format"):
        ts.randn(2, 3, 4, 5).to(memory_format=ts.channels_last_3d)
    with pytest.raises(RuntimeError, match="preserve memory format is unsupported"):
        ts.randn(2, 3).contiguous(memory_format=ts.preserve_format)
    with pytest.raises(TypeError, match="memory_format must be a tessera.memory_format"):
        ts.randn(2, 3).is_contiguous(memory_format="channels_last")


@pytest.mark.skipif(torch is None, reason="torch not importable")
def test_strides_match_torch():
    a = np.random.default_rng(0).standard_normal((2, 3, 4, 5)).astype(np.float32)
    ours, theirs = ts.tensor(a).to(memory_format=ts.channels_last), torch.tensor(a).to(memory_format=torch.channels_last)
    cases = [lambda m, t: m.relu(t), lambda m, t: t + 1, lambda m, t: t * t, lambda m, t: m.nn.functional.gelu(t),
             lambda m, t: t + m.ones(3, 1, 1), lambda m, t: m.ones(2, 3, 4, 5) + t, lambda m, t: t.sin(),
             lambda m, t: m.where(t > 0, t, 0.5 * t)]
    for f in cases:
        assert f(ts, ours).stride() == f(torch, theirs).stride()
    tt, tx = ts.tensor(a[0, 0]).t(), torch.tensor(a[0, 0]).t()
    for f in (lambda t: t * 2, lambda t: t + 1, lambda t: t.exp()):
        assert f(tt).stride() == f(tx).stride()


CONVS = [  # (c_in, c_out, kernel, stride, padding, groups, bias, image size)
    (3, 8, 3, 1, 1, 1, True, 9), (16, 32, 3, 2, 1, 1, False, 9), (16, 16, 3, 1, 1, 16, True, 9),
    (8, 16, 1, 1, 0, 1, True, 9),
    # small planes: the weight gradient as one GEMM over the batch, its operands brought to NCHW / OIHW
    (32, 48, 3, 1, 1, 1, True, 1), (32, 32, 3, 2, 1, 1, False, 2), (128, 128, 3, 1, 1, 1, False, 2),
]


@pytest.mark.parametrize("weights_channels_last", [False, True], ids=["oihw", "ohwi"])
@pytest.mark.parametrize("case", CONVS, ids=[str(i) for i in range(len(CONVS))])
def test_conv_on_nhwc_matches_nchw(case, weights_channels_last):
    cin, cout, k, s, p, g, bias, size = case
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, cin, size, size)).astype(np.float32)
    w = rng.standard_normal((cout, cin // g, k, k)).astype(np.float32)
    b = rng.standard_normal(cout).astype(np.float32) if bias else None
    out_size = (size + 2 * p - k) // s + 1
    gy = ts.tensor(rng.standard_normal((3, cout, out_size, out_size)).astype(np.float32))
    results = []
    for fmt in (ts.contiguous_format, ts.channels_last):
        X = ts.tensor(x).contiguous(memory_format=fmt).requires_grad_()
        W = ts.tensor(w).contiguous(memory_format=fmt if weights_channels_last else ts.contiguous_format)
        W.requires_grad_()
        B = None if b is None else ts.tensor(b, requires_grad=True)
        y = F.conv2d(X, W, B, stride=s, padding=p, groups=g)
        y.backward(gy)
        results.append((y, X.grad, W.grad, None if B is None else B.grad))
    (y0, gx0, gw0, gb0), (y1, gx1, gw1, gb1) = results
    assert y1.is_contiguous(memory_format=ts.channels_last) or out_size == 1
    assert gx1.is_contiguous(memory_format=ts.channels_last)
    if weights_channels_last:  # the weight's gradient in the weight's layout, as PyTorch's
        assert gw1.is_contiguous(memory_format=ts.channels_last)
    for a, b_ in ((y0, y1), (gx0, gx1), (gw0, gw1)) + (((gb0, gb1),) if bias else ()):
        np.testing.assert_allclose(a.detach().numpy(), b_.detach().numpy(), rtol=1e-4, atol=1e-4)
    # float64 takes the generic path and still answers channels-last
    y64 = F.conv2d(ts.tensor(x.astype(np.float64)).contiguous(memory_format=ts.channels_last),
                   ts.tensor(w.astype(np.float64)), stride=s, padding=p, groups=g)
    assert y64.is_contiguous(memory_format=ts.channels_last)
    np.testing.assert_allclose(y64.numpy(), y0.detach().numpy() - (0 if b is None else b[None, :, None, None]),
                               rtol=1e-4, atol=1e-4)


POOLS = {
    "max_pool2d": lambda x: F.max_pool2d(x, 3, stride=2, padding=1),
    "max_pool2d dilated ceil": lambda x: F.max_pool2d(x, 2, stride=2, dilation=2, ceil_mode=True),
    "avg_pool2d": lambda x: F.avg_pool2d(x, 3, stride=2, padding=1, count_include_pad=False),
    "adaptive_avg_pool2d 1": lambda x: F.adaptive_avg_pool2d(x, 1),
    "adaptive_avg_pool2d 3x2": lambda x: F.adaptive_avg_pool2d(x, (3, 2)),
}


@pytest.mark.parametrize("dtype", [ts.float32, ts.float64], ids=str)
@pytest.mark.parametrize("name", list(POOLS))
def test_pooling_keeps_channels_last(name, dtype):
    """Pooling a channels-last input answers channels-last, and its backward's grad_input too (as
    PyTorch's), with the values and gradients of the row-major computation; max pooling's indices
    are the same flat h * w positions."""
    pool = POOLS[name]
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 5, 9, 8))
    gy = ts.tensor(rng.standard_normal(tuple(pool(ts.tensor(x)).shape)), dtype=dtype)
    results = []
    for fmt in (ts.contiguous_format, ts.channels_last):
        X = ts.tensor(x, dtype=dtype).contiguous(memory_format=fmt).requires_grad_()
        y = pool(X)
        y.backward(gy)
        results.append((y, X.grad))
    (y0, g0), (y1, g1) = results
    assert y1.is_contiguous(memory_format=ts.channels_last) and g1.is_contiguous(memory_format=ts.channels_last)
    np.testing.assert_array_equal(y1.detach().numpy(), y0.detach().numpy())
    np.testing.assert_allclose(g1.numpy(), g0.numpy(), rtol=1e-12, atol=1e-6)
    if name.startswith("max_pool2d"):
        _, i0 = F.max_pool2d(ts.tensor(x, dtype=dtype), 3, stride=2, padding=1, return_indices=True)
        _, i1 = F.max_pool2d(ts.tensor(x, dtype=dtype).contiguous(memory_format=ts.channels_last), 3, stride=2,
                             padding=1, return_indices=True)
        assert i1.is_contiguous(memory_format=ts.channels_last) and i1.tolist() == i0.tolist()
    if torch is not None:
        tpool = {"max_pool2d": lambda t: torch.nn.functional.max_pool2d(t, 3, stride=2, padding=1),
                 "max_pool2d dilated ceil": lambda t: torch.nn.functional.max_pool2d(t, 2, stride=2, dilation=2,
                                                                                     ceil_mode=True),
                 "avg_pool2d": lambda t: torch.nn.functional.avg_pool2d(t, 3, stride=2, padding=1,
                                                                        count_include_pad=False),
                 "adaptive_avg_pool2d 1": lambda t: torch.nn.functional.adaptive_avg_pool2d(t, 1),
                 "adaptive_avg_pool2d 3x2": lambda t: torch.nn.functional.adaptive_avg_pool2d(t, (3, 2))}[name]
        ty = tpool(torch.tensor(x).contiguous(memory_format=torch.channels_last))
        assert ty.stride() == y1.stride()
        np.testing.assert_allclose(y1.detach().numpy(), ty.numpy(), rtol=1e-6, atol=1e-6)


def test_channels_last_training_step_matches_row_major():
    """A conv / batch norm / relu / pool / linear model: Module.to(memory_format=channels_last) and
    channels-last inputs give the row-major model's loss and gradients."""
    def build():
        ts.manual_seed(0)
        return ts.nn.Sequential(ts.nn.Conv2d(3, 16, 3, padding=1), ts.nn.BatchNorm2d(16), ts.nn.ReLU(),
                                ts.nn.Conv2d(16, 16, 3, padding=1, bias=False), ts.nn.MaxPool2d(2),
                                ts.nn.AdaptiveAvgPool2d(1), ts.nn.Flatten(), ts.nn.Linear(16, 4))
    x = np.random.default_rng(2).standard_normal((4, 3, 8, 8)).astype(np.float32)
    y = ts.tensor([0, 1, 2, 3])
    grads = []
    for fmt in (ts.contiguous_format, ts.channels_last):
        model = build().to(memory_format=fmt)
        if fmt is ts.channels_last:
            assert model[0].weight.is_contiguous(memory_format=ts.channels_last)
        loss = F.cross_entropy(model(ts.tensor(x).to(memory_format=fmt)), y)
        loss.backward()
        grads.append([float(loss)] + [p.grad.numpy() for p in model.parameters()])
    assert grads[0][0] == pytest.approx(grads[1][0], rel=1e-5)
    for a, b in zip(grads[0][1:], grads[1][1:]):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
