"""More torch.Tensor methods: the in-place forms torch has but Tessera's operators lack
(comparisons and logical ops, addmm_ and friends, masked_scatter_, scatter_reduce_, ... computed
out of place and written back with copy_), fill_diagonal_, put_/put, index_reduce, sum_to_size,
the legacy new(), mH / H, and the method spellings of the functions in _torch_functions_more and
_elementwise_more (x.det(), x.quantile(q), x.gcd(y), ...)."""
import builtins

from tessera import _C, _elementwise_more as _em, _torch_functions_more as _fm

_call = _C.call_op
_E = {}
Tensor = _C.Tensor
_I64 = _C.dtypes["int64"]
_BOOL = _C.dtypes["bool"]


def _write_back(self, result, name):
    """self.copy_(result) after torch's in-place shape rule: the result may not be larger than self."""
    if tuple(result.shape) != tuple(self.shape):
        raise RuntimeError(f"output with shape {list(self.shape)} doesn't match the broadcast shape "
                           f"{list(result.shape)}")
    _call("copy_", (self, result), _E)
    return self


def _inplace_via(op):
    """x.op_(...) as x.copy_(x.op(...)): for operators without an in-place kernel."""
    def f(self, *args, **kwargs):
        return _write_back(self, getattr(self, op)(*args, **kwargs), op + "_")
    f.__name__ = op + "_"
    f.__doc__ = f"In-place {op}: the result (of self's dtype, cast as torch's in-place ops) is written into self."
    return f


def _alias(name):
    def f(self, *args, **kwargs):
        return getattr(self, name)(*args, **kwargs)
    f.__name__ = name
    return f


# ---- fill_diagonal_, put_, index_reduce, sum_to_size
def fill_diagonal_(self, fill_value, wrap=False):
    """Fills the main diagonal (every dim's index equal); for a tall 2-D matrix with wrap=True the
    diagonal restarts every N + 1 rows, as NumPy's fill_diagonal."""
    if self.ndim < 2:
        raise RuntimeError("dimensions must larger than 1")
    shape = tuple(self.shape)
    if self.ndim > 2 and builtins.any(s != shape[0] for s in shape):
        raise RuntimeError("all dimensions of input must be of equal length")
    numel = self.numel()
    if numel == 0:
        return self
    strides = [1] * self.ndim  # of the row-major layout
    for d in builtins.range(self.ndim - 2, -1, -1):
        strides[d] = strides[d + 1] * shape[d + 1]
    step = builtins.sum(strides)
    if self.ndim == 2 and wrap:
        count = (numel + step - 1) // step
    else:
        count = builtins.min(shape)
    import tessera
    idx = tessera.arange(count, device=self.device) * step
    mask = tessera.zeros(numel, dtype=_BOOL, device=self.device)
    mask = _call("index_fill", (mask, 0, idx, True), _E)
    _call("masked_fill_", (self, _call("reshape", (mask, shape), _E), fill_value), _E)
    return self


def _check_put(self, index, source, name):
    if index.dtype != _I64:
        raise RuntimeError(f"{name}(): Expected a long tensor for index, but got {_em._type_name(index.dtype)}")
    if source.dtype != self.dtype:
        raise RuntimeError(f"{name}(): self ({_em._type_name(self.dtype)}) and source "
                           f"({_em._type_name(source.dtype)}) must have the same scalar type")
    if index.numel() != source.numel():
        raise IndexError(f"{name}(): Expected source and index to have the same number of elements, but got "
                         f"source.numel() = {source.numel()}, index.numel() = {index.numel()}")
    n = self.numel()
    if index.numel():
        lo = _call("amin", (index, []), _E).item()
        hi = _call("amax", (index, []), _E).item()
        bad = hi if hi >= n else (lo if lo < -n else None)
        if bad is not None:
            raise IndexError(f"out of range: tried to access index {bad} on a tensor of {n} elements.")


def put(self, index, source, accumulate=False):
    """A copy of self with source's values written (or added) at the flat, row-major positions index names."""
    _check_put(self, index, source, "put")
    n = self.numel()
    idx = _call("remainder", (_call("reshape", (index, (-1,)), _E), _C.tensor(builtins.max(n, 1), dtype=_I64)), _E)
    flat = _call("reshape", (self, (-1,)), _E)
    src = _call("reshape", (source, (-1,)), _E)
    flat = _call("index_put", (flat, [idx], src, accumulate), _E)
    return _call("reshape", (flat, tuple(self.shape)), _E)


def put_(self, index, source, accumulate=False):
    _check_put(self, index, source, "put_")
    return _write_back(self, put(self, index, source, accumulate), "put_")


_INDEX_REDUCES = ("prod", "mean", "amax", "amin")


def index_reduce(self, dim, index, source, reduce, *, include_self=True):
    """Reduces source's slices into self's slices that index names along dim ('prod', 'mean', 'amax', 'amin')."""
    if reduce not in _INDEX_REDUCES:
        raise RuntimeError(f"index_reduce(): Expected reduce to be one of prod, mean, amax or amin but got {reduce}.")
    if index.ndim > 1:
        raise IndexError("index_reduce_(): Index is supposed to be a vector")
    if index.dtype not in (_I64, _C.dtypes["int32"]):
        raise IndexError("index_reduce_(): Expected a long or int tensor for index")
    d = dim % builtins.max(self.ndim, 1)
    if source.ndim and index.numel() != source.shape[d]:
        raise IndexError(f"index_reduce_(): Index should have the same number of elements as dimension {d} of "
                         f"source, but got {index.numel()} vs {source.shape[d]}")
    shape = [1] * source.ndim
    if source.ndim:
        shape[d] = index.numel()
    idx = _call("expand", (_call("reshape", (index.to(_I64), tuple(shape)), _E), tuple(source.shape)), _E)
    return _call("scatter_reduce", (self, d, idx, source, reduce), {"include_self": include_self})


def index_reduce_(self, dim, index, source, reduce, *, include_self=True):
    return _write_back(self, index_reduce(self, dim, index, source, reduce, include_self=include_self),
                       "index_reduce_")


def sum_to_size(self, *size):
    """self summed down to `size` (which must expand to self's shape), as a gradient is reduced for broadcasting."""
    if len(size) == 1 and not isinstance(size[0], builtins.int):
        size = tuple(size[0])
    shape = tuple(self.shape)
    lead = len(shape) - len(size)
    ok = lead >= 0 and builtins.all(s == 1 or s == shape[lead + i] for i, s in enumerate(size))
    if not ok:
        raise RuntimeError(f"size {{{list(size)}}} is not expandable to size {{{list(shape)}}}.")
    r = self
    if lead:
        r = _call("sum", (r, builtins.list(builtins.range(lead))), _E)
    dims = [i for i, s in enumerate(size) if s == 1 and r.shape[i] != 1]
    if dims:
        r = _call("sum", (r, dims, True), _E)
    return r


def new(self, *args, **kwargs):
    """Legacy x.new(...): a tensor of x's dtype and device, uninitialised of the given sizes, or holding data."""
    device = kwargs.pop("device", None) or self.device
    if kwargs:
        raise TypeError(f"new() got an unexpected keyword argument '{next(iter(kwargs))}'")
    import tessera
    if not args:
        return tessera.empty(0, dtype=self.dtype, device=device)
    if builtins.all(isinstance(a, builtins.int) and not isinstance(a, builtins.bool) for a in args):
        return tessera.empty(builtins.list(args), dtype=self.dtype, device=device)
    if len(args) == 1:
        a = args[0]
        if isinstance(a, Tensor):
            if a.dtype != self.dtype:
                raise TypeError(f"expected {self.type()} (got {a.type()})")
            return a
        if isinstance(a, tessera.Size):
            return tessera.empty(builtins.list(a), dtype=self.dtype, device=device)
        return tessera.tensor(a, dtype=self.dtype, device=device)
    raise TypeError(f"new() received an invalid combination of arguments - got {tuple(type(a).__name__ for a in args)}")


def _mH(self):
    if self.ndim < 2:
        raise RuntimeError(f"tensor.mH is only supported on matrices or batches of matrices. Got {self.ndim}-D tensor.")
    return _fm.adjoint(self)


def _H(self):
    if self.ndim not in (0, 2):
        raise RuntimeError(f"tensor.H is only supported on matrices (2-D tensors). Got {self.ndim}-D tensor.")
    return self if self.ndim == 0 else _fm.adjoint(self)


def adjoint(self):
    return _fm.adjoint(self)


def float_power_(self, exponent):
    want = _C.dtypes["complex128"] if self.dtype.is_complex or isinstance(exponent, builtins.complex) or (
        isinstance(exponent, Tensor) and exponent.dtype.is_complex) else _C.dtypes["float64"]
    if self.dtype != want:
        raise RuntimeError(f"the base given to float_power_ has dtype {_em._type_name(self.dtype)} but the "
                           f"operation's result requires dtype {_em._type_name(want)}")
    return _write_back(self, _em.float_power(self, exponent), "float_power_")


def polygamma_method(self, n):
    return _em.polygamma(n, self)


def polygamma_(self, n):
    return _write_back(self, _em.polygamma(n, self), "polygamma_")


def cholesky_solve(self, input2, upper=False):
    return _fm.cholesky_solve(self, input2, upper)


def nonzero_static(self, *, size, fill_value=-1):
    """nonzero() padded with fill_value (or truncated) to exactly `size` rows."""
    nz = _call("nonzero", (self,), _E)
    k = nz.shape[0]
    if k >= size:
        return nz[:size]
    import tessera
    pad = tessera.full((size - k, self.ndim), fill_value, dtype=_I64, device=self.device)
    return _call("cat", ([nz, pad], 0), _E)


# ---- installation
def _install():
    T = Tensor
    own = set(dir(T))

    def put_method(name, fn):
        if name not in own:
            setattr(T, name, fn)

    # in-place comparisons and logical operators: the bool result cast back to self's dtype
    for op in ("eq", "ne", "lt", "le", "gt", "ge", "greater", "greater_equal", "less", "less_equal", "not_equal",
               "logical_and", "logical_or", "logical_xor", "logical_not", "addmm", "addmv", "addr", "baddbmm",
               "addbmm", "masked_scatter", "scatter_reduce", "heaviside", "clamp_min", "clamp_max", "fmax", "fmin",
               "gcd", "lcm", "ldexp", "nextafter", "i0", "mvlgamma", "renorm", "index_fill", "igamma", "igammac"):
        put_method(op + "_", _inplace_via(op))
    for alias, base in {"arctan2_": "atan2_", "arccosh_": "acosh_", "arcsinh_": "asinh_", "arctanh_": "atanh_",
                        "unsafe_chunk": "chunk", "unsafe_split": "split",
                        "unsafe_split_with_sizes": "split_with_sizes"}.items():
        if base is not None and hasattr(T, base):
            put_method(alias, _alias(base))
    # functions that are also methods (self first)
    for name in ("fmax", "fmin", "gcd", "lcm", "float_power", "ldexp", "frexp", "nextafter", "i0", "mvlgamma",
                 "igamma", "igammac"):
        put_method(name, getattr(_em, name))
    for name in ("cov", "corrcoef", "det", "logdet", "slogdet", "inverse", "pinverse", "matrix_power", "matrix_exp",
                 "quantile", "nanquantile", "dist", "inner", "diagflat", "argwhere", "hsplit", "vsplit", "dsplit",
                 "cholesky", "cholesky_inverse", "qr", "svd", "triangular_solve", "prelu", "hardshrink",
                 "histogram", "renorm", "positive", "is_nonzero", "is_same_size", "is_conj", "is_neg", "is_inference",
                 "isreal", "get_device", "diagonal_scatter", "as_strided_scatter", "lstsq", "solve", "eig", "symeig",
                 "narrow_copy", "lu"):
        fn = getattr(_fm, name, None)
        if fn is None:
            import tessera
            fn = getattr(tessera, name, None)
        if fn is not None:
            put_method(name, fn)
    for fn in (fill_diagonal_, put, put_, index_reduce, index_reduce_, sum_to_size, new, adjoint, float_power_,
               polygamma_, cholesky_solve, nonzero_static):
        put_method(fn.__name__, fn)
    put_method("polygamma", polygamma_method)
    put_method("lu_solve", lambda self, LU_data, LU_pivots: _fm.lu_solve(self, LU_data, LU_pivots))
    if "mH" not in own:
        T.mH = property(_mH)
    if "H" not in own:
        T.H = property(_H)


_install()
