"""torch's process-wide switches that programs set at start-up: float32 matmul precision,
deterministic algorithms, the default device and tensor type, warn-always, anomaly mode,
flush-denormal. Tessera records them so programs that set and read them run unchanged; where a
switch has no effect on Tessera's kernels the docstring says so."""
import builtins
import warnings

from tessera import _C

_state = {"matmul_precision": "highest", "deterministic": False, "deterministic_warn_only": False,
          "warn_always": False}
_default_device = [None]  # None: the CPU, as torch


# ---- float32 matmul precision (torch.backends.cuda.matmul.allow_tf32's high-level spelling)
def set_float32_matmul_precision(precision):
    """'highest' (full float32), 'high' or 'medium' (TF32 or bfloat16 passes allowed). An unknown
    value warns and leaves the setting alone, as torch. The CPU kernels always compute in full float32."""
    if precision not in ("highest", "high", "medium"):
        warnings.warn(f"{precision} is not one of 'highest', 'high', or 'medium'; the current "
                      f"setFloat32MatmulPrecision call has no effect.", UserWarning, stacklevel=2)
        return
    _state["matmul_precision"] = precision


def get_float32_matmul_precision():
    return _state["matmul_precision"]


# ---- deterministic algorithms (recorded: Tessera's CPU kernels are deterministic already)
def use_deterministic_algorithms(mode, *, warn_only=False):
    if not isinstance(mode, builtins.bool):
        raise TypeError(f"use_deterministic_algorithms(): argument 'mode' (position 1) must be bool, "
                        f"not {type(mode).__name__}")
    if not isinstance(warn_only, builtins.bool):
        raise TypeError(f"use_deterministic_algorithms(): argument 'warn_only' must be bool, "
                        f"not {type(warn_only).__name__}")
    _state["deterministic"] = mode
    _state["deterministic_warn_only"] = warn_only


def are_deterministic_algorithms_enabled():
    return _state["deterministic"]


def is_deterministic_algorithms_warn_only_enabled():
    return _state["deterministic_warn_only"]


_DEBUG_MODES = {"default": 0, "warn": 1, "error": 2}


def set_deterministic_debug_mode(debug_mode):
    """0 / 'default': off; 1 / 'warn': deterministic, warn-only; 2 / 'error': deterministic."""
    if isinstance(debug_mode, str):
        if debug_mode not in _DEBUG_MODES:
            raise RuntimeError(f"invalid value of debug_mode, expected one of `default`, `warn`, `error`, "
                               f"but got {debug_mode}")
        debug_mode = _DEBUG_MODES[debug_mode]
    elif not isinstance(debug_mode, builtins.int) or isinstance(debug_mode, builtins.bool):
        raise TypeError(f"debug_mode must be str or int, but got {type(debug_mode).__name__}")
    if debug_mode not in (0, 1, 2):
        raise RuntimeError(f"invalid value of debug_mode, expected 0, 1, or 2, but got {debug_mode}")
    use_deterministic_algorithms(debug_mode != 0, warn_only=debug_mode == 1)


def get_deterministic_debug_mode():
    if not _state["deterministic"]:
        return 0
    return 1 if _state["deterministic_warn_only"] else 2


# ---- default device: the factories (tessera._factories) read it when no device is given
def set_default_device(device):
    """Tensors the factories create without a device= land on `device` (None: back to the CPU)."""
    if device is None:
        _default_device[0] = None
        return
    d = device if isinstance(device, _C.device) else _C.device(device)
    _default_device[0] = None if (d.type == "cpu" and d.index is None) else d


def get_default_device():
    d = _default_device[0]
    return _C.device("cpu") if d is None else d


def default_device():
    """The device factories use when none is given, or None for the CPU (the fast path)."""
    return _default_device[0]


_TENSOR_TYPES = {"FloatTensor": "float32", "DoubleTensor": "float64", "HalfTensor": "float16",
                 "BFloat16Tensor": "bfloat16"}


def set_default_tensor_type(t):
    """Deprecated in torch: sets the default dtype (and, for torch.cuda.* types, the default device)
    from a legacy type such as ts.DoubleTensor or the string 'torch.DoubleTensor'."""
    warnings.warn("torch.set_default_tensor_type() is deprecated as of PyTorch 2.1, please use "
                  "torch.set_default_dtype() and torch.set_default_device() as alternatives.", UserWarning,
                  stacklevel=2)
    name = t if isinstance(t, str) else getattr(t, "__name__", None)
    if name is None or isinstance(t, _C.dtype):
        raise TypeError("invalid type object: only floating-point types are supported as the default type")
    parts = name.split(".")
    base = parts[-1]
    if isinstance(t, str) and (len(parts) < 2 or parts[0] not in ("torch", "tessera")):
        raise ValueError(f"invalid type: '{t}'")
    if base not in _TENSOR_TYPES:
        raise TypeError("invalid type object: only floating-point types are supported as the default type")
    _C.set_default_dtype(_C.dtypes[_TENSOR_TYPES[base]])
    if "cuda" in parts[:-1]:
        set_default_device("cuda")
    elif isinstance(t, str):
        set_default_device(None)


# ---- warnings, anomaly mode, inference mode, denormals
def set_warn_always(b):
    """Recorded for is_warn_always_enabled (Tessera's warnings follow Python's filters)."""
    _state["warn_always"] = builtins.bool(b)


def is_warn_always_enabled():
    return _state["warn_always"]


def is_anomaly_enabled():
    from tessera import autograd
    prev = autograd.set_detect_anomaly(False)  # the plugin answers a set with the previous mode
    autograd.set_detect_anomaly(prev)
    return builtins.bool(prev)


def is_anomaly_check_nan_enabled():
    return is_anomaly_enabled()


def set_anomaly_enabled(enabled, check_nan=True):
    from tessera import autograd
    autograd.set_detect_anomaly(builtins.bool(enabled))


def is_inference_mode_enabled():
    from tessera.autograd import grad_mode
    return grad_mode.is_inference_mode_enabled()


def set_flush_denormal(mode):
    """torch returns whether the CPU's flush-to-zero mode could be set. Tessera's kernels do not
    switch the floating-point control register, so this returns False (unsupported) and changes nothing."""
    return False
