"""Indexing and assignment against NumPy: basic indexing (ints, slices with steps, Ellipsis,
None, negative indices) returns views; advanced indexing (integer tensors and lists, boolean
masks, mixed with basic) copies; __setitem__ with scalars and broadcast tensors."""
import numpy as np
import pytest

import tessera as ts
from conftest import assert_close, from_np, to_np

A = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5)

BASIC = [
    (0,), (-1,), (1, 2), (1, -1, 2, -3), (slice(None),), (slice(1, None),), (slice(None, None, 2),),
    (slice(None, None, 3), slice(1, 3)), (Ellipsis, 1), (Ellipsis, slice(0, 5, 2)), (0, Ellipsis, 0),
    (None,), (None, 0, None), (slice(None), None, 1), (Ellipsis, None), (1, slice(0, 0)), (slice(-2, None),),
    (slice(10, 20),), (slice(-10, 1),), (0, 1, 2, 3), (Ellipsis,), (True,), (False,), (0, True),
    (slice(None, -1), Ellipsis, slice(None, None, 4)),
]


def _np_key(key):
    return key if len(key) != 1 else key[0]


@pytest.mark.parametrize("key", BASIC, ids=str)
def test_basic_indexing_is_a_view(key):
    x = from_np(A)
    k = _np_key(key)
    r = x[k]
    expected = A[k]
    assert_close(r, expected, ts.float32)
    assert r._same_storage(x)


@pytest.mark.parametrize("key", BASIC, ids=str)
def test_basic_indexing_of_a_non_contiguous_tensor(key):
    a = A.transpose(3, 1, 2, 0)[::2]
    x = from_np(A).permute(3, 1, 2, 0)[::2]
    k = _np_key(key)
    try:
        expected = a[k]
    except IndexError:
        with pytest.raises(IndexError):
            x[k]
        return
    assert_close(x[k], expected, ts.float32)


def test_scalar_results_and_python_ints():
    x = from_np(A)
    assert x[1, 2, 3, 4].item() == A[1, 2, 3, 4]
    assert x[1][2][3][4].shape == ()
    assert x[np.int64(1), np.int32(2)].shape == (4, 5)
    assert x[ts.tensor(1)].shape == (3, 4, 5)
    assert_close(x[ts.tensor(1):ts.tensor(2)], A[1:2])


def test_basic_indexing_errors():
    x = from_np(A)
    with pytest.raises(IndexError, match="too many indices"):
        x[0, 0, 0, 0, 0]
    with pytest.raises(IndexError):
        x[2]
    with pytest.raises(IndexError):
        x[:, -4]
    with pytest.raises(IndexError, match="ellipsis"):
        x[..., 0, ...]
    with pytest.raises(ValueError, match="step"):
        x[::-1]
    with pytest.raises(ValueError, match="step"):
        x[::0]
    with pytest.raises(IndexError):
        ts.tensor(5)[0]
    with pytest.raises(IndexError, match="only integers"):
        x["a"]
    with pytest.raises(IndexError, match="long|bool"):
        x[ts.tensor([0.5])]


# ---------------------------------------------------------------------------- advanced
ADVANCED = [
    ([1, 0],), ([0, 0, 1],), ([-1],), ([[0, 1], [1, 0]],), (slice(None), [2, 0]), (0, [1, 2]),
    ([0, 1], [2, 0]), ([0, 1], slice(None), [1, 3]), (Ellipsis, [4, 0, 1]), (slice(None), [[0], [2]], [1, 3]),
    ([1], None, [2]), (1, slice(None), [0, 0], slice(1, 3)), ([], ), (0, [], slice(None)),
]
# Where PyTorch and NumPy differ: PyTorch applies integer indices first (as select), so an int does
# not take part in the placement of the advanced dims; NumPy counts it as an advanced index.
TORCH_EXPECTED = {
    str((1, slice(None), [0, 0], slice(1, 3))): lambda a: a[1][:, [0, 0], 1:3],
}


@pytest.mark.parametrize("key", ADVANCED, ids=str)
def test_integer_array_indexing(key):
    x = from_np(A)
    tkey = tuple(ts.tensor(k, dtype=ts.int64) if isinstance(k, list) else k for k in key)
    npkey = tuple(np.array(k, dtype=np.int64) if isinstance(k, list) else k for k in key)
    expected = TORCH_EXPECTED[str(key)](A) if str(key) in TORCH_EXPECTED else A[_np_key(npkey)]
    r = x[_np_key(tkey)]
    assert_close(r, expected, ts.float32)
    assert not r._same_storage(x) or r.numel() == 0
    assert_close(x[_np_key(key)], expected, ts.float32)  # plain lists work too


@pytest.mark.parametrize("dtype", [ts.int32, ts.int64], ids=lambda d: d.name)
def test_index_tensor_dtypes(dtype):
    x = from_np(A)
    i = ts.tensor([1, 0, 1], dtype=dtype)
    assert_close(x[i], A[[1, 0, 1]])
    assert_close(x[:, i], A[:, [1, 0, 1]])


@pytest.mark.parametrize("dtype", [ts.int8, ts.int16, ts.float32], ids=lambda d: d.name)
def test_index_tensor_dtypes_pytorch_refuses(dtype):
    with pytest.raises(IndexError, match="long, int, byte or bool"):
        from_np(A)[ts.tensor([1, 0], dtype=dtype)]


def test_uint8_index_is_a_mask():
    x = from_np(A)
    m = ts.tensor([1, 0, 1], dtype=ts.uint8)  # a byte mask, as PyTorch reads it
    assert_close(x[:, m], A[:, [True, False, True]])


def test_boolean_masks():
    x = from_np(A)
    m = A > 60
    assert_close(x[from_np(m)], A[m])
    assert_close(x[x > 60], A[m])
    m2 = A[:, :, 0, 0] > 5
    assert_close(x[from_np(m2)], A[m2])
    m1 = np.array([True, False, True])
    assert_close(x[:, from_np(m1)], A[:, m1])
    assert_close(x[0, from_np(m1), 1:3], A[0, m1, 1:3])
    assert_close(x[..., from_np(np.array([True, False, False, True, True]))],
                 A[..., np.array([True, False, False, True, True])])
    assert_close(x[[True, False]], A[np.array([True, False])])
    empty = np.zeros((2, 3), dtype=bool)
    assert_close(x[from_np(empty)], A[empty])
    assert_close(x[ts.tensor(True)], A[np.bool_(True)])


def test_mask_shape_mismatch():
    x = from_np(A)
    with pytest.raises(IndexError, match="mask"):
        x[ts.tensor([True, False, True])]


def test_advanced_index_out_of_range():
    x = from_np(A)
    with pytest.raises(IndexError):
        x[ts.tensor([0, 2])]
    with pytest.raises(IndexError):
        x[:, ts.tensor([-4])]


def test_advanced_indexing_of_views():
    a = A[1].T  # (5, 4, 3)
    x = from_np(A)[1].T
    assert_close(x[[0, 4], 1:3], a[[0, 4], 1:3])
    assert_close(x[x > 100], a[a > 100])


# ---------------------------------------------------------------------------- assignment
SET_KEYS = [
    (0,), (-1, 1), (slice(None, None, 2),), (Ellipsis, 0), (slice(None), slice(1, 3), 2), (None, 1),
    (1, Ellipsis, slice(None, None, 2)),
]


@pytest.mark.parametrize("key", SET_KEYS, ids=str)
def test_setitem_scalar_basic(key):
    a = A.copy()
    x = from_np(A)
    k = _np_key(key)
    x[k] = -7
    a[k] = -7
    assert_close(x, a)
    x[k] = 2.5
    a[k] = 2.5
    assert_close(x, a)


@pytest.mark.parametrize("key", SET_KEYS, ids=str)
def test_setitem_tensor_broadcast(key):
    a = A.copy()
    x = from_np(A)
    k = _np_key(key)
    target_shape = a[k].shape
    v = np.arange(target_shape[-1], dtype=np.float32) + 1000 if target_shape else np.float32(1000)
    x[k] = from_np(np.asarray(v))
    a[k] = v
    assert_close(x, a)


def test_setitem_converts_dtypes_and_lists():
    x = ts.zeros(2, 3, dtype=ts.int32)
    x[0] = ts.tensor([1.9, 2.9, 3.9])
    assert x.tolist() == [[1, 2, 3], [0, 0, 0]]
    x[1] = [7, 8, 9]
    assert x.tolist() == [[1, 2, 3], [7, 8, 9]]
    x[:, 0] = True
    assert x[:, 0].tolist() == [1, 1]
    x[1, 1] = ts.tensor(5)
    assert x[1, 1].item() == 5
    with pytest.raises(ValueError):
        x[0] = ts.tensor([1, 2])


def test_setitem_through_views_writes_the_base():
    x = ts.zeros(4, 4)
    y = x.T[1:3]
    y[:, ::2] = 1
    a = np.zeros((4, 4), dtype=np.float32)
    a.T[1:3][:, ::2] = 1
    assert_close(x, a)


def test_setitem_boolean_mask():
    a = A.copy()
    x = from_np(A)
    x[x > 100] = 0
    a[a > 100] = 0
    assert_close(x, a)
    m = np.array([True, False, True])
    x[:, from_np(m)] = -1
    a[:, m] = -1
    assert_close(x, a)
    x[from_np(A[:, :, 0, 0] > 5)] = ts.tensor(3.0)
    a[A[:, :, 0, 0] > 5] = 3.0
    assert_close(x, a)


def test_setitem_boolean_mask_with_values():
    a = A.copy()
    x = from_np(A)
    m = A > 110
    vals = -np.arange(int(m.sum()), dtype=np.float32)
    x[from_np(m)] = from_np(vals)
    a[m] = vals
    assert_close(x, a)


def test_setitem_integer_arrays():
    a = A.copy()
    x = from_np(A)
    x[[0, 1], [2, 0]] = 5
    a[[0, 1], [2, 0]] = 5
    assert_close(x, a)
    v = np.arange(5, dtype=np.float32)
    x[1, [0, 2]] = from_np(v)
    a[1, [0, 2]] = v
    assert_close(x, a)
    x[ts.tensor([1]), :, ts.tensor([3])] = ts.tensor([9.0, 8.0, 7.0, 6.0, 5.0])
    a[[1], :, [3]] = [9.0, 8.0, 7.0, 6.0, 5.0]
    assert_close(x, a)


def test_setitem_bumps_version_and_keeps_storage():
    x = ts.zeros(3)
    p = x.data_ptr()
    v = x._version
    x[1] = 1
    x[[0, 2]] = 2
    assert x.data_ptr() == p and x._version > v
    assert x.tolist() == [2.0, 1.0, 2.0]


def test_getitem_on_every_dtype():
    for dtype in (ts.bool, ts.uint8, ts.int8, ts.int16, ts.int32, ts.int64, ts.float16, ts.bfloat16, ts.float32,
                  ts.float64):
        x = ts.arange(6).reshape(2, 3).to(dtype)
        a = to_np(x)
        assert_close(x[1, ::2], a[1, ::2], dtype)
        assert_close(x[:, [2, 0]], a[:, [2, 0]], dtype)
        x[0, 1] = 1
        a[0, 1] = 1
        assert_close(x, a, dtype)


def test_index_put_functions():
    x = ts.zeros(5)
    idx = ts.tensor([0, 2, 2])
    r = ts.index_put(x, (idx,), ts.tensor(1.0), accumulate=True)
    assert r.tolist() == [1.0, 0.0, 2.0, 0.0, 0.0] and x.tolist() == [0.0] * 5
    x.index_put_([ts.tensor([4])], ts.tensor([3.0]))
    assert x.tolist() == [0.0, 0.0, 0.0, 0.0, 3.0]
    assert x.index_put((ts.tensor([1]),), ts.tensor(9.0)).tolist() == [0.0, 9.0, 0.0, 0.0, 3.0]
    assert ts.nonzero(x).tolist() == [[4]]
    assert [t.tolist() for t in ts.nonzero(ts.eye(2), as_tuple=True)] == [[0, 1], [0, 1]]
    assert [t.tolist() for t in ts.where(ts.tensor([[0, 1], [1, 0]]) > 0)] == [[0, 1], [1, 0]]
    assert ts.masked_select(ts.arange(4), ts.tensor([True, False, True, True])).tolist() == [0, 2, 3]
