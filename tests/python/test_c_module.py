"""tessera._C on its own: dtype/device objects, Tensor metadata, item/tolist, _C.tensor, call_op
overload resolution and argument conversion, the error mapping, plugins, seeds, default dtype."""
import copy
import gc
import os
import pickle
import threading
import weakref

import pytest

import tessera._C as C

F32, F64, I64, BOOL = C.dtypes["float32"], C.dtypes["float64"], C.dtypes["int64"], C.dtypes["bool"]
from conftest import FIXTURE_DIR as FIXTURES


def fixture(name):
    path = os.path.join(FIXTURES, f"libtessera_{name}.so")
    if not os.path.exists(path):
        pytest.skip(f"fixture plugin {path} is not built")
    return path


@pytest.fixture
def good():
    return C.plugins_load(fixture("good"))


def call(name, *args, **kwargs):
    return C.call_op(name, args, kwargs)


def t(data, dtype=None):
    return C.tensor(data, dtype=dtype)


# ---------------------------------------------------------------------------- dtype

DTYPE_FACTS = [  # name, itemsize, floating, signed
    ("bool", 1, False, False), ("uint8", 1, False, False), ("int8", 1, False, True),
    ("int16", 2, False, True), ("int32", 4, False, True), ("int64", 8, False, True),
    ("float16", 2, True, True), ("bfloat16", 2, True, True), ("float32", 4, True, True),
    ("float64", 8, True, True), ("complex64", 8, False, True), ("complex128", 16, False, True),
]


def test_dtypes_table():
    assert sorted(C.dtypes) == sorted(n for n, *_ in DTYPE_FACTS)
    for name, size, floating, signed in DTYPE_FACTS:
        d = C.dtypes[name]
        assert isinstance(d, C.dtype)
        assert d.name == name and d.itemsize == size
        assert d.is_floating_point is floating and d.is_signed is signed
        assert repr(d) == f"tessera.{name}" and str(d) == f"tessera.{name}"


def test_dtype_equality_hash_and_copies():
    assert F32 == C.dtypes["float32"] and F32 is C.dtypes["float32"]
    assert F32 != F64 and F32 != "float32"
    assert len({F32, C.dtypes["float32"], F64}) == 2
    assert pickle.loads(pickle.dumps(F64)) is F64
    assert copy.copy(I64) is I64 and copy.deepcopy(I64) is I64
    with pytest.raises(TypeError):
        C.dtype()


# ---------------------------------------------------------------------------- device

def test_device_forms():
    d = C.device("cpu")
    assert d.type == "cpu" and d.index is None
    assert str(d) == "cpu" and repr(d) == "device(type='cpu')"
    d0 = C.device("cpu:0")
    assert d0.type == "cpu" and d0.index == 0
    assert str(d0) == "cpu:0" and repr(d0) == "device(type='cpu', index=0)"
    assert C.device("cpu", 0) == d0
    assert C.device(d0) == d0 and C.device(d) == d


def test_device_equality_and_hash():
    assert C.device("cpu") == C.device("cpu")
    assert C.device("cpu") != C.device("cpu:0")  # as PyTorch: no index != index 0
    assert len({C.device("cpu"), C.device("cpu"), C.device("cpu", 0)}) == 2
    assert C.device("cpu") != "cpu"
    assert pickle.loads(pickle.dumps(C.device("cpu:0"))) == C.device("cpu:0")


def test_device_errors():
    with pytest.raises(ValueError, match="nosuchdevice"):
        C.device("nosuchdevice")
    with pytest.raises(ValueError):
        C.device("cpu:x")
    with pytest.raises(ValueError):
        C.device("cpu:-1")
    with pytest.raises(ValueError):
        C.device("cpu:0", 0)
    with pytest.raises(TypeError):
        C.device(3)


# ---------------------------------------------------------------------------- Tensor metadata

def test_tensor_metadata():
    x = t([[1.0, 2, 3], [4, 5, 6]])
    assert isinstance(x, C.Tensor)
    assert x.shape == (2, 3) and isinstance(x.shape, tuple)
    assert x.dtype is F32
    assert x.device == C.device("cpu") and x.device.index is None
    assert x.ndim == 2 and x.dim() == 2
    assert x.size() == (2, 3) and x.size(0) == 2 and x.size(-1) == 3 and x.size(dim=1) == 3
    assert x.stride() == (3, 1) and x.stride(0) == 3 and x.stride(-1) == 1
    assert x.numel() == 6
    assert x.is_contiguous() and x.storage_offset() == 0
    assert x.element_size() == 4
    assert isinstance(x.data_ptr(), int) and x.data_ptr() != 0
    assert x.is_cuda is False
    assert isinstance(x._version, int)


def test_size_stride_errors():
    x = t([[1.0, 2], [3, 4]])
    with pytest.raises(IndexError):
        x.size(2)
    with pytest.raises(IndexError):
        x.stride(-3)
    with pytest.raises(TypeError):
        x.size("0")
    with pytest.raises(TypeError):
        x.size(0, 1)


def test_views_share_storage_and_version():
    x = t([[1.0, 2, 3], [4, 5, 6]])
    y = call("transpose", x, 0, 1)
    assert y.shape == (3, 2) and y.stride() == (1, 3) and not y.is_contiguous()
    assert y._same_storage(x) and x._same_storage(y)
    z = call("clone", x)
    assert not z._same_storage(x)
    s = call("select", x, 0, 1)
    assert s.storage_offset() == 3
    v0 = x._version
    call("add_", x, 1)
    assert x._version > v0 and y._version == x._version
    with pytest.raises(TypeError):
        x._same_storage(3)


def test_tensor_object_features():
    x = t([1.0])
    x.note = "hello"  # objects carry Python attributes
    assert x.note == "hello"
    r = weakref.ref(x)
    assert r() is x
    del x
    gc.collect()
    assert r() is None
    # A cycle through the object's __dict__ is collected.
    y = t([2.0])
    y.me = y
    r = weakref.ref(y)
    del y
    gc.collect()
    assert r() is None


def test_tensor_subclass_and_class_attributes():
    class Param(C.Tensor):
        pass

    x = t([1.0, 2.0])
    p = C.Tensor._make_subclass(Param, x)
    assert type(p) is Param and isinstance(p, C.Tensor)
    assert p._same_storage(x) and p.tolist() == [1.0, 2.0]
    r = call("add", p, p)  # subclasses are accepted as tensors
    assert r.tolist() == [2.0, 4.0]
    C.Tensor._c_module_test_attr = lambda self: self.numel() * 10  # methods can be added to the class
    try:
        assert x._c_module_test_attr() == 20
    finally:
        del C.Tensor._c_module_test_attr


def test_tensor_constructor():
    assert C.Tensor().shape == (0,)
    a = C.Tensor([1, 2])
    assert a.dtype is C.get_default_dtype() and a.tolist() == [1.0, 2.0]
    b = C.Tensor(a)
    assert b._same_storage(a)


# ---------------------------------------------------------------------------- item / tolist

def test_item_types():
    assert t(True).item() is True
    v = t(7).item()
    assert v == 7 and type(v) is int
    f = t(2.5).item()
    assert f == 2.5 and type(f) is float
    assert t([[3]]).item() == 3  # any one-element tensor
    assert t(2 ** 62).item() == 2 ** 62  # exact beyond 2**53
    for name in ("uint8", "int8", "int16", "int32"):
        assert type(t(5, C.dtypes[name]).item()) is int
    for name in ("float16", "bfloat16", "float64"):
        assert t(1.5, C.dtypes[name]).item() == 1.5


def test_item_errors():
    with pytest.raises(ValueError, match="a Tensor with 6 elements cannot be converted to Scalar"):
        t([[1, 2, 3], [4, 5, 6]]).item()
    with pytest.raises(ValueError, match="0 elements"):
        t([]).item()


def test_tolist():
    assert t(3.5).tolist() == 3.5  # 0-dim: a number
    assert t([[1, 2], [3, 4]]).tolist() == [[1, 2], [3, 4]]
    assert t([True, False]).tolist() == [True, False]
    assert t([[]]).tolist() == [[]]
    x = call("transpose", t([[1, 2, 3], [4, 5, 6]]), 0, 1)  # strided
    assert x.tolist() == [[1, 4], [2, 5], [3, 6]]
    assert t([0.1], C.dtypes["float16"]).tolist()[0] == pytest.approx(0.1, abs=1e-3)
    assert all(type(v) is int for v in t([1, 2], C.dtypes["uint8"]).tolist())


# ---------------------------------------------------------------------------- _C.tensor

def test_tensor_inference():
    assert t([True, False]).dtype is BOOL
    assert t([1, 2]).dtype is I64
    assert t([1, 2.0]).dtype is F32
    assert t([True, 1]).dtype is I64
    assert t(True).dtype is BOOL and t(True).shape == ()
    assert t(3).shape == () and t(3).dtype is I64
    assert t(3.0).dtype is F32
    e = t([])
    assert e.shape == (0,) and e.dtype is F32
    assert t([[], []]).shape == (2, 0)
    assert t(((1, 2), (3, 4))).shape == (2, 2)  # tuples too
    assert t([[1, 2], (3, 4)]).tolist() == [[1, 2], [3, 4]]


def test_tensor_dtype_and_device_arguments():
    assert t([1, 2], F64).dtype is F64
    assert t([1.7, -1.7], I64).tolist() == [1, -1]  # truncation toward zero
    assert t([0, 2, 0.5], BOOL).tolist() == [False, True, True]
    assert t([300], C.dtypes["uint8"]).tolist() == [44]  # wraps as a C cast
    x = C.tensor([1.0], dtype=F64, device="cpu")
    assert x.dtype is F64 and x.device == C.device("cpu")
    assert C.tensor([1], device=C.device("cpu:0")).device.type == "cpu"
    assert C.tensor([1], dtype="float64").dtype is F64  # a dtype name is accepted too
    with pytest.raises(ValueError):
        C.tensor([1], device="nosuchdevice")
    with pytest.raises(TypeError):
        C.tensor([1], dtype=3)


def test_tensor_from_tensors():
    a = t(2.0)
    x = t([a, 3.0, t(4)])
    assert x.tolist() == [2.0, 3.0, 4.0] and x.dtype is F32
    assert t([t(1), t(2)]).dtype is I64
    assert t([t(True)]).dtype is BOOL
    y = t([[1, 2], [3, 4]])
    c = C.tensor(y)  # a copy keeping the dtype
    assert c.tolist() == [[1, 2], [3, 4]] and c.dtype is I64 and not c._same_storage(y)
    assert C.tensor(y, dtype=F64).dtype is F64
    with pytest.raises(ValueError, match="one-element"):
        t([t([1, 2])])


def test_tensor_ragged_and_bad_elements():
    with pytest.raises(ValueError, match=r"\[1\]"):
        t([[1, 2], [3]])
    with pytest.raises(ValueError, match=r"\[1\]"):
        t([[1, 2], 3])
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        t([[1, [2]], [3, 4]])
    with pytest.raises(TypeError, match=r"str"):
        t([1, "a"])
    with pytest.raises(TypeError):
        t([1, None])
    with pytest.raises(TypeError, match="complex"):
        t([1j], dtype=C.dtypes["float32"])  # complex numbers into a real dtype
    with pytest.raises(OverflowError):
        t([2 ** 70])


def test_tensor_numpy_scalars():
    np = pytest.importorskip("numpy")
    assert t([np.int32(3), np.int64(4)]).dtype is I64
    assert t([np.float32(1.5)]).tolist() == [1.5]
    assert t([np.bool_(True), True]).dtype is BOOL


def test_default_dtype():
    assert C.get_default_dtype() is F32
    C.set_default_dtype(F64)
    try:
        assert C.get_default_dtype() is F64
        assert t([1.5]).dtype is F64
        assert t([1]).dtype is I64
        assert call("zeros", (2,)).dtype is F64
        assert call("rand", (2,)).dtype is F64
        assert call("full", (2,), 1.5).dtype is F64
        assert call("full", (2,), 1).dtype is I64
        assert call("arange", 3).dtype is I64
        assert call("zeros", (2,), dtype=F32).dtype is F32
    finally:
        C.set_default_dtype(F32)
    with pytest.raises(TypeError):
        C.set_default_dtype(I64)
    with pytest.raises(TypeError):
        C.set_default_dtype("not a dtype")
    assert C.get_default_dtype() is F32


# ---------------------------------------------------------------------------- call_op

def test_op_names_and_schemas():
    names = C.op_names()
    assert names == sorted(names) and len(names) == len(set(names))
    for n in ("add", "add_", "sum", "softmax", "empty", "cat"):
        assert n in names
    assert "add.Tensor" not in names
    schemas = C.op_schemas("add")
    assert any(s.startswith("add.Tensor(") for s in schemas)
    assert any(s.startswith("add.Scalar(") for s in schemas)
    assert any(s.startswith("add.out(") for s in schemas)
    assert C.op_schemas("add.Scalar") == [s for s in schemas if s.startswith("add.Scalar(")]
    assert C.op_schemas("no_such_op") == []


def test_tensor_vs_scalar_overloads():
    a, b = t([1.0, 2.0]), t([10.0, 20.0])
    assert C._resolve_op("add", (a, b)) == "add.Tensor"
    assert C._resolve_op("add", (a, 2)) == "add.Scalar"
    assert C._resolve_op("add", (a, 2.5)) == "add.Scalar"
    assert C._resolve_op("add", (a, True)) == "add.Scalar"
    assert C._resolve_op("add", (a, t(3.0))) == "add.Tensor"  # a one-element tensor is still a Tensor
    assert call("add", a, b).tolist() == [11.0, 22.0]
    assert call("add", a, 2).tolist() == [3.0, 4.0]
    assert call("add", a, b, alpha=2).tolist() == [21.0, 42.0]
    assert call("add", a, 1, 3).tolist() == [4.0, 5.0]  # add.Scalar's alpha is positional
    assert call("mul", a, 3).tolist() == [3.0, 6.0]
    assert call("add", t([1, 2]), 2.5).dtype is F32  # Scalar overload: wrapped-number promotion


def test_scalar_from_one_element_tensor():
    a = t([1.0, 2.0])
    assert call("add", a, 1, t(2)).tolist() == [3.0, 4.0]  # alpha (Scalar) from a tensor
    assert call("clamp", a, t(1.5)).tolist() == [1.5, 2.0]
    with pytest.raises(TypeError, match="alpha"):
        call("add", a, 1, t([1.0, 2.0]))  # a Scalar takes one-element tensors only


def test_defaults_and_keywords():
    x = t([[1.0, 2.0], [3.0, 4.0]])
    assert call("sum", x).tolist() == 10.0
    assert call("sum", x, 0).tolist() == [4.0, 6.0]  # int -> int[1]
    assert call("sum", x, (0, 1)).tolist() == 10.0
    assert call("sum", x, [1], True).shape == (2, 1)
    assert call("sum", x, dim=1, keepdim=True).tolist() == [[3.0], [7.0]]
    assert call("sum", x, None).tolist() == 10.0  # int[1]? accepts None
    assert call("sum", x, dim=0, dtype=F64).dtype is F64
    assert call("softmax", x, 1).shape == (2, 2)
    assert call("softmax", x, dim=-1, dtype=F64).dtype is F64
    assert call("amax", x).tolist() == 4.0  # int[1] dim=[] default
    assert call("slice", x, 0, 1).tolist() == [[3.0, 4.0]]  # int? end=None default
    assert call("add", input=x, other=x).tolist() == [[2.0, 4.0], [6.0, 8.0]]  # input= for self


def test_int_list_arguments():
    x = t([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    assert call("view", x, (3, 2)).shape == (3, 2)
    assert call("view", x, [6]).shape == (6,)
    assert call("view", x, 3, 2).shape == (3, 2)  # spread ints, as x.view(3, 2)
    assert call("view", x, 6).shape == (6,)
    assert call("permute", x, 1, 0).shape == (3, 2)
    assert call("zeros", 2, 3).shape == (2, 3)
    assert call("zeros", (2, 3)).shape == (2, 3)
    assert call("zeros", ()).shape == ()
    np = pytest.importorskip("numpy")
    assert call("view", x, (np.int64(3), 2)).shape == (3, 2)
    with pytest.raises(TypeError):
        call("view", x, (3.0, 2))
    with pytest.raises(TypeError):
        call("view", x, "32")


def test_other_argument_types():
    x = t([[1.0, 2.0], [3.0, 4.0]])
    assert call("to", x, I64).dtype is I64  # ScalarType
    assert call("to", x, dtype=float).dtype is F64  # Python types as dtypes, as PyTorch
    assert call("zeros", (2,), device="cpu").device.type == "cpu"  # Device from str
    assert call("zeros", (2,), device=C.device("cpu")).shape == (2,)
    assert call("linspace", 0, 1, 5).tolist() == [0.0, 0.25, 0.5, 0.75, 1.0]  # Scalar from int
    assert call("cat", [x, x]).shape == (4, 2)  # Tensor[]
    assert call("cat", (x, x), 1).shape == (2, 4)
    assert call("div", x, x, rounding_mode="floor").tolist() == [[1.0, 1.0], [1.0, 1.0]]  # str
    assert call("div", x, x, rounding_mode=None).tolist() == [[1.0, 1.0], [1.0, 1.0]]  # str? None
    assert call("eye", 2).tolist() == [[1.0, 0.0], [0.0, 1.0]]  # int? m=None
    with pytest.raises(ValueError):
        call("zeros", (2,), device="nosuchdevice")


def test_int_is_not_bool_or_float():
    x = t([[1.0, 2.0], [3.0, 4.0]])
    with pytest.raises(TypeError):
        call("unsqueeze", x, True)
    with pytest.raises(TypeError):
        call("unsqueeze", x, 1.0)
    with pytest.raises(TypeError):
        call("sum", x, 0, 1)  # keepdim is a bool, not an int
    with pytest.raises(TypeError):
        call("cat", [x, 1])


def test_in_place_and_out_return_the_same_object():
    a, b = t([1.0, 2.0]), t([3.0, 4.0])
    r = call("add_", a, b)
    assert r is a and a.tolist() == [4.0, 6.0]
    r = call("mul_", a, 2)
    assert r is a and a.tolist() == [8.0, 12.0]
    out = t([0.0, 0.0])
    r = call("add", a, b, out=out)
    assert r is out and out.tolist() == [11.0, 16.0]
    assert C._resolve_op("add", (a, b), {"out": out}) == "add.out"
    assert C._resolve_op("add", (a, b)) == "add.Tensor"
    view = call("view", a, (2,))
    assert view is not a and view._same_storage(a)


def test_full_overload_names():
    a = t([1.0, 2.0])
    assert call("add.Scalar", a, 1).tolist() == [2.0, 3.0]
    with pytest.raises(TypeError):
        call("add.Tensor", a, 1)


def test_no_match_lists_received_types_and_candidates():
    a = t([1.0])
    with pytest.raises(TypeError) as e:
        call("add", a, "x")
    msg = str(e.value)
    assert "add() received an invalid combination of arguments" in msg
    assert "(Tensor, str)" in msg
    assert "add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor" in msg
    assert "add.Scalar(Tensor self, Scalar other, Scalar alpha=1) -> Tensor" in msg
    assert "argument 'other'" in msg
    with pytest.raises(TypeError, match="unexpected keyword argument 'bogus'"):
        call("add", a, a, bogus=1)
    with pytest.raises(TypeError, match="'dim'"):
        call("softmax", a)  # a missing argument is named
    with pytest.raises(TypeError, match="multiple values for argument 'self'"):
        call("neg", a, self=a)
    with pytest.raises(TypeError, match="positional arguments"):
        call("neg", a, a)


def test_call_op_argument_errors():
    a = t([1.0])
    with pytest.raises(RuntimeError, match="unknown operator 'no_such_op'"):
        call("no_such_op", a)
    with pytest.raises(TypeError):
        C.call_op("neg", [a], {})  # args must be a tuple
    with pytest.raises(TypeError):
        C.call_op(3, (a,), {})
    with pytest.raises(TypeError):
        C.call_op("neg", (a,), [])
    assert C.call_op("neg", (a,)).tolist() == [-1.0]  # kwargs may be omitted
    assert C.call_op("neg", (a,), None).tolist() == [-1.0]


def test_error_mapping():
    x = t([[1.0, 2.0], [3.0, 4.0]])
    with pytest.raises(IndexError):
        call("transpose", x, 0, 5)
    with pytest.raises(ValueError):
        call("add", t([1.0, 2.0]), t([1.0, 2.0, 3.0]))  # shape mismatch
    with pytest.raises(ValueError):
        call("view", x, (3,))


def test_gil_is_released_and_threads_work():
    x = t([1.0, 2.0, 3.0])
    results, errors = [], []

    def work():
        try:
            for _ in range(200):
                results.append(call("add", x, x).tolist())
        except Exception as e:  # pragma: no cover
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors and len(results) == 800 and all(r == [2.0, 4.0, 6.0] for r in results)


def test_manual_seed_reproducibility():
    C.manual_seed(123)
    a = call("randn", (8,)).tolist()
    b = call("rand", (4,)).tolist()
    C.manual_seed(123)
    assert call("randn", (8,)).tolist() == a
    assert call("rand", (4,)).tolist() == b
    C.manual_seed(124)
    assert call("randn", (8,)).tolist() != a
    C.manual_seed(-1)  # wraps as PyTorch
    with pytest.raises(TypeError):
        C.manual_seed("seed")


# ---------------------------------------------------------------------------- plugins

def test_operator_cache_survives_plugin_loads():
    a = t([1.0, 2.0])
    assert call("add", a, a).tolist() == [2.0, 4.0]  # cached
    if "good" not in {p["name"] for p in C.plugins_list()}:
        with pytest.raises(RuntimeError, match="unknown operator 'test::double_it'"):
            call("test::double_it", a)
    C.plugins_load(fixture("good"))  # defines operators: the cache is rebuilt
    assert call("add", a, a).tolist() == [2.0, 4.0]
    assert call("test::double_it", a).tolist() == [2.0, 4.0]


def test_plugins_load_and_list(good):
    assert good["name"] == "good" and good["version"] == "1.2.3" and good["abi"] == C.ABI_VERSION
    assert good["devices"] == ["testdev"]
    assert "test::double_it" in good["operators_defined"]
    assert isinstance(good["kernels"], int) and good["kernels"] >= 3
    assert os.path.basename(good["path"]) == "libtessera_good.so"
    assert C.plugins_load(fixture("good")) == good  # loading again is a no-op
    listed = {p["name"]: p for p in C.plugins_list()}
    assert listed["good"] == good
    for p in listed.values():
        assert {"name", "version", "abi", "path", "devices", "kernels", "operators_defined"} <= set(p)


def test_plugin_operator(good):
    assert "test::double_it" in C.op_names()
    assert C.op_schemas("test::double_it") == ["test::double_it(Tensor self) -> Tensor"]
    assert call("test::double_it", t([1.0, 2.5])).tolist() == [2.0, 5.0]
    with pytest.raises(TypeError, match="float32"):  # the kernel's TS_ERROR_TYPE
        call("test::double_it", t([1, 2]))
    with pytest.raises(ValueError, match="always_fails"):
        call("test::always_fails", t([1.0]))


def test_plugin_device(good):
    d = C.device("testdev")
    assert d.type == "testdev" and d.index is None
    x = call("empty", (2, 3), device="testdev")
    assert x.device.type == "testdev" and x.device.index == 0 and x.shape == (2, 3)
    y = C.tensor([1.0, 2.0], device="testdev")
    assert y.tolist() == [1.0, 2.0] and y.device == C.device("testdev:0")
    assert call("test::double_it", y).tolist() == [2.0, 4.0]
    assert call("add", y, y).tolist() == [2.0, 4.0]  # testdev has no add kernel: CPU fallback
    C.set_cpu_fallback(False)
    try:
        with pytest.raises(NotImplementedError, match="add"):
            call("add", y, y)
    finally:
        C.set_cpu_fallback(True)


def test_plugins_describe(good):
    text = C.plugins_describe("test::double_it")
    assert "test::double_it" in text and "good" in text and "CPU" in text
    add = C.plugins_describe("add")
    assert "add.Tensor" in add and "add.Scalar" in add and "add.out" in add
    one = C.plugins_describe("add.Tensor")
    assert "add.Tensor" in one and "add.Scalar" not in one
    with pytest.raises(RuntimeError):
        C.plugins_describe("no_such_op")


def test_refused_plugins_raise_plugin_error():
    assert issubclass(C.PluginError, RuntimeError)
    with pytest.raises(C.PluginError, match="abi_major_mismatch|major"):
        C.plugins_load(fixture("abi_major_mismatch"))
    with pytest.raises(C.PluginError):
        C.plugins_load(os.path.join(FIXTURES, "does_not_exist.so"))
    assert "abi_major_mismatch" not in {p["name"] for p in C.plugins_list()}


def test_refused_plugin_leaves_nothing():
    with pytest.raises(C.PluginError):
        C.plugins_load(fixture("init_fails"))
    assert "failing::op" not in C.op_names()
    with pytest.raises(RuntimeError, match="unknown operator"):
        call("failing::op", t([1.0]))


def test_lazy_device_plugin(monkeypatch):
    fixture("lazydev")
    monkeypatch.setenv("TESSERA_PLUGIN_PATH", FIXTURES)
    d = C.device("lazydev")  # loads libtessera_lazydev.so on first use of the name
    assert d.type == "lazydev"
    assert "lazydev" in {p["name"] for p in C.plugins_list()}
    z = call("zeros", (2, 2), device="lazydev")
    assert z.device.type == "lazydev" and z.tolist() == [[0.0, 0.0], [0.0, 0.0]]

