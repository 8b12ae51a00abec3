"""The few autograd entry points nn/optim use, resolved at call time: the autograd plugin and
its Python API may be loaded after this package is imported. Without autograd, no_grad is a
no-op context and requires_grad is False everywhere."""
import contextlib

import tessera


def no_grad():
    ng = getattr(tessera, "no_grad", None)
    return ng() if ng is not None else contextlib.nullcontext()


def has_autograd():
    return hasattr(tessera.Tensor, "requires_grad_")


def set_requires_grad(t, flag):
    if has_autograd():
        t.requires_grad_(flag)
    return t


def requires_grad(t):
    return bool(getattr(t, "requires_grad", False))


def is_grad_enabled():
    f = getattr(tessera, "is_grad_enabled", None)
    return f() if f is not None else False


def enable_grad():
    eg = getattr(tessera, "enable_grad", None)
    return eg() if eg is not None else contextlib.nullcontext()
