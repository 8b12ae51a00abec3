"""Tensor methods that change a tensor's geometry or storage in place, as torch's: set_, resize_,
resize_as_, as_strided_, transpose_, t_, swapaxes_, swapdims_, squeeze_, unsqueeze_.

The view forms compute the new geometry with their out-of-place operator (so shapes, dims and
errors are the operator's) and give it to the tensor itself (_C._set_geometry checks it against
the storage), so every Python object of that tensor sees it. A tensor with autograd history
(a non-leaf that requires grad, grad mode on) becomes the out-of-place view instead, history
included (_C._rebind: this Python object holds the view from now on), which is what torch's
autograd records for these; a leaf that requires grad is refused as torch refuses it."""
import math

from tessera import _C, _memory_format as _mf
from tessera.autograd.grad_mode import is_grad_enabled

Tensor = _C.Tensor


def _records_history(self, op):
    """Whether the change must go through autograd: a non-leaf that requires grad, grad mode on."""
    if not (self.requires_grad and is_grad_enabled()):
        return False
    if self.is_leaf:
        raise RuntimeError(f"{op}: a leaf Variable that requires grad is being used in an in-place operation.")
    return True


def _take_geometry(self, view, op):
    if _records_history(self, op):
        _C._rebind(self, view)
    else:
        _C._set_geometry(self, list(view.shape), list(view.stride()), view.storage_offset(), op)
    return self


def _view_inplace(name, op):
    """x.<name>_(...) as x taking the geometry of x.<name>(...)."""
    def method(self, *args, **kwargs):
        return _take_geometry(self, getattr(self, name)(*args, **kwargs), op)
    method.__name__ = op
    method.__doc__ = f"In-place {name}: self takes the geometry of self.{name}(...) over the same storage."
    return method


def t_(self):
    if self.dim() > 2:
        raise RuntimeError(f"t_() expects a tensor with <= 2 dimensions, but self is {self.dim()}D")
    return _take_geometry(self, self.t(), "t_")


def as_strided_(self, size, stride, storage_offset=None):
    offset = self.storage_offset() if storage_offset is None else int(storage_offset)
    if _records_history(self, "as_strided_"):
        _C._rebind(self, self.as_strided(size, stride, offset))
        return self
    _C._set_geometry(self, [int(s) for s in size], [int(s) for s in stride], offset, "as_strided_")
    return self


def _sizes(args, op):
    if len(args) == 1 and not isinstance(args[0], int):
        args = tuple(args[0])
    try:
        sizes = [int(s) for s in args]
    except (TypeError, ValueError):
        raise TypeError(f"{op}(): argument 'size' must be a tuple of ints, got {args!r}") from None
    if any(s < 0 for s in sizes):
        raise RuntimeError(f"{op}: trying to create tensor with negative dimension: {sizes}")
    return sizes


def _resize(self, sizes, op, memory_format=None):
    if self.requires_grad:
        raise RuntimeError("cannot resize variables that require grad")
    needed = self.storage_offset() + math.prod(sizes)
    have = _C._storage_elements(self)
    if needed > have:
        # A larger storage keeps the old elements (new ones are uninitialised, as torch's). Views
        # made before keep the old storage: Tessera's storages do not grow in place.
        grown = _C.call_op("empty", ([needed],), {"dtype": self.dtype, "device": self.device})
        if have:
            grown[:have].copy_(_C._storage_as_tensor(self))
        _C._set_storage(self, grown)
    fmt = _mf.contiguous_format if memory_format in (None, _mf.preserve_format) else memory_format
    _mf._check(fmt, op)
    if fmt is not _mf.contiguous_format and len(sizes) != _mf._TO_CHANNELS_LAST[fmt][0]:
        raise RuntimeError(f"{op}: required rank {_mf._TO_CHANNELS_LAST[fmt][0]} tensor to use {fmt._name} "
                           f"format, got sizes {sizes}")
    strides = list(_mf.strides_for(sizes, fmt))
    _C._set_geometry(self, sizes, strides, self.storage_offset(), op)
    return self


def resize_(self, *sizes, memory_format=None):
    return _resize(self, _sizes(sizes, "resize_"), "resize_", memory_format)


def resize_as_(self, other, memory_format=None):
    return _resize(self, list(other.shape), "resize_as_", memory_format)


def set_(self, source=None, storage_offset=0, size=None, stride=None):
    """set_(): empty; set_(source): share source's storage and geometry; set_(source, offset,
    size, stride=None): share its storage with the given geometry (contiguous strides by default)."""
    if self.requires_grad and is_grad_enabled():
        raise RuntimeError("set_: a tensor that requires grad cannot take another storage while grad mode is on "
                           "(use torch.no_grad())")
    if source is None:
        _C._set_storage(self, _C.call_op("empty", ([0],), {"dtype": self.dtype, "device": self.device}))
        return self
    if not isinstance(source, Tensor):
        raise TypeError(f"set_(): argument 'source' must be a Tensor, got {type(source).__name__}")
    _C._set_storage(self, source)
    if size is not None:
        sizes = _sizes((size,), "set_")
        strides = list(_mf.strides_for(sizes, _mf.contiguous_format)) if stride is None else [int(s) for s in stride]
        _C._set_geometry(self, sizes, strides, int(storage_offset), "set_")
    return self


def _install():
    for name in ("transpose", "swapaxes", "swapdims", "squeeze", "unsqueeze"):
        setattr(Tensor, name + "_", _view_inplace(name, name + "_"))
    for f in (t_, as_strided_, resize_, resize_as_, set_):
        setattr(Tensor, f.__name__, f)


_install()
