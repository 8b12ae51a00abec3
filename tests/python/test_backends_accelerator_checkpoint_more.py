"""torch.backends flag modules (cudnn, mkldnn, opt_einsum, quantized), torch.accelerator's memory
and stream functions with and without an accelerator, and utils.checkpoint's extra names."""
import collections

import numpy as np
import pytest

import tessera as ts
from tessera.utils import checkpoint as C


def test_cudnn_flags_are_settable_and_restored():
    cudnn = ts.backends.cudnn
    assert cudnn.enabled is True and cudnn.deterministic is False
    before = cudnn.benchmark
    cudnn.benchmark = True
    try:
        assert ts.backends.cudnn.benchmark is True
        with cudnn.flags(enabled=False, deterministic=True):
            assert cudnn.enabled is False and cudnn.deterministic is True and cudnn.benchmark is False
        assert cudnn.enabled is True and cudnn.deterministic is False and cudnn.benchmark is True
    finally:
        cudnn.benchmark = before
    assert isinstance(cudnn.is_available(), bool)
    assert (cudnn.version() is None) == (not cudnn.is_available())
    cudnn.allow_tf32 = False
    cudnn.allow_tf32 = True


def test_mkldnn_opt_einsum_quantized():
    assert ts.backends.mkldnn.is_available() is False and ts.backends.mkldnn.enabled is True
    ts.backends.mkldnn.enabled = False
    ts.backends.mkldnn.enabled = True
    oe = ts.backends.opt_einsum
    if oe.is_available():
        assert oe.enabled is True and oe.strategy == "auto"
        with pytest.raises(ValueError, match="must be one of the following"):
            oe.strategy = "bad"
    else:
        assert oe.enabled is False and oe.strategy is None
        with pytest.raises(ValueError, match="opt_einsum is not available"):
            oe.enabled = True
    q = ts.backends.quantized
    q.engine = "qnnpack"
    assert q.engine == "qnnpack"
    q.engine = "x86"
    with pytest.raises(RuntimeError, match="bad is not a valid value for quantized engine"):
        q.engine = "bad"
    assert ts.backends.mps.is_available() is False


@pytest.mark.skipif(ts.accelerator.is_available(), reason="checks the answers with no accelerator")
def test_accelerator_without_device_answers_as_torch():
    a = ts.accelerator
    assert a.memory_allocated() == a.max_memory_allocated() == a.memory_reserved() == a.max_memory_reserved() == 0
    assert a.memory_stats() == collections.OrderedDict()
    assert a.reset_peak_memory_stats() is None and a.reset_accumulated_memory_stats() is None
    assert a.empty_cache() is None
    for fn in (a.get_memory_info, a.current_stream, a.get_device_capability):
        with pytest.raises(RuntimeError, match=f"accelerator.{fn.__name__}"):
            fn()
    with a.device_index(None):
        pass
    with pytest.raises(RuntimeError):
        with a.device_index(0):
            pass
    with pytest.raises(TypeError, match="expected a torch.Stream"):
        a.set_stream(None)


@pytest.mark.skipif(not ts.accelerator.is_available(), reason="needs an accelerator")
def test_accelerator_with_device():
    a = ts.accelerator
    x = ts.ones(1024, device="cuda")
    assert a.memory_allocated() >= 4096 and a.max_memory_allocated() >= a.memory_allocated()
    assert "allocated_bytes.all.current" in a.memory_stats()
    free, total = a.get_memory_info()
    assert 0 < free <= total
    assert ts.float32 in a.get_device_capability()["supported_dtypes"]
    s = a.current_stream()
    a.set_stream(s)
    with a.device_index(0):
        assert a.current_device_index() == 0
    del x
    a.empty_cache()


def test_checkpoint_names():
    assert issubclass(C.CheckpointError, RuntimeError)
    assert [p.value for p in C.CheckpointPolicy][:4] == [0, 1, 2, 3]
    first, second = C.noop_context_fn()
    with first, second:
        pass
    x = ts.randn(4, requires_grad=True)
    out = C.checkpoint(lambda t: (t.sin() * 2).sum(), x, use_reentrant=False, context_fn=C.noop_context_fn)
    out.backward()
    expected = (x.detach().cos() * 2).tolist()
    assert all(abs(g - e) < 1e-6 for g, e in zip(x.grad.tolist(), expected))
    x.grad = None
    C.CheckpointFunction.apply(lambda t: t * t, True, x).sum().backward()
    assert all(abs(g - 2 * v) < 1e-6 for g, v in zip(x.grad.tolist(), x.tolist()))
    with pytest.raises(ValueError, match="only supported when use_reentrant=False"):
        C.checkpoint(lambda t: t, x, use_reentrant=True, context_fn=lambda: C.noop_context_fn())
    with pytest.raises(NotImplementedError, match="selective activation checkpointing"):
        C.create_selective_checkpoint_contexts(lambda ctx, op, *a, **k: C.CheckpointPolicy.MUST_SAVE)
    with pytest.raises(TypeError, match="policy_fn_or_list must be either a function or a list of ops"):
        C.create_selective_checkpoint_contexts(3)
    detached = C.detach_variable((x, 3))
    assert detached[1] == 3 and detached[0].requires_grad and detached[0] is not x
    with pytest.raises(RuntimeError, match="Only tuple of tensors is supported"):
        C.detach_variable([x])
    assert C.get_device_states(x) == ([], [])
    C.set_device_states([], [])
    with C.set_checkpoint_early_stop(False), C.set_checkpoint_debug_enabled(True):
        pass


@pytest.mark.torch
def test_flag_defaults_match_torch():
    import torch
    for name in ("enabled", "deterministic", "benchmark_limit"):
        assert getattr(ts.backends.cudnn, name) == getattr(torch.backends.cudnn, name), name
    assert ts.backends.opt_einsum.is_available() == torch.backends.opt_einsum.is_available()
    assert ts.backends.opt_einsum.strategy == torch.backends.opt_einsum.strategy
    assert set(torch.backends.quantized.supported_engines) <= set(ts.backends.quantized.supported_engines)
    assert [p.name for p in ts.utils.checkpoint.CheckpointPolicy] == \
        [p.name for p in torch.utils.checkpoint.CheckpointPolicy]


def test_checkpoint_context_fn_wraps_the_forward_and_the_recomputation():
    import contextlib
    events = []

    @contextlib.contextmanager
    def tagged(name):
        events.append(f"enter {name}")
        yield
        events.append(f"exit {name}")

    def f(t):
        events.append("run")
        return (t.sin() * t).sum()
    x = ts.randn(5, requires_grad=True)
    out = C.checkpoint(f, x, use_reentrant=False, context_fn=lambda: (tagged("forward"), tagged("recompute")))
    assert events == ["enter forward", "run", "exit forward"]
    out.backward()
    assert events[3:] == ["enter recompute", "run", "exit recompute"]
    xd = x.detach()
    np.testing.assert_allclose(x.grad.numpy(), (xd.cos() * xd + xd.sin()).numpy(), rtol=1e-5, atol=1e-6)
