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


class UninitializedTensorMixin:
    """A parameter or buffer whose shape is not known yet (the lazy modules' weights): it holds no
    data, and reading its shape raises RuntimeError.

    materialize(shape) returns the initialised tensor (a Parameter, or a plain tensor for a buffer)
    with this one's device, dtype and requires_grad. torch changes the object itself in place;
    tessera's tensors cannot change shape in place, so the owner must store the returned tensor
    (the lazy modules do, under the same name), and an optimizer built before the first forward
    still holds the uninitialised object: build it after."""

    cls_to_become = None

    def materialize(self, shape, device=None, dtype=None):
        data = _Tensor.detach(self)
        if device is None:
            device = data.device
        if dtype is None:
            dtype = data.dtype
        empty = tessera.empty(tuple(shape), device=device, dtype=dtype)
        if self.cls_to_become is Parameter:
            return Parameter(empty, _autograd.requires_grad(self) or not _autograd.has_autograd())
        return _autograd.set_requires_grad(empty, _autograd.requires_grad(self))

    @property
    def shape(self):
        raise RuntimeError("Can't access the shape of an uninitialized parameter or buffer. This error usually happens "
                           "in `load_state_dict` when trying to load an uninitialized parameter into an initialized "
                           "one. Call `forward` to initialize the parameters before accessing their attributes.")

    def share_memory_(self):
        raise RuntimeError("Can't share memory on an uninitialized parameter or buffer. Call `forward` to initialize "
                           "the parameters before calling `module.share_memory()`.")

    def __repr__(self):
        return f"<{self.__class__.__name__}>"

    __str__ = __repr__

    def __reduce_ex__(self, proto):
        return (self.__class__, (_autograd.requires_grad(self),))

    def __deepcopy__(self, memo):
        if id(self) not in memo:
            data = _Tensor.detach(self)
            memo[id(self)] = type(self)(_autograd.requires_grad(self), data.device, data.dtype)
        return memo[id(self)]


def is_lazy(param):
    """Whether param is an UninitializedParameter or UninitializedBuffer."""
    return isinstance(param, UninitializedTensorMixin)


class UninitializedParameter(UninitializedTensorMixin, Parameter):
    """A Parameter of unknown shape (see UninitializedTensorMixin); materialize() gives the
    Parameter. device and dtype are those it will be materialised with."""

    cls_to_become = Parameter

    def __new__(cls, requires_grad=True, device=None, dtype=None):
        p = _Tensor._make_subclass(cls, tessera.empty(0, device=device, dtype=dtype))
        _autograd.set_requires_grad(p, requires_grad)
        return p

    def __init__(self, requires_grad=True, device=None, dtype=None):
        pass


class UninitializedBuffer(UninitializedTensorMixin, _Tensor):
    """A buffer of unknown shape (see UninitializedTensorMixin); materialize() gives the tensor."""

    cls_to_become = _Tensor

    def __new__(cls, requires_grad=False, device=None, dtype=None, persistent=True):
        b = _Tensor._make_subclass(cls, tessera.empty(0, device=device, dtype=dtype))
        _autograd.set_requires_grad(b, requires_grad)
        b.persistent = persistent
        b._is_buffer = True
        return b

    def __init__(self, requires_grad=False, device=None, dtype=None, persistent=True):
        pass
