"""The Tensor object from Python: construction and inference, metadata, Python protocols
(bool/int/float/len/iter/hash/copy/pickle), repr as PyTorch prints it, NumPy and DLPack
interop, dtype/device objects, plugins, and the package's import cost."""
import copy
import os
import pickle
import subprocess
import sys

import numpy as np
import pytest

import tessera as ts
from conftest import BUILD_PYTHON, FIXTURE_DIR, HAVE_TORCH


# ---------------------------------------------------------------------------- construction
def test_tensor_inference():
    assert ts.tensor(3).dtype == ts.int64 and ts.tensor(3).shape == ()
    assert ts.tensor(2.5).dtype == ts.float32
    assert ts.tensor(True).dtype == ts.bool
    assert ts.tensor([1, 2, 3]).dtype == ts.int64
    assert ts.tensor([1, 2.0]).dtype == ts.float32
    assert ts.tensor([True, False]).dtype == ts.bool
    assert ts.tensor([[1, 2], [3, 4]]).shape == (2, 2)
    assert ts.tensor(((1, 2), (3, 4))).tolist() == [[1, 2], [3, 4]]
    assert ts.tensor([]).shape == (0,) and ts.tensor([]).dtype == ts.float32
    assert ts.tensor([[], []]).shape == (2, 0)
    assert ts.tensor([ts.tensor(1), ts.tensor(2)]).tolist() == [1, 2]
    assert ts.tensor([1, 2], dtype=ts.float64).dtype == ts.float64
    assert ts.tensor([1.7, -1.7], dtype=ts.int32).tolist() == [1, -1]
    assert ts.tensor([1], device="cpu").device == ts.device("cpu")


def test_tensor_from_tensor_and_arrays_copies():
    x = ts.tensor([1.0, 2.0])
    y = ts.tensor(x)
    assert not y._same_storage(x) and y.tolist() == [1.0, 2.0]
    assert ts.tensor(x, dtype=ts.int64).dtype == ts.int64
    a = np.array([[1, 2], [3, 4]], dtype=np.int16)
    t = ts.tensor(a)
    assert t.dtype == ts.int16 and t.tolist() == [[1, 2], [3, 4]]
    a[0, 0] = 9
    assert t[0, 0].item() == 1
    assert ts.tensor(np.arange(6.0)[::-2]).tolist() == [5.0, 3.0, 1.0]
    assert ts.tensor(np.float32(1.5)).dtype == ts.float32
    assert ts.tensor(np.float64(1.5)).dtype == ts.float64  # a NumPy scalar keeps its dtype
    assert ts.tensor(range(3)).tolist() == [0, 1, 2]
    assert ts.as_tensor(x) is x
    shared = ts.as_tensor(a)
    a[1, 1] = 7
    assert shared[1, 1].item() == 7


def test_ragged_data_is_a_value_error():
    with pytest.raises(ValueError):
        ts.tensor([[1, 2], [3]])
    with pytest.raises(TypeError):
        ts.tensor(["a"])


# ---------------------------------------------------------------------------- metadata
def test_metadata():
    x = ts.zeros(2, 3, 4)
    assert x.shape == (2, 3, 4) and isinstance(x.shape, tuple)
    assert x.size() == (2, 3, 4) and x.size(1) == 3 and x.size(-1) == 4
    assert x.stride() == (12, 4, 1) and x.stride(0) == 12
    assert x.ndim == 3 and x.dim() == 3 and x.ndimension() == 3
    assert x.numel() == 24 and x.nelement() == 24 and ts.numel(x) == 24
    assert x.element_size() == 4 and x.itemsize == 4 and x.nbytes == 96
    assert x.dtype == ts.float32 and x.device == ts.device("cpu") and x.is_cpu and not x.is_cuda
    assert x.is_contiguous() and x.storage_offset() == 0
    assert x.is_floating_point() and ts.is_floating_point(x) and not x.is_complex()
    assert ts.is_tensor(x) and not ts.is_tensor([1])
    with pytest.raises(IndexError):
        x.size(3)
    y = x[1, :, 2:]
    assert y.storage_offset() == 14 and y.stride() == (4, 1) and not y.is_contiguous()


def test_version_counter():
    x = ts.zeros(3)
    v = x._version
    x.add_(1)
    assert x._version > v
    v = x._version
    x[0] = 5
    assert x._version > v


# ---------------------------------------------------------------------------- Python protocols
def test_python_number_conversions():
    assert bool(ts.tensor([1])) is True and bool(ts.tensor(0.0)) is False
    assert int(ts.tensor(3.7)) == 3 and float(ts.tensor(2)) == 2.0
    assert ts.tensor(5).item() == 5 and isinstance(ts.tensor(5).item(), int)
    assert isinstance(ts.tensor(True).item(), bool)
    assert isinstance(ts.tensor(1.5, dtype=ts.float16).item(), float)
    assert [10, 20, 30][ts.tensor(2)] == 30
    assert list(range(10))[ts.tensor(1):ts.tensor(3)] == [1, 2]
    assert f"{ts.tensor(3.14159):.2f}" == "3.14"


def test_len_iter_contains():
    x = ts.arange(6).reshape(3, 2)
    assert len(x) == 3
    rows = list(x)
    assert len(rows) == 3 and rows[2].tolist() == [4, 5] and rows[2]._same_storage(x)
    assert [int(v) for v in ts.arange(3)] == [0, 1, 2]
    assert 4 in x and 9 not in x
    with pytest.raises(TypeError, match="0-d"):
        len(ts.tensor(1))
    with pytest.raises(TypeError, match="0-d"):
        iter(ts.tensor(1))


def test_hash_is_identity():
    x = ts.zeros(2)
    y = ts.zeros(2)
    assert hash(x) != hash(y) or x is y
    d = {x: 1, y: 2}
    assert d[x] == 1 and d[y] == 2
    assert len({x, x, y}) == 2


def test_copy_deepcopy_pickle():
    x = ts.arange(6, dtype=ts.float64).reshape(2, 3)
    d = copy.deepcopy(x)
    assert not d._same_storage(x) and d.tolist() == x.tolist() and d.dtype == ts.float64
    p = pickle.loads(pickle.dumps(x))
    assert p.tolist() == x.tolist() and p.dtype == ts.float64 and p.shape == (2, 3)
    e = pickle.loads(pickle.dumps(ts.zeros(0, 4, dtype=ts.int8)))
    assert e.shape == (0, 4) and e.dtype == ts.int8
    assert pickle.loads(pickle.dumps(ts.float16)) == ts.float16
    assert pickle.loads(pickle.dumps(ts.device("cpu"))) == ts.device("cpu")


def test_unsupported_operands_return_not_implemented():
    x = ts.zeros(2)
    with pytest.raises(TypeError, match="unsupported operand"):
        x + "a"
    with pytest.raises(TypeError):
        "a" * x  # str * x asks x.__index__, which refuses (as in PyTorch)
    with pytest.raises(TypeError, match="unsupported operand"):
        x - object()
    with pytest.raises(TypeError):
        x @ 2


def test_numpy_operands():
    x = ts.tensor([1.0, 2.0])
    r = x + np.array([1.0, 1.0])
    assert isinstance(r, ts.Tensor) and r.tolist() == [2.0, 3.0]
    r = np.array([1.0, 1.0]) + x
    assert isinstance(r, ts.Tensor) and r.dtype == ts.float64
    r = x * np.float32(2)
    assert r.tolist() == [2.0, 4.0] and r.dtype == ts.float32


# ---------------------------------------------------------------------------- dtype and device objects
def test_dtype_objects():
    assert ts.float is ts.float32 and ts.double is ts.float64 and ts.half is ts.float16
    assert ts.long is ts.int64 and ts.int is ts.int32 and ts.short is ts.int16
    assert repr(ts.float32) == "tessera.float32" and ts.float32.name == "float32"
    assert ts.float64.itemsize == 8 and ts.bfloat16.itemsize == 2 and ts.bool.itemsize == 1
    assert ts.float16.is_floating_point and not ts.int8.is_floating_point
    assert ts.int8.is_signed and not ts.uint8.is_signed
    assert isinstance(ts.float32, ts.dtype)
    assert {ts.float32: 1}[ts.zeros(1).dtype] == 1
    assert ts.promote_types(ts.uint8, ts.int8) == ts.int16
    assert ts.promote_types(ts.float16, ts.bfloat16) == ts.float32
    assert ts.promote_types(ts.int64, ts.float16) == ts.float16
    assert ts.result_type(ts.tensor([1], dtype=ts.int32), 2.5) == ts.float32
    assert ts.result_type(ts.tensor([1], dtype=ts.int8), ts.tensor(1000)) == ts.int8


def test_device_objects():
    d = ts.device("cpu")
    assert d.type == "cpu" and d.index is None and str(d) == "cpu" and repr(d) == "device(type='cpu')"
    d0 = ts.device("cpu:0")
    assert d0.index == 0 and str(d0) == "cpu:0" and repr(d0) == "device(type='cpu', index=0)"
    assert ts.device("cpu", 0) == d0 and ts.device(d0) == d0
    assert hash(ts.device("cpu")) == hash(ts.device("cpu"))
    with pytest.raises((ValueError, RuntimeError)):
        ts.device("no_such_device_xyz")


# ---------------------------------------------------------------------------- repr (expected strings as
# PyTorch prints them for the same inputs; dtypes print as tessera.<name> instead of torch.<name>)
REPRS = [
    (lambda: ts.tensor([[1.0, 2.0], [3.0, 4.0]]), "tensor([[1., 2.],\n        [3., 4.]])"),
    (lambda: ts.tensor([1.5, 2.25]), "tensor([1.5000, 2.2500])"),
    (lambda: ts.tensor([1, 2, 3]), "tensor([1, 2, 3])"),
    (lambda: ts.tensor([1, 2, 3], dtype=ts.int32), "tensor([1, 2, 3], dtype=tessera.int32)"),
    (lambda: ts.tensor([-1, 10, 100], dtype=ts.int8), "tensor([ -1,  10, 100], dtype=tessera.int8)"),
    (lambda: ts.tensor([True, False]), "tensor([ True, False])"),
    (lambda: ts.tensor(3.5), "tensor(3.5000)"),
    (lambda: ts.tensor(3), "tensor(3)"),
    (lambda: ts.tensor(2.0), "tensor(2.)"),
    (lambda: ts.tensor(True), "tensor(True)"),
    (lambda: ts.tensor(1e-5), "tensor(1.0000e-05)"),
    (lambda: ts.tensor([1e10, 1.0]), "tensor([1.0000e+10, 1.0000e+00])"),
    (lambda: ts.tensor([0.1, 100000.0]), "tensor([1.0000e-01, 1.0000e+05])"),
    (lambda: ts.tensor([1.0, float("nan"), float("inf")]), "tensor([1., nan, inf])"),
    (lambda: ts.tensor([-float("inf"), 0.5]), "tensor([  -inf, 0.5000])"),
    (lambda: ts.tensor([-1.5, 2.0]), "tensor([-1.5000,  2.0000])"),
    (lambda: ts.tensor([100.0, 0.5]), "tensor([100.0000,   0.5000])"),
    (lambda: ts.tensor([0.1]), "tensor([0.1000])"),
    (lambda: ts.tensor([0.0, -0.0]), "tensor([0., -0.])"),
    (lambda: ts.zeros(2, 3), "tensor([[0., 0., 0.],\n        [0., 0., 0.]])"),
    (lambda: ts.tensor([1.0, 2.0], dtype=ts.float16), "tensor([1., 2.], dtype=tessera.float16)"),
    (lambda: ts.tensor([0.5, 2.0], dtype=ts.bfloat16), "tensor([0.5000, 2.0000], dtype=tessera.bfloat16)"),
    (lambda: ts.tensor([1.0, 2.0], dtype=ts.float64), "tensor([1., 2.], dtype=tessera.float64)"),
    (lambda: ts.tensor([1, 2], dtype=ts.uint8), "tensor([1, 2], dtype=tessera.uint8)"),
    (lambda: ts.tensor([]), "tensor([])"),
    (lambda: ts.zeros(0, 3), "tensor([], size=(0, 3))"),
    (lambda: ts.zeros(2, 0), "tensor([], size=(2, 0))"),
    (lambda: ts.tensor([], dtype=ts.int64), "tensor([], dtype=tessera.int64)"),
    (lambda: ts.zeros(0, 2, dtype=ts.int32), "tensor([], size=(0, 2), dtype=tessera.int32)"),
    (lambda: ts.arange(8).reshape(2, 2, 2),
     "tensor([[[0, 1],\n         [2, 3]],\n\n        [[4, 5],\n         [6, 7]]])"),
    (lambda: ts.arange(2000), "tensor([   0,    1,    2,  ..., 1997, 1998, 1999])"),
    (lambda: ts.zeros(100, 100),
     "tensor([[0., 0., 0.,  ..., 0., 0., 0.],\n"
     "        [0., 0., 0.,  ..., 0., 0., 0.],\n"
     "        [0., 0., 0.,  ..., 0., 0., 0.],\n"
     "        ...,\n"
     "        [0., 0., 0.,  ..., 0., 0., 0.],\n"
     "        [0., 0., 0.,  ..., 0., 0., 0.],\n"
     "        [0., 0., 0.,  ..., 0., 0., 0.]])"),
    (lambda: ts.arange(30.0),
     "tensor([ 0.,  1.,  2.,  3.,  4.,  5.,  6.,  7.,  8.,  9., 10., 11., 12., 13.,\n"
     "        14., 15., 16., 17., 18., 19., 20., 21., 22., 23., 24., 25., 26., 27.,\n"
     "        28., 29.])"),
    (lambda: ts.arange(12).reshape(3, 4).T,
     "tensor([[ 0,  4,  8],\n        [ 1,  5,  9],\n        [ 2,  6, 10],\n        [ 3,  7, 11]])"),
    (lambda: ts.tensor([[1.5, -2.0], [1e-3, 4.0]]),
     "tensor([[ 1.5000e+00, -2.0000e+00],\n        [ 1.0000e-03,  4.0000e+00]])"),
    (lambda: ts.tensor([123456789.0, 1.0]), "tensor([1.2346e+08, 1.0000e+00])"),
    (lambda: ts.tensor([1.0, 1000.0]), "tensor([   1., 1000.])"),
    (lambda: ts.tensor([1.0, 1001.0]), "tensor([1.0000e+00, 1.0010e+03])"),
]


@pytest.mark.parametrize("make,expected", REPRS, ids=[e for _, e in REPRS])
def test_repr_matches_pytorch(make, expected):
    t = make()
    assert repr(t) == expected
    assert str(t) == expected


def test_repr_default_dtype_suffix_follows_default():
    ts.set_default_dtype(ts.float64)
    assert repr(ts.tensor([1.0, 2.0])) == "tensor([1., 2.])"
    assert repr(ts.tensor([1.0], dtype=ts.float32)) == "tensor([1.], dtype=tessera.float32)"


def test_repr_long_suffix_wraps_to_a_new_line():
    t = ts.arange(18, dtype=ts.int32) + 10
    s = repr(t)
    assert s.endswith("dtype=tessera.int32)")
    assert all(len(line) <= 80 for line in s.split("\n"))


def test_printoptions():
    ts.set_printoptions(precision=2)
    assert repr(ts.tensor([1.2345])) == "tensor([1.23])"
    ts.set_printoptions(profile="default")
    ts.set_printoptions(threshold=5)
    assert repr(ts.arange(10)) == "tensor([0, 1, 2,  ..., 7, 8, 9])"
    ts.set_printoptions(profile="default")
    ts.set_printoptions(sci_mode=True)
    assert repr(ts.tensor([1.0])) == "tensor([1.0000e+00])"


# ---------------------------------------------------------------------------- NumPy and DLPack
def test_numpy_shares_memory():
    x = ts.arange(6, dtype=ts.float32).reshape(2, 3)
    a = x.numpy()
    assert a.dtype == np.float32 and a.shape == (2, 3)
    a[0, 0] = 42
    assert x[0, 0].item() == 42
    assert np.asarray(x).tolist() == x.tolist()
    assert np.asarray(x, dtype=np.float64).dtype == np.float64
    t = x.T.numpy()
    assert t.strides == (4, 12)


def test_from_numpy_shares_memory_and_keeps_alive():
    a = np.arange(6, dtype=np.int32).reshape(2, 3)
    t = ts.from_numpy(a)
    assert t.dtype == ts.int32 and t.shape == (2, 3)
    a[1, 2] = -1
    assert t[1, 2].item() == -1
    t2 = ts.from_numpy(np.ones(4))
    import gc

    gc.collect()
    assert t2.tolist() == [1.0] * 4
    assert ts.from_numpy(a[:, ::2]).tolist() == [[0, 2], [3, -1]]
    with pytest.raises(TypeError, match="complex|unsupported"):
        ts.from_numpy(np.zeros(2, dtype=np.clongdouble))
    with pytest.raises(ValueError, match="negative|stride"):
        ts.from_numpy(np.arange(4)[::-1])


def test_dlpack_roundtrip():
    a = np.arange(12, dtype=np.float64).reshape(3, 4)
    t = ts.from_dlpack(a)
    assert t.tolist() == a.tolist()
    a[0, 0] = -5
    assert t[0, 0].item() == -5
    x = ts.arange(6, dtype=ts.int16).reshape(2, 3).T
    b = np.from_dlpack(x)
    assert b.tolist() == x.tolist() and b.dtype == np.int16
    assert x.__dlpack_device__() == (1, 0)
    y = ts.from_dlpack(x)
    assert y.data_ptr() == x.data_ptr() and y.tolist() == x.tolist()


@pytest.mark.torch
def test_dlpack_with_torch():
    import torch

    tt = torch.arange(6.0).reshape(2, 3)
    t = ts.from_dlpack(tt)
    assert t.tolist() == tt.tolist()
    back = torch.from_dlpack(t)
    assert back.tolist() == tt.tolist()


@pytest.mark.torch
def test_repr_against_torch():
    import torch

    for data in ([[1.0, 2.0], [3.0, 4.0]], [1e-5, 3.0], [1, 2, 3], [True, False], list(range(2000))):
        assert repr(ts.tensor(data)) == repr(torch.tensor(data))


# ---------------------------------------------------------------------------- plugins
def test_plugins_list_and_describe():
    ts.zeros(1)  # the CPU plugin loads on first use
    plugins = ts.plugins.list()
    cpu = [p for p in plugins if p.name == "cpu"]
    assert cpu, plugins
    p = cpu[0]
    assert p.abi == ts._C.ABI_VERSION and "cpu" in p.devices and p.kernels > 50 and p["name"] == "cpu"
    assert os.path.exists(p.path)
    assert isinstance(p.version, str) and "PluginInfo(name='cpu'" in repr(p)
    text = ts.plugins.describe("add")
    assert "add.Tensor" in text and "cpu" in text.lower()
    assert "add.Tensor" in ts.plugins.describe("add.Tensor")
    assert ts.plugins.load(p.path) == p  # loading again is a no-op


def test_plugins_operators_lists_every_overload_schema():
    schemas = ts.plugins.operators()
    assert schemas == sorted(schemas) and len(set(schemas)) == len(schemas)
    assert "add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor" in schemas
    # Every overload of every registered base name, and nothing else.
    expected = {s for name in ts._C.op_names() for s in ts._C.op_schemas(name)}
    assert set(schemas) == expected and len(schemas) > 200
    names = {s.split("(", 1)[0] for s in schemas}
    assert {"add.out", "add_.Tensor", "matmul"} <= names


def _fixture_plugin(name):
    """A test fixture plugin from the C++ test build (tests/fixtures), or None when not built."""
    path = os.path.join(FIXTURE_DIR, f"libtessera_{name}.so")
    return path if os.path.exists(path) else None


def test_plugin_refusal_is_a_plugin_error():
    with pytest.raises(ts.PluginError) as e:
        ts.plugins.load("/nonexistent/libtessera_nothing.so")
    assert isinstance(e.value, RuntimeError)
    bad = _fixture_plugin("abi_major_mismatch")
    if bad:
        with pytest.raises(ts.PluginError, match="ABI|abi"):
            ts.plugins.load(bad)


@pytest.fixture
def good_plugin():
    path = _fixture_plugin("good")
    if path is None:
        pytest.skip("the test fixture plugin `good` is not built")
    return ts.plugins.load(path)


def test_plugin_defined_operators_appear_in_ops(good_plugin):
    info = good_plugin
    assert info.name == "good" and info.version == "1.2.3" and "testdev" in info.devices
    assert any("double_it" in op for op in info.operators_defined)
    assert info in ts.plugins.list()
    x = ts.tensor([1.0, 2.5])
    assert ts.ops.test.double_it(x).tolist() == [2.0, 5.0]
    assert "double_it" in dir(ts.ops.test) and "test" in dir(ts.ops)
    assert ts.ops.test.double_it.schemas == ["test::double_it(Tensor self) -> Tensor"]
    with pytest.raises(ValueError, match="always_fails"):
        ts.ops.test.always_fails(x)
    with pytest.raises(TypeError, match="double_it"):
        ts.ops.test.double_it(x, 3)
    assert "test::double_it" in ts.plugins.describe("test::double_it")


def test_plugin_device_tensors(good_plugin):
    t = ts.empty(3, device="testdev")
    assert t.device.type == "testdev" and t.shape == (3,)
    e = ts.empty(0, device="testdev")
    assert repr(e) == f"tensor([], device='{e.device}')"
    assert ts.ops.test.double_it(t).device == t.device
    ts._C.set_cpu_fallback(False)  # the plugin registers no zeros or add kernel for its device
    try:
        with pytest.raises(NotImplementedError, match="zeros"):
            ts.zeros(2, device="testdev")
        with pytest.raises(NotImplementedError, match="add"):
            t + 1
    finally:
        ts._C.set_cpu_fallback(True)
    assert ts.zeros(2, device="testdev").tolist() == [0.0, 0.0]  # through the CPU fallback
    x = ts.tensor([[1.5, -2.0], [3.0, 4.0]])
    d = x.to("testdev")
    assert d.device.type == "testdev" and d.shape == (2, 2)
    assert repr(d) == "tensor([[ 1.5000, -2.0000],\n        [ 3.0000,  4.0000]], device='testdev:0')"
    back = d.cpu()
    assert back.device == ts.device("cpu") and back.tolist() == x.tolist()
    assert ts.ops.test.double_it(d).to("cpu").tolist() == [[3.0, -4.0], [6.0, 8.0]]
    assert ts.tensor([1, 2], device="testdev").to("cpu", ts.float64).tolist() == [1.0, 2.0]


# ---------------------------------------------------------------------------- import
def test_import_is_lazy_and_numpy_free():
    code = ("import sys, tessera; from tessera import _C; "
            "print('numpy' in sys.modules, [p['name'] for p in _C.plugins_list()])")
    env = dict(os.environ)
    if BUILD_PYTHON:
        env["PYTHONPATH"] = BUILD_PYTHON + os.pathsep + env.get("PYTHONPATH", "")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True).stdout
    assert out.strip() == "False []"


STRICT_MODE = """
import tessera as ts
ts.plugins.set_lazy_loading(False)
assert not ts.plugins.is_lazy_loading_enabled()
def refused(fn, plugin):
    try:
        fn()
    except ts.plugins.PluginError as e:
        assert f"needs plugin '{plugin}'" in str(e) and f'ts.plugins.load_named("{plugin}")' in str(e), str(e)
        return
    raise AssertionError(f"{plugin} was loaded although lazy loading is off")
refused(lambda: ts.ones(2), "cpu")
assert ts.plugins.load_named("cpu").name == "cpu"
x = ts.ones(2)
refused(lambda: x.requires_grad_(), "autograd")
refused(lambda: ts.tril(ts.ones(2, 2)), "composites")
import tessera.profiler
refused(lambda: tessera.profiler.profile().start(), "profiler")
for name in ("autograd", "composites", "profiler"):
    ts.plugins.load_named(name)
(x.requires_grad_() * 2).sum().backward()
assert x.grad.tolist() == [2.0, 2.0] and ts.tril(ts.ones(2, 2)).tolist() == [[1.0, 0.0], [1.0, 1.0]]
with tessera.profiler.profile() as prof:
    ts.ones(2) + 1
assert any(e.key == "aten::add" for e in prof.key_averages())
ts.plugins.set_lazy_loading(True)
print(sorted(p.name for p in ts.plugins.list()))
"""


def test_strict_mode_loads_only_the_named_plugins():
    """ts.plugins.set_lazy_loading(False): every plugin comes in by name; each need of another is a
    PluginError naming it (in a fresh process: the others here have their plugins loaded)."""
    env = dict(os.environ)
    if BUILD_PYTHON:
        env["PYTHONPATH"] = BUILD_PYTHON + os.pathsep + env.get("PYTHONPATH", "")
    run = subprocess.run([sys.executable, "-c", STRICT_MODE], capture_output=True, text=True, env=env, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "['autograd', 'composites', 'cpu', 'profiler']"
    with pytest.raises(ts.plugins.PluginError, match="libtessera_nosuch.so"):
        ts.plugins.load_named("nosuch")


def test_no_torch_needed():
    if not HAVE_TORCH:
        assert "torch" not in sys.modules
