"""Convolution and pooling operators (forward and backward) through the Python package, against
NumPy references written here: 1-D / 2-D convolution with stride, padding, dilation, groups and
bias; max / avg / adaptive-avg pooling with their options; float32 and float64, batched and
unbatched, non-contiguous inputs, empty batches, and the errors. PyTorch, when importable, is a
second oracle."""
import numpy as np
import pytest

import tessera as ts
from conftest import assert_close, from_np, to_np

ops = ts.ops.aten
RNG = np.random.default_rng(4321)
FLOATS = [ts.float32, ts.float64]


def rand(shape, dtype):
    a = RNG.uniform(-1, 1, size=shape)
    return from_np(a, dtype), a


def rtol(dtype):
    return 2e-5 if dtype == ts.float32 else 1e-11


def close(t, expected, dtype):
    assert_close(t, expected, dtype, rtol=rtol(dtype), atol=rtol(dtype))


# ---------------------------------------------------------------------------- NumPy references
def np_conv2d(x, w, b, stride, padding, dilation, groups):
    """x [N, C, H, W], w [O, C / groups, KH, KW]: one strided window slice per kernel offset."""
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    og = o // groups
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    oh = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    ow = (wd + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    y = np.zeros((n, o, oh, ow))
    for i in range(kh):
        for j in range(kw):
            patch = xp[:, :, i * dh: i * dh + sh * (oh - 1) + 1: sh, j * dw: j * dw + sw * (ow - 1) + 1: sw]
            for g in range(groups):
                y[:, g * og:(g + 1) * og] += np.einsum("nchw,oc->nohw", patch[:, g * cg:(g + 1) * cg],
                                                        w[g * og:(g + 1) * og, :, i, j])
    if b is not None:
        y += b.reshape(1, -1, 1, 1)
    return y


def np_conv2d_backward(gy, x, w, stride, padding, dilation, groups):
    """The adjoint of np_conv2d: (grad_x, grad_w, grad_b)."""
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    og = o // groups
    oh, ow = gy.shape[2:]
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    gxp = np.zeros_like(xp)
    gw = np.zeros_like(w)
    for i in range(kh):
        for j in range(kw):
            sl = (slice(None), slice(None), slice(i * dh, i * dh + sh * (oh - 1) + 1, sh),
                  slice(j * dw, j * dw + sw * (ow - 1) + 1, sw))
            patch = xp[sl]
            for g in range(groups):
                gyg = gy[:, g * og:(g + 1) * og]
                gw[g * og:(g + 1) * og, :, i, j] = np.einsum("nohw,nchw->oc", gyg, patch[:, g * cg:(g + 1) * cg])
                gpatch = np.einsum("nohw,oc->nchw", gyg, w[g * og:(g + 1) * og, :, i, j])
                view = gxp[sl]
                view[:, g * cg:(g + 1) * cg] += gpatch
    gx = gxp[:, :, ph:ph + h, pw:pw + wd]
    return gx, gw, gy.sum(axis=(0, 2, 3))


def out_size(n, k, pad, s, d, ceil):
    num = n + 2 * pad - d * (k - 1) - 1
    out = (-(-num // s) if ceil else num // s) + 1
    if ceil and (out - 1) * s >= n + pad:
        out -= 1
    return out


def np_max_pool(x, k, s, pad, dil, ceil):
    """x [P, H, W] -> (values, flat indices): the first maximum of each window."""
    p, h, w = x.shape
    oh, ow = out_size(h, k[0], pad[0], s[0], dil[0], ceil), out_size(w, k[1], pad[1], s[1], dil[1], ceil)
    y = np.full((p, oh, ow), -np.inf)
    idx = np.full((p, oh, ow), -1, dtype=np.int64)
    for a in range(oh):
        for b in range(ow):
            for i in range(k[0]):
                for j in range(k[1]):
                    ih, iw = a * s[0] - pad[0] + i * dil[0], b * s[1] - pad[1] + j * dil[1]
                    if 0 <= ih < h and 0 <= iw < w:
                        v = x[:, ih, iw]
                        better = (v > y[:, a, b]) | np.isnan(v) | (idx[:, a, b] < 0)  # a NaN wins
                        y[:, a, b] = np.where(better, v, y[:, a, b])
                        idx[:, a, b] = np.where(better, ih * w + iw, idx[:, a, b])
    return y, idx


def avg_taps(h, w, k, s, pad, ceil, count_include_pad, divisor):
    """Per output cell: the input cells it averages and their weight."""
    oh, ow = out_size(h, k[0], pad[0], s[0], 1, ceil), out_size(w, k[1], pad[1], s[1], 1, ceil)
    taps = {}
    for a in range(oh):
        for b in range(ow):
            h0, w0 = a * s[0] - pad[0], b * s[1] - pad[1]
            h1, w1 = min(h0 + k[0], h + pad[0]), min(w0 + k[1], w + pad[1])
            size = (h1 - h0) * (w1 - w0)
            h0, w0, h1, w1 = max(h0, 0), max(w0, 0), min(h1, h), min(w1, w)
            cells = [(i, j) for i in range(h0, h1) for j in range(w0, w1)]
            div = divisor if divisor is not None else size if count_include_pad else len(cells)
            taps[a, b] = (cells, div)
    return oh, ow, taps


def adaptive_taps(h, w, oh, ow):
    taps = {}
    for a in range(oh):
        for b in range(ow):
            h0, h1 = (a * h) // oh, -(-((a + 1) * h) // oh)
            w0, w1 = (b * w) // ow, -(-((b + 1) * w) // ow)
            cells = [(i, j) for i in range(h0, h1) for j in range(w0, w1)]
            taps[a, b] = (cells, len(cells))
    return taps


def apply_taps(x, oh, ow, taps):
    """x [P, H, W] -> [P, oh, ow] window averages."""
    y = np.zeros((x.shape[0], oh, ow))
    for (a, b), (cells, div) in taps.items():
        for i, j in cells:
            y[:, a, b] += x[:, i, j] / div
    return y


def adjoint_taps(gy, shape, taps):
    gx = np.zeros(shape)
    for (a, b), (cells, div) in taps.items():
        for i, j in cells:
            gx[:, i, j] += gy[:, a, b] / div
    return gx


def planes(a):
    return a.reshape(-1, *a.shape[-2:])


# ---------------------------------------------------------------------------- convolution
CONV2D = [
    # (x shape, w shape, stride, padding, dilation, groups, bias)
    ((2, 3, 8, 8), (4, 3, 3, 3), (1, 1), (0, 0), (1, 1), 1, True),
    ((2, 3, 8, 8), (5, 3, 3, 3), (1, 1), (1, 1), (1, 1), 1, False),
    ((2, 4, 9, 7), (6, 2, 3, 2), (2, 1), (1, 0), (1, 1), 2, True),
    ((1, 4, 10, 10), (4, 1, 3, 3), (1, 1), (2, 2), (2, 2), 4, True),
    ((3, 2, 7, 6), (3, 2, 2, 3), (3, 2), (0, 1), (2, 1), 1, True),
    ((1, 3, 4, 4), (2, 3, 4, 4), (1, 1), (0, 0), (1, 1), 1, False),
    # channels in multiples of 8 and 16: float32 runs on oneDNN's blocked layouts (reordered in and out)
    ((2, 16, 10, 10), (32, 16, 3, 3), (1, 1), (1, 1), (1, 1), 1, True),
    ((2, 32, 9, 9), (32, 16, 3, 3), (2, 2), (1, 1), (1, 1), 2, False),
    ((2, 16, 8, 8), (16, 1, 3, 3), (1, 1), (1, 1), (1, 1), 16, True),
    ((3, 8, 12, 11), (16, 8, 3, 3), (1, 2), (2, 2), (2, 2), 1, True),
    ((2, 64, 6, 6), (64, 64, 1, 1), (2, 2), (0, 0), (1, 1), 1, False),
    # small planes: the weight gradient as one GEMM over the batch (nn_conv_onednn.cpp)
    ((3, 64, 1, 1), (64, 64, 3, 3), (1, 1), (1, 1), (1, 1), 1, True),
    ((4, 32, 2, 2), (48, 32, 3, 3), (2, 2), (1, 1), (1, 1), 1, False),
    # 1x1, stride 1, planes of 28x28 and more: one GEMM per sample (nn_conv_pointwise.cpp)
    ((2, 5, 28, 28), (7, 5, 1, 1), (1, 1), (0, 0), (1, 1), 1, True),
    ((3, 16, 30, 29), (8, 16, 1, 1), (1, 1), (0, 0), (1, 1), 1, False),
    ((1, 3, 28, 28), (4, 3, 1, 1), (1, 1), (1, 1), (1, 1), 1, True),  # padded: not pointwise
]


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: d.name)
@pytest.mark.parametrize("case", CONV2D, ids=[str(i) for i in range(len(CONV2D))])
def test_conv2d_forward_backward(case, dtype):
    xs, wsh, stride, padding, dilation, groups, has_bias = case
    x, xa = rand(xs, dtype)
    w, wa = rand(wsh, dtype)
    b, ba = rand((wsh[0],), dtype) if has_bias else (None, None)
    y = ops.convolution(x, w, b, list(stride), list(padding), list(dilation), groups)
    want = np_conv2d(xa, wa, ba, stride, padding, dilation, groups)
    close(y, want, dtype)
    gy, gya = rand(want.shape, dtype)
    gx, gw, gb = ops.convolution_backward(gy, x, w, list(stride), list(padding), list(dilation), groups)
    wgx, wgw, wgb = np_conv2d_backward(gya, xa, wa, stride, padding, dilation, groups)
    close(gx, wgx, dtype)
    close(gw, wgw, dtype)
    close(gb, wgb, dtype)


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: d.name)
def test_conv1d_and_unbatched(dtype):
    x, xa = rand((3, 4, 11), dtype)
    w, wa = rand((6, 2, 3), dtype)
    b, ba = rand((6,), dtype)
    y = ops.convolution(x, w, b, [2], [1], [2], 2)
    want = np_conv2d(xa[:, :, None, :], wa[:, :, None, :], ba, (1, 2), (0, 1), (1, 2), 2)[:, :, 0, :]
    close(y, want, dtype)
    close(ops.convolution(x[1], w, b, [2], [1], [2], 2), want[1], dtype)  # (C, L)
    gy, gya = rand(want.shape, dtype)
    gx, gw, gb = ops.convolution_backward(gy, x, w, [2], [1], [2], 2)
    wgx, wgw, wgb = np_conv2d_backward(gya[:, :, None, :], xa[:, :, None, :], wa[:, :, None, :], (1, 2), (0, 1),
                                       (1, 2), 2)
    close(gx, wgx[:, :, 0, :], dtype)
    close(gw, wgw[:, :, 0, :], dtype)
    close(gb, wgb, dtype)
    # Unbatched 2-D: (C, H, W).
    x2, xa2 = rand((3, 6, 5), dtype)
    w2, wa2 = rand((2, 3, 3, 2), dtype)
    close(ops.convolution(x2, w2, None, [1], [1, 0], [1], 1),
          np_conv2d(xa2[None], wa2, None, (1, 1), (1, 0), (1, 1), 1)[0], dtype)


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: d.name)
def test_conv_non_contiguous(dtype):
    xb, xba = rand((2, 7, 6, 3), dtype)
    x, xa = xb.permute(0, 3, 1, 2), xba.transpose(0, 3, 1, 2)  # channels-last memory
    wb, wba = rand((3, 4, 2, 2), dtype)
    w, wa = wb.transpose(0, 1), wba.transpose(1, 0, 2, 3)
    assert not x.is_contiguous() and not w.is_contiguous()
    y = ops.convolution(x, w, None, [2, 1], [1, 0], [1, 1], 1)
    want = np_conv2d(xa, wa, None, (2, 1), (1, 0), (1, 1), 1)
    close(y, want, dtype)
    gyb, gyba = rand((want.shape[0], want.shape[1], want.shape[3], want.shape[2]), dtype)
    gy, gya = gyb.transpose(2, 3), gyba.transpose(0, 1, 3, 2)
    gx, gw, gb = ops.convolution_backward(gy, x, w, [2, 1], [1, 0], [1, 1], 1)
    wgx, wgw, wgb = np_conv2d_backward(gya, xa, wa, (2, 1), (1, 0), (1, 1), 1)
    close(gx, wgx, dtype)
    close(gw, wgw, dtype)
    close(gb, wgb, dtype)


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: d.name)
def test_conv_empty_batch(dtype):
    x = ts.zeros(0, 3, 5, 5, dtype=dtype)
    w, _ = rand((2, 3, 3, 3), dtype)
    y = ops.convolution(x, w, None, [1], [0], [1], 1)
    assert tuple(y.shape) == (0, 2, 3, 3)
    gx, gw, gb = ops.convolution_backward(ts.zeros(0, 2, 3, 3, dtype=dtype), x, w, [1], [0], [1], 1)
    assert tuple(gx.shape) == (0, 3, 5, 5)
    close(gw, np.zeros((2, 3, 3, 3)), dtype)
    close(gb, np.zeros(2), dtype)


def test_conv_half_precision():
    x, xa = rand((2, 3, 6, 6), ts.float32)
    w, wa = rand((4, 3, 3, 3), ts.float32)
    for dt in (ts.float16, ts.bfloat16):
        xh, wh = x.to(dt), w.to(dt)
        y = ops.convolution(xh, wh, None, [1], [1], [1], 1)
        assert y.dtype == dt
        want = np_conv2d(to_np(xh.to(ts.float64)), to_np(wh.to(ts.float64)), None, (1, 1), (1, 1), (1, 1), 1)
        assert_close(y, want, dt, rtol=2e-2, atol=2e-2)


def test_conv_errors():
    x, w = ts.zeros(2, 3, 8, 8), ts.zeros(4, 3, 3, 3)
    with pytest.raises(ValueError, match="convolution.*3 channels.*got 5 channels"):
        ops.convolution(ts.zeros(2, 5, 8, 8), w, None, [1], [0], [1], 1)
    with pytest.raises(ValueError, match="convolution.*divisible by groups"):
        ops.convolution(ts.zeros(2, 6, 8, 8), ts.zeros(5, 3, 3, 3), None, [1], [0], [1], 2)
    with pytest.raises(ValueError, match="convolution.*larger than the padded input"):
        ops.convolution(ts.zeros(2, 3, 2, 2), w, None, [1], [0], [1], 1)
    with pytest.raises(ValueError, match="convolution.*stride"):
        ops.convolution(x, w, None, [0], [0], [1], 1)
    with pytest.raises(ValueError, match="convolution.*bias"):
        ops.convolution(x, w, ts.zeros(3), [1], [0], [1], 1)
    with pytest.raises(TypeError, match="convolution.*float64"):
        ops.convolution(x, ts.zeros(4, 3, 3, 3, dtype=ts.float64), None, [1], [0], [1], 1)
    with pytest.raises(TypeError, match="convolution.*int64"):
        ops.convolution(ts.zeros(2, 3, 8, 8, dtype=ts.int64), ts.zeros(4, 3, 3, 3, dtype=ts.int64), None, [1], [0],
                        [1], 1)
    with pytest.raises(ValueError, match="convolution_backward.*grad_output"):
        ops.convolution_backward(ts.zeros(2, 4, 5, 5), x, w, [1], [0], [1], 1)


# ---------------------------------------------------------------------------- pooling
MAX_CASES = [
    # (kernel, stride, padding, dilation, ceil_mode)
    ((2, 2), (2, 2), (0, 0), (1, 1), False),
    ((3, 3), (1, 1), (1, 1), (1, 1), False),
    ((3, 2), (2, 1), (1, 0), (1, 1), False),
    ((3, 3), (2, 2), (1, 1), (2, 2), False),
    ((3, 3), (2, 2), (0, 0), (1, 1), True),
    ((2, 3), (3, 2), (1, 1), (1, 1), True),
]
SHAPES = [(2, 3, 7, 8), (3, 6, 5)]


@pytest.mark.parametrize("shape", SHAPES, ids=["4d", "3d"])
@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: d.name)
@pytest.mark.parametrize("case", MAX_CASES, ids=[str(i) for i in range(len(MAX_CASES))])
def test_max_pool(case, dtype, shape):
    k, s, p, d, ceil = case
    x, xa = rand(shape, dtype)
    y, idx = ops.max_pool2d_with_indices(x, list(k), list(s), list(p), list(d), ceil)
    wy, widx = np_max_pool(planes(xa), k, s, p, d, ceil)
    out_shape = shape[:-2] + wy.shape[-2:]
    close(y, wy.reshape(out_shape), dtype)
    assert idx.dtype == ts.int64
    np.testing.assert_array_equal(to_np(idx), widx.reshape(out_shape))
    gy, gya = rand(out_shape, dtype)
    gx = ops.max_pool2d_with_indices_backward(gy, x, list(k), list(s), list(p), list(d), ceil, idx)
    want = np.zeros(planes(xa).shape)
    flat = want.reshape(want.shape[0], -1)
    for pl in range(flat.shape[0]):
        np.add.at(flat[pl], widx[pl].ravel(), planes(gya)[pl].ravel())
    close(gx, want.reshape(shape), dtype)


@pytest.mark.parametrize("case", MAX_CASES, ids=[str(i) for i in range(len(MAX_CASES))])
def test_max_pool_float32_ties_nans_and_infinities(case):
    # float32 planes take the vector kernel (rows then columns, positions as floats): the first
    # of equal maxima, the last NaN and a window of -inf must come out as the scalar rule says.
    k, s, p, d, ceil = case
    rng = np.random.default_rng(7)
    a = rng.integers(0, 3, (2, 3, 37, 41)).astype(np.float32)  # many ties, as after a ReLU
    a[rng.random(a.shape) < 0.02] = np.nan
    a[rng.random(a.shape) < 0.02] = np.inf
    a[:, :, 5:12, 3:20] = -np.inf  # windows holding only -inf
    y, idx = ops.max_pool2d_with_indices(from_np(a), list(k), list(s), list(p), list(d), ceil)
    wy, widx = np_max_pool(a.reshape(6, 37, 41).astype(np.float64), k, s, p, d, ceil)
    np.testing.assert_array_equal(to_np(y), wy.reshape(2, 3, *wy.shape[-2:]).astype(np.float32))
    np.testing.assert_array_equal(to_np(idx), widx.reshape(2, 3, *wy.shape[-2:]))
    try:
        import torch
    except ImportError:
        return
    ty, tidx = torch.nn.functional.max_pool2d(torch.from_numpy(a), k, s, p, d, ceil, return_indices=True)
    np.testing.assert_array_equal(to_np(y), ty.numpy())
    np.testing.assert_array_equal(to_np(idx), tidx.numpy())


def test_max_pool_defaults_nan_and_layout():
    x, xa = rand((2, 2, 6, 6), ts.float32)
    y1, i1 = ops.max_pool2d_with_indices(x, [3])  # stride=[] -> kernel_size; one value -> both dims
    y2, i2 = ops.max_pool2d_with_indices(x, [3, 3], [3, 3], [0, 0], [1, 1], False)
    np.testing.assert_array_equal(to_np(y1), to_np(y2))
    np.testing.assert_array_equal(to_np(i1), to_np(i2))
    y3, _ = ops.max_pool2d_with_indices(x, kernel_size=[2, 2], stride=2, padding=1)
    close(y3, np_max_pool(planes(xa), (2, 2), (2, 2), (1, 1), (1, 1), False)[0].reshape(2, 2, 4, 4), ts.float32)
    a = np.zeros((1, 4, 4))
    a[0, 1, 1], a[0, 1, 2] = np.nan, 100
    yn, inn = ops.max_pool2d_with_indices(from_np(a), [2, 2])
    assert np.isnan(to_np(yn)[0, 0, 0]) and to_np(yn)[0, 0, 1] == 100 and to_np(inn)[0, 0, 0] == 5
    xb, xba = rand((2, 7, 5, 3), ts.float64)
    xp, xpa = xb.permute(0, 3, 1, 2), xba.transpose(0, 3, 1, 2)
    yp, ip = ops.max_pool2d_with_indices(xp, [3, 2], [2, 1], [1, 1])
    wy, widx = np_max_pool(planes(xpa), (3, 2), (2, 1), (1, 1), (1, 1), False)
    close(yp, wy.reshape(2, 3, *wy.shape[-2:]), ts.float64)
    np.testing.assert_array_equal(to_np(ip), widx.reshape(2, 3, *wy.shape[-2:]))
    ye, ie = ops.max_pool2d_with_indices(ts.zeros(0, 3, 4, 4), [2])
    assert tuple(ye.shape) == (0, 3, 2, 2) and tuple(ie.shape) == (0, 3, 2, 2)


AVG_CASES = [
    # (kernel, stride, padding, ceil_mode, count_include_pad, divisor_override)
    ((2, 2), (2, 2), (0, 0), False, True, None),
    ((3, 3), (1, 1), (1, 1), False, True, None),
    ((3, 3), (1, 1), (1, 1), False, False, None),
    ((3, 2), (2, 1), (1, 1), True, True, None),
    ((3, 3), (2, 2), (1, 1), True, False, None),
    ((2, 2), (3, 3), (1, 0), True, True, 3),
]


@pytest.mark.parametrize("shape", SHAPES, ids=["4d", "3d"])
@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: d.name)
@pytest.mark.parametrize("case", AVG_CASES, ids=[str(i) for i in range(len(AVG_CASES))])
def test_avg_pool(case, dtype, shape):
    k, s, p, ceil, include_pad, divisor = case
    x, xa = rand(shape, dtype)
    y = ops.avg_pool2d(x, list(k), list(s), list(p), ceil, include_pad, divisor)
    oh, ow, taps = avg_taps(shape[-2], shape[-1], k, s, p, ceil, include_pad, divisor)
    out_shape = shape[:-2] + (oh, ow)
    close(y, apply_taps(planes(xa), oh, ow, taps).reshape(out_shape), dtype)
    gy, gya = rand(out_shape, dtype)
    gx = ops.avg_pool2d_backward(gy, x, list(k), list(s), list(p), ceil, include_pad, divisor)
    close(gx, adjoint_taps(planes(gya), planes(xa).shape, taps).reshape(shape), dtype)


def test_avg_pool_defaults_and_layout():
    x, xa = rand((2, 3, 6, 6), ts.float64)
    close(ops.avg_pool2d(x, [2]), xa.reshape(2, 3, 3, 2, 3, 2).mean(axis=(3, 5)), ts.float64)
    xb, xba = rand((2, 3, 5, 7), ts.float64)
    xt, xta = xb.transpose(2, 3), xba.transpose(0, 1, 3, 2)
    oh, ow, taps = avg_taps(7, 5, (3, 3), (2, 2), (1, 1), False, True, None)
    close(ops.avg_pool2d(xt, [3], [2], [1]), apply_taps(planes(xta), oh, ow, taps).reshape(2, 3, oh, ow), ts.float64)
    assert tuple(ops.avg_pool2d(ts.zeros(0, 2, 4, 4), [2]).shape) == (0, 2, 2, 2)


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: d.name)
@pytest.mark.parametrize("shape,out", [((2, 3, 8, 8), (1, 1)), ((2, 3, 7, 5), (3, 2)), ((3, 5, 6), (4, 6)),
                                       ((1, 2, 3, 3), (5, 7)), ((2, 3, 10, 9), (3, 4))])
def test_adaptive_avg_pool(shape, out, dtype):
    x, xa = rand(shape, dtype)
    taps = adaptive_taps(shape[-2], shape[-1], *out)
    out_shape = shape[:-2] + out
    close(ops.adaptive_avg_pool2d(x, list(out)), apply_taps(planes(xa), *out, taps).reshape(out_shape), dtype)
    gy, gya = rand(out_shape, dtype)
    close(ops.adaptive_avg_pool2d_backward(gy, x), adjoint_taps(planes(gya), planes(xa).shape, taps).reshape(shape),
          dtype)


def test_adaptive_avg_pool_layout_and_empty():
    xb, xba = rand((2, 6, 6, 3), ts.float64)
    xp, xpa = xb.permute(0, 3, 1, 2), xba.transpose(0, 3, 1, 2)
    taps = adaptive_taps(6, 6, 4, 4)
    close(ops.adaptive_avg_pool2d(xp, [4]), apply_taps(planes(xpa), 4, 4, taps).reshape(2, 3, 4, 4), ts.float64)
    assert tuple(ops.adaptive_avg_pool2d(ts.zeros(0, 3, 5, 5), [2, 2]).shape) == (0, 3, 2, 2)


def test_pool_errors():
    x = ts.zeros(2, 3, 6, 6)
    with pytest.raises(ValueError, match="max_pool2d_with_indices.*3-D.*4-D.*got 2-D"):
        ops.max_pool2d_with_indices(ts.zeros(6, 6), [2])
    with pytest.raises(ValueError, match="max_pool2d_with_indices.*half of kernel_size"):
        ops.max_pool2d_with_indices(x, [2], [], [2])
    with pytest.raises(ValueError, match="max_pool2d_with_indices.*output would be empty"):
        ops.max_pool2d_with_indices(x, [7])
    with pytest.raises(TypeError, match="max_pool2d_with_indices.*int32"):
        ops.max_pool2d_with_indices(ts.zeros(2, 3, 6, 6, dtype=ts.int32), [2])
    y, idx = ops.max_pool2d_with_indices(x, [2])
    with pytest.raises(IndexError, match="max_pool2d_with_indices_backward.*out of range"):
        ops.max_pool2d_with_indices_backward(y, x, [2], [2], [0], [1], False, ts.full((2, 3, 3, 3), 36,
                                                                                      dtype=ts.int64))
    with pytest.raises(ValueError, match="avg_pool2d.*divisor_override"):
        ops.avg_pool2d(x, [2], [], [0], False, True, 0)
    with pytest.raises(ValueError, match="avg_pool2d_backward.*grad_output"):
        ops.avg_pool2d_backward(ts.zeros(2, 3, 4, 4), x, [2], [2], [0], False, True, None)
    with pytest.raises(ValueError, match="adaptive_avg_pool2d.*output_size"):
        ops.adaptive_avg_pool2d(x, [-1, 2])
    with pytest.raises(ValueError, match="adaptive_avg_pool2d_backward.*grad_output"):
        ops.adaptive_avg_pool2d_backward(ts.zeros(2, 4, 2, 2), x)


def test_backward_of_expanded_grad_output():
    """Autograd hands backward ops stride-0 gradients (from sum()): they read like dense ones."""
    x, xa = rand((2, 3, 6, 6), ts.float64)
    w, wa = rand((4, 3, 3, 3), ts.float64)
    gy = ts.ones(1, 1, 1, 1, dtype=ts.float64).expand(2, 4, 4, 4)
    gx, gw, gb = ops.convolution_backward(gy, x, w, [1], [0], [1], 1)
    wgx, wgw, wgb = np_conv2d_backward(np.ones((2, 4, 4, 4)), xa, wa, (1, 1), (0, 0), (1, 1), 1)
    close(gx, wgx, ts.float64)
    close(gw, wgw, ts.float64)
    close(gb, wgb, ts.float64)
    ones = ts.ones(1, 1, 1, 1, dtype=ts.float64).expand(2, 3, 3, 3)
    _, idx = ops.max_pool2d_with_indices(x, [2])
    assert to_np(ops.max_pool2d_with_indices_backward(ones, x, [2], [], [0], [1], False, idx)).sum() == 54
    close(ops.avg_pool2d_backward(ones, x, [2], [], [0], False, True, None), np.full((2, 3, 6, 6), 0.25), ts.float64)
    close(ops.adaptive_avg_pool2d_backward(ones, x), np.full((2, 3, 6, 6), 0.25), ts.float64)


# ---------------------------------------------------------------------------- PyTorch, when present
@pytest.mark.torch
def test_against_torch():
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    xa = RNG.uniform(-1, 1, size=(2, 4, 9, 8))
    wa = RNG.uniform(-1, 1, size=(6, 2, 3, 3))
    ba = RNG.uniform(-1, 1, size=(6,))
    x, w, b = from_np(xa), from_np(wa), from_np(ba)
    tx, tw, tb = torch.tensor(xa), torch.tensor(wa), torch.tensor(ba)
    close(ops.convolution(x, w, b, [2, 1], [1, 1], [1, 2], 2), F.conv2d(tx, tw, tb, (2, 1), (1, 1), (1, 2), 2).numpy(),
          ts.float64)
    y, idx = ops.max_pool2d_with_indices(x, [3, 3], [2, 2], [1, 1], [1, 1], True)
    ty, tidx = F.max_pool2d(tx, 3, 2, 1, 1, True, return_indices=True)
    close(y, ty.numpy(), ts.float64)
    np.testing.assert_array_equal(to_np(idx), tidx.numpy())
    close(ops.avg_pool2d(x, [3, 3], [2, 2], [1, 1], True, False, None),
          F.avg_pool2d(tx, 3, 2, 1, True, False).numpy(), ts.float64)
    close(ops.adaptive_avg_pool2d(x, [4, 3]), F.adaptive_avg_pool2d(tx, (4, 3)).numpy(), ts.float64)
