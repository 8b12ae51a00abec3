"""Interop of tessera._C with NumPy and DLPack: Tensor.numpy(), Tensor.__array__, _C.from_numpy,
Tensor.__dlpack__ / __dlpack_device__ and _C.from_dlpack.

Every conversion shares memory: the tests write on one side and read on the other, convert
every dtype, transposed and sliced views both ways, zero-size and 0-d arrays, check lifetimes
(the source is deleted, the other side still reads the right values; the source is freed once
the last user is gone) and the errors. DLPack capsules are also inspected and crafted with
ctypes (versioned layout, flags, NULL strides, byte_offset, foreign devices). Where PyTorch is
installed the same round trips run against it.
"""
import ctypes
import gc
import sys
import weakref

import numpy as np
import pytest

import tessera._C as C

NUMPY_DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64"]
ALL_DTYPES = NUMPY_DTYPES + ["bfloat16"]
kDLCPU, kDLCUDA = 1, 2
IS_COPIED = 2
READ_ONLY = 1


def dt(name):
    return C.dtypes[name]


def sample_values(name, n):
    if name == "bool":
        return [i % 3 == 0 for i in range(n)]
    if name in ("float16", "bfloat16", "float32", "float64"):
        return [(i - 2) * 0.5 for i in range(n)]
    if name == "uint8":
        return [(i * 37) % 256 for i in range(n)]
    return [i * 3 - 5 for i in range(n)]


def sample(name, shape=(2, 3)):
    n = int(np.prod(shape))
    flat = sample_values(name, n)
    nested = np.array(flat, dtype=object).reshape(shape).tolist() if shape else flat[0]
    return C.tensor(nested, dtype=dt(name))


def sample_array(name, shape=(2, 3)):
    n = int(np.prod(shape))
    return np.array(sample_values(name, n), dtype=name).reshape(shape)


def transpose(t, d0=0, d1=1):
    return C.call_op("transpose", (t, d0, d1), {})


def collect():
    for _ in range(3):
        gc.collect()


# ---- ctypes views of the DLPack structs (the DLPack 1.0 C layout)

class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", DELETER)]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [("version", DLPackVersion), ("manager_ctx", ctypes.c_void_p), ("deleter", DELETER),
                ("flags", ctypes.c_uint64), ("dl_tensor", DLTensor)]


_capsule_name = ctypes.pythonapi.PyCapsule_GetName
_capsule_name.restype, _capsule_name.argtypes = ctypes.c_char_p, [ctypes.py_object]
_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype, _capsule_pointer.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype, _capsule_new.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]


def capsule_name(capsule):
    return _capsule_name(capsule).decode()


class Crafted:
    """A hand-made DLPack producer over a ctypes float32 buffer; counts deleter calls."""

    def __init__(self, values, shape, strides=None, byte_offset=0, device_type=kDLCPU, versioned=False,
                 major=1, flags=0, dtype=(2, 32, 1)):
        self.buffer = (ctypes.c_float * len(values))(*values)
        self.shape = (ctypes.c_int64 * len(shape))(*shape)
        self.strides = (ctypes.c_int64 * len(strides))(*strides) if strides is not None else None
        self.deleted = 0

        def on_delete(_):
            self.deleted += 1

        self.deleter = DELETER(on_delete)
        if versioned:
            self.managed = DLManagedTensorVersioned()
            self.managed.version = DLPackVersion(major, 0)
            self.managed.flags = flags
        else:
            self.managed = DLManagedTensor()
        self.managed.deleter = self.deleter
        dl = self.managed.dl_tensor
        dl.data = ctypes.addressof(self.buffer)
        dl.device = DLDevice(device_type, 0)
        dl.ndim = len(shape)
        dl.dtype = DLDataType(*dtype)
        dl.shape = self.shape
        dl.strides = self.strides
        dl.byte_offset = byte_offset
        name = b"dltensor_versioned" if versioned else b"dltensor"
        self.capsule = _capsule_new(ctypes.addressof(self.managed), name, None)


# ---- Tensor.numpy()

@pytest.mark.parametrize("name", NUMPY_DTYPES)
def test_numpy_every_dtype(name):
    t = sample(name)
    a = t.numpy()
    assert a.dtype == np.dtype(name)
    assert a.shape == (2, 3)
    assert a.tolist() == t.tolist()
    np.testing.assert_array_equal(a, sample_array(name))


def test_numpy_shares_memory_both_ways():
    t = C.tensor([[1.0, 2.0], [3.0, 4.0]])
    a = t.numpy()
    a[0, 1] = 20.0
    assert t.tolist() == [[1.0, 20.0], [3.0, 4.0]]
    C.call_op("fill_", (t, 7), {})
    assert a.tolist() == [[7.0, 7.0], [7.0, 7.0]]
    assert a.ctypes.data == t.data_ptr()
    assert a.flags.writeable


def test_numpy_keeps_memory_alive():
    t = C.tensor([[1.5, 2.5, 3.5]])
    a = t.numpy()
    assert a.base is not None
    del t
    collect()
    junk = [C.tensor([9.0, 9.0, 9.0]) for _ in range(50)]  # reuse freed memory, if it were freed
    assert a.tolist() == [[1.5, 2.5, 3.5]]
    del junk


def test_numpy_of_views():
    base = C.tensor(np.arange(12, dtype=np.float32).reshape(3, 4).tolist())
    t = transpose(base)
    a = t.numpy()
    assert a.shape == (4, 3)
    assert a.strides == (4, 16)
    assert not a.flags.c_contiguous
    np.testing.assert_array_equal(a, np.arange(12, dtype=np.float32).reshape(3, 4).T)
    a[3, 0] = -1.0  # element [0][3] of base
    assert base.tolist()[0][3] == -1.0
    row = C.call_op("select", (base, 0, 2), {})  # a view with a storage offset
    r = row.numpy()
    assert r.tolist() == [8.0, 9.0, 10.0, 11.0]
    assert r.ctypes.data == row.data_ptr()
    col = C.call_op("slice", (base, 1, 1, 4, 2), {})
    np.testing.assert_array_equal(col.numpy(), np.array([[1, -1], [5, 7], [9, 11]], dtype=np.float32))


def test_numpy_zero_size_and_zero_dim():
    e = C.tensor([])
    assert e.numpy().shape == (0,)
    z = C.call_op("zeros", ([0, 3],), {})
    assert z.numpy().shape == (0, 3)
    assert z.numpy().dtype == np.float32
    s = C.tensor(3.25)
    a = s.numpy()
    assert a.shape == ()
    assert a[()] == 3.25
    a[()] = 4.0
    assert s.item() == 4.0


def test_numpy_refuses_bfloat16():
    t = sample("bfloat16")
    with pytest.raises(TypeError, match="bfloat16"):
        t.numpy()


# ---- Tensor.__array__

def test_array_protocol():
    t = C.tensor([[1.0, 2.0], [3.0, 4.0]])
    a = np.asarray(t)
    assert np.shares_memory(a, t.numpy())
    assert a.dtype == np.float32
    d = np.asarray(t, dtype=np.float64)
    assert d.dtype == np.float64 and d.tolist() == t.tolist()
    c = np.array(t)  # np.array copies by default
    assert not np.shares_memory(c, t.numpy())
    assert c.tolist() == t.tolist()
    with pytest.raises(ValueError):
        np.asarray(t, dtype=np.float64, copy=False)
    assert np.shares_memory(np.asarray(t, copy=False), t.numpy())
    assert np.add(t, 1).tolist() == [[2.0, 3.0], [4.0, 5.0]]  # NumPy functions accept tensors


def test_array_protocol_bfloat16_converts_to_float32():
    t = sample("bfloat16")
    a = np.asarray(t)
    assert a.dtype == np.float32
    assert a.tolist() == t.tolist()
    with pytest.raises(ValueError):
        np.asarray(t, copy=False)


# ---- from_numpy

@pytest.mark.parametrize("name", NUMPY_DTYPES)
def test_from_numpy_every_dtype(name):
    a = sample_array(name)
    t = C.from_numpy(a)
    assert t.dtype == dt(name)
    assert t.shape == (2, 3)
    assert t.stride() == (3, 1)
    assert t.tolist() == a.tolist()
    assert t.data_ptr() == a.ctypes.data


def test_from_numpy_shares_memory_both_ways():
    a = np.zeros((2, 3), dtype=np.float32)
    t = C.from_numpy(a)
    a[1, 2] = 5.0
    assert t.tolist()[1][2] == 5.0
    C.call_op("fill_", (t, 2), {})
    assert (a == 2).all()
    assert t.numpy().ctypes.data == a.ctypes.data
    assert t._same_storage(C.from_numpy(a)) is False  # two wrappings, two storages over the same memory


def test_from_numpy_keeps_array_alive_and_lets_it_go():
    a = np.arange(6, dtype=np.int64)
    ref = weakref.ref(a)
    t = C.from_numpy(a)
    del a
    collect()
    assert ref() is not None
    assert t.tolist() == [0, 1, 2, 3, 4, 5]
    view = C.call_op("slice", (t, 0, 2, 6, 1), {})
    del t
    collect()
    assert ref() is not None  # the view shares the storage
    assert view.tolist() == [2, 3, 4, 5]
    del view
    collect()
    assert ref() is None


def test_from_numpy_views():
    base = np.arange(24, dtype=np.float64).reshape(4, 6)
    t = C.from_numpy(base.T)
    assert t.shape == (6, 4)
    assert t.stride() == (1, 6)
    assert not t.is_contiguous()
    assert t.tolist() == base.T.tolist()
    s = C.from_numpy(base[1:, ::2])
    assert s.shape == (3, 3)
    assert s.stride() == (6, 2)
    assert s.tolist() == base[1:, ::2].tolist()
    assert s.data_ptr() == base[1:, ::2].ctypes.data
    C.call_op("fill_", (s, -1), {})
    assert (base[1:, ::2] == -1).all() and (base[0] != -1).all()
    b = np.broadcast_to(np.arange(3.0), (2, 3))  # stride 0, read-only
    with pytest.warns(UserWarning, match="not writable"):
        tb = C.from_numpy(b)
    assert tb.stride() == (0, 1)
    assert tb.tolist() == [[0.0, 1.0, 2.0]] * 2


def test_from_numpy_zero_size_and_zero_dim():
    for shape in [(0,), (3, 0), (0, 4, 2)]:
        t = C.from_numpy(np.zeros(shape, dtype=np.float32))
        assert t.shape == shape
        assert t.numel() == 0
        assert t.tolist() == np.zeros(shape).tolist()
    s = C.from_numpy(np.array(7, dtype=np.int32))
    assert s.shape == ()
    assert s.item() == 7


def test_from_numpy_errors():
    with pytest.raises(TypeError, match="expected np.ndarray"):
        C.from_numpy([1, 2, 3])
    for bad in [np.clongdouble, np.uint16, np.uint32, np.uint64, object, "U3", "datetime64[s]"]:
        arr = np.zeros(3, dtype=bad)
        with pytest.raises(TypeError, match=str(arr.dtype).split("[")[0]):
            C.from_numpy(arr)
    with pytest.raises(ValueError, match="negative"):
        C.from_numpy(np.arange(4.0)[::-1])
    swapped = np.arange(4, dtype=">i4" if sys.byteorder == "little" else "<i4")
    with pytest.raises(ValueError, match="byte order"):
        C.from_numpy(swapped)
    raw = np.zeros(17, dtype=np.uint8)
    misaligned = raw[1:].view(np.int32)  # 16 bytes from an odd address
    with pytest.raises(ValueError, match="aligned"):
        C.from_numpy(misaligned)
    odd = np.lib.stride_tricks.as_strided(np.zeros(8, dtype=np.int16), shape=(3,), strides=(3,))
    with pytest.raises(ValueError, match="multiple of the element"):
        C.from_numpy(odd)


def test_from_numpy_read_only_warns():
    a = np.arange(3.0)
    a.flags.writeable = False
    with pytest.warns(UserWarning, match="not writable"):
        t = C.from_numpy(a)
    assert t.tolist() == [0.0, 1.0, 2.0]


# ---- DLPack: export

def test_dlpack_device():
    assert C.tensor([1.0]).__dlpack_device__() == (kDLCPU, 0)


def test_dlpack_capsule_names():
    t = C.tensor([1.0, 2.0])
    assert capsule_name(t.__dlpack__()) == "dltensor"
    assert capsule_name(t.__dlpack__(max_version=None)) == "dltensor"
    assert capsule_name(t.__dlpack__(max_version=(0, 8))) == "dltensor"
    assert capsule_name(t.__dlpack__(max_version=(1, 0))) == "dltensor_versioned"
    assert capsule_name(t.__dlpack__(max_version=(1, 3))) == "dltensor_versioned"
    assert capsule_name(t.__dlpack__(max_version=(2, 0))) == "dltensor_versioned"
    assert capsule_name(t.__dlpack__(max_version=[1, 0])) == "dltensor_versioned"
    with pytest.raises(TypeError, match="max_version"):
        t.__dlpack__(max_version=1)


DL_DTYPES = {"bool": (6, 8), "uint8": (1, 8), "int8": (0, 8), "int16": (0, 16), "int32": (0, 32),
             "int64": (0, 64), "float16": (2, 16), "bfloat16": (4, 16), "float32": (2, 32), "float64": (2, 64)}


@pytest.mark.parametrize("name", ALL_DTYPES)
def test_dlpack_versioned_layout(name):
    base = sample(name, (3, 4))
    t = transpose(base)
    cap = t.__dlpack__(max_version=(1, 0))
    m = DLManagedTensorVersioned.from_address(_capsule_pointer(cap, b"dltensor_versioned"))
    assert (m.version.major, m.version.minor) == (1, 0)
    assert m.flags == 0
    dl = m.dl_tensor
    assert (dl.device.device_type, dl.device.device_id) == (kDLCPU, 0)
    assert (dl.dtype.code, dl.dtype.bits, dl.dtype.lanes) == DL_DTYPES[name] + (1,)
    assert dl.ndim == 2
    assert [dl.shape[i] for i in range(2)] == [4, 3]
    assert [dl.strides[i] for i in range(2)] == [1, 4]
    assert dl.data + dl.byte_offset == t.data_ptr()
    legacy = t.__dlpack__()
    lm = DLManagedTensor.from_address(_capsule_pointer(legacy, b"dltensor"))
    assert lm.dl_tensor.ndim == 2 and lm.dl_tensor.data == dl.data


def test_dlpack_copy_flag_and_options():
    t = C.tensor([1.0, 2.0, 3.0])
    cap = t.__dlpack__(max_version=(1, 0), copy=True)
    m = DLManagedTensorVersioned.from_address(_capsule_pointer(cap, b"dltensor_versioned"))
    assert m.flags & IS_COPIED
    assert m.dl_tensor.data != t.data_ptr()
    copied = C.from_dlpack(cap)
    assert copied.tolist() == [1.0, 2.0, 3.0] and not copied._same_storage(t)
    assert C.from_dlpack(t.__dlpack__(max_version=(1, 0), copy=False))._same_storage(t)
    assert capsule_name(t.__dlpack__(dl_device=(kDLCPU, 0), stream=None)) == "dltensor"
    with pytest.raises(BufferError):
        t.__dlpack__(dl_device=(kDLCUDA, 0))
    with pytest.raises(ValueError, match="stream"):
        t.__dlpack__(stream=1)
    with pytest.raises(TypeError):
        t.__dlpack__((1, 0))  # keyword-only arguments


def test_dlpack_unconsumed_capsule_frees_the_tensor():
    a = np.arange(4.0)
    ref = weakref.ref(a)
    t = C.from_numpy(a)
    caps = [t.__dlpack__(), t.__dlpack__(max_version=(1, 0))]
    del a, t
    collect()
    assert ref() is not None  # the capsules hold the tensor, which holds the array
    del caps
    collect()
    assert ref() is None


@pytest.mark.parametrize("name", NUMPY_DTYPES)
def test_numpy_from_dlpack_every_dtype(name):
    t = sample(name)
    a = np.from_dlpack(t)
    assert a.dtype == np.dtype(name)
    assert a.tolist() == t.tolist()
    assert a.ctypes.data == t.data_ptr()


def test_numpy_from_dlpack_shares_views_and_lifetime():
    base = C.tensor(np.arange(12, dtype=np.float32).reshape(3, 4).tolist())
    a = np.from_dlpack(transpose(base))
    assert a.shape == (4, 3) and a.strides == (4, 16)
    np.testing.assert_array_equal(a, np.arange(12, dtype=np.float32).reshape(3, 4).T)
    a[0, 2] = 100.0
    assert base.tolist()[2][0] == 100.0
    del base
    collect()
    junk = [C.tensor([0.0] * 12) for _ in range(50)]
    assert a[0, 2] == 100.0 and a[3, 1] == 7.0
    del junk
    assert np.from_dlpack(C.call_op("zeros", ([0, 2],), {})).shape == (0, 2)
    assert np.from_dlpack(C.tensor(2.5)).shape == ()


# ---- DLPack: import

@pytest.mark.parametrize("name", NUMPY_DTYPES)
def test_from_dlpack_numpy_every_dtype(name):
    a = sample_array(name)
    t = C.from_dlpack(a)
    assert t.dtype == dt(name)
    assert t.tolist() == a.tolist()
    assert t.data_ptr() == a.ctypes.data


def test_from_dlpack_numpy_shares_views_and_lifetime():
    base = np.arange(24, dtype=np.int32).reshape(4, 6).copy()  # owns its memory (a weakref target)
    ref = weakref.ref(base)
    t = C.from_dlpack(base.T)
    assert t.shape == (6, 4) and t.stride() == (1, 6)
    assert t.tolist() == base.T.tolist()
    s = C.from_dlpack(base[:, 1::2])
    assert s.stride() == (6, 2) and s.tolist() == base[:, 1::2].tolist()
    C.call_op("fill_", (s, 0), {})
    assert (base[:, 1::2] == 0).all()
    base[0, 0] = 99
    assert t.tolist()[0][0] == 99
    del base, s
    collect()
    assert ref() is not None
    assert t.tolist()[0] == [99, 6, 12, 18] and t.tolist()[1] == [0, 0, 0, 0]
    del t
    collect()
    assert ref() is None  # the producer's deleter ran
    e = C.from_dlpack(np.zeros((0, 3), dtype=np.float64))
    assert e.shape == (0, 3) and e.dtype == dt("float64")
    z = C.from_dlpack(np.array(5, dtype=np.int16))
    assert z.shape == () and z.item() == 5


@pytest.mark.parametrize("name", ALL_DTYPES)
def test_from_dlpack_tessera_round_trip(name):
    t = transpose(sample(name, (2, 3)))
    for cap in [t.__dlpack__(), t.__dlpack__(max_version=(1, 0))]:
        u = C.from_dlpack(cap)
        assert u.dtype == t.dtype and u.shape == t.shape and u.stride() == t.stride()
        assert u.tolist() == t.tolist()
        assert u.data_ptr() == t.data_ptr()
    u = C.from_dlpack(t)  # through __dlpack__
    assert u.tolist() == t.tolist() and u.data_ptr() == t.data_ptr()


def test_from_dlpack_capsule_used_once():
    t = C.tensor([1, 2, 3])
    for kwargs, used in [({}, "used_dltensor"), ({"max_version": (1, 0)}, "used_dltensor_versioned")]:
        cap = t.__dlpack__(**kwargs)
        u = C.from_dlpack(cap)
        assert capsule_name(cap) == used
        with pytest.raises(ValueError, match="already consumed"):
            C.from_dlpack(cap)
        assert u.tolist() == [1, 2, 3]


def test_from_dlpack_legacy_producer():
    class Legacy:  # a producer from before DLPack 1.0: no max_version keyword
        def __init__(self, t):
            self.t = t
            self.calls = 0

        def __dlpack__(self, stream=None):
            self.calls += 1
            return self.t.__dlpack__()

        def __dlpack_device__(self):
            return (kDLCPU, 0)

    p = Legacy(C.tensor([[1.0, 2.0]]))
    u = C.from_dlpack(p)
    assert u.tolist() == [[1.0, 2.0]] and p.calls == 1


def test_from_dlpack_crafted_null_strides_and_byte_offset():
    c = Crafted(list(range(10)), shape=(2, 3), byte_offset=8)  # starts at element 2, contiguous
    t = C.from_dlpack(c.capsule)
    assert capsule_name(c.capsule) == "used_dltensor"
    assert t.shape == (2, 3) and t.stride() == (3, 1)
    assert t.tolist() == [[2.0, 3.0, 4.0], [5.0, 6.0, 7.0]]
    c.buffer[2] = 50.0
    assert t.tolist()[0][0] == 50.0
    assert c.deleted == 0
    del t
    collect()
    assert c.deleted == 1
    v = Crafted(list(range(6)), shape=(3, 2), strides=(1, 3), versioned=True)
    tv = C.from_dlpack(v.capsule)
    assert capsule_name(v.capsule) == "used_dltensor_versioned"
    assert tv.tolist() == [[0.0, 3.0], [1.0, 4.0], [2.0, 5.0]]
    del tv
    collect()
    assert v.deleted == 1


def test_from_dlpack_refusals_leave_the_capsule_unconsumed():
    cuda = Crafted([0.0] * 4, shape=(4,), device_type=kDLCUDA)
    with pytest.raises(BufferError, match="kDLCUDA"):
        C.from_dlpack(cuda.capsule)
    assert capsule_name(cuda.capsule) == "dltensor" and cuda.deleted == 0
    newer = Crafted([0.0] * 4, shape=(4,), versioned=True, major=2)
    with pytest.raises(BufferError, match="version 2"):
        C.from_dlpack(newer.capsule)
    assert capsule_name(newer.capsule) == "dltensor_versioned"
    complex_ = Crafted([0.0] * 4, shape=(4,), dtype=(5, 32, 1))  # complex32: no such Tessera dtype
    with pytest.raises(TypeError, match="code 5, bits 32"):
        C.from_dlpack(complex_.capsule)
    lanes = Crafted([0.0] * 4, shape=(1,), dtype=(2, 32, 4))
    with pytest.raises(TypeError, match="lanes 4"):
        C.from_dlpack(lanes.capsule)
    negative = Crafted([0.0] * 4, shape=(4,), strides=(-1,), byte_offset=12)
    with pytest.raises(ValueError, match="negative"):
        C.from_dlpack(negative.capsule)
    misaligned = Crafted([0.0] * 4, shape=(2,), byte_offset=2)
    with pytest.raises(ValueError, match="aligned"):
        C.from_dlpack(misaligned.capsule)
    for c in [cuda, newer, complex_, lanes, negative, misaligned]:
        assert not capsule_name(c.capsule).startswith("used_")


def test_from_dlpack_read_only_warns():
    c = Crafted([1.0, 2.0], shape=(2,), versioned=True, flags=READ_ONLY)
    with pytest.warns(UserWarning, match="read-only"):
        t = C.from_dlpack(c.capsule)
    assert t.tolist() == [1.0, 2.0]


def test_from_dlpack_errors():
    with pytest.raises(TypeError, match="__dlpack__"):
        C.from_dlpack([1, 2, 3])
    with pytest.raises(TypeError, match="code 1, bits 16"):
        C.from_dlpack(np.zeros(3, dtype=np.uint16))

    class OnCuda:
        def __dlpack__(self, **kwargs):
            raise AssertionError("must not be called")

        def __dlpack_device__(self):
            return (kDLCUDA, 1)

    with pytest.raises(BufferError, match="kDLCUDA"):
        C.from_dlpack(OnCuda())
    other = _capsule_new(ctypes.addressof(ctypes.c_int(0)), b"something_else", None)
    with pytest.raises(TypeError, match="something_else"):
        C.from_dlpack(other)


# ---- PyTorch, where it is installed

def _torch():
    return pytest.importorskip("torch")


@pytest.mark.parametrize("name", ALL_DTYPES)
def test_torch_round_trips(name):
    torch = _torch()
    t = transpose(sample(name, (2, 3)))
    pt = torch.from_dlpack(t)
    assert str(pt.dtype) == "torch." + name
    assert pt.tolist() == t.tolist()
    assert pt.data_ptr() == t.data_ptr()
    assert pt.stride() == t.stride()
    back = C.from_dlpack(pt)
    assert back.data_ptr() == t.data_ptr() and back.tolist() == t.tolist()
    src = torch.arange(12).reshape(3, 4).to(getattr(torch, name)).T
    u = C.from_dlpack(src)
    assert u.tolist() == src.tolist() and u.stride() == src.stride()
    assert u.data_ptr() == src.data_ptr()


def test_torch_sharing_and_lifetime():
    torch = _torch()
    src = torch.zeros(2, 3)
    u = C.from_dlpack(src)
    src[1, 1] = 4.0
    assert u.tolist()[1][1] == 4.0
    del src
    collect()
    assert u.tolist() == [[0.0, 0.0, 0.0], [0.0, 4.0, 0.0]]
    t = C.tensor([1.0, 2.0])
    pt = torch.from_dlpack(t)
    pt.add_(1)
    assert t.tolist() == [2.0, 3.0]
    del t
    collect()
    assert pt.tolist() == [2.0, 3.0]
    assert C.from_numpy(torch.ones(2).numpy()).tolist() == [1.0, 1.0]
