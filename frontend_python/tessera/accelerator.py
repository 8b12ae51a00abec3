"""tessera.accelerator: torch.accelerator's device-agnostic questions (is there an accelerator,
which, how many), its streams, capability and memory statistics, answered from the CUDA plugin
without printing anything when there is none."""
from tessera import _C, cuda


def is_available():
    return cuda.is_available()


def current_accelerator(check_available=False):
    """The accelerator's device type (`device("cuda")`), or None when there is none."""
    if cuda.is_available():
        return _C.device("cuda")
    return None


def device_count():
    return cuda.device_count() if cuda.is_available() else 0


def current_device_index():
    if not cuda.is_available():
        raise RuntimeError("accelerator.current_device_index: no accelerator is available")
    return cuda.current_device()


def set_device_index(device):
    if not cuda.is_available():
        raise RuntimeError("accelerator.set_device_index: no accelerator is available")
    cuda.set_device(device)


def synchronize(device=None):
    if cuda.is_available():
        cuda.synchronize(device)


current_device_idx = current_device_index
set_device_idx = set_device_index


# ---- streams and device capability: torch raises when there is no accelerator, as here
def _require(fname):
    if not cuda.is_available():
        raise RuntimeError(f"accelerator.{fname}: no accelerator is available")


def _index(device, fname):
    _require(fname)
    return cuda._index(device)


def current_stream(device=None, /):
    """The current stream of the accelerator's device (the current one by default)."""
    return cuda.current_stream(_index(device, "current_stream"))


def set_stream(stream, /):
    """Makes `stream` its device's current stream (and that device the current one, as torch)."""
    from tessera._streams import Stream, set_stream as _set_stream
    if not isinstance(stream, Stream):
        raise TypeError(f"accelerator.set_stream: expected a torch.Stream, got {type(stream).__name__}")
    _require("set_stream")
    if stream.device.index is not None:
        cuda.set_device(stream.device.index)
    _set_stream(stream)


def get_device_capability(device=None, /):
    """{"supported_dtypes": the dtypes tensors on the device may have}."""
    _index(device, "get_device_capability")
    return {"supported_dtypes": set(_C.dtypes.values())}


class device_index:
    """Makes `device` the current device index inside the block; None changes nothing."""

    def __init__(self, device, /):
        self.idx = device
        self.prev_idx = -1

    def __enter__(self):
        if self.idx is not None:
            self.prev_idx = current_device_index()
            set_device_index(self.idx)

    def __exit__(self, *exc_info):
        if self.idx is not None and self.prev_idx >= 0:
            set_device_index(self.prev_idx)


# ---- memory: torch's flat statistics names; with no allocator in use, empty and zero as torch's
_TORCH_STATS = {"allocated": "allocated_bytes.all.current", "peak_allocated": "allocated_bytes.all.peak",
                "reserved": "reserved_bytes.all.current", "peak_reserved": "reserved_bytes.all.peak",
                "num_allocations": "allocation.all.allocated", "num_device_allocations": "num_device_alloc",
                "num_ooms": "num_ooms", "num_cache_hits": "num_cache_hits"}


def memory_stats(device_index=None, /):
    import collections
    if not cuda.is_available():
        return collections.OrderedDict()
    stats = cuda.memory_stats(device_index)
    return collections.OrderedDict(sorted((_TORCH_STATS[k], v) for k, v in stats.items() if k in _TORCH_STATS))


def memory_allocated(device_index=None, /):
    return memory_stats(device_index).get("allocated_bytes.all.current", 0)


def max_memory_allocated(device_index=None, /):
    return memory_stats(device_index).get("allocated_bytes.all.peak", 0)


def memory_reserved(device_index=None, /):
    return memory_stats(device_index).get("reserved_bytes.all.current", 0)


def max_memory_reserved(device_index=None, /):
    return memory_stats(device_index).get("reserved_bytes.all.peak", 0)


def reset_peak_memory_stats(device_index=None, /):
    if cuda.is_available():
        cuda.reset_peak_memory_stats(device_index)


def reset_accumulated_memory_stats(device_index=None, /):
    # The plugin's counters are all either current values or peaks: nothing accumulates to reset.
    return None


def empty_cache():
    if cuda.is_available():
        cuda.empty_cache()


def get_memory_info(device_index=None, /):
    """(free, total) bytes of the device; free as the caching allocator sees it (total less what
    it has reserved), since the plugin does not ask the driver."""
    total = cuda.get_device_properties(_index(device_index, "get_memory_info")).total_memory
    return total - memory_reserved(device_index), total
