"""3-D convolution: F.conv3d / nn.Conv3d and the transposed F.conv_transpose3d / nn.ConvTranspose3d,
forward and every gradient, against a NumPy reference written here (float32 on oneDNN's 5-D
primitives, float64 on the generic vol2col path), batched and unbatched, with stride, padding,
dilation and groups; the modules against PyTorch when it is importable; and the errors."""
import numpy as np
import pytest

import tessera as ts
from conftest import HAVE_TORCH, assert_close, from_np

ops = ts.ops.aten
F = ts.nn.functional
RNG = np.random.default_rng(97)
FLOATS = [ts.float32, ts.float64]


def rand(shape, dtype):
    a = RNG.uniform(-1, 1, size=shape)
    return from_np(a, dtype), a


def close(t, expected, dtype):
    tol = 3e-5 if dtype == ts.float32 else 1e-11
    assert_close(t, expected, dtype, rtol=tol, atol=tol)


def windows(x, kernel, stride, dilation, out):
    """For each kernel offset (a, i, j): the strided window of x [N, C, D, H, W] that meets it."""
    (kd, kh, kw), (sd, sh, sw), (dd, dh, dw), (od, oh, ow) = kernel, stride, dilation, out
    for a in range(kd):
        for i in range(kh):
            for j in range(kw):
                yield (a, i, j), (slice(None), slice(None), slice(a * dd, a * dd + sd * (od - 1) + 1, sd),
                                  slice(i * dh, i * dh + sh * (oh - 1) + 1, sh),
                                  slice(j * dw, j * dw + sw * (ow - 1) + 1, sw))


def np_conv3d(x, w, b, stride, padding, dilation, groups):
    """x [N, C, D, H, W], w [O, C / groups, kD, kH, kW]."""
    o, cg = w.shape[:2]
    og = o // groups
    xp = np.pad(x, [(0, 0), (0, 0)] + [(p, p) for p in padding])
    out = [(n + 2 * p - d * (k - 1) - 1) // s + 1
           for n, p, d, k, s in zip(x.shape[2:], padding, dilation, w.shape[2:], stride)]
    y = np.zeros((x.shape[0], o, *out))
    for (a, i, j), win in windows(xp, w.shape[2:], stride, dilation, out):
        patch = xp[win]
        for g in range(groups):
            y[:, g * og:(g + 1) * og] += np.einsum("ncdhw,oc->nodhw", patch[:, g * cg:(g + 1) * cg],
                                                    w[g * og:(g + 1) * og, :, a, i, j])
    if b is not None:
        y += b.reshape(1, -1, 1, 1, 1)
    return y


def np_conv3d_backward(gy, x, w, stride, padding, dilation, groups):
    """The adjoint of np_conv3d: (grad_x, grad_w, grad_b)."""
    o, cg = w.shape[:2]
    og = o // groups
    xp = np.pad(x, [(0, 0), (0, 0)] + [(p, p) for p in padding])
    gxp, gw = np.zeros_like(xp), np.zeros_like(w)
    for (a, i, j), win in windows(xp, w.shape[2:], stride, dilation, gy.shape[2:]):
        for g in range(groups):
            cs, os_ = slice(g * cg, (g + 1) * cg), slice(g * og, (g + 1) * og)
            gw[os_, :, a, i, j] += np.einsum("nodhw,ncdhw->oc", gy[:, os_], xp[win][:, cs])
            gxp[win][:, cs] += np.einsum("nodhw,oc->ncdhw", gy[:, os_], w[os_, :, a, i, j])
    d, h, wd = x.shape[2:]
    (pd, ph, pw) = padding
    return gxp[:, :, pd:pd + d, ph:ph + h, pw:pw + wd], gw, gy.sum(axis=(0, 2, 3, 4))


CASES = [
    # (x shape, w shape, stride, padding, dilation, groups, bias)
    ((2, 3, 5, 6, 7), (4, 3, 3, 3, 3), (1, 1, 1), (1, 1, 1), (1, 1, 1), 1, True),
    ((2, 4, 7, 8, 5), (6, 2, 2, 3, 1), (2, 1, 2), (1, 0, 0), (1, 2, 1), 2, False),
    ((1, 8, 6, 6, 6), (8, 1, 3, 3, 3), (2, 2, 2), (1, 1, 1), (1, 1, 1), 8, True),  # depthwise
    ((2, 16, 4, 5, 6), (16, 16, 1, 3, 3), (1, 1, 1), (0, 2, 2), (1, 2, 2), 1, True),  # oneDNN blocked channels
    ((3, 2, 3, 3, 3), (5, 2, 3, 3, 3), (1, 1, 1), (0, 0, 0), (1, 1, 1), 1, False),  # 1x1x1 output
]


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: d.name)
@pytest.mark.parametrize("case", CASES, ids=[str(i) for i in range(len(CASES))])
def test_conv3d_forward_backward(case, dtype):
    xs, wsh, stride, padding, dilation, groups, has_bias = case
    x, xa = rand(xs, dtype)
    w, wa = rand(wsh, dtype)
    b, ba = rand((wsh[0],), dtype) if has_bias else (None, None)
    y = ops.convolution(x, w, b, list(stride), list(padding), list(dilation), groups)
    want = np_conv3d(xa, wa, ba, stride, padding, dilation, groups)
    assert tuple(y.shape) == want.shape
    close(y, want, dtype)
    gy, gya = rand(want.shape, dtype)
    gx, gw, gb = ops.convolution_backward(gy, x, w, list(stride), list(padding), list(dilation), groups)
    wgx, wgw, wgb = np_conv3d_backward(gya, xa, wa, stride, padding, dilation, groups)
    close(gx, wgx, dtype)
    close(gw, wgw, dtype)
    close(gb, wgb, dtype)
    # The transposed convolution's forward is this one's input gradient.
    close(ops.convolution_backward_input(gy, w, list(xs), list(stride), list(padding), list(dilation), groups), wgx,
          dtype)


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: d.name)
def test_conv3d_unbatched_and_autograd(dtype):
    x, xa = rand((3, 4, 5, 6), dtype)
    w, wa = rand((2, 3, 2, 3, 3), dtype)
    x.requires_grad_(True)
    w.requires_grad_(True)
    y = F.conv3d(x, w, None, stride=(1, 2, 1), padding=1)
    want = np_conv3d(xa[None], wa, None, (1, 2, 1), (1, 1, 1), (1, 1, 1), 1)[0]
    close(y, want, dtype)
    gya = RNG.uniform(-1, 1, size=want.shape)
    y.backward(from_np(gya, dtype))
    wgx, wgw, _ = np_conv3d_backward(gya[None], xa[None], wa, (1, 2, 1), (1, 1, 1), (1, 1, 1), 1)
    close(x.grad, wgx[0], dtype)
    close(w.grad, wgw, dtype)


def test_conv3d_gradcheck_and_same_padding():
    x = ts.randn(1, 2, 4, 3, 5, dtype=ts.float64, requires_grad=True)
    w = ts.randn(3, 2, 2, 2, 3, dtype=ts.float64, requires_grad=True)
    b = ts.randn(3, dtype=ts.float64, requires_grad=True)
    assert ts.autograd.gradcheck(lambda x, w, b: F.conv3d(x, w, b, 1, (1, 0, 1), (2, 1, 1)), (x, w, b))
    assert ts.autograd.gradcheck(lambda x, w, b: F.conv_transpose3d(x, w.transpose(0, 1), b, 2, 1, 1), (x, w, b))
    # padding='same' with even kernels pads the odd extra element on the right, as torch
    xa, wa = x.detach().numpy(), w.detach().numpy()
    y = F.conv3d(x.detach(), w.detach(), None, padding="same")
    want = np_conv3d(np.pad(xa, [(0, 0), (0, 0), (0, 1), (0, 1), (1, 1)]), wa, None, (1, 1, 1), (0, 0, 0),
                     (1, 1, 1), 1)
    assert tuple(y.shape) == xa.shape[:1] + (3,) + xa.shape[2:]
    close(y, want, ts.float64)


def test_conv_transpose3d_against_scatter():
    """conv_transpose3d as its definition: each input voxel scatters the weight, scaled, into the output."""
    x, xa = rand((2, 4, 3, 2, 3), ts.float64)
    w, wa = rand((4, 3, 3, 2, 2), ts.float64)  # (C_in, C_out, k...)
    b, ba = rand((3,), ts.float64)
    s, p, op_ = (2, 1, 2), (1, 0, 1), (1, 0, 1)
    y = F.conv_transpose3d(x, w, b, s, p, op_)
    full = [(i - 1) * st + k + o for i, st, k, o in zip(xa.shape[2:], s, wa.shape[2:], op_)]
    acc = np.zeros((2, 3, *full))
    for d in range(xa.shape[2]):
        for h in range(xa.shape[3]):
            for wi in range(xa.shape[4]):
                acc[:, :, d * s[0]:d * s[0] + 3, h * s[1]:h * s[1] + 2, wi * s[2]:wi * s[2] + 2] += np.einsum(
                    "nc,cokij->nokij", xa[:, :, d, h, wi], wa)
    want = acc[:, :, p[0]:full[0] - p[0], p[1]:full[1] - p[1], p[2]:full[2] - p[2]] + ba.reshape(1, -1, 1, 1, 1)
    assert tuple(y.shape) == want.shape
    close(y, want, ts.float64)


@pytest.mark.skipif(not HAVE_TORCH, reason="needs torch")
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("module,kw,shape", [
    ("Conv3d", dict(stride=2, padding=1), (2, 4, 6, 7, 8)),
    ("Conv3d", dict(groups=2, dilation=(1, 2, 1), padding_mode="replicate", padding=(0, 2, 1)), (1, 4, 5, 6, 4)),
    ("Conv3d", dict(padding="same", bias=False), (4, 5, 6, 7)),  # unbatched
    ("ConvTranspose3d", dict(stride=2, padding=1, output_padding=1), (2, 4, 3, 4, 5)),
    ("ConvTranspose3d", dict(groups=4, dilation=2, bias=False), (1, 4, 3, 3, 2)),
])
def test_modules_match_torch(module, kw, shape, dtype):
    import torch
    torch.manual_seed(0)
    tm = getattr(torch.nn, module)(4, 8, 3, **kw).to(getattr(torch, dtype))
    sm = getattr(ts.nn, module)(4, 8, 3, **kw).to(getattr(ts, dtype))
    assert repr(sm) == repr(tm)
    with ts.no_grad():
        for p_src, p_dst in zip(tm.parameters(), sm.parameters()):
            p_dst.copy_(ts.tensor(p_src.detach().numpy()))
    xa = np.random.default_rng(1).uniform(-1, 1, size=shape)
    tx = torch.tensor(xa, dtype=getattr(torch, dtype), requires_grad=True)
    sx = ts.tensor(xa, dtype=getattr(ts, dtype), requires_grad=True)
    ty, sy = tm(tx), sm(sx)
    tol = 1e-4 if dtype == "float32" else 1e-10
    np.testing.assert_allclose(sy.detach().numpy(), ty.detach().numpy(), rtol=tol, atol=tol)
    gy = np.random.default_rng(2).uniform(-1, 1, size=tuple(ty.shape))
    ty.backward(torch.tensor(gy, dtype=ty.dtype))
    sy.backward(ts.tensor(gy, dtype=sy.dtype))
    np.testing.assert_allclose(sx.grad.numpy(), tx.grad.numpy(), rtol=tol, atol=tol)
    for (name, tp), sp in zip(tm.named_parameters(), sm.parameters()):
        np.testing.assert_allclose(sp.grad.numpy(), tp.grad.numpy(), rtol=tol, atol=tol, err_msg=name)


def test_conv3d_half_precision_and_module_defaults():
    x, xa = rand((1, 2, 4, 4, 4), ts.float32)
    w, wa = rand((3, 2, 3, 3, 3), ts.float32)
    for dt in (ts.float16, ts.bfloat16):
        y = F.conv3d(x.to(dt), w.to(dt), padding=1)
        assert y.dtype == dt
        want = np_conv3d(x.to(dt).to(ts.float64).numpy(), w.to(dt).to(ts.float64).numpy(), None, (1, 1, 1),
                         (1, 1, 1), (1, 1, 1), 1)
        assert_close(y, want, dt, rtol=3e-2, atol=3e-2)
    m = ts.nn.Conv3d(2, 5, (1, 3, 3))
    assert tuple(m.weight.shape) == (5, 2, 1, 3, 3) and m.kernel_size == (1, 3, 3) and m.stride == (1, 1, 1)
    assert tuple(m(ts.zeros(3, 2, 4, 6, 6)).shape) == (3, 5, 4, 4, 4)
    mt = ts.nn.ConvTranspose3d(2, 5, 2, stride=2)
    assert tuple(mt.weight.shape) == (2, 5, 2, 2, 2)
    assert tuple(mt(ts.zeros(1, 2, 3, 4, 5), output_size=[7, 9, 11]).shape) == (1, 5, 7, 9, 11)


def test_conv3d_errors():
    w = ts.zeros(4, 3, 3, 3, 3)
    with pytest.raises(ValueError, match="convolution.*3 channels.*got 5 channels"):
        F.conv3d(ts.zeros(2, 5, 6, 6, 6), w)
    with pytest.raises(ValueError, match="conv3d: expected a 4-D .unbatched. or 5-D .batched. input"):
        F.conv3d(ts.zeros(3, 6, 6), w)
    with pytest.raises(ValueError, match="conv3d: expected a 5-D weight"):
        F.conv3d(ts.zeros(2, 3, 6, 6, 6), ts.zeros(4, 3, 3, 3))
    with pytest.raises(ValueError, match=r"convolution: expected stride to have 1 or 3 values.*\[1, 2\]"):
        ops.convolution(ts.zeros(2, 3, 6, 6, 6), w, None, [1, 2], [0], [1], 1)
    with pytest.raises(ValueError, match=r"convolution: the kernel \(size after dilation \[3, 5, 3\]\) can't be "
                                         r"larger than the padded input \(size per channel \[4, 4, 4\]\)"):
        F.conv3d(ts.zeros(1, 3, 4, 4, 4), w, dilation=(1, 2, 1))
    with pytest.raises(ValueError, match="convolution_backward.*grad_output of shape"):
        ops.convolution_backward(ts.zeros(2, 4, 3, 3, 3), ts.zeros(2, 3, 6, 6, 6), w, [1], [0], [1], 1)
    with pytest.raises(RuntimeError, match="conv_transpose3d: output padding must be smaller"):
        F.conv_transpose3d(ts.zeros(1, 4, 3, 3, 3), ts.zeros(4, 2, 3, 3, 3), stride=1, output_padding=1)
