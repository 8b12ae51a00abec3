"""F.interpolate's trilinear (5-D), bicubic (4-D), nearest-exact and area (3-D to 5-D) modes,
antialiased bilinear, bicubic and lanczos (4-D), and nn.Upsample over them: values and input
gradients against NumPy references written from torch's formulas (scalar loops building one
resampling matrix per spatial dim), and against torch on the same inputs when it is importable;
the errors of bad mode / rank / argument combinations."""
import math

import numpy as np
import pytest

import tessera as ts
import tessera.nn as nn
import tessera.nn.functional as F

RNG = np.random.default_rng(7)
DTYPES = [np.float32, np.float64]
TOL = {np.float32: (2e-5, 2e-5), np.float64: (1e-12, 1e-12)}


# ---------------------------------------------------------------------------- NumPy references
def _ratio(n, o, align, scale):
    if align:
        return (n - 1) / (o - 1) if o > 1 else 0.0
    return 1.0 / scale if scale else n / o


def _coord(j, n, o, align, scale, cubic):
    r = _ratio(n, o, align, scale)
    if align:
        return r * j
    x = r * (j + 0.5) - 0.5
    return x if cubic else max(x, 0.0)


def linear_matrix(n, o, align=False, scale=None):
    """(o, n): output j = (1 - l) x[i0] + l x[i1]; the identity when o == n."""
    m = np.zeros((o, n))
    for j in range(o):
        if o == n:
            m[j, j] = 1.0
            continue
        x = _coord(j, n, o, align, scale, cubic=False)
        i0 = min(int(math.floor(x)), n - 1)
        lam = min(max(x - i0, 0.0), 1.0)
        m[j, i0] += 1.0 - lam
        m[j, min(i0 + 1, n - 1)] += lam
    return m


def cubic_kernel(d, a=-0.75):
    d = abs(d)
    if d <= 1:
        return (a + 2) * d ** 3 - (a + 3) * d ** 2 + 1
    if d < 2:
        return a * d ** 3 - 5 * a * d ** 2 + 8 * a * d - 4 * a
    return 0.0


def cubic_matrix(n, o, align=False, scale=None):
    """(o, n): output j = sum over k in -1..2 of W(t - k) x[clamp(i0 + k)], t = x - i0."""
    m = np.zeros((o, n))
    for j in range(o):
        x = _coord(j, n, o, align, scale, cubic=True)
        i0 = min(int(math.floor(x)), n - 1)
        t = min(max(x - i0, 0.0), 1.0)
        for k in (-1, 0, 1, 2):
            m[j, min(max(i0 + k, 0), n - 1)] += cubic_kernel(t - k)
    return m


def nearest_exact_matrix(n, o, scale=None):
    m = np.zeros((o, n))
    r = 1.0 / scale if scale else n / o
    for j in range(o):
        m[j, min(int(math.floor((j + 0.5) * r)), n - 1)] = 1.0
    return m


def area_matrix(n, o):
    m = np.zeros((o, n))
    for j in range(o):
        a, b = (j * n) // o, -((-(j + 1) * n) // o)
        m[j, a:b] = 1.0 / (b - a)
    return m


def apply(x, mats):
    """x resampled by one (o, n) matrix per spatial dim (dims 2, 3, ...)."""
    for d, m in enumerate(mats):
        x = np.moveaxis(np.tensordot(m, np.moveaxis(x, 2 + d, 0), axes=(1, 0)), 0, 2 + d)
    return x


def apply_grad(g, mats):
    return apply(g, [m.T for m in mats])


def _out_size(n, s):
    return int(n * s)


# ---------------------------------------------------------------------------- antialias=True
def aa_filter(mode, x):
    x = abs(x)
    if mode == "bilinear":
        return max(1.0 - x, 0.0)
    if mode == "bicubic":  # a = -0.5
        return cubic_kernel(x, a=-0.5) if x < 2.0 else 0.0
    return float(np.sinc(x) * np.sinc(x / 3.0)) if x < 3.0 else 0.0


def aa_matrix(n, o, mode, align=False, scale=None):
    """(o, n), torch's _compute_indices_min_size_weights_aa in scalar loops: output j centred at
    r (j + 0.5); the inputs i with |i + 0.5 - centre| inside the support (the filter's half-width
    times r when shrinking) weighted by the filter at that distance / max(r, 1), normalised."""
    half = {"bilinear": 1.0, "bicubic": 2.0, "lanczos": 3.0}[mode]
    r = _ratio(n, o, align, scale)
    support = half * r if r >= 1.0 else half
    inv = 1.0 / r if r >= 1.0 else 1.0
    m = np.zeros((o, n))
    for j in range(o):
        centre = r * (j + 0.5)
        lo = max(int(centre - support + 0.5), 0)
        hi = min(int(centre + support + 0.5), n)
        w = [aa_filter(mode, (i - centre + 0.5) * inv) for i in range(lo, hi)]
        total = sum(w)
        m[j, lo:hi] = [v / total for v in w] if total != 0 else w
    return m


AA_CASES = [  # joined to CASES below, each with antialias=True
    ("bilinear", (2, 3, 17, 23), dict(size=(7, 9))),
    ("bilinear", (1, 2, 20, 30), dict(size=(45, 61))),  # growing: the plain filter, normalised
    ("bilinear", (1, 2, 33, 31), dict(scale_factor=(0.37, 1.7))),
    ("bilinear", (1, 2, 33, 31), dict(size=(9, 8), align_corners=True)),
    ("bicubic", (2, 3, 17, 23), dict(size=(7, 9))),
    ("bicubic", (1, 2, 40, 40), dict(size=(40, 13))),  # one dim unchanged
    ("bicubic", (1, 2, 33, 31), dict(scale_factor=0.37)),
    ("bicubic", (1, 1, 100, 100), dict(size=(3, 3), align_corners=True)),
    ("lanczos", (2, 3, 17, 23), dict(size=(7, 9))),
    ("lanczos", (1, 2, 12, 10), dict(scale_factor=(2.5, 0.5))),
]
def _aa_mats(mode, shape, kw):
    align = bool(kw.get("align_corners"))
    size, sf = kw.get("size"), kw.get("scale_factor")
    if size is not None:
        outs, scales = list(size), [None, None]
    else:
        scales = list(sf) if isinstance(sf, (list, tuple)) else [sf, sf]
        outs = [_out_size(n, s) for n, s in zip(shape[2:], scales)]
    return [aa_matrix(n, o, mode, align, sc) for n, o, sc in zip(shape[2:], outs, scales)]


# ---------------------------------------------------------------------------- cases
# (mode, input shape, kwargs, the reference's matrices)
def _mats(mode, shape, kw):
    if kw.get("antialias"):
        return _aa_mats(mode, shape, kw)
    spatial = shape[2:]
    align = bool(kw.get("align_corners"))
    size, sf = kw.get("size"), kw.get("scale_factor")
    if size is not None:
        outs = list(size) if isinstance(size, (list, tuple)) else [size] * len(spatial)
        scales = [None] * len(spatial)
    else:
        scales = list(sf) if isinstance(sf, (list, tuple)) else [sf] * len(spatial)
        outs = [_out_size(n, s) for n, s in zip(spatial, scales)]
        if kw.get("recompute_scale_factor") or mode == "area":
            scales = [None] * len(spatial)
    make = {"trilinear": lambda n, o, s: linear_matrix(n, o, align, s),
            "bicubic": lambda n, o, s: cubic_matrix(n, o, align, s),
            "nearest-exact": lambda n, o, s: nearest_exact_matrix(n, o, s),
            "area": lambda n, o, s: area_matrix(n, o)}[mode]
    return [make(n, o, s) for n, o, s in zip(spatial, outs, scales)]


CASES = [
    ("trilinear", (2, 3, 4, 5, 6), dict(size=(7, 3, 9))),
    ("trilinear", (2, 3, 4, 5, 6), dict(size=(7, 3, 9), align_corners=True)),
    ("trilinear", (1, 2, 5, 4, 6), dict(scale_factor=1.7)),
    ("trilinear", (1, 2, 5, 4, 6), dict(scale_factor=(0.6, 2.5, 1.3), align_corners=True)),
    ("trilinear", (1, 2, 5, 4, 6), dict(scale_factor=(0.6, 2.5, 1.3), recompute_scale_factor=True)),
    ("trilinear", (1, 2, 10, 4, 3), dict(scale_factor=(1.05, 1.0, 0.5))),  # 10 * 1.05 -> 10: a copy
    ("trilinear", (1, 1, 3, 1, 2), dict(size=(1, 4, 1), align_corners=True)),
    ("bicubic", (2, 3, 5, 6), dict(size=(9, 4))),
    ("bicubic", (2, 3, 5, 6), dict(size=(9, 4), align_corners=True)),
    ("bicubic", (2, 3, 8, 7), dict(scale_factor=(2.3, 0.6))),
    ("bicubic", (2, 3, 8, 7), dict(scale_factor=(2.3, 0.6), align_corners=True)),
    ("bicubic", (1, 2, 8, 7), dict(scale_factor=0.45, recompute_scale_factor=True)),
    ("bicubic", (1, 2, 10, 3), dict(scale_factor=(1.05, 3))),  # 10 * 1.05 -> 10, but not a copy
    ("bicubic", (1, 2, 1, 3), dict(size=(3, 1))),
    ("bicubic", (1, 2, 3, 2), dict(size=(1, 5), align_corners=True)),
    ("nearest-exact", (2, 3, 5), dict(size=9)),
    ("nearest-exact", (2, 3, 9), dict(scale_factor=0.4)),
    ("nearest-exact", (2, 3, 5, 6), dict(size=(3, 11))),
    ("nearest-exact", (2, 3, 5, 6), dict(scale_factor=(1.5, 0.7))),
    ("nearest-exact", (1, 2, 5, 6, 7), dict(scale_factor=0.7)),
    ("nearest-exact", (1, 2, 3, 4, 2), dict(size=(5, 2, 7))),
    ("area", (2, 3, 9), dict(size=4)),
    ("area", (2, 3, 4), dict(size=10)),
    ("area", (2, 3, 9, 8), dict(scale_factor=0.45)),
    ("area", (2, 3, 9, 8), dict(size=(3, 5))),
    ("area", (1, 2, 9, 8, 7), dict(size=(3, 4, 2))),
    ("area", (1, 2, 6, 8, 7), dict(scale_factor=(0.5, 0.3, 1.0))),
]
CASES += [(m, s, dict(kw, antialias=True)) for m, s, kw in AA_CASES]
IDS = [f"{m}-{'x'.join(map(str, s))}-{'-'.join(f'{k}={v}' for k, v in kw.items())}" for m, s, kw in CASES]


def _run_tessera(x, g, mode, kw):
    tx = ts.tensor(x, requires_grad=True)
    y = F.interpolate(tx, mode=mode, **kw)
    y.backward(ts.tensor(g))
    return y.detach().numpy(), tx.grad.numpy()


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.__name__)
@pytest.mark.parametrize("mode,shape,kw", CASES, ids=IDS)
def test_matches_numpy_reference(mode, shape, kw, dtype):
    mats = _mats(mode, shape, kw)
    x = RNG.standard_normal(shape).astype(dtype)
    expected = apply(x.astype(np.float64), mats)
    g = RNG.standard_normal(expected.shape).astype(dtype)
    y, grad = _run_tessera(x, g, mode, kw)
    rtol, atol = TOL[dtype]
    assert y.dtype == dtype and grad.dtype == dtype
    np.testing.assert_allclose(y, expected, rtol=rtol, atol=atol)
    np.testing.assert_allclose(grad, apply_grad(g.astype(np.float64), mats), rtol=rtol, atol=atol)


@pytest.mark.torch
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.__name__)
@pytest.mark.parametrize("mode,shape,kw", CASES, ids=IDS)
def test_matches_torch(mode, shape, kw, dtype):
    import torch
    import torch.nn.functional as TF
    x = RNG.standard_normal(shape).astype(dtype)
    rx = torch.tensor(x, requires_grad=True)
    ry = TF.interpolate(rx, mode=mode, **kw)
    g = RNG.standard_normal(tuple(ry.shape)).astype(dtype)
    ry.backward(torch.tensor(g))
    y, grad = _run_tessera(x, g, mode, kw)
    rtol, atol = TOL[dtype]
    np.testing.assert_allclose(y, ry.detach().numpy(), rtol=rtol, atol=atol)
    np.testing.assert_allclose(grad, rx.grad.numpy(), rtol=rtol, atol=atol)


def test_bicubic_weights_by_hand():
    """A = -0.75: halfway between samples the four taps weigh -3/32, 19/32, 19/32, -3/32, and
    align_corners=True keeps the samples; a constant stays constant, the border taps clamped."""
    x = np.zeros((1, 1, 1, 12))
    x[..., 5] = 1.0
    out = F.interpolate(ts.tensor(x), size=(1, 23), mode="bicubic", align_corners=True).numpy()[0, 0, 0]
    expected = np.zeros(23)
    expected[[7, 9, 10, 11, 13]] = [-3 / 32, 19 / 32, 1.0, 19 / 32, -3 / 32]
    np.testing.assert_allclose(out, expected, atol=1e-15)
    flat = F.interpolate(ts.full((1, 1, 3, 4), 2.5), scale_factor=(2.5, 0.7), mode="bicubic").numpy()
    np.testing.assert_allclose(flat, np.full((1, 1, 7, 2), 2.5), rtol=1e-6)


def test_trilinear_reproduces_affine_functions():
    d, h, w = 3, 4, 5
    zz, yy, xx = np.meshgrid(*(np.arange(n, dtype=np.float64) for n in (d, h, w)), indexing="ij")
    x = (2 * zz - yy + 0.5 * xx + 1)[None, None]
    out = F.interpolate(ts.tensor(x), size=(7, 9, 11), mode="trilinear", align_corners=True).numpy()[0, 0]
    g = [np.linspace(0, n - 1, o) for n, o in ((d, 7), (h, 9), (w, 11))]
    z2, y2, x2 = np.meshgrid(*g, indexing="ij")
    np.testing.assert_allclose(out, 2 * z2 - y2 + 0.5 * x2 + 1, atol=1e-12)


def test_nearest_exact_and_area_on_simple_inputs():
    x = np.arange(4, dtype=np.float32)[None, None]
    np.testing.assert_array_equal(F.interpolate(ts.tensor(x), size=8, mode="nearest-exact").numpy()[0, 0],
                                  [0, 0, 1, 1, 2, 2, 3, 3])
    # nearest picks floor(j * 4 / 3), nearest-exact rounds the pixel centres: floor((j + 0.5) * 4 / 3)
    np.testing.assert_array_equal(F.interpolate(ts.tensor(x), size=3, mode="nearest").numpy()[0, 0], [0, 1, 2])
    np.testing.assert_array_equal(F.interpolate(ts.tensor(x), size=3, mode="nearest-exact").numpy()[0, 0], [0, 2, 3])
    np.testing.assert_allclose(F.interpolate(ts.tensor(x), size=2, mode="area").numpy()[0, 0], [0.5, 2.5])
    np.testing.assert_allclose(F.interpolate(ts.tensor(x), scale_factor=0.75, mode="area").numpy()[0, 0],
                               [0.5, 1.5, 2.5])


@pytest.mark.torch
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.__name__)
def test_nearest_exact_indices_match_torch_over_many_sizes(dtype):
    """The nearest-exact source index is discontinuous in the coordinate: torch's float32 / float64
    roundings (its float32 opmath, fused multiply-add and floorf) must be reproduced; n = 2,
    o = 41 is one size where a plain float32 evaluation picks another pixel. The gradient is the
    forward's scatter (torch's own backward picks its indices with a different rounding and
    disagrees with its forward on a few of these sizes)."""
    import torch
    import torch.nn.functional as TF
    ins = [1, 2, 3, 5, 6, 7, 9, 13, 31]
    outs = [1, 2, 3, 4, 7, 9, 11, 17, 23, 41, 47, 55, 64]
    x = np.arange(max(ins), dtype=dtype)
    for n in ins:
        for o in outs:
            ref = TF.interpolate(torch.tensor(x[None, None, :n]), size=o, mode="nearest-exact").numpy()[0, 0]
            tx = ts.tensor(x[None, None, :n], requires_grad=True)
            y = F.interpolate(tx, size=o, mode="nearest-exact")
            np.testing.assert_array_equal(y.detach().numpy()[0, 0], ref, err_msg=f"n={n} o={o}")
            weights = np.arange(1, o + 1, dtype=dtype)
            y.backward(ts.tensor(weights[None, None]))
            expected = np.zeros(n, dtype=dtype)
            np.add.at(expected, ref.astype(np.int64), weights)
            np.testing.assert_array_equal(tx.grad.numpy()[0, 0], expected)
        for s in (0.3, 0.7, 1 / 3, 2 / 3, 1.1, 1.5, 2.5, 3.7):
            if int(n * s) < 1:
                continue
            ref = TF.interpolate(torch.tensor(x[None, None, :n]), scale_factor=s, mode="nearest-exact").numpy()
            got = F.interpolate(ts.tensor(x[None, None, :n]), scale_factor=s, mode="nearest-exact").numpy()
            np.testing.assert_array_equal(got, ref, err_msg=f"n={n} s={s}")


@pytest.mark.torch
@pytest.mark.parametrize("kw", [dict(scale_factor=2, mode="trilinear"),
                                dict(size=(3, 4, 5), mode="trilinear", align_corners=True),
                                dict(scale_factor=0.5, mode="area"), dict(scale_factor=1.5, mode="nearest-exact")],
                         ids=["trilinear", "trilinear-corners", "area", "nearest-exact"])
def test_upsample_module_matches_torch_5d(kw):
    import torch
    x = RNG.standard_normal((1, 2, 4, 4, 6)).astype(np.float32)
    ours, theirs = nn.Upsample(**kw), torch.nn.Upsample(**kw)
    assert repr(ours) == repr(theirs)
    np.testing.assert_allclose(ours(ts.tensor(x)).numpy(), theirs(torch.tensor(x)).numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.torch
@pytest.mark.parametrize("kw", [dict(scale_factor=1.5, mode="bicubic"),
                                dict(size=(7, 3), mode="bicubic", align_corners=True),
                                dict(scale_factor=0.6, mode="area"),
                                dict(scale_factor=(1.5, 0.5), mode="nearest-exact"),
                                dict(scale_factor=1.7, mode="bicubic", recompute_scale_factor=True)],
                         ids=["bicubic", "bicubic-corners", "area", "nearest-exact", "bicubic-recompute"])
def test_upsample_module_matches_torch_4d(kw):
    import torch
    x = np.random.default_rng(4).standard_normal((2, 2, 5, 6)).astype(np.float32)  # not the shared RNG: the
    ours, theirs = nn.Upsample(**kw), torch.nn.Upsample(**kw)  # same input however pytest-xdist splits the tests
    np.testing.assert_allclose(ours(ts.tensor(x)).numpy(), theirs(torch.tensor(x)).numpy(), rtol=1e-5, atol=2e-6)


def test_linear_and_bilinear_still_match_the_reference():
    x = RNG.standard_normal((2, 3, 5)).astype(np.float64)
    for align in (False, True):
        got = F.interpolate(ts.tensor(x), size=8, mode="linear", align_corners=align).numpy()
        np.testing.assert_allclose(got, apply(x, [linear_matrix(5, 8, align)]), atol=1e-6)
    x4 = RNG.standard_normal((1, 2, 4, 5)).astype(np.float32)
    got = F.interpolate(ts.tensor(x4), scale_factor=1.5, mode="bilinear").numpy()
    np.testing.assert_allclose(got, apply(x4, [linear_matrix(4, 6, False, 1.5), linear_matrix(5, 7, False, 1.5)]),
                               rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------------------- errors
X3, X4, X5 = (np.zeros(s, dtype=np.float32) for s in ((1, 2, 4), (1, 2, 4, 5), (1, 2, 3, 4, 5)))
BAD = [
    ("trilinear on 4-D", X4, dict(scale_factor=2, mode="trilinear"), NotImplementedError, "trilinear mode needs 5D"),
    ("trilinear on 3-D", X3, dict(scale_factor=2, mode="trilinear"), NotImplementedError, "trilinear mode needs 5D"),
    ("linear on 5-D", X5, dict(scale_factor=2, mode="linear"), NotImplementedError, "linear mode needs 3D"),
    ("bilinear on 5-D", X5, dict(scale_factor=2, mode="bilinear"), NotImplementedError, "bilinear mode needs 4D"),
    ("bicubic on 3-D", X3, dict(scale_factor=2, mode="bicubic"), NotImplementedError, "Only 3D, 4D and 5D input"),
    ("bicubic on 5-D", X5, dict(scale_factor=2, mode="bicubic"), NotImplementedError, "got bicubic"),
    ("area on 2-D", X3[0], dict(scale_factor=2, mode="area"), NotImplementedError, "got 2D"),
    ("nearest-exact on 6-D", X5[None], dict(scale_factor=2, mode="nearest-exact"), NotImplementedError, "got 6D"),
    ("unknown mode", X4, dict(scale_factor=2, mode="cubic"), NotImplementedError, "got cubic"),
    ("area with align_corners", X4, dict(scale_factor=2, mode="area", align_corners=True), ValueError,
     "align_corners option can only be set"),
    ("nearest-exact with align_corners", X4, dict(size=3, mode="nearest-exact", align_corners=False), ValueError,
     "align_corners option can only be set"),
    ("antialias trilinear", X5, dict(scale_factor=2, mode="trilinear", antialias=True), ValueError,
     "Anti-alias option is restricted"),
    ("antialias area", X4, dict(scale_factor=2, mode="area", antialias=True), ValueError,
     "Anti-alias option is restricted"),
    ("recompute with size", X4, dict(size=3, mode="bicubic", recompute_scale_factor=True), ValueError,
     "recompute_scale_factor is not meaningful"),
    ("size of the wrong rank", X4, dict(size=(2, 3, 4), mode="bicubic"), ValueError,
     "must have the same number of spatial dimensions"),
    ("scale of the wrong rank", X5, dict(scale_factor=(2, 3), mode="trilinear"), ValueError,
     "must have the same number of spatial dimensions"),
    ("float size", X4, dict(size=(2.5, 3), mode="bicubic"), TypeError, "expected size to be one of int"),
    ("empty bicubic output", X4, dict(scale_factor=0.1, mode="bicubic"), RuntimeError,
     r"Input and output sizes should be greater than 0, but got input \(H: 4, W: 5\) output \(H: 0, W: 0\)"),
    ("empty trilinear output", X5, dict(size=(2, 0, 3), mode="trilinear"), RuntimeError,
     r"input \(D: 3, H: 4, W: 5\) output \(D: 2, H: 0, W: 3\)"),
    ("empty nearest-exact output", X3, dict(scale_factor=0.1, mode="nearest-exact"), RuntimeError,
     r"input \(W: 4\) and output \(W: 0\)"),
    ("lanczos with corners", X4, dict(scale_factor=2, mode="lanczos", align_corners=True), ValueError,
     "Lanczos mode does not support align_corners=True"),
    ("lanczos without antialias", X4, dict(scale_factor=2, mode="lanczos"), ValueError,
     "Lanczos mode requires antialias=True"),
]


@pytest.mark.parametrize("name,x,kw,exc,match", BAD, ids=[b[0] for b in BAD])
def test_errors(name, x, kw, exc, match):
    with pytest.raises(exc, match=match):
        F.interpolate(ts.tensor(x), **kw)


@pytest.mark.torch
@pytest.mark.parametrize("name,x,kw,exc,match", BAD, ids=[b[0] for b in BAD])
def test_errors_match_torch(name, x, kw, exc, match):
    import torch
    import torch.nn.functional as TF
    with pytest.raises(exc) as theirs:
        TF.interpolate(torch.tensor(x), **kw)
    with pytest.raises(exc) as ours:
        F.interpolate(ts.tensor(x), **kw)
    assert str(ours.value) == str(theirs.value)


def test_antialias_refuses_integer_images():
    with pytest.raises(NotImplementedError, match="antialias=True needs a floating input, got tessera.uint8"):
        F.interpolate(ts.zeros(1, 3, 8, 8, dtype=ts.uint8), size=(4, 4), mode="bilinear", antialias=True)
