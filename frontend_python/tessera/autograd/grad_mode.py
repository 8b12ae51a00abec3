"""Grad mode: no_grad, enable_grad, set_grad_enabled, inference_mode (context managers and
decorators, thread-local like PyTorch's)."""
import functools
import threading

from tessera.autograd import _plugin

_inference = threading.local()  # whether an inference_mode(True) block is active (is_inference_mode_enabled)


_IS_GRAD_ENABLED = "autograd::is_grad_enabled"
_loaded = _plugin._state


def is_grad_enabled():
    # Asked on every compiled call's guard check and by many modules: the operator is called
    # directly by its full name (_plugin.call's extra frame and name building cost ~100 ns).
    if not _loaded["loaded"]:
        return True  # nothing records without the plugin; the mode is on by default
    return _plugin._call(_IS_GRAD_ENABLED, (), _plugin._E)


def _set(enabled):
    """Sets grad mode; returns the previous mode."""
    if not _plugin.loaded():
        _plugin.ensure()
    return _plugin.call("set_grad_enabled", (bool(enabled),))


class _Mode:
    enabled = True

    def __enter__(self):
        self._prev = _set(self.enabled)
        return self

    def __exit__(self, *exc):
        _set(self._prev)
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with type(self)():
                return fn(*args, **kwargs)

        return wrapper


class no_grad(_Mode):
    """Operators inside record no history (and skip the autograd plugin entirely)."""
    enabled = False


class enable_grad(_Mode):
    enabled = True


class inference_mode(_Mode):
    """Like no_grad (Tessera has no separate inference tensors)."""

    def __init__(self, mode=True):
        self.enabled = not mode

    def __enter__(self):
        self._prev_inference = is_inference_mode_enabled()
        _inference.on = not self.enabled
        return super().__enter__()

    def __exit__(self, *exc):
        _inference.on = self._prev_inference
        return super().__exit__(*exc)

    def __call__(self, fn):
        mode = not self.enabled

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with inference_mode(mode):
                return fn(*args, **kwargs)

        return wrapper


def is_inference_mode_enabled():
    return getattr(_inference, "on", False)


class set_grad_enabled:
    """set_grad_enabled(mode) sets the mode now, and restores the old one when used with `with`."""

    def __init__(self, mode):
        self._prev = _set(mode)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        _set(self._prev)
        return False
