"""pytest set-up and shared helpers for the tessera Python package tests.

Finds the package: the build tree named by TESSERA_TEST_BUILD_DIR (its python/ folder, or the
folder itself), else build/release/python when it holds a built tessera, else the installed
package. Provides NumPy helpers used as the oracle (tests import them: `from conftest import
to_np`), and skips tests marked `torch` when PyTorch is not importable.
"""
import importlib.util
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _candidate_paths():
    env = os.environ.get("TESSERA_TEST_BUILD_DIR")
    if env:
        yield os.path.join(env, "python")
        yield env
    yield os.path.join(ROOT, "build", "release", "python")


def _setup_path():
    if os.environ.get("TESSERA_TEST_INSTALLED"):  # CI: test the pip-installed package
        return None
    for p in _candidate_paths():
        if os.path.isdir(os.path.join(p, "tessera")):
            if p not in sys.path:
                sys.path.insert(0, p)
            return p
    return None  # the installed package


BUILD_PYTHON = _setup_path()
# The C++ build's fixture plugins (tests/fixtures): named by TESSERA_TEST_FIXTURE_DIR, else next
# to the build tree's python/ folder, else build/release's.
FIXTURE_DIR = os.environ.get("TESSERA_TEST_FIXTURE_DIR") or os.path.join(
    os.path.dirname(BUILD_PYTHON) if BUILD_PYTHON else os.path.join(ROOT, "build", "release"), "tests", "fixtures")
HAVE_TORCH = importlib.util.find_spec("torch") is not None


def pytest_configure(config):
    config.addinivalue_line("markers", "torch: needs PyTorch (skipped when it is not installed)")
    config.addinivalue_line("markers", "slow: takes seconds; `-m 'not slow'` leaves it out of a quick run "
                                       "(CI runs every test)")


def pytest_collection_modifyitems(config, items):
    if HAVE_TORCH:
        return
    skip = pytest.mark.skip(reason="PyTorch is not installed")
    for item in items:
        if "torch" in item.keywords:
            item.add_marker(skip)


def pytest_report_header(config):
    import tessera

    return f"tessera {tessera.__version__} from {os.path.dirname(tessera.__file__)}"


@pytest.fixture(autouse=True)
def _restore_global_state():
    """Tests that change the default dtype or print options do not leak it."""
    import tessera as ts

    default = ts.get_default_dtype()
    opts = ts.get_printoptions()
    yield
    ts.set_default_dtype(default)
    ts.set_printoptions(**{k: v for k, v in opts.items()})


# ---------------------------------------------------------------------------- helpers
# dtype tables and NumPy conversions that use only tolist()/tensor(), so the op tests do not
# depend on the interop layer.
import numpy as np  # noqa: E402

import tessera as ts  # noqa: E402

ALL_DTYPES = [ts.bool, ts.uint8, ts.int8, ts.int16, ts.int32, ts.int64, ts.float16, ts.bfloat16, ts.float32,
              ts.float64]
FLOAT_DTYPES = [ts.float16, ts.bfloat16, ts.float32, ts.float64]
INT_DTYPES = [ts.uint8, ts.int8, ts.int16, ts.int32, ts.int64]
NUMERIC_DTYPES = INT_DTYPES + FLOAT_DTYPES

NP = {"bool": np.bool_, "uint8": np.uint8, "int8": np.int8, "int16": np.int16, "int32": np.int32,
      "int64": np.int64, "float16": np.float16, "bfloat16": np.float32, "float32": np.float32,
      "float64": np.float64, "complex64": np.complex64, "complex128": np.complex128}


def np_dtype(dtype):
    """The NumPy dtype holding a tessera dtype's values (bfloat16 values are float32 values)."""
    return np.dtype(NP[dtype.name])


def to_np(t):
    """The tensor's values as a NumPy array (its shape kept for empty tensors too)."""
    return np.array(t.tolist(), dtype=np_dtype(t.dtype)).reshape(t.shape)


def from_np(a, dtype=None):
    """A tessera tensor holding the array's values (converted to dtype when given)."""
    a = np.asarray(a)
    if dtype is None:
        dtype = {np.dtype(v): k for k, v in NP.items() if k != "bfloat16"}[a.dtype]
        dtype = getattr(ts, dtype)
    t = ts.tensor(a.tolist(), dtype=dtype)
    return t.reshape(a.shape)


def round_bf16(a):
    """Rounds float32 values to bfloat16 (round to nearest even), kept as float32."""
    a = np.asarray(a, dtype=np.float32)
    bits = a.view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16
    out = rounded.astype(np.uint32).view(np.float32)
    return np.where(np.isnan(a), a, out)


def tol(dtype):
    return {"float16": (1e-3, 1e-3), "bfloat16": (1e-2, 1e-2), "float32": (1e-5, 1e-6),
            "float64": (1e-12, 1e-12), "complex64": (1e-5, 1e-6), "complex128": (1e-12, 1e-12)}.get(dtype.name, (0, 0))


def assert_close(t, expected, dtype=None, rtol=None, atol=None, check_dtype=True):
    """Compares a tensor with a NumPy array: shape, dtype (when given) and values."""
    assert isinstance(t, ts.Tensor), type(t)
    expected = np.asarray(expected)
    assert tuple(t.shape) == expected.shape, (tuple(t.shape), expected.shape)
    if dtype is not None and check_dtype:
        assert t.dtype == dtype, (t.dtype, dtype)
    got = to_np(t)
    if t.dtype.is_complex:
        r, a = tol(t.dtype)
        np.testing.assert_allclose(got.astype(np.complex128), expected.astype(np.complex128),
                                   rtol=r if rtol is None else rtol, atol=a if atol is None else atol,
                                   equal_nan=True)
    elif t.dtype.is_floating_point:
        r, a = tol(t.dtype)
        np.testing.assert_allclose(got.astype(np.float64), expected.astype(np.float64),
                                   rtol=r if rtol is None else rtol, atol=a if atol is None else atol,
                                   equal_nan=True)
    else:
        np.testing.assert_array_equal(got, expected.astype(got.dtype))


def sample(shape, dtype, rng, low=-10, high=10, nonzero=False):
    """Random NumPy values that fit `dtype` (non-negative for uint8, exact in half precision)."""
    if dtype == ts.bool:
        return rng.random(shape) < 0.5
    if dtype == ts.uint8:
        low = max(low, 0)
    if dtype.is_floating_point:
        a = rng.uniform(low, high, size=shape)
        if dtype in (ts.float16, ts.bfloat16):
            a = np.round(a * 8) / 8  # exactly representable in both
        a = a.astype(np.float64)
    else:
        a = rng.integers(low, high + 1, size=shape)
    if nonzero:
        a = np.where(a == 0, 1, a)
    return a.astype(np_dtype(dtype))


def torch_promote(a, b):
    """PyTorch's promote_types (its table differs from NumPy's for int + float16 and bfloat16)."""
    if a == b:
        return a
    if a == ts.bool:
        return b
    if b == ts.bool:
        return a
    fa, fb = a.is_floating_point, b.is_floating_point
    if fa and not fb:
        return a
    if fb and not fa:
        return b
    if fa and fb:
        if {a.name, b.name} == {"float16", "bfloat16"}:
            return ts.float32
        return a if a.itemsize > b.itemsize else b
    return getattr(ts, np.promote_types(np_dtype(a), np_dtype(b)).name)


# ---- comparing modules with torch's (the nn test files)
def T(a, requires_grad=False, dtype=np.float32):
    """A tessera tensor of `a` (anything NumPy reads) in `dtype`."""
    return ts.tensor(np.asarray(a, dtype=dtype), requires_grad=requires_grad)


def from_torch(t, requires_grad=False):
    return ts.tensor(t.detach().numpy(), requires_grad=requires_grad)


def close(got, expected, tol=1e-5):
    """got (a tessera tensor) against a torch tensor or anything NumPy reads, rtol = atol = tol."""
    expected = expected.detach().numpy() if hasattr(expected, "detach") else np.asarray(expected)
    np.testing.assert_allclose(to_np(got), expected, rtol=tol, atol=tol)


def load_torch_state(module, torch_module):
    """Copies torch_module's parameters and buffers into module; their state_dict keys must agree."""
    sd = torch_module.state_dict()
    assert list(module.state_dict()) == list(sd)
    module.load_state_dict({k: from_torch(v) for k, v in sd.items()})
