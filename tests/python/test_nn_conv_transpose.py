"""nn.ConvTranspose1d/2d and F.conv_transpose1d/2d against PyTorch (outputs and every gradient,
float32 on oneDNN and float64 on the generic path) and against a NumPy scatter-add definition;
output_size; Conv padding modes; torch's errors."""
import numpy as np
import pytest

import tessera as ts


def _np(t):
    return t.detach().numpy()


def _copy_params(src, dst):
    with ts.no_grad():
        for p_src, p_dst in zip(src.parameters(), dst.parameters()):
            p_dst.copy_(ts.tensor(p_src.detach().numpy()))


CASES = [  # (dims, kwargs, input shape)
    (2, dict(stride=2, padding=1, output_padding=1), (2, 4, 5, 6)),
    (2, dict(groups=2, dilation=2, bias=False), (1, 4, 3, 3)),
    (2, dict(kernel_size=4, stride=2, padding=1), (3, 4, 8, 8)),  # DCGAN's up-sampling layer
    (2, dict(), (4, 5, 5)),  # unbatched
    (1, dict(stride=3, padding=2), (2, 4, 7)),
    (1, dict(groups=4, output_padding=1, stride=2), (2, 4, 6)),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("n,kw,shape", CASES)
def test_matches_torch(n, kw, shape, dtype):
    torch = pytest.importorskip("torch")
    kw = dict(kw)
    k = kw.pop("kernel_size", 3)
    torch.manual_seed(0)
    tm = getattr(torch.nn, f"ConvTranspose{n}d")(4, 8, k, **kw).to(getattr(torch, dtype))
    sm = getattr(ts.nn, f"ConvTranspose{n}d")(4, 8, k, **kw).to(getattr(ts, dtype))
    _copy_params(tm, sm)
    assert repr(sm) == repr(tm)
    x_t = torch.randn(*shape, dtype=getattr(torch, dtype), requires_grad=True)
    x_s = ts.tensor(x_t.detach().numpy()).requires_grad_()
    y_t, y_s = tm(x_t), sm(x_s)
    assert tuple(y_s.shape) == tuple(y_t.shape)
    rtol = 1e-4 if dtype == "float32" else 1e-10
    np.testing.assert_allclose(_np(y_s), _np(y_t), rtol=rtol, atol=rtol)
    (y_t * y_t).sum().backward()
    (y_s * y_s).sum().backward()
    np.testing.assert_allclose(_np(x_s.grad), _np(x_t.grad), rtol=rtol, atol=10 * rtol)
    for p_t, p_s in zip(tm.parameters(), sm.parameters()):
        np.testing.assert_allclose(_np(p_s.grad), _np(p_t.grad), rtol=rtol, atol=10 * rtol)


def _numpy_conv_transpose2d(x, w, stride, padding, output_padding, dilation):
    """The definition: every input pixel scatters its weighted kernel into the output."""
    n, cin, h, wd = x.shape
    _, cout, kh, kw = w.shape
    oh = (h - 1) * stride - 2 * padding + dilation * (kh - 1) + output_padding + 1
    ow = (wd - 1) * stride - 2 * padding + dilation * (kw - 1) + output_padding + 1
    full = np.zeros((n, cout, oh + 2 * padding + stride, ow + 2 * padding + stride))
    for i in range(h):
        for j in range(wd):
            for a in range(kh):
                for b in range(kw):
                    full[:, :, i * stride + a * dilation, j * stride + b * dilation] += x[:, :, i, j] @ w[:, :, a, b]
    return full[:, :, padding:padding + oh, padding:padding + ow]


@pytest.mark.parametrize("dtype", [ts.float32, ts.float64])
def test_matches_the_numpy_definition(dtype):
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((2, 3, 4, 5)), rng.standard_normal((3, 2, 3, 2))
    for stride, padding, output_padding, dilation in [(1, 0, 0, 1), (2, 1, 1, 1), (3, 2, 0, 2)]:
        got = ts.nn.functional.conv_transpose2d(ts.tensor(x).to(dtype), ts.tensor(w).to(dtype), None, stride, padding,
                                                output_padding, 1, dilation)
        want = _numpy_conv_transpose2d(x, w, stride, padding, output_padding, dilation)
        np.testing.assert_allclose(_np(got), want, rtol=1e-4, atol=1e-4)


def test_output_size_picks_output_padding():
    m = ts.nn.ConvTranspose2d(2, 3, 3, stride=2)
    x = ts.randn(1, 2, 5, 5)
    assert tuple(m(x).shape) == (1, 3, 11, 11)
    assert tuple(m(x, output_size=[12, 12]).shape) == (1, 3, 12, 12)
    assert tuple(m(x, output_size=(1, 3, 11, 12)).shape) == (1, 3, 11, 12)
    with pytest.raises(ValueError, match="valid sizes range from 11 to 12"):
        m(x, output_size=[13, 13])


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
def test_conv_padding_modes(mode):
    torch = pytest.importorskip("torch")
    for n, shape in ((1, (2, 3, 9)), (2, (2, 3, 6, 7))):
        tm = getattr(torch.nn, f"Conv{n}d")(3, 4, 3, padding=2, dilation=2, padding_mode=mode)
        sm = getattr(ts.nn, f"Conv{n}d")(3, 4, 3, padding=2, dilation=2, padding_mode=mode)
        _copy_params(tm, sm)
        assert repr(sm) == repr(tm)
        x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
        np.testing.assert_allclose(_np(sm(ts.tensor(x))), _np(tm(torch.tensor(x))), rtol=1e-4, atol=1e-5)


def test_errors():
    x = ts.randn(1, 4, 5, 5)
    with pytest.raises(RuntimeError, match="expected input of shape \\(1, 4, 5, 5\\) to have 3 channels"):
        ts.nn.functional.conv_transpose2d(x, ts.randn(3, 2, 3, 3))
    with pytest.raises(RuntimeError, match="output padding must be smaller than either stride or dilation"):
        ts.nn.functional.conv_transpose2d(x, ts.randn(4, 2, 3, 3), output_padding=1)
    with pytest.raises(ValueError, match="expected a 3-D \\(unbatched\\) or 4-D \\(batched\\) input"):
        ts.nn.functional.conv_transpose2d(ts.randn(5, 5), ts.randn(4, 2, 3, 3))
    with pytest.raises(ValueError, match='Only "zeros" padding mode is supported for ConvTranspose2d'):
        ts.nn.ConvTranspose2d(2, 2, 3, padding_mode="reflect")
    with pytest.raises(ValueError, match="padding_mode must be one of"):
        ts.nn.Conv2d(2, 2, 3, padding_mode="mirror")
    with pytest.raises(ValueError, match="convolution_backward_input: expected grad_output of shape"):
        ts.ops.aten.convolution_backward_input(ts.randn(1, 4, 6, 6), ts.randn(4, 2, 3, 3), [1, 2, 7, 7], [1, 1],
                                               [0, 0], [1, 1], 1)
