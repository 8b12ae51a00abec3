"""Functions whose PyTorch signature is not a single operator call: where with scalars,
max/min (overloaded on their arguments), var/std with `unbiased`, all/any, isclose,
closeness checks, splitting, type promotion queries. Most are also Tensor methods."""
import builtins
import math

from tessera import _C

_call = _C.call_op
_E = {}
_Tensor = _C.Tensor
_DT = _C.dtypes
_BOOL = _DT["bool"]
_INT64 = _DT["int64"]


def scalar_dtype(t, s):
    """The dtype PyTorch gives `t op s` for a Python number s (a "wrapped number"): the tensor's
    dtype unless s is of a higher category (bool < int < float)."""
    dt = t.dtype
    if isinstance(s, builtins.bool):
        return dt
    if isinstance(s, builtins.int):
        return _INT64 if dt == _BOOL else dt
    if isinstance(s, builtins.float):
        return dt if dt.is_floating_point else _C.get_default_dtype()
    raise TypeError(f"expected a Tensor or a Python number, got {type(s).__name__}")


def wrap_scalar(t, s):
    """A 0-dim tensor holding s, of the dtype `t op s` computes in, on t's device."""
    return _C.tensor(s, dtype=scalar_dtype(t, s), device=t.device)


def _python_scalar_dtype(values):
    if builtins.any(isinstance(v, builtins.float) for v in values):
        return _C.get_default_dtype()
    if builtins.any(isinstance(v, builtins.int) and not isinstance(v, builtins.bool) for v in values):
        return _INT64
    return _BOOL


class _ValuesIndices(tuple):
    """(values, indices), as torch.return_types.max / min."""
    __slots__ = ()

    def __new__(cls, values, indices):
        return tuple.__new__(cls, (values, indices))

    values = property(lambda self: self[0])
    indices = property(lambda self: self[1])

    def __repr__(self):
        return f"tessera.return_types.{type(self).__name__}(\nvalues={self[0]!r},\nindices={self[1]!r})"


class _MaxResult(_ValuesIndices):
    __slots__ = ()


class _MinResult(_ValuesIndices):
    __slots__ = ()


_MaxResult.__name__ = _MaxResult.__qualname__ = "max"
_MinResult.__name__ = _MinResult.__qualname__ = "min"


def where(condition, input=None, other=None):
    """where(condition, input, other): elements of input where condition holds, else of other;
    either may be a Python number. where(condition) is nonzero(condition, as_tuple=True)."""
    if input is None and other is None:
        return nonzero(condition, as_tuple=True)
    a_t, b_t = isinstance(input, _Tensor), isinstance(other, _Tensor)
    if not a_t and not b_t:
        dt = _python_scalar_dtype((input, other))
        input = _C.tensor(input, dtype=dt, device=condition.device)
        other = _C.tensor(other, dtype=dt, device=condition.device)
    elif not a_t:
        input = wrap_scalar(other, input)
    elif not b_t:
        other = wrap_scalar(input, other)
    return _call("where", (condition, input, other), _E)


def _where_method(self, condition, y):
    return where(condition, self, y)


def _max_min(name, reduce_op, arg_op, pair_op, result_type):
    def f(input, dim=None, keepdim=False, *, out=None):
        if isinstance(dim, _Tensor):
            return _call(pair_op, (input, dim), _E if out is None else {"out": out})
        if dim is None:
            if input.numel() == 0:
                raise ValueError(f"{name}(): expected a non-empty tensor when no dim is given (the reduction has "
                                 "no identity)")
            return _call(reduce_op, (input,), _E)
        return result_type(_call(reduce_op, (input, dim, keepdim), _E), _call(arg_op, (input, dim, keepdim), _E))

    f.__name__ = name
    f.__doc__ = (f"{name}(input) -> the {name}imum element; {name}(input, dim, keepdim=False) -> (values, indices); "
                 f"{name}(input, other) -> {pair_op}(input, other)")
    return f


max = _max_min("max", "amax", "argmax", "maximum", _MaxResult)
min = _max_min("min", "amin", "argmin", "minimum", _MinResult)


def _var_std(name):
    def f(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
        if isinstance(dim, builtins.bool):  # var(input, unbiased)
            unbiased, dim = dim, None
        if unbiased is not None:
            if correction is not None:
                raise TypeError(f"{name}(): pass either unbiased or correction, not both")
            correction = 1 if unbiased else 0
        kw = {"keepdim": keepdim}
        if correction is not None:
            kw["correction"] = correction
        return _call(name, (input, dim), kw)

    f.__name__ = name
    return f


var = _var_std("var")
std = _var_std("std")


def all(input, dim=None, keepdim=False):
    """True where every element (along dim) is nonzero; a bool tensor."""
    zeros = _call("sum", (_call("eq", (input, 0), _E), dim, keepdim), _E)
    return _call("eq", (zeros, 0), _E)


def any(input, dim=None, keepdim=False):
    """True where some element (along dim) is nonzero; a bool tensor."""
    nonzeros = _call("sum", (_call("ne", (input, 0), _E), dim, keepdim), _E)
    return _call("gt", (nonzeros, 0), _E)


def isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """|input - other| <= atol + rtol * |other|, elementwise (infinities equal only to themselves)."""
    if not isinstance(other, _Tensor):
        other = wrap_scalar(input, other)
    close = _call("le", (_call("abs", (_call("sub", (input, other), _E),), _E),
                         _call("add", (_call("mul", (_call("abs", (other,), _E), rtol), _E), atol), _E)), _E)
    close = _call("logical_or", (close, _call("eq", (input, other), _E)), _E)
    if equal_nan:
        both = _call("logical_and", (_call("isnan", (input,), _E), _call("isnan", (other,), _E)), _E)
        close = _call("logical_or", (close, both), _E)
    return close


def allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    return builtins.bool(all(isclose(input, other, rtol, atol, equal_nan)).item())


def equal(input, other):
    """True when both have the same shape and elements."""
    if tuple(input.shape) != tuple(other.shape):
        return False
    return builtins.bool(all(_call("eq", (input, other), _E)).item())


def nonzero(input, *, as_tuple=False):
    """The indices of the nonzero elements: an [n, ndim] int64 tensor, or one 1-D tensor per dim."""
    nz = _call("nonzero", (input,), _E)
    if not as_tuple:
        return nz
    if input.ndim == 0:
        return (_call("select", (nz, 1, 0), _E) if nz.ndim == 2 and nz.shape[1] == 1 else
                _call("zeros", ((nz.shape[0],),), {"dtype": _INT64}),)
    return tuple(_call("select", (nz, 1, j), _E) for j in range(input.ndim))


def unbind(input, dim=0):
    n = input.shape[dim] if input.ndim else 0
    if input.ndim == 0:
        raise IndexError("unbind: expected a tensor with at least one dimension, got a 0-d tensor")
    return tuple(_call("select", (input, dim, i), _E) for i in range(n))


def split(tensor, split_size_or_sections, dim=0):
    """Views of consecutive pieces along dim: of split_size each (the last smaller), or of the
    given section sizes."""
    size = tensor.shape[dim]
    if isinstance(split_size_or_sections, builtins.int):
        step = split_size_or_sections
        if step <= 0:
            raise ValueError(f"split: expected a positive split_size, got {step}")
        sections = [builtins.min(step, size - s) for s in range(0, size, step)] or [0]
    else:
        sections = list(split_size_or_sections)
        if sum_ints(sections) != size:
            raise ValueError(f"split: the sections {sections} do not add up to the size {size} of dimension {dim}")
    out, start = [], 0
    for n in sections:
        out.append(_call("narrow", (tensor, dim, start, n), _E))
        start += n
    return tuple(out)


def sum_ints(values):
    total = 0
    for v in values:
        total += v
    return total


def chunk(input, chunks, dim=0):
    if chunks <= 0:
        raise ValueError(f"chunk: expected a positive number of chunks, got {chunks}")
    size = input.shape[dim]
    return split(input, builtins.max(1, -(-size // chunks)), dim)


def clamp_min(input, min):
    return _call("clamp", (input, min, None), _E)


def clamp_max(input, max):
    return _call("clamp", (input, None, max), _E)


def t(input):
    """The transpose of a tensor of at most 2 dims."""
    if input.ndim < 2:
        return _call("permute", (input, list(range(input.ndim))), _E)
    if input.ndim > 2:
        raise ValueError(f"t() expects a tensor with <= 2 dimensions, but self is {input.ndim}D")
    return _call("transpose", (input, 0, 1), _E)


def numel(input):
    return input.numel()


def is_tensor(obj):
    return isinstance(obj, _Tensor)


def is_floating_point(input):
    return input.dtype.is_floating_point


def promote_types(type1, type2):
    """The smallest dtype both promote to (torch.promote_types), as the kernels compute it."""
    a = _call("empty", ((0,),), {"dtype": type1})
    b = _call("empty", ((0,),), {"dtype": type2})
    return _call("where", (_call("empty", ((0,),), {"dtype": _BOOL}), a, b), _E).dtype


def result_type(tensor1, tensor2):
    """The dtype of an arithmetic op on the two operands (tensors or Python numbers)."""
    if isinstance(tensor1, _Tensor) and isinstance(tensor2, _Tensor):
        a = _call("empty", ((0,) if tensor1.ndim else (),), {"dtype": tensor1.dtype})
        b = _call("empty", ((0,) if tensor2.ndim else (),), {"dtype": tensor2.dtype})
        return _call("where", (_call("ones", ((),), {"dtype": _BOOL}), a, b), _E).dtype
    if isinstance(tensor1, _Tensor):
        return scalar_dtype(tensor1, tensor2)
    if isinstance(tensor2, _Tensor):
        return scalar_dtype(tensor2, tensor1)
    return _python_scalar_dtype((tensor1, tensor2))


def einsum(equation, *operands):
    """einsum("ij,jk->ik", a, b) or einsum("ij,jk->ik", [a, b]): contractions over labelled dims."""
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    return _call("einsum", (equation, list(operands)), _E)


def meshgrid(*tensors, indexing=None):
    """Coordinate grids of 1-D tensors; indexing "ij" (the default, as PyTorch's) or "xy"."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    return tuple(_call("meshgrid", (list(tensors),), {"indexing": indexing or "ij"}))


def norm(input, p="fro", dim=None, keepdim=False, dtype=None):
    """torch.norm: the vector p-norm over dim (all elements by default); "fro" is the 2-norm."""
    if p == "nuc":
        raise NotImplementedError("norm: the nuclear norm needs torch.linalg.svd, which Tessera does not have yet")
    if p == "fro" or p is None:
        p = 2
    if isinstance(dim, builtins.int):
        dim = [dim]
    return _call("linalg_vector_norm", (input, p, dim, keepdim), {"dtype": dtype})


def _unique_result(values, inverse, counts, return_inverse, return_counts):
    out = (values,) + ((inverse,) if return_inverse else ()) + ((counts,) if return_counts else ())
    return out[0] if len(out) == 1 else out


def unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None):
    """The distinct elements (sorted), with each element's position among them and their counts."""
    if dim is not None:
        values, inverse, counts = _call("unique_dim", (input, dim, sorted, return_inverse, return_counts), _E)
        return _unique_result(values, inverse, counts, return_inverse, return_counts)
    values, inverse, counts = _call("_unique2", (input, sorted, return_inverse, return_counts), _E)
    return _unique_result(values, inverse, counts, return_inverse, return_counts)


def unique_consecutive(input, return_inverse=False, return_counts=False, dim=None):
    """Collapses runs of equal consecutive elements (of the flattened input)."""
    values, inverse, counts = _call("unique_consecutive", (input, return_inverse, return_counts, dim), _E)
    return _unique_result(values, inverse, counts, return_inverse, return_counts)


def block_diag(*tensors):
    """A block-diagonal matrix of the given 0-, 1- or 2-D tensors."""
    return _call("block_diag", (list(tensors),), _E)


def broadcast_tensors(*tensors):
    """The tensors expanded to their common broadcast shape (views)."""
    return tuple(_call("broadcast_tensors", (list(tensors),), _E))


def tensor_split(input, indices_or_sections, dim=0):
    """Views of `input` split into near-equal sections, or at the given indices, along dim."""
    return tuple(_call("tensor_split", (input, indices_or_sections, dim), _E))


def atleast_1d(*tensors):
    out = tuple(t.reshape(1) if t.ndim == 0 else t for t in _flat(tensors))
    return out[0] if len(out) == 1 else out


def atleast_2d(*tensors):
    out = tuple(t.reshape(1, 1) if t.ndim == 0 else t.unsqueeze(0) if t.ndim == 1 else t for t in _flat(tensors))
    return out[0] if len(out) == 1 else out


def atleast_3d(*tensors):
    def three(t):
        if t.ndim == 0:
            return t.reshape(1, 1, 1)
        if t.ndim == 1:
            return t.reshape(1, t.shape[0], 1)
        return t.unsqueeze(2) if t.ndim == 2 else t
    out = tuple(three(t) for t in _flat(tensors))
    return out[0] if len(out) == 1 else out


def _flat(tensors):
    return tuple(tensors[0]) if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)) else tensors
