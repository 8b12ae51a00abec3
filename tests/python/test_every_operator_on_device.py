"""Every operator overload on a device against the CPU plugin as the oracle (the issue's "a
CPU-vs-CUDA comparison of every operator", for any device).

The device: TESSERA_SWEEP_DEVICE when set; else "cuda" when a CUDA device exists; else the
fallbackdev fixture (tests/fixtures/fallback_device.cpp), whose memory the host cannot read and
which registers only empty, copy_ and add.Tensor, so every other operator reaches it through the
host's CPU fallback: an end-to-end check of this harness and of the fallback.

Each sample of op_samples.py runs on CPU tensors and on copies of them on the device. Results
must agree in type, device, dtype, shape and values (dtype-aware tolerances; exact for integers
and bools); arguments written in place must agree too; in-place and out= variants return their
argument; where the CPU raises, the device raises the same exception type.
"""
import os

import pytest

import tessera as ts
from conftest import FIXTURE_DIR, assert_close, to_np
from op_samples import SAMPLES, View, all_overloads, entry_for, materialize, schema_of, variant_of

FIXTURE_DEVICE = "fallbackdev"

# Overloads with no samples, and why. Empty: every operator in ops.yaml can be run and compared.
EXCLUDED = {
    # Core ATen names whose every call also fits an older overload, which Python resolves first
    # (same results); they are reached by their full name from C++ or a graph.
    "empty.memory_format": "empty's signature: a call by name runs empty",
    "mean": "every call that fits mean(Tensor, *, dtype) fits mean.dim, which runs",
}

# Device result vs CPU result, per dtype name: (rtol, atol). Entries may loosen them.
TOL = {"float16": (1e-3, 1e-3), "bfloat16": (1.6e-2, 1e-2), "float32": (1e-5, 1e-5), "float64": (1e-10, 1e-10)}


def _mixed_dtypes(args, kwargs):  # `when` of REFUSED: the device's arguments
    return len({t.dtype for t in _tensors([args, kwargs])}) > 1


# What a device's own kernels refuse by design, per device type: overload -> (when, the error, its
# message). The device must raise that (not crash, not return garbage); the CPU is not compared.
REFUSED = {
    # tests/fixtures/fallback_device.cpp: its add.Tensor and copy_ take equal dtypes only; add_.Tensor
    # and add.out run its add.Tensor (the host derives the variants of a device's functional kernel).
    FIXTURE_DEVICE: {"add.Tensor": (_mixed_dtypes, TypeError, "fallbackdev adds only equal dtypes"),
                     "add_.Tensor": (_mixed_dtypes, TypeError, "fallbackdev adds only equal dtypes"),
                     "add.out": (_mixed_dtypes, TypeError, "fallbackdev adds only equal dtypes"),
                     "copy_": (_mixed_dtypes, TypeError, "fallbackdev copies only between equal dtypes")},
}

# Known bugs: overload -> (when(target, args, kwargs), reason). Such a sample is expected to fail
# (the test is then xfail, naming it); if it passes, the test fails so that the entry is removed.
KNOWN_BUGS = {}  # none open: the two this sweep found (batch norm's running statistics lost by the
#                 CPU fallback; the fixture's copy_ not checking broadcast) are fixed


# View operators that may return a copy by contract (as dispatcher/src/cpu_fallback.cpp): a device
# without a kernel for any other view operator raises rather than falling back.
# conj copies a complex input (Tessera has no conjugate bit); real, imag and view_as_* alias through
# the host's dtype-changing alias, which needs no view primitive of the device.
VIEWS_THAT_MAY_COPY = {"contiguous", "reshape", "flatten", "to", "conj"}
VIEWS_WITHOUT_DEVICE_PRIMITIVES = {"view_as_real", "view_as_complex", "resolve_conj", "resolve_neg", "real"}


# ---------------------------------------------------------------------------- the target device
def _cuda_device_count():
    """As test_cuda.py decides: naming "cuda" loads its plugin, which reports 0 devices without a GPU."""
    try:
        ts.device("cuda")
    except ValueError:
        pass
    try:
        return ts.ops.cuda.device_count()
    except AttributeError:  # the plugin was not built
        return 0


def _fixture_device():
    path = os.path.join(FIXTURE_DIR, "libtessera_fallback_device.so")
    if not os.path.exists(path):
        return None, f"no CUDA device, and the fixture plugin {path} is not built"
    ts.plugins.load(path)
    return FIXTURE_DEVICE, None


def _target_device():
    """(device name, None) or (None, why there is none)."""
    name = os.environ.get("TESSERA_SWEEP_DEVICE")
    if name == FIXTURE_DEVICE or (not name and _cuda_device_count() == 0):
        return _fixture_device()
    return name or "cuda", None


class Target:
    """The device under test and what its plugin registers."""

    def __init__(self, name):
        self.device = ts.device(name)
        self.type = self.device.type
        self.plugin = next(p.name for p in ts.plugins.list() if self.type in p.devices)
        self._kernels = {}
        # A device with view kernels gets non-contiguous samples with their strides; one without
        # (the fixture) can only hold contiguous copies of them.
        self.has_views = all(self.has_kernel(v) for v in ("transpose.int", "slice.Tensor", "expand"))

    def has_kernel(self, overload):
        """Whether the device's plugin registers a kernel for `overload` (ts.plugins.describe lists
        a section per overload of the base name, a line per dispatch key: key, kind, plugin)."""
        if overload not in self._kernels:
            section, found = None, False
            for line in ts.plugins.describe(overload).splitlines():
                if not line.startswith(" "):
                    section = line.strip()
                elif section == overload and line.split()[-2:] == ["kernel", self.plugin]:
                    found = True
            self._kernels[overload] = found
        return self._kernels[overload]


@pytest.fixture(scope="module")
def target():
    name, reason = _target_device()
    if name is None:
        pytest.skip(reason)
    return Target(name)


# ---------------------------------------------------------------------------- the samples table
def test_every_overload_has_samples():
    """Adding an operator to ops.yaml without samples in op_samples.py fails here."""
    missing = [n for n in all_overloads() if n not in EXCLUDED and entry_for(n) is None]
    assert not missing, f"overloads without samples in tests/python/op_samples.py: {missing}"


def test_the_table_names_only_existing_overloads():
    known = set(all_overloads())
    unknown = [n for n in list(SAMPLES) + list(EXCLUDED) if n not in known]
    assert not unknown, f"op_samples.py / EXCLUDED name overloads that are not registered: {unknown}"


def test_variants_are_derived_from_their_functional_overload():
    assert variant_of("add_.Tensor") == ("inplace", "add.Tensor")
    assert variant_of("add.out") == ("out", "add.Tensor")
    assert variant_of("sum.dim_IntList_out") == ("out", "sum.dim_IntList")
    assert variant_of("abs.out") == ("out", "abs")
    assert variant_of("abs_") == ("inplace", "abs")
    assert variant_of("copy_") == ("inplace", "copy")  # Core ATen's functional copy
    assert variant_of("add.Tensor") is None and variant_of("mm") is None


# ---------------------------------------------------------------------------- the comparison
def _convert(v, convert, memo):
    """`v` with each tensor or View replaced by convert(it); one object converts once, so an
    argument passed twice stays one tensor (which matters in place)."""
    if isinstance(v, (ts.Tensor, View)):
        if id(v) not in memo:
            memo[id(v)] = convert(v)
        return memo[id(v)]
    if isinstance(v, (list, tuple)):
        return type(v)(_convert(x, convert, memo) for x in v)
    return v


def _prepare(sample, convert):
    memo = {}
    args = tuple(_convert(a, convert, memo) for a in sample.args)
    kwargs = {k: _convert(v, convert, memo) for k, v in sample.kwargs.items()}
    return args, kwargs


def _on_device(target):
    def move(v):
        if isinstance(v, ts.Tensor):
            return v.to(target.device)
        if target.has_views:  # the same view of the base moved to the device
            return v.make(v.base.to(target.device))
        return v.materialize().to(target.device)
    return move


def _tensors(v):
    """The tensors of an argument or result, in order (None entries of Tensor?[] skipped)."""
    if isinstance(v, ts.Tensor):
        return [v]
    if isinstance(v, (list, tuple)):
        return [t for x in v for t in _tensors(x)]
    if isinstance(v, dict):
        return _tensors(list(v.values()))
    return []


def _call(packet, args, kwargs):
    try:
        return packet(*args, **kwargs), None
    except Exception as e:  # noqa: BLE001 - the error is the result being compared
        return None, e


def _assert_matches(got, want, target, entry, what, values=True):
    """A device tensor against its CPU counterpart (its values too unless `values` is False)."""
    assert got.device.type == target.type, f"{what} is on {got.device}, expected {target.device}"
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype}, CPU {want.dtype}"
    assert tuple(got.shape) == tuple(want.shape), f"{what}: shape {tuple(got.shape)}, CPU {tuple(want.shape)}"
    if not values:
        return
    rtol, atol = entry.tol.get(want.dtype.name, TOL.get(want.dtype.name, (0, 0)))
    try:
        assert_close(got.to("cpu"), to_np(want), want.dtype, rtol=rtol, atol=atol)
    except AssertionError as e:
        raise AssertionError(f"{what}: device values differ from the CPU's\n{e}") from None


def _written_argument(overload, args, kwargs):
    """The argument an in-place or out= overload writes and returns, else None."""
    returns = schema_of(overload).split(" -> ")[-1]
    if "!" not in returns:
        return None
    return kwargs["out"] if "out" in kwargs else args[0]


def _is_view(overload):
    """A view operator that must alias its input (not one that may copy)."""
    returns = schema_of(overload).split(" -> ")[-1]
    return returns.startswith("Tensor(a)") and overload.split(".")[0] not in VIEWS_THAT_MAY_COPY


# Composites that raised, on the target, NotImplementedError naming a view primitive it lacks.
_NEEDS_VIEWS = set()


def _is_composite(overload):
    """ops.yaml's composites: run on a device through its primitives (views included)."""
    return "kind: composite" in ts.plugins.describe(overload)


def _check_sample(overload, entry, sample, target):
    packet = getattr(ts.ops.aten, overload.split(".")[0])
    if "Device? device" in schema_of(overload):  # factories: one run per device
        sample = sample.with_args(device="cpu")
    # The device copies first: the CPU run may write into the sample's tensors.
    d_args, d_kwargs = _prepare(sample, _on_device(target))
    if "device" in d_kwargs:
        d_kwargs["device"] = target.device
    args, kwargs = _prepare(sample, materialize)
    resolved = ts._C._resolve_op(packet.__name__, args, kwargs)
    assert resolved == overload, f"the sample calls {resolved}, not {overload}"

    want, cpu_error = _call(packet, args, kwargs)
    if sample.error is not None:
        assert isinstance(cpu_error, sample.error), f"the CPU should raise {sample.error.__name__}, got {cpu_error!r}"
    elif cpu_error is not None:
        raise AssertionError(f"the CPU raised {cpu_error!r} on a sample expected to run")

    # (A composite view checks its arguments before it reaches a view primitive: its error samples
    # raise the CPU's error on the device too.)
    if _is_view(overload) and not target.has_kernel(overload) and not (sample.error and _is_composite(overload)) \
            and overload not in VIEWS_WITHOUT_DEVICE_PRIMITIVES:
        with pytest.raises(NotImplementedError, match="view operator"):
            packet(*d_args, **d_kwargs)
        return False
    when, error, message = REFUSED.get(target.type, {}).get(overload, (None, None, None))
    if when is not None and when(d_args, d_kwargs):
        with pytest.raises(error, match=message):
            packet(*d_args, **d_kwargs)
        return False
    got, device_error = _call(packet, d_args, d_kwargs)
    if cpu_error is not None:
        assert type(device_error) is type(cpu_error), \
            f"the CPU raised {cpu_error!r}; the device " + (f"raised {device_error!r}" if device_error else "returned")
        return False
    if isinstance(device_error, NotImplementedError) and "view operator" in str(device_error) and _is_composite(overload):
        _NEEDS_VIEWS.add(overload)  # a composite built on a view primitive the device lacks: the error names it
        return False
    assert device_error is None, f"the device raised {device_error!r}; the CPU ran"

    assert type(got) is type(want) and len(_tensors(got)) == len(_tensors(want)), (got, want)
    for i, (g, w) in enumerate(zip(_tensors(got), _tensors(want))):
        _assert_matches(g, w, target, entry, f"result {i}", values=not (entry.uninitialised or entry.random))
    if entry.random:  # values: the entry's properties, on both sides
        entry.check(args, want)
        entry.check(args, type(got)(t.to("cpu") for t in got) if isinstance(got, tuple) else got.to("cpu"))
    # Arguments written in place (declared or not) must end up the same.
    for i, (g, w) in enumerate(zip(_tensors([d_args, d_kwargs]), _tensors([args, kwargs]))):
        _assert_matches(g, w, target, entry, f"tensor argument {i} after the call", values=not entry.random)
    written = _written_argument(overload, args, kwargs)
    if written is not None:
        assert want is written, "the CPU returned a new tensor, not the argument it writes"
        assert got is _written_argument(overload, d_args, d_kwargs), \
            "the device returned a new tensor, not the argument it writes"
    if _is_view(overload):
        assert want._same_storage(args[0]) and got._same_storage(d_args[0]), "a view does not share its input's storage"
    return True


@pytest.mark.parametrize("overload", [n for n in all_overloads() if n not in EXCLUDED])
def test_operator_matches_cpu(overload, target):
    entry = entry_for(overload)
    if entry is None:
        pytest.fail(f"{overload} has no samples (see test_every_overload_has_samples)")
    bug, reason = KNOWN_BUGS.get(overload, (None, None))
    ran, known_failures = 0, []
    for i, sample in enumerate(entry.make()):
        where = f"{overload} on {target.device}, sample {i} {sample!r}"
        is_bug = bug is not None and bug(target, sample.args, sample.kwargs)
        try:
            ran += _check_sample(overload, entry, sample, target)
        except AssertionError as e:
            if not is_bug:
                raise AssertionError(f"{where}:\n{e}") from None
            known_failures.append(f"{where}: {str(e).splitlines()[0]}")
            continue
        assert not is_bug, f"{where} passes: the known bug is fixed, remove it from KNOWN_BUGS"
    if not (_is_view(overload) and not target.has_kernel(overload)) and overload not in _NEEDS_VIEWS:
        assert ran > 0, f"{overload}: no sample ran without an error"
    if known_failures:
        pytest.xfail(f"{reason}; " + "; ".join(known_failures))
