"""tessera.linalg: PyTorch's torch.linalg over Tessera's operators. The factorizations (LU,
Cholesky, QR, eigh, eig, SVD) are LAPACK on the CPU; the solvers built on them are composites, so
a device that implements the factorizations gets them all. Real dtypes (float32, float64); LU and
what is built on it (solve, inv, det) and eig also take complex64 / complex128 (eig of a real
matrix is complex). The rest (triangular solves, LU with P, matrix functions, ...) is in
_linalg_more."""
import builtins
from collections import namedtuple

from tessera import _C

_call = _C.call_op
_E = {}

SlogdetResult = namedtuple("slogdet", ["sign", "logabsdet"])
QRResult = namedtuple("qr", ["Q", "R"])
EighResult = namedtuple("eigh", ["eigenvalues", "eigenvectors"])
EigResult = namedtuple("eig", ["eigenvalues", "eigenvectors"])
SVDResult = namedtuple("svd", ["U", "S", "Vh"])
LUFactorResult = namedtuple("lu_factor", ["LU", "pivots"])
LUFactorExResult = namedtuple("lu_factor_ex", ["LU", "pivots", "info"])
CholeskyExResult = namedtuple("cholesky_ex", ["L", "info"])
LDLFactorResult = namedtuple("ldl_factor", ["LD", "pivots"])
LDLFactorExResult = namedtuple("ldl_factor_ex", ["LD", "pivots", "info"])
LstsqResult = namedtuple("lstsq", ["solution", "residuals", "rank", "singular_values"])


def vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None):
    """The vector ord-norm of x over dim (every element when None): ord 2, 1, inf, -inf, 0 or any real."""
    if isinstance(dim, builtins.int):
        dim = [dim]
    return _call("linalg_vector_norm", (x, ord, dim, keepdim), {"dtype": dtype})


def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None):
    """'fro', 'nuc', inf, -inf, 1, -1, 2, -2 norms of the matrices in dims `dim`."""
    return _call("linalg_matrix_norm", (A, ord, list(dim), keepdim), {"dtype": dtype})


def norm(A, ord=None, dim=None, keepdim=False, *, dtype=None):
    """A vector norm (dim an int or None with ord None) or a matrix norm (dim a pair, or a 2-D input
    with ord given), as torch.linalg.norm."""
    if isinstance(dim, builtins.int):
        dim = (dim,)
    if dim is not None and len(dim) == 2 or (dim is None and ord is not None and A.ndim == 2):
        return matrix_norm(A, "fro" if ord is None else ord, dim or (-2, -1), keepdim, dtype=dtype)
    if dim is None and ord is not None and A.ndim != 1:
        raise ValueError(f"linalg.norm: If dim is not specified but ord is, the input must be 1D or 2D. Got {A.ndim}D.")
    return vector_norm(A, 2 if ord is None else ord, dim, keepdim, dtype=dtype)


def cross(input, other, *, dim=-1):
    """The cross product of 3-vectors along dim."""
    return _call("linalg_cross", (input, other), {"dim": dim})


def vecdot(x, y, *, dim=-1):
    """The dot product of vectors along dim (real dtypes)."""
    return (x * y).sum(dim)


def det(A):
    return _call("linalg_det", (A,), _E)


def slogdet(A):
    return SlogdetResult(*_call("linalg_slogdet", (A,), _E))


def cholesky(A, *, upper=False):
    return _call("linalg_cholesky", (A,), {"upper": upper})


def cholesky_ex(A, *, upper=False, check_errors=False):
    return CholeskyExResult(*_call("linalg_cholesky_ex", (A,), {"upper": upper, "check_errors": check_errors}))


def ldl_factor_ex(A, *, hermitian=False, check_errors=False):
    return LDLFactorExResult(*_call("linalg_ldl_factor_ex", (A,), {"hermitian": hermitian,
                                                                    "check_errors": check_errors}))


def ldl_factor(A, *, hermitian=False):
    LD, pivots, _ = ldl_factor_ex(A, hermitian=hermitian, check_errors=True)
    return LDLFactorResult(LD, pivots)


def ldl_solve(LD, pivots, B, *, hermitian=False):
    return _call("linalg_ldl_solve", (LD, pivots, B), {"hermitian": hermitian})


def qr(A, mode="reduced"):
    return QRResult(*_call("linalg_qr", (A, mode), _E))


def eigh(A, UPLO="L"):
    return EighResult(*_call("linalg_eigh", (A, UPLO), _E))


def eigvalsh(A, UPLO="L"):
    return _call("linalg_eigvalsh", (A, UPLO), _E)


def eig(A, *, out=None):
    """Eigenvalues and right eigenvectors (columns, each of unit norm with its largest component
    real: LAPACK's geev, as torch) of square matrices; complex results for real input too. The
    gradient is defined for losses that do not depend on each eigenvector's phase."""
    result = EigResult(*_call("linalg_eig", (A,), _E))
    if out is not None:
        for o, r in zip(out, result):
            o.resize_(r.shape).copy_(r)
        return EigResult(*out)
    return result


def eigvals(A, *, out=None):
    """The eigenvalues of eig (complex), its gradient through eig's."""
    w = _call("linalg_eigvals", (A,), _E)
    if out is not None:
        return out.resize_(w.shape).copy_(w)
    return w


def svd(A, full_matrices=True, *, driver=None):
    return SVDResult(*_call("linalg_svd", (A, full_matrices), {"driver": driver}))


def svdvals(A, *, driver=None):
    return _call("linalg_svdvals", (A,), {"driver": driver})


def pinv(A, *, atol=None, rtol=None, hermitian=False):
    return _call("linalg_pinv", (A,), {"atol": atol, "rtol": rtol, "hermitian": hermitian})


def matrix_rank(A, *, atol=None, rtol=None, hermitian=False):
    return _call("linalg_matrix_rank", (A,), {"atol": atol, "rtol": rtol, "hermitian": hermitian})


def lstsq(A, B, rcond=None, *, driver=None):
    return LstsqResult(*_call("linalg_lstsq", (A, B, rcond), {"driver": driver}))


def lu_solve(LU, pivots, B, *, left=True, adjoint=False):
    return _call("linalg_lu_solve", (LU, pivots, B), {"left": left, "adjoint": adjoint})


# the composites over the functions above (inv, solve and the LU factorizations included, for their errors
# and gradients); torch's top-level matrix_power, matrix_exp, triangular_solve share them
from tessera._linalg_more import (  # noqa: E402,F401
    LinAlgError, LUResult, InvExResult, SolveExResult, PolarResult, matmul, diagonal, inv, solve, inv_ex, solve_ex,
    solve_triangular, lu, lu_factor, lu_factor_ex, matrix_power, matrix_exp, matrix_sqrth, polar, cond, multi_dot,
    tensorinv, tensorsolve, vander, householder_product, _powers)
