"""Tensor methods that change geometry or storage in place (tessera/_tensor_geometry_methods.py):
set_, resize_, resize_as_, as_strided_, transpose_, t_, swapaxes_, swapdims_, squeeze_, unsqueeze_,
against NumPy and, where torch is importable, torch on the same sequence of calls."""
import numpy as np
import pytest

import tessera as ts


def _state(t):
    return tuple(t.shape), tuple(t.stride()), t.storage_offset(), np.array(t.tolist())


# Each case: a list of (method, args) applied in turn to arange(24).reshape(2, 3, 4).
CASES = [
    [("transpose_", (0, 2))],
    [("swapaxes_", (1, -1)), ("swapdims_", (0, 1))],
    [("unsqueeze_", (1,)), ("unsqueeze_", (-1,)), ("squeeze_", ())],
    [("unsqueeze_", (0,)), ("squeeze_", (0,))],
    [("unsqueeze_", (3,)), ("squeeze_", ((1, 3),))],
    [("as_strided_", ((3, 2), (4, 1), 5))],
    [("as_strided_", ((2, 2), (1, 2)))],
    [("resize_", (4, 6))],
    [("resize_", ((2, 2),))],
    [("resize_", (5, 6))],  # grows the storage: the first 24 elements are kept
]


@pytest.mark.parametrize("calls", CASES, ids=lambda c: "+".join(m for m, _ in c))
def test_sequence_matches_numpy_and_torch(calls):
    x = ts.arange(24.0).reshape(2, 3, 4)
    alias = x
    for method, args in calls:
        assert getattr(x, method)(*args) is x
    assert alias is x
    shape, strides, offset, values = _state(x)
    # NumPy oracle: the same geometry over the original flat values.
    flat = np.arange(24.0)
    if calls[-1][0] == "resize_" and int(np.prod(shape)) > 24:
        np.testing.assert_array_equal(values.reshape(-1)[:24], flat)
    else:
        expected = np.lib.stride_tricks.as_strided(flat[offset:], shape, [s * 8 for s in strides])
        np.testing.assert_array_equal(values, expected)
    torch = pytest.importorskip("torch")
    y = torch.arange(24.0).reshape(2, 3, 4)
    for method, args in calls:
        getattr(y, method)(*args)
    assert (tuple(y.shape), tuple(y.stride()), y.storage_offset()) == (shape, strides, offset)
    if int(np.prod(shape)) <= 24:
        np.testing.assert_array_equal(values, y.numpy())


def test_views_made_before_share_the_storage():
    x = ts.zeros(2, 3)
    v = x[0]
    x.t_()
    x[1, 0] = 5.0  # row 0, column 1 of the original
    assert v.tolist() == [0.0, 5.0, 0.0]


def test_t_on_1d_and_2d_and_refused_above():
    v = ts.arange(3.0)
    assert v.t_() is v and tuple(v.shape) == (3,)
    m = ts.arange(6.0).reshape(2, 3).t_()
    assert m.tolist() == [[0.0, 3.0], [1.0, 4.0], [2.0, 5.0]]
    with pytest.raises(RuntimeError, match=r"t_\(\) expects a tensor with <= 2 dimensions, but self is 3D"):
        ts.ones(2, 3, 4).t_()


def test_set_shares_storage_and_takes_geometry():
    a = ts.arange(10.0)
    b = ts.empty(0)
    b.set_(a)
    assert b.data_ptr() == a.data_ptr() and b.tolist() == a.tolist()
    b.set_(a, 2, (2, 2), (3, 1))
    assert b.tolist() == [[2.0, 3.0], [5.0, 6.0]]
    b.fill_(-1.0)
    assert a.tolist() == [0.0, 1.0, -1.0, -1.0, 4.0, -1.0, -1.0, 7.0, 8.0, 9.0]
    b.set_()
    assert tuple(b.shape) == (0,) and a.tolist()[0] == 0.0


def test_resize_as_and_channels_last():
    x = ts.arange(6.0)
    x.resize_as_(ts.empty(3, 2))
    assert tuple(x.shape) == (3, 2) and x.tolist() == [[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]]
    y = ts.empty(0).resize_(2, 3, 4, 5, memory_format=ts.channels_last)
    assert tuple(y.stride()) == (60, 1, 15, 3)


def test_autograd_history_goes_through_the_view():
    w = ts.tensor([1.0, 2.0, 3.0], requires_grad=True)
    h = w * 2
    h.unsqueeze_(0)
    assert tuple(h.shape) == (1, 3)
    (h * ts.tensor([[1.0, 10.0, 100.0]])).sum().backward()
    assert w.grad.tolist() == [2.0, 20.0, 200.0]
    g = w * 1
    g.t_()
    g.transpose_(0, 0)
    (g * g).sum().backward()
    assert w.grad.tolist() == [4.0, 24.0, 206.0]
    s = w * 1
    s.as_strided_((2,), (2,), 0)
    s.sum().backward()
    assert w.grad.tolist() == [5.0, 24.0, 207.0]


def test_no_grad_changes_a_leaf_in_place():
    p = ts.ones(2, 3, requires_grad=True)
    with ts.no_grad():
        p.t_()
    assert tuple(p.shape) == (3, 2) and p.requires_grad


def test_errors():
    leaf = ts.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place"):
        leaf.unsqueeze_(0)
    with pytest.raises(RuntimeError, match="cannot resize variables that require grad"):
        leaf.resize_(4)
    with pytest.raises(RuntimeError, match=r"as_strided_: .*storage of 5 elements.*storage of 4 elements"):
        ts.arange(4.0).as_strided_((3,), (2,))
    with pytest.raises(RuntimeError, match="resize_: trying to create tensor with negative dimension"):
        ts.ones(2).resize_(-1)
    with pytest.raises(RuntimeError, match="set_: expected a source of dtype float32, got int64"):
        ts.ones(2).set_(ts.arange(3))
    with pytest.raises(IndexError):
        ts.ones(2, 3).transpose_(0, 5)
    x = ts.ones(2, 3)
    with pytest.raises(IndexError):
        x.unsqueeze_(7)
    assert tuple(x.shape) == (2, 3)  # a refused change leaves the tensor as it was
