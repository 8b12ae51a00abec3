"""tessera.linalg: PyTorch's torch.linalg names over Tessera's operators (the vector norm and the
cross product so far; the LAPACK-backed decompositions are not built yet)."""
import builtins

from tessera import _C

_call = _C.call_op


def vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None):
    """The vector ord-norm of x over dim (every element when None): ord 2, 1, inf, -inf, 0 or any real."""
    if isinstance(dim, builtins.int):
        dim = [dim]
    return _call("linalg_vector_norm", (x, ord, dim, keepdim), {"dtype": dtype})


def norm(A, ord=None, dim=None, keepdim=False, *, dtype=None):
    """The vector norm (ord None means 2 over the flattened input); matrix norms need SVD (not built)."""
    if isinstance(ord, str) or (dim is not None and not isinstance(dim, builtins.int) and len(dim) == 2):
        raise NotImplementedError("linalg.norm: matrix norms are not implemented yet; use linalg.vector_norm")
    return vector_norm(A, 2 if ord is None else ord, dim, keepdim, dtype=dtype)


def cross(input, other, *, dim=-1):
    """The cross product of 3-vectors along dim."""
    return _call("linalg_cross", (input, other), {"dim": dim})


def vecdot(x, y, *, dim=-1):
    """The dot product of vectors along dim (real dtypes)."""
    return (x * y).sum(dim)
