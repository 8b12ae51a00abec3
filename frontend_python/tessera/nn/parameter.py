"""nn.Parameter: a Tensor subclass that modules register as a learnable parameter."""
import tessera
from tessera.nn import _autograd

_Tensor = tessera.Tensor


class Parameter(_Tensor):
    """A tensor that is a module parameter: assigning one to a Module attribute registers it.

    Parameter(data=None, requires_grad=True) shares data's storage (as torch does) under a new
    tensor object with no autograd history. Results of operations on a Parameter are plain
    Tensors."""

    def __new__(cls, data=None, requires_grad=True):
        if data is None:
            data = tessera.empty(0)
        if not isinstance(data, _Tensor):
            raise TypeError(f"Parameter: expected data to be a Tensor, got {type(data).__name__}")
        p = _Tensor._make_subclass(cls, data.detach())
        _autograd.set_requires_grad(p, requires_grad)
        return p

    def __init__(self, data=None, requires_grad=True):  # all done in __new__
        pass

    def __repr__(self):
        return "Parameter containing:\n" + _Tensor.__repr__(self)

    __str__ = __repr__

    def __deepcopy__(self, memo):
        if id(self) in memo:
            return memo[id(self)]
        r = type(self)(self.detach().clone(), _autograd.requires_grad(self) or not _autograd.has_autograd())
        memo[id(self)] = r
        return r

    def __reduce_ex__(self, protocol):
        return (_rebuild_parameter, (self.detach(), _autograd.requires_grad(self) or not _autograd.has_autograd()))


def _rebuild_parameter(data, requires_grad):
    return Parameter(data, requires_grad)


class Buffer(_Tensor):
    """Marks a tensor assigned to a Module attribute as a buffer (nn.Buffer(t, persistent=True));
    the module stores a plain tensor."""

    def __new__(cls, data=None, *, persistent=True):
        if data is None:
            data = tessera.empty(0)
        b = _Tensor._make_subclass(cls, data.detach())
        b.persistent = persistent
        return b
