"""The backward engine adds a slice's (or narrow's, or a split piece's) gradient straight into
its input's gradient buffer when the engine owns that buffer, instead of a zeros tensor of the
input's shape plus a full-size add per piece. The gradients must be those of the plain rule in
every combination: pieces of a split, overlapping slices, a slice beside another use of the same
tensor, hooks and retain_grad on the sliced tensor, a root gradient the user passed (never written
in place), create_graph, autograd.grad, float64. Oracle: NumPy."""
import numpy as np

import tessera as ts
from conftest import to_np


def _leaf(shape, seed, dtype=ts.float32):
    rng = np.random.default_rng(seed)
    return ts.tensor(rng.standard_normal(shape).astype(np.float64), dtype=dtype, requires_grad=True)


def _calls(prof, name):
    return sum(e.count for e in prof.key_averages() if e.key == name)


def test_split_pieces_each_weighted():
    x = _leaf((4, 9), 0)
    h = x * 1.5  # a non-leaf: the pieces' gradients meet in MulBackward's buffer
    q, k, v = h.split(3, dim=1)
    with ts.profiler.profile() as prof:
        (q * 1 + k * 2 + (v * v)).sum().backward()
    # the first piece makes the buffer (zeros and a copy, a fresh tensor the engine owns); the
    # other two go into their regions of it in place
    assert _calls(prof, "aten::slice_backward") == 1, prof.key_averages().table()
    want = np.concatenate([np.full((4, 3), 1.0), np.full((4, 3), 2.0), 2 * to_np(h)[:, 6:]], axis=1) * 1.5
    np.testing.assert_allclose(to_np(x.grad), want, rtol=1e-6, atol=1e-6)


def test_overlapping_slices_and_another_use_of_the_tensor():
    x = _leaf((5, 8), 1, ts.float64)
    h = x.exp()
    a, b, c = h[:, :5], h[:, 3:], h.narrow(0, 1, 3)
    loss = (a * 2).sum() + (b * b).sum() + (c * 3).sum() + (h * 0.5).sum()
    loss.backward()
    hv = to_np(h)
    g = np.full((5, 8), 0.5)
    g[:, :5] += 2
    g[:, 3:] += 2 * hv[:, 3:]
    g[1:4, :] += 3
    np.testing.assert_allclose(to_np(x.grad), g * hv, rtol=1e-12, atol=1e-12)


def test_hooks_and_retain_grad_see_the_whole_sum():
    x = _leaf((3, 6), 2)
    h = x * 1.0
    h.retain_grad()
    seen = []
    h.register_hook(lambda g: seen.append(to_np(g).copy()))
    p0, p1, p2 = h.chunk(3, dim=1)
    (p0.sum() + 2 * p1.sum() + 3 * p2.sum()).backward()
    want = np.repeat(np.array([[1.0, 2.0, 3.0]]), 2, axis=1).repeat(3, axis=0)
    np.testing.assert_allclose(seen[0], want)
    np.testing.assert_allclose(to_np(h.grad), want)
    np.testing.assert_allclose(to_np(x.grad), want)


def test_a_root_gradient_given_by_the_user_is_not_written_in_place():
    x = _leaf((2, 6), 3)
    u = x * 2
    a, b = u[:, :3], u[:, 3:]
    g_u = ts.ones(2, 6)
    g_a, g_b = ts.full((2, 3), 5.0), ts.full((2, 3), 7.0)
    ts.autograd.backward([u, a, b], [g_u, g_a, g_b])
    np.testing.assert_array_equal(to_np(g_u), np.ones((2, 6)))  # the user's tensor is as it was
    want = np.ones((2, 6))
    want[:, :3] += 5
    want[:, 3:] += 7
    np.testing.assert_allclose(to_np(x.grad), 2 * want)


def test_autograd_grad_and_create_graph():
    x = _leaf((4, 6), 4, ts.float64)
    h = x * x
    q, k = h.split(3, dim=1)
    loss = (q * k).sum()
    (gx,) = ts.autograd.grad(loss, x, create_graph=True)
    xv = to_np(x)
    hv = xv * xv
    dh = np.concatenate([hv[:, 3:], hv[:, :3]], axis=1)
    np.testing.assert_allclose(to_np(gx), dh * 2 * xv, rtol=1e-12)
    # the second derivative through the pieces (the in-place path is off while recording)
    (ggx,) = ts.autograd.grad(gx.sum(), x)
    # d/dx_i of sum_j 2 x_j h_pair(j): 2 h_pair(i) + 2 x_pair(i) * 2 x_i
    xp = np.concatenate([xv[:, 3:], xv[:, :3]], axis=1)
    np.testing.assert_allclose(to_np(ggx), 2 * dh + 4 * xv * xp, rtol=1e-12)


def test_strided_slices_and_negative_bounds():
    x = _leaf((10, 3), 5)
    h = x + 0
    (h[::2].sum() * 2 + h[1::3].sum() * 5 + h[-4:].sum()).backward()
    g = np.zeros((10, 3))
    g[::2] += 2
    g[1::3] += 5
    g[-4:] += 1
    np.testing.assert_allclose(to_np(x.grad), g)
