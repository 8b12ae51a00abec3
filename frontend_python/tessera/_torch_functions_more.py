"""More of torch's top-level functions, over Tessera's operators: the torch.* spellings of
torch.linalg / torch.nn.functional functions (with ATen's argument orders and integer reduction
codes where torch's top-level form has them), statistics (quantile, cov, histogram), creation
(range, logspace, windows, asarray, frombuffer), shape helpers (hsplit, cartesian_prod,
combinations, ...), predicates, and the top-level in-place forms (torch.abs_(x) is x.abs_())."""
import builtins
import itertools
import math
import warnings
from collections import namedtuple

from tessera import _C, _elementwise_more, _functions, linalg
from tessera.nn import _rnn, functional as _F

_call = _C.call_op
_E = {}
_Tensor = _C.Tensor
_DT = _C.dtypes
_F64 = _DT["float64"]
_I64 = _DT["int64"]
_BOOL = _DT["bool"]

SVDResult = namedtuple("svd", ["U", "S", "V"])
SlogdetResult = namedtuple("slogdet", ["sign", "logabsdet"])
HistogramResult = namedtuple("histogram", ["hist", "bin_edges"])
TriangularSolveResult = namedtuple("triangular_solve", ["solution", "cloned_coefficient"])

newaxis = None


def _type_name(dt):
    return _elementwise_more._type_name(dt)


def _out(result, out, fname):
    return _elementwise_more._out(result, out, fname)


def _ts():
    import tessera
    return tessera


# ============================================================================ creation
def range(start=0, end=None, step=1, *, out=None, dtype=None, layout=None, device=None, requires_grad=False):
    """Deprecated in torch: start, start + step, ... up to and including end (the default dtype
    unless dtype is given)."""
    warnings.warn("torch.range is deprecated and will be removed in a future release because its behavior is "
                  "inconsistent with Python's range builtin. Instead, use torch.arange, which produces values in "
                  "[start, end).", UserWarning, stacklevel=2)
    if end is None:
        start, end = 0, start
    if step == 0:
        raise RuntimeError("step must be nonzero")
    if (end - start) * step < 0:
        raise RuntimeError("upper bound and lower bound inconsistent with step sign")
    dtype = dtype or _C.get_default_dtype()
    n = int(math.floor((end - start) / step)) + 1
    ts = _ts()
    r = ts.arange(n, dtype=_F64, device=device) * float(step) + float(start)
    r = r.to(dtype)
    if requires_grad:
        r.requires_grad_(True)
    return _out(r, out, "range")


def logspace(start, end, steps, base=10.0, *, out=None, dtype=None, layout=None, device=None,
             requires_grad=False):
    """base ** linspace(start, end, steps), in the default dtype unless dtype is given."""
    ts = _ts()
    if isinstance(start, _Tensor):
        start = start.item()
    if isinstance(end, _Tensor):
        end = end.item()
    dtype = dtype or _C.get_default_dtype()
    exps = ts.linspace(start, end, steps, dtype=_F64, device=device)
    r = _call("pow", (_C.tensor(float(base), dtype=_F64, device=exps.device), exps), _E)
    if not (dtype.is_floating_point or dtype.is_complex):
        r = _call("trunc", (r,), _E)
    r = r.to(dtype)
    if requires_grad:
        r.requires_grad_(True)
    return _out(r, out, "logspace")


def _window(fname, window_length, periodic, dtype, device, requires_grad, values):
    """A window from values(n) (float64 positions 0..n-1 of an n-point symmetric window)."""
    if not isinstance(window_length, builtins.int) or isinstance(window_length, builtins.bool):
        raise TypeError(f"{fname}(): argument 'window_length' must be int, not {type(window_length).__name__}")
    if window_length < 0:
        raise RuntimeError(f"{fname} requires non-negative window_length, got window_length={window_length}")
    dtype = dtype or _C.get_default_dtype()
    if not dtype.is_floating_point:
        raise RuntimeError(f"{fname} expects floating point dtypes, got: {dtype}")
    ts = _ts()
    if window_length == 0:
        r = ts.empty(0, dtype=dtype, device=device)
    elif window_length == 1:
        r = ts.ones(1, dtype=dtype, device=device)
    else:
        n = window_length + 1 if periodic else window_length
        r = values(ts.arange(n, dtype=_F64, device=device), n)
        if periodic:
            r = r[:-1]
        r = r.to(dtype).contiguous()
    if requires_grad:
        r.requires_grad_(True)
    return r


def _cosine_sum(coeffs):
    def values(i, n):
        r = None
        for k, a in enumerate(coeffs):
            term = _call("mul", (_call("cos", (_call("mul", (i, 2.0 * math.pi * k / (n - 1)), _E),), _E), a), _E)
            r = term if r is None else _call("add", (r, term), _E)
        return r
    return values


def hann_window(window_length, periodic=True, *, dtype=None, layout=None, device=None, requires_grad=False):
    return _window("hann_window", window_length, periodic, dtype, device, requires_grad, _cosine_sum([0.5, -0.5]))


def hamming_window(window_length, periodic=True, alpha=0.54, beta=0.46, *, dtype=None, layout=None, device=None,
                   requires_grad=False):
    return _window("hamming_window", window_length, periodic, dtype, device, requires_grad,
                   _cosine_sum([alpha, -beta]))


def blackman_window(window_length, periodic=True, *, dtype=None, layout=None, device=None, requires_grad=False):
    return _window("blackman_window", window_length, periodic, dtype, device, requires_grad,
                   _cosine_sum([0.42, -0.5, 0.08]))


def bartlett_window(window_length, periodic=True, *, dtype=None, layout=None, device=None, requires_grad=False):
    def values(i, n):
        half = (n - 1) / 2.0
        return _call("sub", (_C.tensor(1.0, dtype=_F64, device=i.device),
                             _call("abs", (_call("div", (_call("sub", (i, half), _E), half), _E),), _E)), _E)
    return _window("bartlett_window", window_length, periodic, dtype, device, requires_grad, values)


def kaiser_window(window_length, periodic=True, beta=12.0, *, dtype=None, layout=None, device=None,
                  requires_grad=False):
    def values(i, n):
        half = (n - 1) / 2.0
        ratio = _call("div", (_call("sub", (i, half), _E), half), _E)
        arg = _call("mul", (_call("sqrt", (_call("clamp", (_call("sub", (
            _C.tensor(1.0, dtype=_F64, device=i.device), _call("mul", (ratio, ratio), _E)), _E),), {"min": 0.0}),),
            _E), float(beta)), _E)
        return _call("div", (_elementwise_more.i0(arg), _elementwise_more.i0(_C.tensor(float(beta), dtype=_F64))),
                     _E)
    return _window("kaiser_window", window_length, periodic, dtype, device, requires_grad, values)


def asarray(obj, *, dtype=None, device=None, copy=None, requires_grad=False):
    """obj as a tensor, sharing memory where torch does (a tensor or NumPy array needing no
    conversion, unless copy=True); copy=False raises where a copy is needed."""
    ts = _ts()
    if isinstance(obj, _Tensor):
        t = obj
        needs = (dtype is not None and dtype != t.dtype) or (device is not None and _C.device(device) != t.device)
        if copy is False and needs:
            raise ValueError("can't alias tensor from a different dtype or device with copy=False")
        t = t.to(dtype=dtype or t.dtype, device=device or t.device)
        if copy and t is obj or (copy and not needs):
            t = t.clone()
    elif type(obj).__module__ == "numpy" and type(obj).__name__ == "ndarray":
        t = ts.from_numpy(obj)
        needs = dtype is not None and dtype != t.dtype
        if copy is False and needs:
            raise ValueError("can't alias NumPy array with a different dtype with copy=False")
        t = t.to(dtype) if needs else (t.clone() if copy else t)
        if device is not None:
            t = t.to(device)
    elif isinstance(obj, (bytes, bytearray, memoryview)):
        t = frombuffer(obj, dtype=dtype or _DT["uint8"])
        if copy:
            t = t.clone()
        if device is not None:
            t = t.to(device)
    elif hasattr(obj, "__dlpack__") and not hasattr(obj, "__array__"):
        t = ts.from_dlpack(obj)
        t = t.to(dtype=dtype or t.dtype, device=device or t.device)
    else:
        if copy is False:
            raise ValueError(f"can't alias {type(obj).__name__} with copy=False")
        t = ts.tensor(obj, dtype=dtype, device=device)
    if requires_grad:
        t.requires_grad_(True)
    return t


def frombuffer(buffer, *, dtype, count=-1, offset=0, requires_grad=False):
    """A 1-D tensor over a Python buffer's memory (shared, as torch): count elements of dtype after offset bytes."""
    import numpy as np
    ts = _ts()
    mv = memoryview(buffer)
    length = mv.nbytes
    size = dtype.itemsize
    if length == 0 or count == 0:
        raise ValueError(f"both buffer length ({length}) and count ({count}) must not be 0")
    if offset < 0 or offset >= length:
        raise ValueError(f"offset ({offset} bytes) must be non-negative and no greater than buffer length "
                         f"({length} bytes) minus 1")
    if count < 0:
        if (length - offset) % size:
            raise ValueError(f"buffer length ({length - offset} bytes) after offset ({offset} bytes) must be a "
                             f"multiple of element size ({size})")
        count = (length - offset) // size
    elif offset + count * size > length:
        raise ValueError(f"requested buffer length ({count} * {size} bytes) after offset ({offset} bytes) must not "
                         f"be greater than actual buffer length ({length} bytes)")
    if mv.readonly:
        warnings.warn("The given buffer is not writable, and PyTorch does not support non-writable tensors. This "
                      "means you can write to the underlying (supposedly non-writable) buffer using the tensor.",
                      UserWarning, stacklevel=2)
    if dtype.name == "bfloat16":
        raise TypeError("frombuffer: bfloat16 has no NumPy counterpart to read the buffer through")
    np_dtype = dtype.name
    arr = np.frombuffer(mv, dtype=np_dtype, count=count, offset=offset)
    t = ts.from_numpy(arr)
    if requires_grad:
        t.requires_grad_(True)
    return t


def broadcast_shapes(*shapes):
    """The shape tensors of these shapes broadcast to (ints count as 1-D shapes)."""
    ts = _ts()
    norm = []
    for s in shapes:
        s = (s,) if isinstance(s, builtins.int) else tuple(s)
        if builtins.any(d < 0 for d in s):
            raise ValueError("Attempting to broadcast a dimension with negative length!")
        norm.append(s)
    ndim = builtins.max((len(s) for s in norm), default=0)
    result = [1] * ndim
    for i, s in enumerate(norm):
        for j, d in enumerate(s):
            k = ndim - len(s) + j
            if d == 1 or d == result[k]:
                continue
            if result[k] == 1:
                result[k] = d
                continue
            raise RuntimeError(f"Attempting to broadcast a dimension of length {d} at {j - len(s)}! Mismatching "
                               f"argument at index {i} had {tuple(s)}; but expected shape should be broadcastable "
                               f"to {result}")
    return ts.Size(result)


def can_cast(from_, to):
    """Whether the casting rule allows from_ -> to: no float to integral, no complex to non-complex, no non-bool
    to bool."""
    if from_.is_complex and not to.is_complex:
        return False
    if from_.is_floating_point and not (to.is_floating_point or to.is_complex):
        return False
    if from_ != _BOOL and to == _BOOL:
        return False
    return True


# ============================================================================ predicates, trivial
def is_complex(input):
    return input.dtype.is_complex


def is_signed(input):
    return input.dtype.is_signed


def is_nonzero(input):
    n = input.numel()
    if n == 0:
        raise RuntimeError("Boolean value of Tensor with no values is ambiguous")
    if n > 1:
        raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
    return builtins.bool(input.item())


def is_same_size(input, other):
    return tuple(input.shape) == tuple(other.shape)


def is_conj(input):
    return False  # Tessera's conj() materialises: there is no lazy conjugate bit


def is_neg(input):
    return False  # no lazy negation bit either


def is_inference(input):
    return False  # inference_mode works as no_grad: no tensor is an inference tensor


def is_storage(obj):
    return False  # Tessera has no storage objects


def isreal(input):
    if input.dtype.is_complex:
        return _call("eq", (_call("imag", (input,), _E), 0), _E)
    return _call("full_like", (input, True), {"dtype": _BOOL})


def detach(input):
    return input.detach()


def positive(input):
    if input.dtype == _BOOL:
        raise RuntimeError("The `+` operator, on a bool tensor is not supported.")
    return input


def get_device(input):
    return -1 if input.device.type == "cpu" else (input.device.index or 0)


def typename(obj):
    if isinstance(obj, _Tensor):
        return obj.type()
    module = getattr(obj, "__module__", "") or ""
    qualname = getattr(obj, "__qualname__", None) or type(obj).__qualname__
    if not hasattr(obj, "__qualname__"):
        module = type(obj).__module__
    return qualname if module in ("", "builtins") else f"{module}.{qualname}"


def rsub(input, other, *, alpha=1):
    """other - alpha * input."""
    if not isinstance(other, _Tensor):
        other = _functions.wrap_scalar(input, other)
    return _call("sub", (other, input), {"alpha": alpha} if alpha != 1 else _E)


def ravel(input):
    return _call("reshape", (input, (-1,)), _E)


def adjoint(input):
    if input.ndim < 2:
        raise RuntimeError(f"tensor.adjoint() is only supported on matrices or batches of matrices. Got "
                           f"{input.ndim}-D tensor.")
    return _call("conj", (_call("transpose", (input, -2, -1), _E),), _E) if input.dtype.is_complex else \
        _call("transpose", (input, -2, -1), _E)


# ============================================================================ linear algebra
def det(input):
    return linalg.det(input)


def logdet(input):
    """log(det(input)): nan for a negative determinant, -inf for a singular matrix."""
    sign, logabs = linalg.slogdet(input)
    nan = _C.tensor(math.nan, dtype=logabs.dtype, device=logabs.device)
    return _call("where", (_call("lt", (sign, 0), _E), nan, logabs), _E)


def slogdet(input):
    return SlogdetResult(*linalg.slogdet(input))


def inverse(input, *, out=None):
    return _out(linalg.inv(input), out, "inverse")


def pinverse(input, rcond=1e-15):
    return linalg.pinv(input, rtol=rcond)


def matrix_power(input, n, *, out=None):
    return linalg.matrix_power(input, n, out=out)


def matrix_exp(input):
    return linalg.matrix_exp(input)


def svd(input, some=True, compute_uv=True, *, out=None):
    """(U, S, V) with input = U diag(S) V^H (V, not V^H, as torch.svd); some=False: full U and V."""
    if not compute_uv:
        S = linalg.svdvals(input)
        m, n = input.shape[-2], input.shape[-1]
        batch = tuple(input.shape[:-2])
        ts = _ts()
        U = ts.zeros(batch + (m, m), dtype=input.dtype, device=input.device)
        V = ts.zeros(batch + (n, n), dtype=input.dtype, device=input.device)
        return SVDResult(U, S, V)
    U, S, Vh = linalg.svd(input, full_matrices=not some)
    return SVDResult(U, S, adjoint(Vh))


def _from_cholesky(L, upper):
    """A = L L^H (lower) or U^H U (upper)."""
    return _call("matmul", (adjoint(L), L), _E) if upper else _call("matmul", (L, adjoint(L)), _E)


def cholesky_solve(B, L, upper=False, *, out=None):
    """X with A X = B for A given by its Cholesky factor (solved with A itself, rebuilt from the
    factor). B is a matrix or a batch of them; the batch dims of B and L broadcast, as torch's
    (linalg.solve would read a B with one dim fewer than A as a batch of vectors)."""
    if B.dim() < 2:
        raise RuntimeError(f"b should have at least 2 dimensions, but has {B.dim()} dimensions instead")
    A = _from_cholesky(L, upper)
    batch = broadcast_shapes(tuple(B.shape[:-2]), tuple(A.shape[:-2]))
    B, A = B.expand(*batch, *B.shape[-2:]), A.expand(*batch, *A.shape[-2:])
    return _out(linalg.solve(A, B), out, "cholesky_solve")


def cholesky_inverse(L, upper=False, *, out=None):
    return _out(linalg.inv(_from_cholesky(L, upper)), out, "cholesky_inverse")


def triangular_solve(b, A, upper=True, transpose=False, unitriangular=False, *, out=None):
    """Deprecated in torch: X with op(A) X = b for triangular A; (solution, a copy of A)."""
    warnings.warn("torch.triangular_solve is deprecated in favor of torch.linalg.solve_triangular and will be "
                  "removed in a future PyTorch release.", UserWarning, stacklevel=2)
    if transpose:  # op(A) = A^T: the other triangle of the transpose
        return TriangularSolveResult(linalg.solve_triangular(_call("transpose", (A, -2, -1), _E), b, upper=not upper,
                                                             unitriangular=unitriangular), A.clone())
    return TriangularSolveResult(linalg.solve_triangular(A, b, upper=upper, unitriangular=unitriangular), A.clone())


def _removed(name, message):
    def f(*args, **kwargs):
        raise RuntimeError(f"This function was deprecated since version 1.9 and is now removed. {message}")
    f.__name__ = name
    return f


solve = _removed("solve", "`torch.solve` is deprecated in favor of `torch.linalg.solve`. `torch.linalg.solve` "
                          "has its arguments reversed and does not return the LU factorization.")
lstsq = _removed("lstsq", "`torch.lstsq` is deprecated in favor of `torch.linalg.lstsq`. `torch.linalg.lstsq` has "
                          "reversed arguments and does not return the QR decomposition in the returned tuple.")
eig = _removed("eig", "`torch.linalg.eig` returns complex tensors of dtype `cfloat` or `cdouble` rather than real "
                      "tensors mimicking complex tensors.")
symeig = _removed("symeig", "The default behavior has changed from using the upper triangular portion of the "
                            "matrix by default to using the lower triangular portion. Use torch.linalg.eigh.")
cholesky = _removed("cholesky", "`torch.cholesky` is deprecated in favor of `torch.linalg.cholesky`. "
                                "U = torch.cholesky(A, upper=True) should be replaced with "
                                "U = torch.linalg.cholesky(A).mH")
qr = _removed("qr", "`torch.qr` is deprecated in favor of `torch.linalg.qr`; its boolean parameter `some` is "
                    "replaced by the string parameter `mode` ('reduced' or 'complete').")
matrix_rank = _removed("matrix_rank", "Please use the `torch.linalg.matrix_rank` function instead. The parameter "
                                      "'symmetric' was renamed in `torch.linalg.matrix_rank()` to 'hermitian'.")


def chain_matmul(*matrices, out=None):
    """Deprecated in torch (use linalg.multi_dot): the product of 2-D matrices, left to right."""
    warnings.warn("torch.chain_matmul is deprecated and will be removed in a future PyTorch release. Use "
                  "torch.linalg.multi_dot instead, which accepts a list of two or more tensors rather than multiple "
                  "parameters.", UserWarning, stacklevel=2)
    if not matrices:
        raise RuntimeError("chain_matmul(): Expected one or more matrices")
    for i, m in enumerate(matrices):
        if m.ndim != 2:
            raise RuntimeError(f"Tensor dimension is {m.ndim}, expected 2 instead.")
    if len(matrices) == 1:
        return _out(matrices[0].clone(), out, "chain_matmul")
    r = matrices[0]
    for m in matrices[1:]:
        r = _call("mm", (r, m), _E)
    return _out(r, out, "chain_matmul")


def inner(input, other, *, out=None):
    """Sum over the last dims of input and other (a product when either is 0-D)."""
    if input.ndim == 0 or other.ndim == 0:
        return _out(_call("mul", (input, other), _E), out, "inner")
    if input.shape[-1] != other.shape[-1]:
        raise RuntimeError(f"inner() the last dimension must match on both input tensors but got shapes "
                           f"{list(input.shape)} and {list(other.shape)}")
    return _out(_call("tensordot", (input, other, [-1], [-1]), _E), out, "inner")


def dist(input, other, p=2):
    return linalg.vector_norm(_call("sub", (input, other), _E), p)


def frobenius_norm(input, dim=(-2, -1), keepdim=False, *, out=None):
    return _out(linalg.vector_norm(input, 2, list(dim), keepdim), out, "frobenius_norm")


def nuclear_norm(input, dim=(-2, -1), keepdim=False, *, out=None):
    if isinstance(dim, builtins.bool):
        dim, keepdim = (-2, -1), dim
    return _out(linalg.matrix_norm(input, "nuc", dim, keepdim), out, "nuclear_norm")


# ============================================================================ statistics
_INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")


def _quantile(fname, input, q, dim, keepdim, interpolation, out, ignore_nan):
    if not isinstance(input, _Tensor):
        raise TypeError(f"{fname}(): argument 'input' (position 1) must be Tensor, not {type(input).__name__}")
    if input.dtype.name not in ("float32", "float64"):
        raise RuntimeError(f"{fname}() input tensor must be either float or double dtype")
    if input.numel() == 0:
        raise RuntimeError(f"{fname}() input tensor must be non-empty")
    if interpolation not in _INTERPOLATIONS:
        raise RuntimeError(f"{fname}() interpolation must be one of linear, lower, higher, midpoint or nearest, "
                           f"but got {interpolation}")
    scalar_q = not isinstance(q, _Tensor)
    if scalar_q:
        if not 0 <= q <= 1:
            raise RuntimeError(f"{fname}() q must be in the range [0, 1] but got {q}")
        qt = _C.tensor([float(q)], dtype=input.dtype, device=input.device)
    else:
        if q.ndim > 1:
            raise RuntimeError(f"{fname}() q must be a scalar or 1D tensor")
        if q.dtype != input.dtype:
            raise RuntimeError(f"{fname}() q tensor must be same dtype as the input tensor")
        if not _functions.all(_call("logical_and", (_call("ge", (q, 0), _E), _call("le", (q, 1), _E)), _E)).item():
            raise RuntimeError(f"{fname}() q values must be in the range [0, 1]")
        qt = _call("reshape", (q, (-1,)), _E)
    ndim = input.ndim
    if dim is None:
        x = _call("reshape", (input, (-1,)), _E)
    else:
        if not -builtins.max(ndim, 1) <= dim < builtins.max(ndim, 1):
            raise IndexError(f"Dimension out of range (expected to be in range of [{-builtins.max(ndim, 1)}, "
                             f"{builtins.max(ndim, 1) - 1}], but got {dim})")
        dim = dim % builtins.max(ndim, 1)
        x = _call("movedim", (input if ndim else _call("reshape", (input, (1,)), _E), dim, -1), _E)
    n = x.shape[-1]
    srt = _call("sort", (x, -1, False), _E)[0]  # NaNs sort last
    k = qt.shape[0]
    # the rank (0-based position in the sorted slice) of each q: over the non-NaN values for
    # nanquantile; at the last (a NaN) for quantile where the slice has one.
    nan_mask = _call("isnan", (srt,), _E)
    if ignore_nan:
        valid = _call("sum", (_call("logical_not", (nan_mask,), _E), [-1], True), _E).to(input.dtype)
        last = _call("sub", (valid, 1), _E)
        last = _call("where", (_call("lt", (last, 0), _E), _C.tensor(float(n - 1), dtype=input.dtype), last), _E)
    else:
        has_nan = _call("any", (nan_mask, -1, True), _E)
        last = _C.tensor(float(n - 1), dtype=input.dtype, device=input.device)
    ranks = _call("mul", (last, qt), _E)  # (..., k)
    if not ignore_nan:
        ranks = _call("where", (has_nan, _C.tensor(float(n - 1), dtype=input.dtype), ranks), _E)
    if interpolation == "lower":
        ranks = _call("floor", (ranks,), _E)
    elif interpolation == "higher":
        ranks = _call("ceil", (ranks,), _E)
    elif interpolation == "nearest":
        ranks = _call("round", (ranks,), _E)
    below = _call("floor", (ranks,), _E).to(_I64)
    above = _call("clamp", (_call("add", (below, 1), _E),), {"max": n - 1})
    vb = _call("gather", (srt, -1, below), _E)
    va = _call("gather", (srt, -1, above), _E)
    if interpolation == "midpoint":
        weight = _call("where", (_call("eq", (ranks, below.to(input.dtype)), _E),
                                 _C.tensor(0.0, dtype=input.dtype), _C.tensor(0.5, dtype=input.dtype)), _E)
    else:
        weight = _call("sub", (ranks, below.to(input.dtype)), _E)
    r = _call("lerp", (vb, va, weight), _E)  # (..., k)
    r = _call("where", (_call("eq", (weight, 0), _E), vb, r), _E)  # exact at a rank (no NaN from va)
    r = _call("movedim", (r, -1, 0), _E)  # (k, ...)
    if keepdim:
        if dim is None:
            r = _call("reshape", (r, (k,) + (1,) * ndim), _E)
        elif ndim:
            r = _call("unsqueeze", (r, dim + 1), _E)
    if scalar_q or (isinstance(q, _Tensor) and q.ndim == 0):
        r = _call("squeeze", (r, 0), _E)
    return _out(r, out, fname)


def quantile(input, q, dim=None, keepdim=False, *, interpolation="linear", out=None):
    """The q-th quantiles of input (over dim, or all elements), interpolating as asked; NaN where a slice has one."""
    return _quantile("quantile", input, q, dim, keepdim, interpolation, out, False)


def nanquantile(input, q, dim=None, keepdim=False, *, interpolation="linear", out=None):
    """quantile ignoring NaN values (NaN only for a slice of NaNs)."""
    return _quantile("nanquantile", input, q, dim, keepdim, interpolation, out, True)


def cov(input, *, correction=1, fweights=None, aweights=None):
    """The covariance matrix of input's rows (variables) over its columns (observations)."""
    if input.ndim > 2:
        raise RuntimeError(f"cov(): expected input to have two or fewer dimensions but got an input with "
                           f"{input.ndim} dimensions")
    x = _call("reshape", (input, (1, -1)), _E) if input.ndim < 2 else input
    if not (x.dtype.is_floating_point or x.dtype.is_complex):
        x = x.to(_C.get_default_dtype())
    n_obs = x.shape[1]
    w = None
    if fweights is not None:
        if fweights.ndim > 1:
            raise RuntimeError(f"cov(): expected fweights to have one or fewer dimensions but got fweights with "
                               f"{fweights.ndim} dimensions")
        if fweights.dtype.is_floating_point or fweights.dtype.is_complex:
            raise RuntimeError(f"cov(): expected fweights to have integral dtype but got fweights with "
                               f"{_type_name(fweights.dtype)} dtype")
        if fweights.numel() != n_obs:
            raise RuntimeError(f"cov(): expected fweights to have the same numel as there are observations in the "
                               f"input but got {fweights.numel()} != {n_obs}")
        if fweights.numel() and _call("amin", (fweights, []), _E).item() < 0:
            raise RuntimeError("cov(): fweights cannot be negative")
        w = fweights
    if aweights is not None:
        if aweights.ndim > 1:
            raise RuntimeError(f"cov(): expected aweights to have one or fewer dimensions but got aweights with "
                               f"{aweights.ndim} dimensions")
        if not aweights.dtype.is_floating_point:
            raise RuntimeError(f"cov(): expected aweights to have floating point dtype but got aweights with "
                               f"{_type_name(aweights.dtype)} dtype")
        if aweights.numel() != n_obs:
            raise RuntimeError(f"cov(): expected aweights to have the same numel as there are observations in the "
                               f"input but got {aweights.numel()} != {n_obs}")
        if aweights.numel() and _call("amin", (aweights, []), _E).item() < 0:
            raise RuntimeError("cov(): aweights cannot be negative")
        w = aweights if w is None else _call("mul", (w, aweights), _E)
    if w is None:
        avg = _call("mean", (x, [1], True), _E)
        w_sum = float(n_obs)
        norm = w_sum - correction
        xm = _call("sub", (x, avg), _E)
        xw = xm
    else:
        w = w.to(x.dtype)
        w_sum_t = _call("sum", (w,), _E)
        avg = _call("div", (_call("sum", (_call("mul", (x, w), _E), [1], True), _E), w_sum_t), _E)
        w_sum = w_sum_t.item()
        if correction == 0:
            norm = w_sum
        elif aweights is None:
            norm = w_sum - correction
        else:
            norm = w_sum - correction * _call("sum", (_call("mul", (w, aweights.to(x.dtype)), _E),),
                                              _E).item() / w_sum
        xm = _call("sub", (x, avg), _E)
        xw = _call("mul", (xm, w), _E)
    if norm <= 0:
        warnings.warn("cov(): degrees of freedom is <= 0. Correction should be strictly less than the number of "
                      "observations.", UserWarning, stacklevel=2)
        norm = 0.0
    xt = _call("transpose", (xm, 0, 1), _E)
    if xt.dtype.is_complex:
        xt = _call("conj", (xt,), _E)
    c = _call("div", (_call("mm", (xw, xt), _E), norm), _E)
    return _call("squeeze", (c,), _E) if c.shape[0] == 1 else c


def corrcoef(input):
    """Pearson correlation coefficients of input's rows, clipped to [-1, 1]."""
    c = cov(input)
    if c.ndim == 0:
        return _call("div", (c, c), _E)
    d = _call("diagonal", (c, 0, 0, 1), _E)
    std = _call("sqrt", (d if not d.dtype.is_complex else _call("real", (d,), _E),), _E)
    c = _call("div", (c, _call("unsqueeze", (std, 1), _E)), _E)
    c = _call("div", (c, _call("unsqueeze", (std, 0), _E)), _E)
    if c.dtype.is_complex:
        return c
    return _call("clamp", (c,), {"min": -1.0, "max": 1.0})


def histogram(input, bins, *, range=None, weight=None, density=False, out=None):
    """(hist, bin_edges): counts (or weights' sums) of input's values in equal bins over range (or the
    data's min..max), or in the bins whose edges a 1-D tensor gives; the last bin includes its right edge."""
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f'"histogramdd" not implemented for \'{_type_name(input.dtype)}\'')
    ts = _ts()
    x = _call("reshape", (input, (-1,)), _E)
    if isinstance(bins, _Tensor):
        if bins.ndim != 1 or bins.numel() < 1:
            raise RuntimeError("torch.histogram(): bins tensor should have one dimension and at least 1 element")
        edges = bins.to(input.dtype)
    else:
        if not isinstance(bins, builtins.int) or bins <= 0:
            raise RuntimeError(f"torch.histogram(): bins must be > 0, but got {bins} for dimension 0")
        if range is not None:
            lo, hi = float(range[0]), float(range[1])
        elif x.numel():
            lo, hi = _call("amin", (x, []), _E).item(), _call("amax", (x, []), _E).item()
        else:
            lo, hi = 0.0, 0.0
        if lo > hi:
            raise RuntimeError(f"torch.histogram(): min should not exceed max, but got min {lo} max {hi} for "
                               f"dimension 0")
        if lo == hi:
            lo, hi = lo - 0.5, hi + 0.5
        edges = ts.linspace(lo, hi, bins + 1, dtype=input.dtype, device=input.device)
    nb = edges.numel() - 1
    w = None if weight is None else _call("reshape", (weight, (-1,)), _E).to(input.dtype)
    if nb <= 0:
        hist = ts.zeros(0, dtype=input.dtype, device=input.device)
        return HistogramResult(hist, edges)
    lo_e, hi_e = edges[0], edges[-1]
    inside = _call("logical_and", (_call("ge", (x, lo_e), _E), _call("le", (x, hi_e), _E)), _E)
    idx = _call("sub", (_call("searchsorted", (edges, x), {"right": True}), 1), _E)
    idx = _call("clamp", (idx,), {"min": 0, "max": nb - 1})  # the right edge falls in the last bin
    idx = _call("masked_select", (idx, inside), _E)
    wsel = None if w is None else _call("masked_select", (w, inside), _E)
    hist = _call("bincount", (idx, wsel, nb), _E).to(input.dtype)
    if density:
        widths = _call("sub", (edges[1:], edges[:-1]), _E)
        hist = _call("div", (hist, _call("mul", (_call("sum", (hist,), _E), widths), _E)), _E)
    if out is not None:
        out[0].copy_(hist)
        out[1].copy_(edges)
        return HistogramResult(out[0], out[1])
    return HistogramResult(hist, edges)


def renorm(input, p, dim, maxnorm, *, out=None):
    """Each slice along dim whose p-norm exceeds maxnorm is scaled to norm maxnorm."""
    if input.ndim < 2:
        raise RuntimeError(f"renorm: input needs at least 2 dimensions, got {input.ndim} dimensions")
    if p <= 0:
        raise RuntimeError("renorm: non-positive-norm not supported")
    if maxnorm < 0:
        raise RuntimeError(f"renorm: expected maxnorm to be >= 0 but got {maxnorm}")
    dim = dim % input.ndim
    others = [d for d in builtins.range(input.ndim) if d != dim]
    norms = linalg.vector_norm(input, p, others, True)
    factor = _call("where", (_call("gt", (norms, maxnorm), _E),
                             _call("div", (_C.tensor(float(maxnorm), dtype=norms.dtype),
                                           _call("add", (norms, 1e-7), _E)), _E),
                             _C.tensor(1.0, dtype=norms.dtype)), _E)
    return _out(_call("mul", (input, factor), _E), out, "renorm")


# ============================================================================ shapes and indices
def argwhere(input):
    return _call("nonzero", (input,), _E)


def diagflat(input, offset=0):
    return _call("diag", (_call("reshape", (input, (-1,)), _E), offset), _E)


def row_stack(tensors, *, out=None):
    return _out(_call("vstack", (builtins.list(tensors),), _E), out, "row_stack")


def _split_dir(fname, input, indices_or_sections, dim, min_dims):
    if input.ndim < min_dims:
        raise RuntimeError(f"torch.{fname} requires a tensor with at least {min_dims} dimension, but got a tensor "
                           f"with {input.ndim} dimensions!")
    if isinstance(indices_or_sections, builtins.int):
        size = input.shape[dim]
        if indices_or_sections == 0 or size % indices_or_sections:
            raise RuntimeError(f"torch.{fname} attempted to split along dimension {dim}, but the size of the "
                               f"dimension {size} is not divisible by the split_size {indices_or_sections}!")
    return _functions.tensor_split(input, indices_or_sections, dim)


def hsplit(input, indices_or_sections):
    return _split_dir("hsplit", input, indices_or_sections, 1 if input.ndim > 1 else 0, 1)


def vsplit(input, indices_or_sections):
    return _split_dir("vsplit", input, indices_or_sections, 0, 2)


def dsplit(input, indices_or_sections):
    return _split_dir("dsplit", input, indices_or_sections, 2, 3)


def cartesian_prod(*tensors):
    """The rows of all combinations of one element of each 1-D tensor (a 1-D tensor stays as it is)."""
    if len(tensors) == 1:
        return tensors[0]
    grids = _functions.meshgrid(*tensors, indexing="ij")
    return _call("stack", ([_call("reshape", (g, (-1,)), _E) for g in grids], 1), _E)


def combinations(input, r=2, with_replacement=False):
    """The length-r combinations of a 1-D tensor's elements (as itertools.combinations), one per row."""
    if input.ndim != 1:
        raise RuntimeError(f"Expect a 1D vector, but got shape {list(input.shape)}")
    if r < 0:
        raise RuntimeError(f"Expect a non-negative number, but got {r}")
    if r == 0:
        return input.new_empty(0)
    gen = itertools.combinations_with_replacement if with_replacement else itertools.combinations
    combos = builtins.list(gen(builtins.range(input.shape[0]), r))
    if not combos:
        return input.new_empty((0, r))
    idx = _C.tensor(combos, dtype=_I64, device=input.device)
    return _call("reshape", (_call("index_select", (input, 0, _call("reshape", (idx, (-1,)), _E)), _E),
                             (len(combos), r)), _E)


def unravel_index(indices, shape):
    """The coordinates in `shape` of flat (row-major) indices, one tensor per dimension."""
    if isinstance(indices, (builtins.int,)):
        indices = _C.tensor(indices, dtype=_I64)
    if indices.dtype.is_floating_point or indices.dtype.is_complex or indices.dtype == _BOOL:
        raise TypeError(f"expected 'indices' to be integer dtype, but got {indices.dtype}")
    shape = (shape,) if isinstance(shape, builtins.int) else tuple(shape)
    if builtins.any(s < 0 for s in shape):
        raise ValueError(f"'shape' cannot have negative values, but got {shape}")
    total = math.prod(shape)
    if indices.numel():
        lo, hi = _call("amin", (indices, []), _E).item(), _call("amax", (indices, []), _E).item()
        if lo < -total or hi >= total:
            raise ValueError("'indices' must be in range [-{0}, {1}), but got {2}".format(
                total, total, lo if lo < -total else hi))
    idx = _call("remainder", (indices.to(_I64), _C.tensor(builtins.max(total, 1), dtype=_I64)), _E)
    out = []
    for s in reversed(shape):
        out.append(_call("remainder", (idx, _C.tensor(builtins.max(s, 1), dtype=_I64)), _E))
        idx = _call("floor_divide", (idx, _C.tensor(builtins.max(s, 1), dtype=_I64)), _E)
    return tuple(reversed(out))


def vander(x, N=None, increasing=False):
    """Columns x**0 .. x**(N-1) (decreasing powers unless increasing); integer and bool inputs give int64."""
    if x.ndim != 1:
        raise RuntimeError("x must be a one-dimensional tensor.")
    if N is None:
        N = x.shape[0]
    if N < 0:
        raise RuntimeError("N must be non-negative.")
    if not (x.dtype.is_floating_point or x.dtype.is_complex):
        x = x.to(_I64)
    ts = _ts()
    if N == 0:
        return ts.empty((x.shape[0], 0), dtype=x.dtype, device=x.device)
    r = linalg._powers(x, N)  # linalg.vander's increasing powers
    return r if increasing else _call("flip", (r, [1]), _E)


def trapezoid(y, x=None, *, dx=None, dim=-1):
    """The trapezoid rule along dim, with sample points x (a tensor) or spacing dx (default 1)."""
    if isinstance(x, (builtins.int, builtins.float)):
        dx, x = x, None
    n = y.shape[dim] if y.ndim else 0
    if n == 0:
        return _call("sum", (_call("mul", (y, 0), _E), [dim]), _E)
    left = _call("narrow", (y, dim, 0, n - 1), _E)
    right = _call("narrow", (y, dim, 1, n - 1), _E)
    mid = _call("add", (left, right), _E)
    if x is None:
        return _call("mul", (_call("sum", (mid, [dim]), _E), (1.0 if dx is None else dx) / 2.0), _E)
    if x.ndim == 1:
        if x.shape[0] != n:
            raise RuntimeError(f"trapezoid: There must be one `x` value for each sample point")
        d = _call("diff", (x,), _E)
        shape = [1] * y.ndim
        shape[dim] = n - 1
        d = _call("reshape", (d, shape), _E)
    else:
        d = _call("diff", (x,), {"dim": dim})
    return _call("div", (_call("sum", (_call("mul", (d, mid), _E), [dim]), _E), 2.0), _E)


def trapz(y, x=None, *, dx=None, dim=-1):
    return trapezoid(y, x, dx=dx, dim=dim)


def cumulative_trapezoid(y, x=None, *, dx=None, dim=-1):
    """The running trapezoid rule along dim (one element fewer than y there)."""
    if isinstance(x, (builtins.int, builtins.float)):
        dx, x = x, None
    n = y.shape[dim]
    if n == 0:
        return y.clone()
    left = _call("narrow", (y, dim, 0, n - 1), _E)
    right = _call("narrow", (y, dim, 1, n - 1), _E)
    mid = _call("add", (left, right), _E)
    if x is None:
        parts = _call("mul", (mid, (1.0 if dx is None else dx) / 2.0), _E)
    else:
        if x.ndim == 1:
            d = _call("diff", (x,), _E)
            shape = [1] * y.ndim
            shape[dim] = n - 1
            d = _call("reshape", (d, shape), _E)
        else:
            d = _call("diff", (x,), {"dim": dim})
        parts = _call("div", (_call("mul", (d, mid), _E), 2.0), _E)
    return _call("cumsum", (parts, dim), _E)


def diagonal_scatter(input, src, offset=0, dim1=0, dim2=1):
    """A copy of input with src written on its (offset, dim1, dim2) diagonal (masked_scatter, so
    autograd gives input's gradient zero there and src's the diagonal's)."""
    expected = tuple(_call("diagonal", (input, offset, dim1, dim2), _E).shape)
    if tuple(src.shape) != expected:
        raise RuntimeError(f"expected src to have a size equal to the slice of self. src size = {list(src.shape)}, "
                           f"slice size = {list(expected)}")
    ts = _ts()
    mask = ts.zeros(tuple(input.shape), dtype=_BOOL, device=input.device)
    _call("diagonal", (mask, offset, dim1, dim2), _E).fill_(True)
    # masked_scatter takes source values in the row-major order of the mask's positions: there the
    # diagonal index varies at the place of the first of dim1 and dim2.
    d = builtins.min(dim1 % input.ndim, dim2 % input.ndim)
    src = _call("movedim", (src, -1, d), _E)
    return _call("masked_scatter", (input, mask, src.contiguous()), _E)


def as_strided_scatter(input, src, size, stride, storage_offset=None):
    """A copy of input (laid out contiguously) with src written on its as_strided(size, stride, offset) view."""
    ts = _ts()
    pos = _call("as_strided", (ts.arange(input.numel(), device=input.device), builtins.list(size),
                               builtins.list(stride), storage_offset or 0), _E)
    if tuple(pos.shape) != tuple(src.shape):
        raise RuntimeError(f"expected src to have a size equal to the slice of self. src size = {list(src.shape)}, "
                           f"slice size = {list(pos.shape)}")
    flat = _call("reshape", (input, (-1,)), _E)
    flat = _call("index_put", (flat, [_call("reshape", (pos, (-1,)), _E)], _call("reshape", (src, (-1,)), _E),
                               False), _E)
    return _call("reshape", (flat, tuple(input.shape)), _E)


def _copy_variant(name, fn):
    def f(*args, out=None, **kwargs):
        return _out(fn(*args, **kwargs).clone(), out, name)
    f.__name__ = name
    f.__doc__ = f"torch.{name}: a copy (not a view) of the result."
    return f


# ============================================================================ nn functions under torch.*
_REDUCTIONS = {0: "none", 1: "mean", 2: "sum"}


def _reduction(reduction, fname):
    """ATen's integer reduction codes (0 none, 1 mean, 2 sum); F's names pass through."""
    if isinstance(reduction, str):
        return reduction
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{fname}: {reduction} is not a valid value for reduction")
    return _REDUCTIONS[reduction]


conv1d = _F.conv1d
conv2d = _F.conv2d
conv3d = _F.conv3d
conv_transpose1d = _F.conv_transpose1d
conv_transpose2d = _F.conv_transpose2d
conv_transpose3d = _F.conv_transpose3d
bilinear = _F.bilinear
cosine_similarity = _F.cosine_similarity
pairwise_distance = _F.pairwise_distance
pdist = _F.pdist
prelu = _F.prelu
hardshrink = _F.hardshrink
pixel_shuffle = _F.pixel_shuffle
pixel_unshuffle = _F.pixel_unshuffle
channel_shuffle = native_channel_shuffle = _F.channel_shuffle
conv_tbc = _F.conv_tbc
avg_pool1d = _F.avg_pool1d
adaptive_avg_pool1d = _F.adaptive_avg_pool1d


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-05, cudnn_enable=True):
    return _F.layer_norm(input, normalized_shape, weight, bias, eps)


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-05, cudnn_enabled=True):
    return _F.group_norm(input, num_groups, weight, bias, eps)


def batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps, cudnn_enabled):
    """ATen's order (weight and bias before the running statistics), unlike F.batch_norm."""
    return _F.batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)


def instance_norm(input, weight, bias, running_mean, running_var, use_input_stats, momentum, eps, cudnn_enabled):
    return _F.instance_norm(input, running_mean, running_var, weight, bias, use_input_stats, momentum, eps)


def rms_norm(input, normalized_shape, weight=None, eps=None):
    return _F.rms_norm(input, normalized_shape, weight, eps)


def dropout(input, p, train):
    return _F.dropout(input, p, train)


def dropout_(input, p, train):
    return _F.dropout(input, p, train, inplace=True)


def alpha_dropout(input, p, train):
    return _F.alpha_dropout(input, p, train)


def alpha_dropout_(input, p, train):
    return _F.alpha_dropout(input, p, train, inplace=True)


def feature_alpha_dropout(input, p, train):
    return _F.feature_alpha_dropout(input, p, train)


def feature_alpha_dropout_(input, p, train):
    return _F.feature_alpha_dropout(input, p, train, inplace=True)


def feature_dropout(input, p, train):
    """Zeroes whole (n, c) planes of an (N, C, *) input with probability p, scaling the rest by 1 / (1 - p)."""
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not train or p == 0.0 or input.numel() == 0:
        return input
    if input.ndim < 2:
        raise RuntimeError(f"Feature dropout requires at least 2 dimensions in the input")
    mask_shape = builtins.list(input.shape[:2]) + [1] * (input.ndim - 2)
    keep = _call("bernoulli", (_call("full", (mask_shape, 1.0 - p), {"dtype": input.dtype, "device": input.device}),),
                 _E)
    scale = _call("div", (keep, 1.0 - p), _E) if p < 1.0 else keep
    return _call("mul", (input, scale), _E)


def feature_dropout_(input, p, train):
    return input.copy_(feature_dropout(input, p, train))


def threshold(input, threshold, value):
    return _F.threshold(input, threshold, value)


def threshold_(input, threshold, value):
    return _F.threshold(input, threshold, value, inplace=True)


def celu(input, alpha=1.0):
    return _F.celu(input, alpha)


def celu_(input, alpha=1.0):
    return _F.celu(input, alpha, inplace=True)


def selu(input):
    return _F.selu(input)


def selu_(input):
    return _F.selu(input, inplace=True)


def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, generator=None):
    from tessera._generator import using
    with using(generator):
        return _F.rrelu(input, lower, upper, training)


def rrelu_(input, lower=1.0 / 8, upper=1.0 / 3, training=False, generator=None):
    from tessera._generator import using
    with using(generator):
        return _F.rrelu(input, lower, upper, training, inplace=True)


def kl_div(input, target, reduction=1, *, log_target=False):
    return _F.kl_div(input, target, reduction=_reduction(reduction, "kl_div"), log_target=log_target)


def margin_ranking_loss(input1, input2, target, margin=0.0, reduction=1):
    return _F.margin_ranking_loss(input1, input2, target, margin,
                                  reduction=_reduction(reduction, "margin_ranking_loss"))


def hinge_embedding_loss(input, target, margin=1.0, reduction=1):
    return _F.hinge_embedding_loss(input, target, margin, reduction=_reduction(reduction, "hinge_embedding_loss"))


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-06, swap=False, reduction=1):
    return _F.triplet_margin_loss(anchor, positive, negative, margin, p, eps, swap,
                                  reduction=_reduction(reduction, "triplet_margin_loss"))


def poisson_nll_loss(input, target, log_input, full, eps, reduction):
    return _F.poisson_nll_loss(input, target, log_input, full, eps=eps,
                               reduction=_reduction(reduction, "poisson_nll_loss"))


def cosine_embedding_loss(input1, input2, target, margin=0.0, reduction=1):
    return _F.cosine_embedding_loss(input1, input2, target, margin,
                                    reduction=_reduction(reduction, "cosine_embedding_loss"))


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction=1, zero_infinity=False):
    return _F.ctc_loss(log_probs, targets, input_lengths, target_lengths, blank, _reduction(reduction, "ctc_loss"),
                       zero_infinity)


def _pool_stride(stride):
    return None if stride is None or (isinstance(stride, (tuple, builtins.list)) and not stride) else stride


def max_pool1d(input, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    return _F.max_pool1d(input, kernel_size, _pool_stride(stride), padding, dilation, ceil_mode)


def max_pool1d_with_indices(input, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    return _F.max_pool1d(input, kernel_size, _pool_stride(stride), padding, dilation, ceil_mode, return_indices=True)


def max_pool2d(input, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    return _F.max_pool2d(input, kernel_size, _pool_stride(stride), padding, dilation, ceil_mode)


def max_pool3d(input, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    return _F.max_pool3d(input, kernel_size, _pool_stride(stride), padding, dilation, ceil_mode)


def adaptive_max_pool1d(input, output_size):
    """(values, indices), as torch's top-level form."""
    return tuple(_F.adaptive_max_pool1d(input, output_size, return_indices=True))


# ---- the recurrent functions over nn's engine (nn/_rnn.py): its cells, and its layers, which run
# the fused _rnn_layer kernel where the device has one.
def rnn_tanh_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    return _rnn.rnn_cell(_F.linear(input, w_ih, b_ih), hx, w_hh, b_hh, False)


def rnn_relu_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    return _rnn.rnn_cell(_F.linear(input, w_ih, b_ih), hx, w_hh, b_hh, True)


def lstm_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """(h', c') from hx = (h, c): gates i, f, g, o in torch's order."""
    if len(hx) != 2:
        raise RuntimeError(f"lstm_cell: Expected hx to be a tuple of two tensors (h, c), got {len(hx)}")
    return _rnn.lstm_cell(_F.linear(input, w_ih, b_ih), hx[0], hx[1], w_hh, b_hh)


def gru_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    return _rnn.gru_cell(_F.linear(input, w_ih, b_ih), hx, w_hh, b_hh)


def _layers(mode, input, hx, params, has_biases, num_layers, dropout_p, train, bidirectional, batch_first):
    """torch.lstm / gru / rnn_tanh / rnn_relu: params per layer and direction are (w_ih, w_hh[, b_ih,
    b_hh]); hx is h0 (or (h0, c0)) stacked over layers x directions; dropout between layers when train."""
    if not isinstance(input, _Tensor):
        raise TypeError("the packed-sequence form of the RNN functions is not supported; pass a padded tensor")
    per = 4 if has_biases else 2
    dirs = 2 if bidirectional else 1
    if len(params) != per * num_layers * dirs:
        raise RuntimeError(f"expected {per * num_layers * dirs} parameter tensors, got {len(params)}")
    weights = []
    for k in builtins.range(num_layers * dirs):
        weights += list(params[k * per:(k + 1) * per]) + ([] if has_biases else [None, None])
    lstm = mode == "LSTM"
    x = _call("transpose", (input, 0, 1), _E) if batch_first else input  # (T, N, H)
    h0, c0 = (hx[0], hx[1]) if lstm else (hx, None)
    unbatched = x.ndim == 2
    if unbatched:
        x, h0 = _call("unsqueeze", (x, 1), _E), _call("unsqueeze", (h0, 1), _E)
        c0 = None if c0 is None else _call("unsqueeze", (c0, 1), _E)
    steps, batch = x.shape[0], x.shape[1]
    out, h_n, c_n = _rnn.run(mode, _call("reshape", (x, (steps * batch, x.shape[2])), _E), [batch] * steps, h0, c0,
                             weights, num_layers, bidirectional, dropout_p, train, 0)
    out = _call("reshape", (out, (steps, batch, out.shape[-1])), _E)
    if unbatched:
        out, h_n = _call("squeeze", (out, 1), _E), _call("squeeze", (h_n, 1), _E)
        c_n = None if c_n is None else _call("squeeze", (c_n, 1), _E)
    elif batch_first:
        out = _call("transpose", (out, 0, 1), _E)
    return (out, h_n, c_n) if lstm else (out, h_n)


def lstm(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first):
    return _layers("LSTM", input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first)


def gru(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first):
    return _layers("GRU", input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first)


def rnn_tanh(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first):
    return _layers("RNN_TANH", input, hx, params, has_biases, num_layers, dropout, train, bidirectional,
                   batch_first)


def rnn_relu(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first):
    return _layers("RNN_RELU", input, hx, params, has_biases, num_layers, dropout, train, bidirectional,
                   batch_first)


def embedding_renorm_(input, indices, max_norm, norm_type):
    """Rows of input that indices name, with a norm_type-norm above max_norm, rescaled to max_norm (in place)."""
    from tessera.autograd.grad_mode import no_grad
    with no_grad():
        idx = _call("unique_dim", (_call("reshape", (indices, (-1,)), _E), 0), _E)
        idx = idx[0] if isinstance(idx, (tuple, builtins.list)) else idx
        rows = _call("index_select", (input, 0, idx), _E)
        norms = linalg.vector_norm(rows, norm_type, [1], True)
        scale = _call("where", (_call("gt", (norms, max_norm), _E),
                                _call("div", (_C.tensor(float(max_norm), dtype=norms.dtype),
                                              _call("add", (norms, 1e-7), _E)), _E),
                                _C.tensor(1.0, dtype=norms.dtype)), _E)
        _call("index_copy_", (input, 0, idx, _call("mul", (rows, scale), _E)), _E)
    return input


def randint_like(input, low=0, high=None, *, dtype=None, layout=None, device=None, requires_grad=False,
                 memory_format=None):
    """Random integers in [low, high) of input's shape (and dtype and device unless given)."""
    if high is None:
        low, high = 0, low
    ts = _ts()
    r = ts.randint(low, high, tuple(input.shape), dtype=dtype or input.dtype, device=device or input.device)
    if requires_grad:
        r.requires_grad_(True)
    return r


LUResult = namedtuple("lu", ["LU", "pivots"])
LUInfoResult = namedtuple("lu", ["LU", "pivots", "infos"])


def lu(A, pivot=True, get_infos=False, out=None):
    """Deprecated in torch: (LU, pivots[, infos]) of linalg.lu_factor_ex."""
    LU, pivots, infos = linalg.lu_factor_ex(A, pivot=pivot)
    return LUInfoResult(LU, pivots, infos) if get_infos else LUResult(LU, pivots)


def lu_solve(b, LU_data, LU_pivots, *, out=None):
    """Deprecated in torch: X with A X = b from A's LU factorization (linalg.lu_solve's argument order differs)."""
    return _out(linalg.lu_solve(LU_data, LU_pivots, b), out, "lu_solve")


# ============================================================================ top-level in-place forms
_INPLACE_METHODS = (
    "abs_ acos_ acosh_ arccos_ arccosh_ arcsin_ arcsinh_ arctan_ arctanh_ asin_ asinh_ atan_ atanh_ ceil_ clamp_ "
    "clamp_max_ clamp_min_ clip_ conj_physical_ cos_ cosh_ deg2rad_ erf_ erfc_ exp2_ exp_ expm1_ fill_ fix_ floor_ "
    "frac_ gcd_ i0_ lcm_ ldexp_ log10_ log1p_ log2_ log_ logit_ nan_to_num_ neg_ negative_ rad2deg_ reciprocal_ "
    "relu_ round_ rsqrt_ sigmoid_ sin_ sinc_ sinh_ sqrt_ square_ tan_ tanh_ trunc_ xlogy_ zero_ index_put_ "
    "detach_ sgn_ sign_ digamma_ lgamma_ erfinv_ fmod_ remainder_ hypot_ copysign_ heaviside_ "
    "logical_not_ bitwise_not_ polygamma_ mvlgamma_ float_power_ nextafter_ renorm_"
).split()


def _inplace_function(name):
    def f(input, *args, **kwargs):
        return getattr(input, name)(*args, **kwargs)
    f.__name__ = f.__qualname__ = name
    f.__doc__ = f"torch.{name}(input, ...): input.{name}(...)."
    return f


def _install(namespace):
    """Adds this module's functions (and the in-place forms) to the tessera namespace where missing."""
    skip = {"range_", "newaxis"}
    public = {k: v for k, v in globals().items() if not k.startswith("_") and k not in skip and not k[0].isupper()}
    for k in ("builtins", "itertools", "math", "warnings", "namedtuple", "linalg"):
        public.pop(k, None)
    for k, v in public.items():
        if k not in namespace and v is not None:
            namespace[k] = v
    namespace.setdefault("newaxis", None)
    namespace.setdefault("_grouped_mm", _F.grouped_mm)  # torch._grouped_mm, F.grouped_mm's operator
    for name in _INPLACE_METHODS:
        if name not in namespace:
            namespace[name] = _inplace_function(name)
    ts = namespace
    copies = {"narrow_copy": "narrow", "select_copy": "select", "permute_copy": "permute", "expand_copy": "expand",
              "diagonal_copy": "diagonal", "squeeze_copy": "squeeze", "unsqueeze_copy": "unsqueeze",
              "t_copy": "t", "transpose_copy": "transpose", "unfold_copy": "unfold", "alias_copy": "alias",
              "detach_copy": "detach", "view_as_real_copy": "view_as_real", "view_as_complex_copy": "view_as_complex",
              "as_strided_copy": "as_strided"}
    for name, base in copies.items():
        if name not in ts and base in ts:
            ts[name] = _copy_variant(name, ts[base])
    if "view_copy" not in ts:
        ts["view_copy"] = _copy_variant("view_copy", lambda input, size: input.view(size))
    for name, base in {"unsafe_chunk": "chunk", "unsafe_split": "split",
                       "unsafe_split_with_sizes": "split_with_sizes"}.items():
        if name not in ts and base in ts:
            ts[name] = ts[base]
    for name in ("addmv_", "index_reduce", "put", "nonzero_static"):  # the method, called as a function
        if name not in ts:
            ts[name] = _inplace_function(name)
    for name in ("fmax", "fmin", "gcd", "lcm", "float_power", "ldexp", "frexp", "nextafter", "i0", "polygamma",
                 "mvlgamma", "igamma", "igammac"):
        ts.setdefault(name, getattr(_elementwise_more, name))
