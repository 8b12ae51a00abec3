"""torch.autocast for tessera: a context manager and decorator over the autocast plugin's
per-thread, per-device-type state."""
import functools
import threading

from tessera import _C

_dtype_type = _C.dtype

__all__ = ["autocast", "is_autocast_available", "is_autocast_enabled", "get_autocast_dtype", "set_autocast_enabled",
           "set_autocast_dtype"]

_E = {}
# torch's defaults: bfloat16 on the CPU, float16 on GPUs.
_DEFAULT_DTYPES = {"cpu": "bfloat16", "cuda": "float16", "hip": "float16"}
_dtypes = {}  # device type -> the dtype autocast uses there (set_autocast_dtype)
_loaded = []
# This thread's autocast regions as (device type, dtype name) pairs, sorted: a mirror of the
# plugin's per-thread state that ts.compile's guards read without calling into the plugin.
class _ThreadState(threading.local):
    regions = ()  # a class default: reading it in a new thread raises nothing (a miss would cost ~1 us)


_thread_state = _ThreadState()


def autocast_state():
    """The device types autocast is on for in this thread, with their dtypes (() when none)."""
    return _thread_state.regions


def _record_state(device_type, enabled, dtype):
    regions = dict(autocast_state())
    if enabled:
        regions[device_type] = str(dtype).split(".")[-1]
    else:
        regions.pop(device_type, None)
    _thread_state.regions = tuple(sorted(regions.items()))


def _plugin():
    if not _loaded:
        if not _C.plugins_load_named("autocast", "autocast (mixed precision)"):
            raise RuntimeError("autocast is not available: libtessera_autocast.so is not on the plugin search path "
                               f"{_C.plugins_search_path()}")
        _loaded.append(True)


def _device_type(device_type):
    if not isinstance(device_type, str):
        raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
    return device_type.split(":")[0]


def is_autocast_available(device_type):
    """Whether autocast supports this device type (a loaded plugin registers it)."""
    from tessera import _dtypes  # noqa: F401  (dtype table loaded)
    try:
        _plugin()
        return _C.call_op("autocast::is_enabled", (_device_type(device_type),), _E) in (True, False)
    except (RuntimeError, ValueError):
        return False


def get_autocast_dtype(device_type):
    import tessera
    name = _dtypes.get(_device_type(device_type), _DEFAULT_DTYPES.get(_device_type(device_type), "float16"))
    return getattr(tessera, name)


def set_autocast_dtype(device_type, dtype):
    _dtypes[_device_type(device_type)] = str(dtype).split(".")[-1]


def is_autocast_enabled(device_type=None):
    """Is autocast on for device_type on this thread (torch's no-argument form asks about CUDA)."""
    if not _loaded:
        return False
    return bool(_C.call_op("autocast::is_enabled", (_device_type(device_type or "cuda"),), _E))


def set_autocast_enabled(device_type, enabled=None):
    if enabled is None:  # torch's old form: set_autocast_enabled(enabled) for CUDA
        device_type, enabled = "cuda", device_type
    _plugin()
    device_type = _device_type(device_type)
    _C.call_op("autocast::set_state", (device_type, bool(enabled), get_autocast_dtype(device_type)), _E)
    _record_state(device_type, bool(enabled), get_autocast_dtype(device_type))


class autocast:
    """torch.autocast(device_type, dtype=None, enabled=True, cache_enabled=None): inside, the
    operators on the device type's policy lists run in `dtype` (float16 or bfloat16) or float32.
    Nested regions restore the outer state on exit; usable as a decorator."""

    def __init__(self, device_type, dtype=None, enabled=True, cache_enabled=None):
        import tessera
        self.device = _device_type(device_type)
        if dtype is None:
            dtype = get_autocast_dtype(self.device)
        if not isinstance(dtype, _dtype_type):
            raise ValueError(f"Expected `dtype` to be a tessera dtype, got {dtype!r}")
        if dtype not in (tessera.float16, tessera.bfloat16, tessera.float32):
            raise RuntimeError(f"In autocast, but the target dtype {dtype} is not supported. Autocast runs in "
                               "float16 or bfloat16 (float32 disables the casts).")
        self.fast_dtype = dtype
        self._enabled = bool(enabled)
        self._cache_enabled = cache_enabled  # casts are not cached: accepted for torch's signature
        self._previous = []

    def __enter__(self):
        _plugin()
        was_on = bool(_C.call_op("autocast::is_enabled", (self.device,), _E))
        self._previous.append((was_on, get_autocast_dtype(self.device) if was_on else None,
                               _dtypes.get(self.device)))
        if self._enabled:
            set_autocast_dtype(self.device, self.fast_dtype)
        _C.call_op("autocast::set_state", (self.device, self._enabled, self.fast_dtype), _E)
        _record_state(self.device, self._enabled, self.fast_dtype)
        return self

    def __exit__(self, *exc):
        was_on, dtype, stored = self._previous.pop()
        if stored is None:
            _dtypes.pop(self.device, None)
        else:
            _dtypes[self.device] = stored
        _C.call_op("autocast::set_state", (self.device, was_on, dtype or self.fast_dtype), _E)
        _record_state(self.device, was_on, dtype or self.fast_dtype)
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with autocast(self.device, self.fast_dtype, self._enabled, self._cache_enabled):
                return fn(*args, **kwargs)
        return wrapper
