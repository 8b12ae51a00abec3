"""The autograd half of tessera.Tensor: requires_grad, grad, grad_fn, backward, hooks, detach.

Without the autograd plugin loaded no tensor can require grad, so the getters answer without
loading it; anything that changes autograd state loads it.
"""
from tessera import _C
from tessera.autograd import _plugin

Tensor = _C.Tensor
_call = _C.call_op
_E = {}


class GradFn:
    """The node that made a tensor (its `grad_fn`): name() names the backward of the operator."""
    __slots__ = ("_name",)

    def __init__(self, name):
        self._name = name

    def name(self):
        return self._name

    def __repr__(self):
        return f"<{self._name}>"


class RemovableHandle:
    def __init__(self, tensor, callback):
        self._tensor, self._callback = tensor, callback

    def remove(self):
        if self._tensor is not None:
            _plugin.call("remove_hook", (self._tensor, self._callback))
            self._tensor = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


def _get_requires_grad(self):
    return _plugin.loaded() and _plugin.call("requires_grad", (self,))


def _set_requires_grad(self, value):
    _plugin.call("requires_grad_", (self, bool(value)))


def requires_grad_(self, requires_grad=True):
    _plugin.call("requires_grad_", (self, bool(requires_grad)))
    return self


def _get_grad(self):
    return _plugin.call("get_grad", (self,)) if _plugin.loaded() else None


def _set_grad(self, value):
    if value is not None and not isinstance(value, Tensor):
        raise TypeError(f"assigned grad expected to be a Tensor or None but got grad of type {type(value).__name__}")
    if value is None and not _plugin.loaded():
        return
    _plugin.call("set_grad", (self, value))


def _get_is_leaf(self):
    return not _plugin.loaded() or _plugin.call("is_leaf", (self,))


def _get_grad_fn(self):
    if not _plugin.loaded():
        return None
    name = _plugin.call("grad_fn_name", (self,))
    return GradFn(name) if name else None


def _get_retains_grad(self):
    return _plugin.loaded() and _plugin.call("retains_grad", (self,))


def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
    from tessera import autograd

    autograd.backward([self], None if gradient is None else [gradient], retain_graph, create_graph, inputs)


def register_hook(self, hook):
    """hook(grad) -> Tensor or None runs when the gradient of this tensor is computed."""
    if not callable(hook):
        raise TypeError("register_hook expects a callable")
    callback = _C.register_callback(hook)
    _plugin.call("register_hook", (self, callback))  # the id's hold passes to autograd
    return RemovableHandle(self, callback)


def register_post_accumulate_grad_hook(self, hook):
    """hook(tensor) -> None runs after a leaf's .grad was accumulated during backward (torch's
    optimizer-in-backward and DDP's gradient buckets use it)."""
    if not callable(hook):
        raise TypeError("register_post_accumulate_grad_hook expects a callable")
    callback = _C.register_callback(hook)
    _plugin.call("register_post_accumulate_grad_hook", (self, callback))  # the id's hold passes to autograd
    return RemovableHandle(self, callback)


def retain_grad(self):
    _plugin.call("retain_grad", (self,))


def detach(self):
    """A new tensor sharing storage, cut from the graph (requires_grad=False)."""
    if _plugin.loaded():
        return _plugin.call("detach", (self,))
    return _call("permute", (self, list(range(self.ndim))), _E)


def detach_(self):
    if _get_grad_fn(self) is not None:
        raise RuntimeError("detach_(): in-place detach of a tensor with history is not supported; use detach()")
    if _get_requires_grad(self):
        _set_requires_grad(self, False)
    return self


def install():
    T = Tensor
    T.requires_grad = property(_get_requires_grad, _set_requires_grad)
    T.grad = property(_get_grad, _set_grad)
    T.is_leaf = property(_get_is_leaf)
    T.grad_fn = property(_get_grad_fn)
    T.retains_grad = property(_get_retains_grad)
    for f in (requires_grad_, backward, register_hook, register_post_accumulate_grad_hook, retain_grad, detach,
              detach_):
        setattr(T, f.__name__, f)
