"""tessera.cuda: torch.cuda's everyday surface over the CUDA plugin's operators (ts.ops.cuda.*).

    >>> import tessera as ts
    >>> if ts.cuda.is_available():
    ...     x = ts.randn(1024, 1024, device="cuda")
    ...     ts.cuda.synchronize()
    ...     print(ts.cuda.memory_allocated())

Importing this module loads nothing: the plugin (libtessera_cuda.so) loads on the first call,
as naming the device "cuda" does. Without the plugin, or without a driver or a GPU,
is_available() is False and device_count() is 0, as in PyTorch; the calls that need a device
raise RuntimeError with the reason the plugin gave. The ROCm plugin's device is "hip"
(ts.ops.hip.*), not "cuda".
"""
import collections
import contextlib

from tessera import _C
from tessera._streams import Event, Stream  # noqa: F401  (torch.cuda.Stream / torch.cuda.Event)
from tessera._cuda_graphs import (CUDAGraph, graph, graph_pool_handle,  # noqa: F401  (torch.cuda's names)
                                  is_current_stream_capturing)

_STATS = ("allocated", "reserved", "peak_allocated", "peak_reserved", "num_allocations", "num_cache_hits",
          "num_device_allocations", "num_ooms", "num_deferred_frees", "pending_frees")


_namespace = None  # ts.ops.cuda once the plugin is found


def _ops():
    """The plugin's operator namespace (ts.ops.cuda), or None when the plugin is not there."""
    global _namespace
    if _namespace is None:
        from tessera import ops

        try:
            _C.device("cuda")  # naming the device loads its plugin, lazily, once
        except ValueError:
            pass  # the plugin loaded, with 0 devices (or it is absent: checked below)
        try:
            ops.cuda.device_count
        except AttributeError:
            return None  # looked for again next time: the plugin may be loaded by path later
        _namespace = ops.cuda
    return _namespace


def _require():
    ops = _ops()
    if ops is None:
        raise RuntimeError("tessera.cuda: the CUDA plugin (libtessera_cuda.so) is not installed or failed to load; "
                           "see tessera.plugins.list()")
    return ops


def _index(device):
    """A device index from None (the current device), an int, "cuda", "cuda:1" or a tessera.device."""
    if device is None:
        return current_device()
    if isinstance(device, int):
        return device
    d = _C.device(device) if isinstance(device, str) else device
    if d.type != "cuda":
        raise ValueError(f"tessera.cuda: expected a cuda device, got {d}")
    return current_device() if d.index is None else d.index


def is_available():
    ops = _ops()
    return bool(ops and ops.is_available())


def device_count():
    ops = _ops()
    return ops.device_count() if ops else 0


def current_device():
    return _require().current_device()


def set_device(device):
    _require().set_device(_index(device))


@contextlib.contextmanager
def device(d):
    """Makes `d` the current CUDA device inside the block (None or a negative index: no change)."""
    index = None if d is None else _index(d)
    if index is None or index < 0:
        yield
        return
    previous = current_device()
    set_device(index)
    try:
        yield
    finally:
        set_device(previous)


class DeviceProperties(collections.namedtuple("DeviceProperties",
                                              "name major minor total_memory multi_processor_count")):
    """What torch.cuda.get_device_properties reports most often used: the name, the compute
    capability (major, minor), the memory in bytes and the number of multiprocessors."""


def get_device_properties(device=None):
    return DeviceProperties(*_require().get_device_properties(_index(device)))


def get_device_name(device=None):
    return get_device_properties(device).name


def get_device_capability(device=None):
    p = get_device_properties(device)
    return p.major, p.minor


def synchronize(device=None):
    """Waits for all work queued on every stream of the device."""
    _require().synchronize(_index(device))


def current_stream(device=None):
    return _C.current_stream(_C.device("cuda", _index(device)))


def default_stream(device=None):
    return _C.default_stream(_C.device("cuda", _index(device)))


def stream(s):
    """Makes `s` the current stream of its device inside the block (None: no change)."""
    from tessera._streams import stream as _stream

    return _stream(s)


# ---- memory: the caching allocator's statistics, in bytes, per device
def memory_stats(device=None):
    """The caching allocator's counters as a dict: allocated, reserved (held from the driver),
    their peaks, allocations, cache hits, device allocations, out-of-memory retries, deferred
    (stream-ordered) frees and those still pending."""
    return dict(zip(_STATS, _require().memory_stats(_index(device))))


def memory_allocated(device=None):
    return memory_stats(device)["allocated"]


def max_memory_allocated(device=None):
    return memory_stats(device)["peak_allocated"]


def memory_reserved(device=None):
    return memory_stats(device)["reserved"]


def max_memory_reserved(device=None):
    return memory_stats(device)["peak_reserved"]


def reset_peak_memory_stats(device=None):
    _require().reset_peak_memory_stats(_index(device))


def empty_cache():
    """Returns the cached blocks no tensor uses to the driver."""
    _require().empty_cache()


def __getattr__(name):
    # torch.cuda.amp (deprecated in torch, still common): autocast("cuda", float16) and GradScaler("cuda").
    if name == "amp":
        import types

        from tessera import amp as _amp

        def autocast(enabled=True, dtype=None, cache_enabled=True):
            import tessera
            return _amp.autocast("cuda", dtype=dtype or tessera.float16, enabled=enabled, cache_enabled=cache_enabled)

        def GradScaler(init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5, growth_interval=2000,
                       enabled=True):
            return _amp.GradScaler("cuda", init_scale, growth_factor, backoff_factor, growth_interval, enabled)

        return types.SimpleNamespace(autocast=autocast, GradScaler=GradScaler, custom_fwd=_amp.custom_fwd,
                                     custom_bwd=_amp.custom_bwd)
    raise AttributeError(f"module 'tessera.cuda' has no attribute '{name}'")
