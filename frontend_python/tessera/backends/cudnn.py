"""tessera.backends.cudnn: torch.backends.cudnn's switches. Tessera's CUDA plugin calls cuDNN for
convolutions when it was built with it; benchmark, deterministic and benchmark_limit are recorded
for programs that set them (the plugin picks its algorithms itself), and TF32 in convolutions
follows tessera.backends.cuda.matmul.allow_tf32, the plugin's one TF32 switch."""
import sys

from tessera.backends._flags import flags_context

enabled = True
benchmark = False
benchmark_limit = 10
deterministic = False
allow_tf32 = True  # torch's default; recorded only (see the module's docstring)


def _library():
    """The path of the cuDNN library the CUDA plugin loaded, or None."""
    from tessera import cuda
    if cuda._ops() is None:
        return None
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                if "libcudnn" in line and "/" in line:
                    return line[line.index("/"):].strip()
    except OSError:
        pass
    return None


def is_available():
    """True when the CUDA plugin is loaded with cuDNN."""
    return _library() is not None


def version():
    """cuDNN's version as an int (e.g. 90100), or None without cuDNN."""
    path = _library()
    if path is None:
        return None
    import ctypes
    try:
        return int(ctypes.CDLL(path).cudnnGetVersion())
    except (OSError, AttributeError):
        return None


def is_acceptable(tensor):
    return enabled and tensor.device.type == "cuda" and is_available()


def set_flags(_enabled=None, _benchmark=None, _benchmark_limit=None, _deterministic=None, _allow_tf32=None):
    module = sys.modules[__name__]
    orig = (enabled, benchmark, benchmark_limit, deterministic, allow_tf32)
    for name, value in zip(("enabled", "benchmark", "benchmark_limit", "deterministic", "allow_tf32"),
                           (_enabled, _benchmark, _benchmark_limit, _deterministic, _allow_tf32)):
        if value is not None:
            setattr(module, name, value)
    return orig


def flags(enabled=False, benchmark=False, benchmark_limit=10, deterministic=False, allow_tf32=True):
    """Sets the switches inside the block (torch's defaults: cuDNN off), restoring them after."""
    return flags_context(set_flags, (enabled, benchmark, benchmark_limit, deterministic, allow_tf32))
