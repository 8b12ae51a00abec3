"""tessera.autograd.forward_ad: forward-mode automatic differentiation, as torch.autograd.forward_ad.

Inside ``with dual_level():``, ``make_dual(x, t)`` gives a tensor whose every operator also
computes its output's tangent (the Jacobian-vector product) with the operator's jvp formula
(autograd/derivatives.yaml's ``result:``), and ``unpack_dual(y)`` reads it back. The tangents
are ordinary tensors: they can require grad and be batched by vmap (jacfwd is vmap over jvp).
"""
from collections import namedtuple

from tessera import _C
from tessera.autograd import _plugin

__all__ = ["UnpackedDualTensor", "dual_level", "enter_dual_level", "exit_dual_level", "make_dual", "unpack_dual"]

_current_level = -1  # PyTorch's value when no level is open


def enter_dual_level():
    """Opens a new forward AD level and returns its index (one level at a time)."""
    global _current_level
    level = _plugin.call("enter_dual_level", ())
    _current_level = level
    return level


def exit_dual_level(*, level=None):
    """Closes the level: every tangent made in it is forgotten."""
    global _current_level
    if level is None:
        level = _current_level
    if level != _current_level:
        raise RuntimeError("Trying to exit a forward AD level that was not the last one that was created. This is not "
                           "supported.")
    _plugin.call("exit_dual_level", (level,))
    _current_level = -1


def _check_tensor(x, fn, what):
    if not isinstance(x, _C.Tensor):
        raise TypeError(f"{fn}(): argument '{what}' must be Tensor, not {type(x).__name__}")


def make_dual(tensor, tangent, *, level=None):
    """A view of `tensor` with `tangent` as its forward gradient at `level` (the open one)."""
    _check_tensor(tensor, "make_dual", "tensor")
    _check_tensor(tangent, "make_dual", "tangent")
    if level is None:
        level = _current_level
    if level < 0:
        raise RuntimeError("Trying to create a dual Tensor for forward AD but no level exists, make sure to "
                           "enter_dual_level() first.")
    if not (tensor.is_floating_point() or tensor.is_complex()):
        raise ValueError(f"Expected primal to be floating point or complex, but got: {tensor.dtype}")
    if not (tangent.is_floating_point() or tangent.is_complex()):
        raise ValueError(f"Expected tangent to be floating point or complex, but got: {tangent.dtype}")
    return _plugin.call("make_dual", (tensor, tangent, level))


class UnpackedDualTensor(namedtuple("UnpackedDualTensor", ["primal", "tangent"])):
    """unpack_dual's result: the primal (a view without the tangent) and the tangent (None if none)."""


def unpack_dual(tensor, *, level=None):
    """(primal, tangent) of a dual tensor at `level`; a plain tensor gives (tensor, None)."""
    if not isinstance(tensor, _C.Tensor):
        return UnpackedDualTensor(tensor, None)
    if level is None:
        level = _current_level
    if level < 0:
        return UnpackedDualTensor(tensor, None)
    tangent = _plugin.call("tangent_of", (tensor, level))
    if tangent is None:
        return UnpackedDualTensor(tensor, None)
    return UnpackedDualTensor(_plugin.call("primal_of", (tensor,)), tangent)


class dual_level:
    """Context manager of one forward AD level: ``with dual_level(): ...``."""

    def __enter__(self):
        return enter_dual_level()

    def __exit__(self, *exc):
        exit_dual_level()
        return False
