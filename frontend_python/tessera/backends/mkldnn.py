"""tessera.backends.mkldnn: torch.backends.mkldnn's switches. Tessera's CPU backend has its own
kernels, not oneDNN's, so is_available() is False; the switches are recorded for programs that set them."""
import sys

from tessera.backends._flags import flags_context

enabled = True
deterministic = False
allow_tf32 = False


def is_available():
    return False


def set_flags(_enabled=None, _deterministic=None, _allow_tf32=None):
    module = sys.modules[__name__]
    orig = (enabled, deterministic, allow_tf32)
    for name, value in zip(("enabled", "deterministic", "allow_tf32"), (_enabled, _deterministic, _allow_tf32)):
        if value is not None:
            setattr(module, name, value)
    return orig


def flags(enabled=False, deterministic=False, allow_tf32=False):
    return flags_context(set_flags, (enabled, deterministic, allow_tf32))
