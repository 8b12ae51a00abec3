"""Every operator of the every-operator sweep (op_samples.py) run as a one-operator compiled
graph: captured on one call, replayed by the inductor backend on fresh copies of the same
sample, and compared with eager on those copies (results and arguments written in place).
Composites decompose during capture, so this also checks each decomposition."""
import pytest
from conftest import assert_close, to_np
from op_samples import all_overloads, entry_for, materialize

import tessera as ts

SKIP = {
    "empty.memory_format", "mean",  # reached only by full name (see test_every_operator_on_device.EXCLUDED)
}
TOL = {"float16": (1e-3, 1e-3), "bfloat16": (1.6e-2, 1e-2), "float32": (1e-5, 1e-5), "float64": (1e-10, 1e-10)}


@pytest.fixture(scope="module", autouse=True)
def _shared_cache(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv("TESSERA_CACHE_DIR", str(tmp_path_factory.mktemp("compile_cache")))
    # One-operator graphs fuse nothing; run them compiled all the same.
    mp.setattr(ts.compiler.config, "eager_when_nothing_fuses", False)
    yield
    mp.undo()


def _tensors(v):
    if isinstance(v, ts.Tensor):
        return [v]
    if isinstance(v, (list, tuple)):
        return [t for x in v for t in _tensors(x)]
    return []


def _fresh(entry, i):
    sample = entry.make()[i]
    return sample, tuple(materialize(a) for a in sample.args), {k: materialize(v) for k, v in sample.kwargs.items()}


def _run(fn, args, kwargs):
    try:
        return fn(*args, **kwargs), None
    except Exception as e:  # noqa: BLE001 - the error is the result being compared
        return None, e


@pytest.mark.parametrize("overload", [n for n in all_overloads() if n not in SKIP])
def test_operator_compiled_matches_eager(overload):
    entry = entry_for(overload)
    if entry is None:
        pytest.skip("no samples (test_every_operator_on_device fails for this)")
    packet = getattr(ts.ops.aten, overload.split(".")[0])
    count = min(len(entry.make()), 2)
    for i in range(count):
        sample, args, kwargs = _fresh(entry, i)
        if "Device? device" in str(packet.schemas) and "device" not in kwargs:
            pass
        want, want_error = _run(packet, args, kwargs)
        compiled = ts.compile(lambda *a, **k: packet(*a, **k))
        _, capture_args, capture_kwargs = _fresh(entry, i)
        _, capture_error = _run(compiled, capture_args, capture_kwargs)
        _, replay_args, replay_kwargs = _fresh(entry, i)
        got, got_error = _run(compiled, replay_args, replay_kwargs)
        where = f"{overload}, sample {i} {sample!r}"
        if want_error is not None:
            assert type(got_error) is type(want_error) and type(capture_error) is type(want_error), \
                f"{where}: eager raised {want_error!r}; compiled raised {got_error!r}"
            continue
        assert got_error is None, f"{where}: compiled raised {got_error!r}"
        if entry.random or entry.uninitialised:
            continue
        for k, (g, w) in enumerate(zip(_tensors(got), _tensors(want))):
            assert g.dtype == w.dtype and tuple(g.shape) == tuple(w.shape), f"{where}: result {k}"
            rtol, atol = entry.tol.get(w.dtype.name, TOL.get(w.dtype.name, (0, 0)))
            assert_close(g, to_np(w), w.dtype, rtol=rtol, atol=atol)
        assert len(_tensors(got)) == len(_tensors(want)), where
        for k, (g, w) in enumerate(zip(_tensors([replay_args, replay_kwargs]), _tensors([args, kwargs]))):
            rtol, atol = entry.tol.get(w.dtype.name, TOL.get(w.dtype.name, (0, 0)))
            assert_close(g, to_np(w), w.dtype, rtol=rtol, atol=atol)
