"""The rest of torch.linalg as composites over tessera.linalg's factorizations and matmul: triangular solves,
LU with its permutation, the *_ex variants, matrix functions (power, exp, square root), condition numbers,
multi_dot, tensor inverses and solves, Vandermonde and Householder products. Everything is built from
differentiable operators, so gradients come from autograd. Real dtypes (float32, float64).

Left out: eig / eigvals (complex results of a general eigensolver: Tessera has no LAPACK geev-backed operator)
and ldl_factor / ldl_solve (Bunch-Kaufman pivoting has no operator either)."""
import builtins
import math
from collections import namedtuple

from tessera import _C

_call = _C.call_op
_E = {}

LUResult = namedtuple("lu", ["P", "L", "U"])
InvExResult = namedtuple("inv_ex", ["inverse", "info"])
SolveExResult = namedtuple("solve_ex", ["result", "info"])
PolarResult = namedtuple("polar", ["U", "H"])


class LinAlgError(RuntimeError, ValueError):
    """A singular input (torch.linalg.LinAlgError). Also a ValueError: Tessera's kernels raised that before."""


class _FactorError(RuntimeError, ValueError):
    """torch.linalg.lu_factor raises a plain RuntimeError; ValueError kept for Tessera's earlier callers."""


def _la():
    from tessera import linalg
    return linalg


def _ts():
    import tessera
    return tessera


def _out(result, out, fname):
    if out is None:
        return result
    if tuple(out.shape) != tuple(result.shape):
        out.resize_(tuple(result.shape))
    out.copy_(result)
    return out


def _at_least_2d(A, fname, name="A"):
    if A.ndim < 2:
        raise RuntimeError(f"{fname}: The input tensor {name} must have at least 2 dimensions.")


def _square(A, fname):
    _at_least_2d(A, fname)
    if A.shape[-1] != A.shape[-2]:
        raise RuntimeError(f"{fname}: A must be batches of square matrices, but they are {A.shape[-2]} by "
                           f"{A.shape[-1]} matrices")


def _eye(n, m, A):
    return _call("eye", (n, m), {"dtype": A.dtype, "device": A.device})


def _batched_eye(A):
    return _call("expand", (_eye(A.shape[-1], None, A), tuple(A.shape)), _E)


def _mm(a, b):
    return _call("matmul", (a, b), _E)


def _mT(a):
    return _call("transpose", (a, -2, -1), _E)


def _first_bad(info):
    """(batch index or None, info) of the first matrix with info > 0, or None when all succeeded."""
    flat = info.reshape(-1).tolist()
    for i, v in enumerate(flat):
        if v > 0:
            return (i if info.ndim > 0 else None), v
    return None


def _batch_prefix(bad):
    return "" if bad[0] is None else f"(Batch element {bad[0]}): "


def _inv_message(fname, bad):
    return (f"{fname}: {_batch_prefix(bad)}The diagonal element {bad[1]} is zero, the inversion could not be "
            f"completed because the input matrix is singular.")


def _solve_message(bad):
    return f"torch.linalg.solve: {_batch_prefix(bad)}The solver failed because the input matrix is singular."


def _getrf(bad):
    """Tessera's detail after torch's message (callers may match either)."""
    return f" (U[{bad[1]},{bad[1]}] is zero: LAPACK getrf info = {bad[1]})"


def _singular_info(A):
    return _call("linalg_lu_factor_ex", (A.detach(),), {"pivot": True, "check_errors": False})[2]


# ============================================================================ aliases
def matmul(input, other, *, out=None):
    return _out(_call("matmul", (input, other), _E), out, "matmul")


def diagonal(A, *, offset=0, dim1=-2, dim2=-1):
    return _call("diagonal", (A, offset, dim1, dim2), _E)


# ============================================================================ inverses and solves
def inv(A, *, out=None):
    """The inverse; a singular matrix raises LinAlgError with torch's message."""
    try:
        r = _call("linalg_inv", (A,), _E)
    except ValueError as e:
        if "singular" not in str(e):
            raise
        bad = _first_bad(_singular_info(A))
        raise LinAlgError(_inv_message("linalg.inv", bad) + _getrf(bad) if bad else str(e)) from None
    return _out(r, out, "linalg.inv")


def solve(A, B, *, left=True, out=None):
    try:
        r = _call("linalg_solve", (A, B), {"left": left})
    except ValueError as e:
        if "singular" not in str(e):
            raise
        bad = _first_bad(_singular_info(A))
        raise LinAlgError(_solve_message(bad) + _getrf(bad) if bad else str(e)) from None
    return _out(r, out, "linalg.solve")


def inv_ex(A, *, check_errors=False, out=None):
    """(inverse, info): info is getrf's per matrix; a singular matrix gives LU's inf/nan unless check_errors."""
    _square(A, "linalg.inv")
    LU, pivots, info = _call("linalg_lu_factor_ex", (A.detach(),), {"pivot": True, "check_errors": False})
    bad = _first_bad(info)
    if bad is None:
        return InvExResult(_call("linalg_inv", (A,), _E), info)  # the differentiable path
    if check_errors:
        raise LinAlgError(_inv_message("linalg.inv_ex", bad))
    return InvExResult(_call("linalg_lu_solve", (LU, pivots, _batched_eye(A)), {"left": True, "adjoint": False}),
                       info)


def solve_ex(A, B, *, left=True, check_errors=False, out=None):
    """(result, info) of linalg.solve; a singular matrix gives LU's inf/nan unless check_errors."""
    _square(A, "linalg.solve")
    LU, pivots, info = _call("linalg_lu_factor_ex", (A.detach(),), {"pivot": True, "check_errors": False})
    bad = _first_bad(info)
    if bad is None:
        return SolveExResult(_call("linalg_solve", (A, B), {"left": left}), info)
    if check_errors:
        raise LinAlgError(_solve_message(bad).replace("torch.linalg.solve", "torch.linalg.solve_ex"))
    if left:
        x = _call("linalg_lu_solve", (LU, pivots, B), {"left": True, "adjoint": False}) if B.ndim != 1 else \
            _call("linalg_lu_solve", (LU, pivots, B.unsqueeze(-1)), {"left": True, "adjoint": False}).squeeze(-1)
    else:
        x = _call("linalg_lu_solve", (LU, pivots, B), {"left": False, "adjoint": False})
    return SolveExResult(x, info)


def _broadcast_batch(A, B):
    batch = _ts().broadcast_shapes(tuple(A.shape[:-2]), tuple(B.shape[:-2]))
    return (_call("expand", (A, batch + tuple(A.shape[-2:])), _E),
            _call("expand", (B, batch + tuple(B.shape[-2:])), _E))


def _unit_diagonal(T):
    eye = _eye(T.shape[-1], None, T)
    off = _call("logical_not", (eye.to(_ts().bool),), _E)
    return _call("add", (_call("mul", (T, off), _E), eye), _E)


def solve_triangular(A, B, *, upper, left=True, unitriangular=False, out=None):
    """X with A X = B (X A = B when not left) reading only A's upper or lower triangle (its diagonal as ones
    when unitriangular); the gradient of A is triangular too. Solved by LU, which keeps a triangular matrix
    as it is: a zero diagonal gives inf/nan as torch, not an error."""
    fname = "linalg.solve_triangular"
    _square(A, fname)
    _at_least_2d(B, fname, "B")
    if left and A.shape[-1] != B.shape[-2] or not left and A.shape[-2] != B.shape[-1]:
        eq = "AX = B" if left else "XA = B"
        raise RuntimeError(f"{fname}: Incompatible shapes of A and B for the equation {eq} "
                           f"({A.shape[-2]}x{A.shape[-1]} and {B.shape[-2]}x{B.shape[-1]})")
    T = _call("triu", (A, 0), _E) if upper else _call("tril", (A, 0), _E)
    if unitriangular:
        T = _unit_diagonal(T)
    T, B = _broadcast_batch(T, B)  # B keeps as many dims as T: linalg.solve never reads it as vectors
    if A.shape[-1] == 0:
        return _out(B.clone(), out, fname)
    d = _call("diagonal", (T.detach(), 0, -2, -1), _E)
    if bool(_call("eq", (d, 0), _E).any().item()):
        LU, pivots, _ = _call("linalg_lu_factor_ex", (T,), {"pivot": True, "check_errors": False})
        return _out(_call("linalg_lu_solve", (LU, pivots, B), {"left": left, "adjoint": False}), out, fname)
    return _out(_call("linalg_solve", (T, B), {"left": left}), out, fname)


# ============================================================================ LU
def _permutations(pivots, m):
    """Row permutations perm (as nested lists) with P^T A = A[perm] from getrf's 1-based sequential swaps."""
    def one(p):
        perm = list(builtins.range(m))
        for i, j in enumerate(p):
            perm[i], perm[j - 1] = perm[j - 1], perm[i]
        return perm

    def walk(p):
        return one(p) if not p or not isinstance(p[0], list) else [walk(q) for q in p]
    return walk(pivots.tolist())


def _permutation_matrix(pivots, m, A):
    """P (batched like pivots) with A = P L U: P^T's row i is e_perm[i]."""
    ts = _ts()
    perm = ts.tensor(_permutations(pivots, m), dtype=ts.int64, device=A.device)
    onehot = _call("eq", (perm.unsqueeze(-1), ts.arange(m, device=A.device)), _E).to(A.dtype)
    return _mT(onehot)


def _eliminate(A):
    """(L, U) of A by Gaussian elimination without pivoting (A already permuted) in differentiable operators:
    autograd differentiates the factorization itself."""
    ts = _ts()
    m, n = A.shape[-2], A.shape[-1]
    k = builtins.min(m, n)
    batch = tuple(A.shape[:-2])
    rows, cols = [], []
    M = A
    for j in builtins.range(k):
        u = M[..., 0:1, :]
        p = M[..., 0:1, 0:1]
        # a zero pivot has zeros below it (LAPACK chose the largest): leave that column of L zero, as getrf does
        p = _call("where", (_call("eq", (p, 0), _E), _ts().ones_like(p), p), _E)
        l = _call("div", (M[..., 1:, 0:1], p), _E)
        rows.append(ts.cat([ts.zeros(batch + (1, j), dtype=A.dtype, device=A.device), u], -1) if j else u)
        one = ts.ones(batch + (1, 1), dtype=A.dtype, device=A.device)
        col = ts.cat([one, l], -2)
        cols.append(ts.cat([ts.zeros(batch + (j, 1), dtype=A.dtype, device=A.device), col], -2) if j else col)
        M = _call("sub", (M[..., 1:, 1:], _mm(l, u[..., :, 1:])), _E)
    if k == 0:
        return ts.zeros(batch + (m, 0), dtype=A.dtype, device=A.device), \
            ts.zeros(batch + (0, n), dtype=A.dtype, device=A.device)
    return ts.cat(cols, -1), ts.cat(rows, -2)


def _unpack(LU):
    """(L, U) of getrf's compact LU: L m x k unit lower, U k x n upper."""
    m, n = LU.shape[-2], LU.shape[-1]
    k = builtins.min(m, n)
    L = _call("tril", (LU[..., :, :k], -1), _E)
    L = _call("add", (L, _eye(m, k, LU)), _E)
    return L, _call("triu", (LU[..., :k, :], 0), _E)


def _needs_grad(A):
    return A.requires_grad and _ts().is_grad_enabled()


def lu(A, *, pivot=True, out=None):
    """(P, L, U) with A = P L U. Differentiable: with a gradient to track, L and U come from elimination in
    autograd's operators on the rows LAPACK chose (the permutation is piecewise constant)."""
    if A.ndim < 2:
        raise RuntimeError(f"linalg.lu: Expected tensor with 2 or more dimensions. Got size: {list(A.shape)} instead")
    if not pivot:
        raise RuntimeError("linalg.lu_factor: LU without pivoting is not implemented on the CPU")
    m = A.shape[-2]
    LU, pivots, _ = _call("linalg_lu_factor_ex", (A.detach(),), {"pivot": True, "check_errors": False})
    P = _permutation_matrix(pivots, m, A)
    if not _needs_grad(A):
        L, U = _unpack(LU)
        return LUResult(P, L, U)
    L, U = _eliminate(_mm(_mT(P), A))
    return LUResult(P, L, U)


def _compact(L, U):
    """getrf's compact LU from L (m x k) and U (k x n)."""
    ts = _ts()
    m, n = L.shape[-2], U.shape[-1]
    k = L.shape[-1]
    batch = tuple(L.shape[:-2])
    strict = _call("tril", (L, -1), _E)
    if m > k:
        U = ts.cat([U, ts.zeros(batch + (m - k, n), dtype=U.dtype, device=U.device)], -2)
    if n > k:
        strict = ts.cat([strict, ts.zeros(batch + (m, n - k), dtype=L.dtype, device=L.device)], -1)
    return _call("add", (strict, U), _E)


def lu_factor_ex(A, *, pivot=True, check_errors=False, out=None):
    la = _la()
    LU, pivots, info = _call("linalg_lu_factor_ex", (A,), {"pivot": pivot, "check_errors": check_errors})
    if _needs_grad(A):  # LAPACK's factors carry no history: rebuild LU from the differentiable L and U
        P, L, U = lu(A)
        LU = _compact(L, U)
    return la.LUFactorExResult(LU, pivots, info)


def lu_factor(A, *, pivot=True, out=None):
    la = _la()
    LU, pivots, info = lu_factor_ex(A, pivot=pivot)
    bad = _first_bad(info)
    if bad:
        raise _FactorError(f"torch.linalg.lu_factor: {_batch_prefix(bad)}U[{bad[1]},{bad[1]}] is zero and using it "
                           f"on lu_solve would result in a division by zero. If you still want to perform the "
                           f"factorization, consider calling linalg.lu(A, pivot) or linalg.lu_factor_ex(A, pivot)")
    return la.LUFactorResult(LU, pivots)


# ============================================================================ matrix functions
def matrix_power(A, n, *, out=None):
    """A ** n by repeated squaring (n < 0: of the inverse); n == 0 gives identities."""
    if not isinstance(n, builtins.int) or isinstance(n, builtins.bool):
        raise TypeError(f"linalg_matrix_power(): argument 'n' (position 2) must be int, not {type(n).__name__}")
    _square(A, "linalg.matrix_power")
    if n == 0:
        return _out(_batched_eye(A).clone(), out, "matrix_power")
    a = inv(A) if n < 0 else A
    n = builtins.abs(n)
    result = None
    while n:
        if n & 1:
            result = a if result is None else _mm(result, a)
        n >>= 1
        if n:
            a = _mm(a, a)
    return _out(A.clone() if result is A else result, out, "matrix_power")


# Higham (2005), "The scaling and squaring method for the matrix exponential revisited": the [m/m] Pade
# degrees, the 1-norm bound theta_m up to which each is accurate to the unit roundoff, and the coefficients.
_PADE = {
    3: [120., 60., 12., 1.],
    5: [30240., 15120., 3360., 420., 30., 1.],
    7: [17297280., 8648640., 1995840., 277200., 25200., 1512., 56., 1.],
    9: [17643225600., 8821612800., 2075673600., 302702400., 30270240., 2162160., 110880., 3960., 90., 1.],
    13: [64764752532480000., 32382376266240000., 7771770303897600., 1187353796428800., 129060195264000.,
         10559470521600., 670442572800., 33522128640., 1323241920., 40840800., 960960., 16380., 182., 1.],
}
_THETA64 = ((3, 1.495585217958292e-2), (5, 2.539398330063230e-1), (7, 9.504178996162932e-1),
            (9, 2.097847961257068), (13, 5.371920351148152))
_THETA32 = ((3, 4.258730016922831e-1), (5, 1.880152677804762), (7, 3.925724783138660))


def _pade(A, m):
    """(V + U, V - U) for the [m/m] approximant p(A) / p(-A) = (V + U) / (V - U)."""
    b = _PADE[m]
    eye = _batched_eye(A)
    A2 = _mm(A, A)
    if m < 13:
        powers = [eye, A2]
        for _ in builtins.range(2, m // 2 + 1):
            powers.append(_mm(powers[-1], A2))
        U = builtins.sum((powers[i] * b[2 * i + 1] for i in builtins.range(1, len(powers))), powers[0] * b[1])
        V = builtins.sum((powers[i] * b[2 * i] for i in builtins.range(1, len(powers))), powers[0] * b[0])
        U = _mm(A, U)
    else:
        A4 = _mm(A2, A2)
        A6 = _mm(A4, A2)
        U = _mm(A6, A6 * b[13] + A4 * b[11] + A2 * b[9]) + A6 * b[7] + A4 * b[5] + A2 * b[3] + eye * b[1]
        U = _mm(A, U)
        V = _mm(A6, A6 * b[12] + A4 * b[10] + A2 * b[8]) + A6 * b[6] + A4 * b[4] + A2 * b[2] + eye * b[0]
    return V + U, V - U


def matrix_exp(A):
    """exp(A) by scaling and squaring with Higham's Pade degrees for A's precision: the lowest degree whose bound
    covers the largest 1-norm in the batch, else the highest on A / 2**s, squared s times."""
    _square(A, "linalg.matrix_exp")
    if A.shape[-1] == 0 or A.numel() == 0:
        return A.clone()
    col_sums = _call("sum", (_call("abs", (A.detach(),), _E), [-2]), _E)
    norm = _call("amax", (col_sums, []), _E).item()
    thetas = _THETA64 if A.dtype == _ts().float64 else _THETA32
    if not math.isfinite(norm):
        s, m = 0, thetas[-1][0]
    else:
        m = next((d for d, t in thetas if norm <= t), None)
        s = 0
        if m is None:
            m, theta = thetas[-1]
            s = builtins.max(0, int(math.ceil(math.log2(norm / theta))))
    a = _call("div", (A, float(2 ** s)), _E) if s else A
    P, Q = _pade(a, m)
    r = _call("linalg_solve", (Q, P), {"left": True})
    for _ in builtins.range(s):
        r = _mm(r, r)
    return r


def matrix_sqrth(A):
    """The principal square root of a symmetric positive-definite matrix (its lower triangle read) by eigh;
    negative eigenvalues count as zero, as torch."""
    _square(A, "linalg.matrix_sqrth")
    w, V = _la().eigh(A)
    s = _call("sqrt", (_call("clamp", (w, 0.0, None), _E),), _E)
    return _mm(V * s.unsqueeze(-2), _mT(V))


def polar(A, *, out=None):
    """(U, H) with A = U H, U with orthonormal columns and H symmetric positive semi-definite, from the SVD."""
    _at_least_2d(A, "linalg.polar")
    if A.shape[-2] < A.shape[-1]:
        raise RuntimeError(f"linalg.polar: input must have at least as many rows as columns, but got "
                           f"{A.shape[-2]} by {A.shape[-1]} matrices")
    W, S, Vh = _la().svd(A, full_matrices=False)
    return PolarResult(_mm(W, Vh), _mm(_mT(Vh) * S.unsqueeze(-2), Vh))


# ============================================================================ norms and products
_COND_ORDS = ("fro", "nuc", math.inf, -math.inf, 1, -1)


def cond(A, p=None, *, out=None):
    """The condition number in the p-norm: the singular values' ratio for p None, 2, -2 (any shape), else
    norm(A) * norm(inv(A)) on square matrices, inf where A is singular."""
    la = _la()
    if p not in (None, 2, -2) and p not in _COND_ORDS:
        raise ValueError(f"linalg.cond got an invalid norm type: {p}")
    if A.ndim < 2:
        raise RuntimeError("linalg.cond: The input tensor must have at least 2 dimensions.")
    if p in (None, 2, -2):
        s = la.svdvals(A)
        hi, lo = _call("amax", (s, [-1]), _E), _call("amin", (s, [-1]), _E)
        return _out(_call("div", (lo, hi) if p == -2 else (hi, lo), _E), out, "linalg.cond")
    if A.shape[-1] != A.shape[-2]:
        raise RuntimeError(f"linalg.cond(ord={p}): A must be batches of square matrices, but they are "
                           f"{A.shape[-2]} by {A.shape[-1]} matrices")
    Ainv, info = inv_ex(A)
    r = _call("mul", (la.matrix_norm(A, p), la.matrix_norm(Ainv, p)), _E)
    inf = _C.tensor(math.inf, dtype=r.dtype, device=r.device)
    return _out(_call("where", (_call("gt", (info, 0), _E), inf, r), _E), out, "linalg.cond")


def _chain_order(dims):
    """Matrix-chain dynamic programme: split[i][j] is the best last split of the product of matrices i..j."""
    n = len(dims) - 1
    cost = [[0] * n for _ in builtins.range(n)]
    split = [[0] * n for _ in builtins.range(n)]
    for length in builtins.range(1, n):
        for i in builtins.range(n - length):
            j = i + length
            cost[i][j] = math.inf
            for k in builtins.range(i, j):
                c = cost[i][k] + cost[k + 1][j] + dims[i] * dims[k + 1] * dims[j + 1]
                if c < cost[i][j]:
                    cost[i][j], split[i][j] = c, k
    return split


def multi_dot(tensors, *, out=None):
    """The product of a chain of 2-D matrices (the first may be a row vector, the last a column vector, as 1-D)
    in the order with the fewest scalar multiplications."""
    tensors = list(tensors)
    n = len(tensors)
    if n < 2:
        raise RuntimeError(f"multi_dot(): expected at least 2 tensors but got {n}")
    for i, t in enumerate(tensors):
        where = "first" if i == 0 else "last" if i == n - 1 else None
        if where and t.ndim not in (1, 2):
            raise RuntimeError(f"multi_dot(): the {where} tensor must be 1D or 2D but got {t.ndim}D")
        if not where and t.ndim != 2:
            raise RuntimeError(f"multi_dot(): tensor {i} must be 2D but got {t.ndim}D")
        if t.dtype != tensors[0].dtype:
            raise RuntimeError(f"multi_dot(): all tensors must have be the same dtype but tensor 0 is "
                               f"{_type_name(tensors[0].dtype)} and tensor {i} {_type_name(t.dtype)}")
    first_vec, last_vec = tensors[0].ndim == 1, tensors[-1].ndim == 1
    mats = list(tensors)
    if first_vec:
        mats[0] = mats[0].unsqueeze(0)
    if last_vec:
        mats[-1] = mats[-1].unsqueeze(-1)
    for i in builtins.range(n - 1):
        if mats[i].shape[-1] != mats[i + 1].shape[0]:
            raise RuntimeError(f"multi_dot(): tensors {i} and {i + 1} with shapes {list(tensors[i].shape)} and "
                               f"{list(tensors[i + 1].shape)} cannot be multiplied")
    dims = [mats[0].shape[0]] + [t.shape[1] for t in mats]
    split = _chain_order(dims)

    def product(i, j):
        if i == j:
            return mats[i]
        k = split[i][j]
        return _mm(product(i, k), product(k + 1, j))
    r = product(0, n - 1)
    if first_vec and last_vec:
        r = r.reshape(())
    elif first_vec:
        r = r.squeeze(0)
    elif last_vec:
        r = r.squeeze(-1)
    return _out(r, out, "multi_dot")


def _type_name(dt):
    return {"float32": "float", "float64": "double", "int32": "int", "int64": "long", "float16": "half",
            "bfloat16": "BFloat16", "bool": "bool"}.get(str(dt).split(".")[-1], str(dt))


def _prod(shape):
    r = 1
    for s in shape:
        r *= s
    return r


def tensorinv(A, ind=2, *, out=None):
    """The inverse of tensordot(A, ., ind): A read as a prod(shape[:ind]) x prod(shape[ind:]) square matrix."""
    if not isinstance(ind, builtins.int) or ind <= 0:
        raise RuntimeError(f"Expected a strictly positive integer for 'ind', but got {ind}")
    rows, cols = tuple(A.shape[:ind]), tuple(A.shape[ind:])
    m, n = _prod(rows), _prod(cols)
    if m != n:
        raise RuntimeError(f"Expected self to satisfy the requirement prod(self.shape[ind:]) == "
                           f"prod(self.shape[:ind]), but got {n} != {m}")
    try:
        r = inv(A.reshape(m, n))
    except LinAlgError as e:
        raise LinAlgError(str(e).replace("linalg.inv: ", "inv: ", 1)) from None
    return _out(r.reshape(cols + rows), out, "linalg.tensorinv")


def tensorsolve(A, B, dims=None, *, out=None):
    """X with tensordot(A, X, X.ndim) = B; dims: A's dims moved to the end first."""
    if dims is not None:
        dims = [d % A.ndim for d in dims]
        keep = [d for d in builtins.range(A.ndim) if d not in dims]
        A = A.permute(keep + dims)
    rest = tuple(A.shape[B.ndim:])
    n = _prod(rest)
    if n != B.numel():
        raise RuntimeError(f"Expected self to satisfy the requirement prod(self.shape[other.ndim:]) == "
                           f"prod(self.shape[:other.ndim]), but got {n} != {B.numel()}")
    return _out(solve(A.reshape(-1, n), B.reshape(-1)).reshape(rest), out, "linalg.tensorsolve")


def _powers(x, N):
    """x**0 .. x**(N-1) stacked on a new last dim by repeated products (differentiable, exact for integers)."""
    cols = [_ts().ones_like(x)]
    for _ in builtins.range(N - 1):
        cols.append(_call("mul", (cols[-1], x), _E))
    return _call("stack", (cols, -1), _E)


def vander(x, N=None):
    """The Vandermonde matrices of the vectors in x's last dim: increasing powers x**0 .. x**(N-1)."""
    if x.dtype == _ts().bool:
        raise NotImplementedError("linalg.vander supports floating point, complex, and integer tensors, but got "
                                  "Bool")
    if x.ndim < 1:
        raise RuntimeError("N must be greater than 1.")
    if N is None:
        N = x.shape[-1]
    if N <= 1:
        raise RuntimeError("N must be greater than 1.")
    return _powers(x, N)


def householder_product(A, tau, *, out=None):
    """The first n columns of H_1 ... H_k, H_i = I - tau_i v_i v_i^T with v_i the i-th column of A below the
    diagonal after a one (geqrf's compact Q), applied right to left to the identity's first n columns."""
    fname = "torch.linalg.householder_product"
    _at_least_2d(A, fname, "input")
    m, n = A.shape[-2], A.shape[-1]
    if m < n:
        raise RuntimeError(f"{fname}: input.shape[-2] must be greater than or equal to input.shape[-1]")
    if n < tau.shape[-1]:
        raise RuntimeError(f"{fname}: input.shape[-1] must be greater than or equal to tau.shape[-1]")
    if tau.ndim != A.ndim - 1:
        raise RuntimeError(f"{fname}: Expected tau to have one dimension less than input, but got tau.ndim equal "
                           f"to {tau.ndim} and input.ndim is equal to {A.ndim}")
    V = _call("add", (_call("tril", (A, -1), _E), _eye(m, n, A)), _E)
    batch = _ts().broadcast_shapes(tuple(A.shape[:-2]), tuple(tau.shape[:-1]))
    X = _call("expand", (_eye(m, n, A), batch + (m, n)), _E)
    for i in builtins.range(tau.shape[-1] - 1, -1, -1):
        v = V[..., :, i:i + 1]
        t = tau[..., i:i + 1].unsqueeze(-1)
        X = _call("sub", (X, _mm(v * t, _mm(_mT(v), X))), _E)
    return _out(X.contiguous(), out, "linalg.householder_product")
