"""Tensor.__getitem__ / __setitem__ with NumPy/PyTorch semantics.

Basic indexing (ints, slices with positive steps, Ellipsis, None, Python bools) is a chain of
view operators (select, slice, unsqueeze), so the result shares memory with the tensor.
Advanced indexing (integer tensors or lists, boolean masks) goes through the `index` operator
(and `index_put_` for assignment), which take masks as they are; the common cases take a
shortcut (`masked_select` for x[mask], `masked_fill_` for x[mask] = scalar).
"""
import operator

from tessera import _C

_call = _C.call_op
_E = {}
_Tensor = _C.Tensor
_BOOL = _C.dtypes["bool"]
_INT64 = _C.dtypes["int64"]
_UINT8 = _C.dtypes["uint8"]
_INDEX_DTYPES = (_INT64, _C.dtypes["int32"], _UINT8, _BOOL)


def _to_index_tensor(seq):
    if isinstance(seq, (list, tuple)):
        if len(seq) == 0:
            return _call("empty", ((0,),), {"dtype": _INT64})
        return _C.tensor(seq)
    from tessera._factories import tensor  # arrays (NumPy, ...)

    return tensor(seq)


def _bound(v):
    return v if v is None or type(v) is int else operator.index(v)


def _normalise(idx):
    """Turns every index item into one of: int, slice (int/None bounds), None, Ellipsis, bool,
    or an integer / bool Tensor of at least one dimension. Returns (items, dims consumed)."""
    items = []
    consumed = 0
    for it in idx:
        t = type(it)
        if t is int:
            consumed += 1
        elif t is slice:
            if not all(v is None or type(v) is int for v in (it.start, it.stop, it.step)):
                it = slice(_bound(it.start), _bound(it.stop), _bound(it.step))
            consumed += 1
        elif it is None or it is Ellipsis or t is bool:
            pass
        else:
            if not isinstance(it, _Tensor):
                if isinstance(it, (list, tuple)) or hasattr(it, "__array__"):
                    it = _to_index_tensor(it)
                elif hasattr(it, "__index__"):
                    it = operator.index(it)
                    consumed += 1
                    items.append(it)
                    continue
                else:
                    raise IndexError(
                        "only integers, slices (`:`), ellipsis (`...`), None and long or byte Variables are "
                        f"valid indices (got {type(it).__name__})")
            dtype = it.dtype
            if dtype == _UINT8:  # a byte mask, as in PyTorch (where it is deprecated)
                it = _call("to", (it, _BOOL), _E)
                dtype = _BOOL
            if dtype == _BOOL:
                if it.ndim == 0:
                    it = bool(it.item())
                else:
                    consumed += it.ndim
            elif dtype not in _INDEX_DTYPES:
                raise IndexError("tensors used as indices must be long, int, byte or bool tensors, got "
                                 f"{dtype.name}")
            elif it.ndim == 0:
                it = int(it.item())
                consumed += 1
            else:
                consumed += 1
        items.append(it)
    return items, consumed


def _apply(self, idx):
    """Applies the basic part of `idx` (a tuple) with view ops. Returns (view, advanced) where
    advanced is None or a list of (dim of view, index tensor)."""
    ndim = self.ndim
    consumed = 0
    for it in idx:  # the common case: ints, slices, None, Ellipsis only
        t = type(it)
        if t is int or t is slice:
            consumed += 1
        elif it is not None and it is not Ellipsis:
            idx, consumed = _normalise(idx)
            break
    if consumed > ndim:
        raise IndexError(f"too many indices for tensor of dimension {ndim}")
    result = self
    d = 0
    advanced = None
    seen_ellipsis = False
    for it in idx:
        t = type(it)
        if t is int:
            result = _call("select", (result, d, it), _E)
        elif t is slice:
            start, stop, step = it.start, it.stop, it.step
            if step is None:
                step = 1
            elif step <= 0:
                raise ValueError("step must be greater than zero")
            if start is not None or stop is not None or step != 1:
                if type(start) is not int and start is not None:
                    start = operator.index(start)
                if type(stop) is not int and stop is not None:
                    stop = operator.index(stop)
                result = _call("slice", (result, d, start, stop, step), _E)
            d += 1
        elif it is None:
            result = _call("unsqueeze", (result, d), _E)
            d += 1
        elif it is Ellipsis:
            if seen_ellipsis:
                raise IndexError("an index can only have a single ellipsis ('...')")
            seen_ellipsis = True
            d += ndim - consumed
        elif t is bool:
            result = _call("unsqueeze", (result, d), _E)
            if not it:
                result = _call("slice", (result, d, 0, 0, 1), _E)
            d += 1
        else:  # an index tensor (normalised)
            if advanced is None:
                advanced = []
            if it.dtype == _BOOL:
                k = it.ndim
                shape = result.shape
                mshape = it.shape
                for j in range(k):
                    if d + j >= len(shape) or mshape[j] != shape[d + j]:
                        raise IndexError(
                            f"The shape of the mask {list(mshape)} at index {j} does not match the shape of the "
                            f"indexed tensor {list(shape)} at index {d + j}")
                advanced.append((d, it))
                d += k
            else:
                advanced.append((d, it))
                d += 1
    return result, advanced


def _alias(t):
    # A new tensor object over the same storage (x[...] and x[:] are views, as in PyTorch).
    return _call("permute", (t, list(range(t.ndim))), _E)


def _index_list(advanced):
    """The Tensor?[] argument of index / index_put_: one entry per dim up to the last indexed
    one, None for dims taken whole. A k-dim mask is one entry covering k dims (the operators
    expand it through nonzero, as PyTorch's expandTensors does)."""
    indices = []
    for d, ix in advanced:
        while len(indices) < d:
            indices.append(None)
        indices.append(ix)
    return indices


def getitem(self, idx):
    t = type(idx)
    if t is int:
        return _call("select", (self, 0, idx), _E)
    if t is not tuple:
        if t is slice and (idx.step is None or idx.step == 1) and (idx.start is None or type(idx.start) is int) \
                and (idx.stop is None or type(idx.stop) is int):
            if idx.start is None and idx.stop is None:
                return _alias(self)
            return _call("slice", (self, 0, idx.start, idx.stop, 1), _E)
        idx = (idx,)
    view, advanced = _apply(self, idx)
    if advanced is None:
        return _alias(view) if view is self else view
    if len(advanced) == 1:
        d, ix = advanced[0]
        if d == 0 and ix.dtype == _BOOL and ix.ndim == view.ndim:
            return _call("masked_select", (view, ix), _E)
    return _call("index", (view, _index_list(advanced)), _E)


def _is_number(v):
    return isinstance(v, (int, float))  # bool is an int


def setitem(self, idx, value):
    if not isinstance(value, _Tensor) and not _is_number(value):
        from tessera._factories import tensor

        value = tensor(value, dtype=self.dtype, device=self.device)
    if _records_gradient(self, value):
        return _setitem_recorded(self, idx, value)
    if type(idx) is int:
        view, advanced = _call("select", (self, 0, idx), _E), None
    else:
        view, advanced = _apply(self, idx if type(idx) is tuple else (idx,))
    if advanced is None:
        if isinstance(value, _Tensor):
            _call("copy_", (view, value), _E)
        else:
            _call("fill_", (view, value), _E)
        return
    if len(advanced) == 1 and advanced[0][1].dtype == _BOOL and (
            not isinstance(value, _Tensor) or value.ndim == 0):
        # x[..., mask, ...] = scalar: masked_fill_ with the mask broadcast over the trailing dims.
        d, mask = advanced[0]
        rest = view.ndim - d - mask.ndim
        if rest:
            mask = _call("view", (mask, list(mask.shape) + [1] * rest), _E)
        scalar = value.item() if isinstance(value, _Tensor) else value
        _call("masked_fill_", (view, mask, scalar), _E)
        return
    if isinstance(value, _Tensor):
        if value.dtype != view.dtype:
            value = _call("to", (value, view.dtype), _E)
    else:
        value = _C.tensor(value, dtype=view.dtype, device=view.device)
    _call("index_put_", (view, _index_list(advanced), value), _E)


def _records_gradient(self, value):
    """True when autograd must see this assignment (the target or the value requires grad)."""
    from tessera.autograd import _plugin

    if not _plugin.loaded():
        return False
    return (self.requires_grad or (isinstance(value, _Tensor) and value.requires_grad)) and \
        _plugin.call("is_grad_enabled", ())


def _setitem_recorded(self, idx, value):
    """x[idx] = v as one index_put_ on x itself (not on a view of it), so autograd records it
    like any in-place operator: the positions idx selects come from indexing an arange."""
    from tessera._factories import arange

    positions = arange(self.numel(), device=self.device).view(list(self.shape))[idx]
    indices, rest = [], positions
    for size in reversed(self.shape):
        quotient = rest // size
        indices.append(rest - quotient * size)
        rest = quotient
    indices.reverse()
    if not isinstance(value, _Tensor):
        value = _C.tensor(value, dtype=self.dtype, device=self.device)
    elif value.dtype != self.dtype:
        value = _call("to", (value, self.dtype), _E)
    _call("index_put_", (self, indices, value), _E)
