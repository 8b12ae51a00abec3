"""F.pad in every mode, F.interpolate (nearest, linear, bilinear), pixel and channel shuffles and
their modules: against NumPy (np.pad, index arithmetic) and against torch when importable."""
import numpy as np
import pytest

import tessera as ts
import tessera.nn as nn
import tessera.nn.functional as F

X = np.random.default_rng(0).standard_normal((2, 3, 5, 6)).astype(np.float32)
NP_MODES = {"constant": "constant", "reflect": "reflect", "replicate": "edge", "circular": "wrap"}


@pytest.mark.parametrize("mode", sorted(NP_MODES))
@pytest.mark.parametrize("pad", [(1, 2), (2, 1, 0, 3), (1, 1, 2, 2)])
def test_pad_matches_numpy(mode, pad):
    x = X if len(pad) == 4 or mode == "constant" else X[0]
    got = F.pad(ts.tensor(x), pad, mode=mode).numpy()
    widths = [(0, 0)] * x.ndim
    for i in range(len(pad) // 2):
        widths[x.ndim - 1 - i] = (pad[2 * i], pad[2 * i + 1])
    np.testing.assert_array_equal(got, np.pad(x, widths, mode=NP_MODES[mode]))


def test_negative_constant_pad_crops_and_value_fills():
    got = F.pad(ts.tensor(X), (-1, 2), value=7.0).numpy()
    np.testing.assert_array_equal(got[..., :5], X[..., 1:])
    assert (got[..., 5:] == 7.0).all()


def test_nearest_and_pixel_shuffle_match_index_arithmetic():
    up = F.interpolate(ts.tensor(X), scale_factor=2).numpy()
    np.testing.assert_array_equal(up, X.repeat(2, axis=2).repeat(2, axis=3))
    up1 = F.interpolate(ts.tensor(X[:, :, 0]), size=12).numpy()
    np.testing.assert_array_equal(up1, X[:, :, 0].repeat(2, axis=2))
    r = 2
    x = np.random.default_rng(1).standard_normal((2, 8, 3, 4)).astype(np.float32)
    shuffled = F.pixel_shuffle(ts.tensor(x), r).numpy()
    n, c, h, w = 2, 2, 3, 4
    for ci in range(c):
        for i in range(h * r):
            for j in range(w * r):
                assert shuffled[1, ci, i, j] == x[1, ci * r * r + (i % r) * r + j % r, i // r, j // r]
    np.testing.assert_array_equal(F.pixel_unshuffle(ts.tensor(shuffled), r).numpy(), x)


def test_bad_arguments():
    with pytest.raises(RuntimeError, match="Padding length must be divisible by 2"):
        F.pad(ts.tensor(X), (1, 2, 3))
    with pytest.raises(RuntimeError, match="reflect padding size should be less than"):
        F.pad(ts.tensor(X), (6, 0, 0, 0), mode="reflect")
    with pytest.raises(ValueError, match="either size or scale_factor should be defined"):
        F.interpolate(ts.tensor(X))
    with pytest.raises(ValueError, match="only one of size or scale_factor should be defined"):
        F.interpolate(ts.tensor(X), size=3, scale_factor=2)
    with pytest.raises(RuntimeError, match="divisible by the square of upscale_factor"):
        F.pixel_shuffle(ts.ones(1, 3, 2, 2), 2)
    with pytest.raises(ValueError, match="wrapping around more than once"):
        F.pad(ts.tensor(X), (7, 0, 0, 0), mode="circular")


CASES = [
    ("pad reflect", lambda f, t: f.pad(t, (2, 1, 1, 3), mode="reflect")),
    ("pad replicate 1d", lambda f, t: f.pad(t[0], (2, 3), mode="replicate")),
    ("pad circular", lambda f, t: f.pad(t, (2, 1, 1, 3), mode="circular")),
    ("pad constant", lambda f, t: f.pad(t, (2, 1, 1, 3, 1, 0), value=0.5)),
    ("nearest size", lambda f, t: f.interpolate(t, size=(7, 9))),
    ("nearest 3d", lambda f, t: f.interpolate(t.unsqueeze(2), scale_factor=(2, 1, 2))),
    ("bilinear", lambda f, t: f.interpolate(t, scale_factor=1.7, mode="bilinear")),
    ("bilinear corners", lambda f, t: f.interpolate(t, size=(9, 4), mode="bilinear", align_corners=True)),
    ("linear", lambda f, t: f.interpolate(t[:, :, 0], size=11, mode="linear")),
    ("pixel_shuffle", lambda f, t: f.pixel_shuffle(t.reshape(2, 12, 5, 3), 2)),
    ("channel_shuffle", lambda f, t: f.channel_shuffle(t.reshape(2, 6, 5, 3), 3)),
]


@pytest.mark.torch
@pytest.mark.parametrize("name,fn", CASES, ids=[c[0] for c in CASES])
def test_value_and_gradient_match_torch(name, fn):
    import torch
    import torch.nn.functional as TF
    x = np.concatenate([X, X * 0.5], axis=1) if name == "pixel_shuffle" else X
    tx, rx = ts.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    y, ry = fn(F, tx), fn(TF, rx)
    np.testing.assert_allclose(y.detach().numpy(), ry.detach().numpy(), rtol=1e-5, atol=1e-6)
    g = np.random.default_rng(2).standard_normal(tuple(ry.shape)).astype(np.float32)
    y.backward(ts.tensor(g))
    ry.backward(torch.tensor(g))
    np.testing.assert_allclose(tx.grad.numpy(), rx.grad.numpy(), rtol=1e-4, atol=1e-5)


@pytest.mark.torch
def test_module_reprs_match_torch():
    import torch
    for make in (lambda m: m.ReflectionPad2d(2), lambda m: m.ConstantPad1d(3, 1.5), lambda m: m.ZeroPad2d((1, 0, 2, 0)),
                 lambda m: m.ReplicationPad3d(1), lambda m: m.Upsample(scale_factor=2), lambda m: m.PixelShuffle(3),
                 lambda m: m.PixelUnshuffle(2), lambda m: m.ChannelShuffle(2), lambda m: m.Upsample(size=(3, 4))):
        assert repr(make(nn)) == repr(make(torch.nn))


@pytest.mark.parametrize("pad", [0, 1, 3])
def test_conv_tbc_matches_the_direct_sum(pad):
    # out[t, b, o] = bias[o] + sum_k sum_c x_padded[t + k, b, c] w[k, c, o]
    rng = np.random.default_rng(pad)
    x, w, b = rng.standard_normal((7, 2, 3)), rng.standard_normal((3, 3, 4)), rng.standard_normal(4)
    xp = np.concatenate([np.zeros((pad, 2, 3)), x, np.zeros((pad, 2, 3))])
    steps = xp.shape[0] - w.shape[0] + 1
    want = np.stack([np.einsum("kbc,kco->bo", xp[t:t + 3], w) for t in range(steps)]) + b
    tx = ts.tensor(x, requires_grad=True)
    got = ts.conv_tbc(tx, ts.tensor(w), ts.tensor(b), pad)
    np.testing.assert_allclose(got.detach().numpy(), want, rtol=1e-12, atol=1e-12)
    assert F.conv_tbc is ts.conv_tbc and F.native_channel_shuffle is F.channel_shuffle
    assert ts.autograd.gradcheck(lambda v: ts.conv_tbc(v, ts.tensor(w), ts.tensor(b), pad), (tx,))
    with pytest.raises(RuntimeError, match="input channels"):
        ts.conv_tbc(tx, ts.tensor(w[:, :2]), ts.tensor(b), pad)
