"""torch's element-wise functions that Tessera has no kernel for, as vectorised composites of its
operators (so every device and autograd get them): fmax/fmin, gcd/lcm (Euclid's algorithm, one
remainder per step over the whole tensor), float_power, ldexp, frexp, nextafter (from frexp's
exponent), i0 (Chebyshev expansions), polygamma (the Hurwitz zeta function), mvlgamma, igamma/igammac
(series and continued fraction)."""
import builtins
import math
from collections import namedtuple

from tessera import _C

_call = _C.call_op
_E = {}
_Tensor = _C.Tensor
_DT = _C.dtypes
_F64 = _DT["float64"]
_C128 = _DT["complex128"]
_I32 = _DT["int32"]

FrexpResult = namedtuple("frexp", ["mantissa", "exponent"])


def _tensor_of(x, like):
    """A Python number as a 0-dim tensor of the dtype `like op x` computes in."""
    if isinstance(x, _Tensor):
        return x
    from tessera._functions import wrap_scalar
    return wrap_scalar(like, x)


def _type_name(dt):
    return {"float32": "Float", "float64": "Double", "float16": "Half", "bfloat16": "BFloat16", "int64": "Long",
            "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte", "bool": "Bool",
            "complex64": "ComplexFloat", "complex128": "ComplexDouble"}.get(dt.name, dt.name)


def _out(result, out, fname):
    if out is None:
        return result
    if tuple(out.shape) != tuple(result.shape):
        raise RuntimeError(f"{fname}: the out tensor has shape {list(out.shape)} but the result has shape "
                           f"{list(result.shape)}")
    return out.copy_(result)


def _where(cond, a, b):
    return _call("where", (cond, a, b), _E)


# ---- fmax / fmin: maximum / minimum that ignore a NaN operand
def _nan_ignoring(op, fname):
    def f(input, other, *, out=None):
        other = _tensor_of(other, input)
        r = _call(op, (input, other), _E)
        if r.dtype.is_floating_point:
            a_nan, b_nan = _call("isnan", (input,), _E), _call("isnan", (other,), _E)
            r = _where(b_nan, input.to(r.dtype), _where(a_nan, other.to(r.dtype), r))
        return _out(r, out, fname)
    f.__name__ = fname
    f.__doc__ = f"torch.{fname}: element-wise {op}, taking the other operand where one is NaN."
    return f


fmax = _nan_ignoring("maximum", "fmax")
fmin = _nan_ignoring("minimum", "fmin")


# ---- gcd / lcm on integer tensors
def _check_integral(t, fname):
    if t.dtype.is_floating_point or t.dtype.is_complex or t.dtype.name == "bool":
        raise NotImplementedError(f'"{fname}_cpu" not implemented for \'{_type_name(t.dtype)}\'')


def _gcd(a, b):
    a, b = _call("abs", (a,), _E), _call("abs", (b,), _E)
    # Euclid's algorithm on every element at once: (a, b) <- (b, a mod b) until all b are 0.
    while _call("any", (_call("ne", (b, 0), _E),), _E).item():
        nz = _call("ne", (b, 0), _E)
        safe_b = _where(nz, b, _call("full_like", (b, 1), _E))
        a, b = _where(nz, b, a), _where(nz, _call("remainder", (a, safe_b), _E), b)
    return a


def gcd(input, other, *, out=None):
    """Greatest common divisor of integer tensors (non-negative; gcd(0, 0) = 0)."""
    other = _tensor_of(other, input)
    _check_integral(input, "gcd")
    _check_integral(other, "gcd")
    a, b = _call("broadcast_tensors", ([input, other],), _E)
    from tessera._functions import result_type
    dt = result_type(input, other)
    return _out(_gcd(a.to(dt), b.to(dt)), out, "gcd")


def lcm(input, other, *, out=None):
    """Least common multiple of integer tensors (non-negative; lcm with 0 is 0)."""
    other = _tensor_of(other, input)
    _check_integral(input, "lcm")
    _check_integral(other, "lcm")
    from tessera._functions import result_type
    dt = result_type(input, other)
    a, b = _call("broadcast_tensors", ([input.to(dt), other.to(dt)],), _E)
    g = _gcd(a, b)
    safe_g = _where(_call("eq", (g, 0), _E), _call("full_like", (g, 1), _E), g)
    r = _call("abs", (_call("mul", (_call("floor_divide", (a, safe_g), _E), b), _E),), _E)
    return _out(_where(_call("eq", (g, 0), _E), g, r), out, "lcm")


# ---- float_power, ldexp
def _double_of(x):
    if isinstance(x, _Tensor):
        return x.to(_C128 if x.dtype.is_complex else _F64)
    return x


def float_power(input, exponent, *, out=None):
    """input ** exponent computed in double precision (complex128 when either operand is complex)."""
    if not isinstance(input, _Tensor):
        if not isinstance(exponent, _Tensor):
            raise TypeError("float_power(): expected at least one Tensor operand")
        base_complex = isinstance(input, builtins.complex) or exponent.dtype.is_complex
        input = _C.tensor(input, dtype=_C128 if base_complex else _F64, device=exponent.device)
    cplx = input.dtype.is_complex or isinstance(exponent, builtins.complex) or (
        isinstance(exponent, _Tensor) and exponent.dtype.is_complex)
    dt = _C128 if cplx else _F64
    e = exponent.to(dt) if isinstance(exponent, _Tensor) else exponent
    return _out(_call("pow", (input.to(dt), e), _E), out, "float_power")


def ldexp(input, other, *, out=None):
    """input * 2 ** other; integer inputs give the default float dtype."""
    other = _tensor_of(other, input)
    if not (input.dtype.is_floating_point or input.dtype.is_complex):
        input = input.to(_C.get_default_dtype())
    two = _C.tensor(2.0, dtype=input.dtype if input.dtype.is_floating_point else _F64, device=input.device)
    return _out(_call("mul", (input, _call("pow", (two, other), _E)), _E), out, "ldexp")


# ---- frexp, nextafter: exponents from log2, corrected by one step where log2 rounded
_MANT_BITS = {"float16": 11, "bfloat16": 8, "float32": 24, "float64": 53}
_MIN_EXP = {"float16": -14, "bfloat16": -126, "float32": -126, "float64": -1022}  # of the smallest normal


def _frexp_parts(x):
    """(mantissa, exponent) in float64 for a floating tensor x; mantissa in [0.5, 1) in magnitude."""
    xd = x.to(_F64)
    ax = _call("abs", (xd,), _E)
    finite_nz = _call("logical_and", (_call("isfinite", (xd,), _E), _call("ne", (xd, 0), _E)), _E)
    safe = _where(finite_nz, ax, _call("full_like", (ax, 1.0), _E))
    e = _call("add", (_call("floor", (_call("log2", (safe,), _E),), _E), 1), _E)
    # log2 may round across an integer near powers of two: fix so that 0.5 <= |x| / 2**e < 1.
    two = _C.tensor(2.0, dtype=_F64, device=x.device)
    m = _call("div", (safe, _call("pow", (two, e), _E)), _E)
    e = _where(_call("ge", (m, 1.0), _E), _call("add", (e, 1), _E), e)
    e = _where(_call("lt", (m, 0.5), _E), _call("sub", (e, 1), _E), e)
    m = _call("div", (safe, _call("pow", (two, e), _E)), _E)
    m = _call("mul", (m, _call("sign", (xd,), _E)), _E)
    m = _where(finite_nz, m, xd)  # 0, inf and nan keep their value with exponent 0
    e = _where(finite_nz, e, _call("mul", (e, 0.0), _E))
    return m, e, finite_nz


def frexp(input, *, out=None):
    """(mantissa, exponent) with input = mantissa * 2 ** exponent, 0.5 <= |mantissa| < 1 (int32 exponent)."""
    if not input.dtype.is_floating_point:
        raise RuntimeError("torch.frexp() only supports floating-point dtypes")
    m, e, _ = _frexp_parts(input)
    res = FrexpResult(m.to(input.dtype), e.to(_I32))
    if out is not None:
        out[0].copy_(res[0])
        out[1].copy_(res[1])
        return FrexpResult(out[0], out[1])
    return res


def nextafter(input, other, *, out=None):
    """The next floating-point value after input towards other (in input's dtype)."""
    other = _tensor_of(other, input)
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f'"nextafter_cpu" not implemented for \'{_type_name(input.dtype)}\'')
    name = input.dtype.name
    p, emin = _MANT_BITS[name], _MIN_EXP[name]
    x, y = _call("broadcast_tensors", ([input.to(_F64), other.to(_F64)],), _E)
    m, e, finite_nz = _frexp_parts(x)
    up = _call("gt", (y, x), _E)  # the direction of the step
    away = _call("eq", (up, _call("gt", (x, 0), _E)), _E)  # moving away from zero
    # The spacing just below |x| halves at a power of two (|mantissa| == 0.5) when moving towards zero.
    at_pow2 = _call("eq", (_call("abs", (m,), _E), 0.5), _E)
    step_exp = _call("sub", (e, p), _E)
    step_exp = _where(_call("logical_and", (at_pow2, _call("logical_not", (away,), _E)), _E),
                      _call("sub", (step_exp, 1), _E), step_exp)
    step_exp = _call("clamp", (step_exp,), {"min": emin - p + 1})  # subnormal spacing
    two = _C.tensor(2.0, dtype=_F64, device=x.device)
    ulp = _call("pow", (two, step_exp), _E)
    tiny = 2.0 ** (emin - p + 1)
    moved = _call("add", (x, _where(up, ulp, _call("neg", (ulp,), _E))), _E)
    from_zero = _where(up, _C.tensor(tiny, dtype=_F64, device=x.device), _C.tensor(-tiny, dtype=_F64, device=x.device))
    r = _where(_call("eq", (x, 0), _E), from_zero, moved)
    from tessera._finfo import finfo
    fmax = finfo(input.dtype).max
    inf_x = _call("isinf", (x,), _E)
    r = _where(inf_x, _call("mul", (_call("sign", (x,), _E), fmax), _E), r)  # inf towards a finite value
    r = _where(_call("eq", (x, y), _E), y, r)
    r = _where(_call("logical_or", (_call("isnan", (x,), _E), _call("isnan", (y,), _E)), _E),
               _C.tensor(math.nan, dtype=_F64, device=x.device), r)
    return _out(r.to(input.dtype), out, "nextafter")


# ---- i0: Cephes' Chebyshev expansions of exp(-|x|) I0(x) on [0, 8] and (8, inf)
_I0_A = [-4.41534164647933937950e-18, 3.33079451882223809783e-17, -2.43127984654795469359e-16,
         1.71539128555513303061e-15, -1.16853328779934516808e-14, 7.67618549860493561688e-14,
         -4.85644678311192946090e-13, 2.95505266312963983461e-12, -1.72682629144155570723e-11,
         9.67580903537323691224e-11, -5.18979560163526290666e-10, 2.65982372468238665035e-9,
         -1.30002500998624804212e-8, 6.04699502254191894932e-8, -2.67079385394061173391e-7,
         1.11738753912010371815e-6, -4.41673835845875056359e-6, 1.64484480707288970893e-5,
         -5.75419501008210370398e-5, 1.88502885095841655729e-4, -5.76375574538582365885e-4,
         1.63947561694133579842e-3, -4.32430999505057594430e-3, 1.05464603945949983183e-2,
         -2.37374148058994688156e-2, 4.93052842396707084878e-2, -9.49010970480476444210e-2,
         1.71620901522208775349e-1, -3.04682672343198398683e-1, 6.76795274409476084995e-1]
_I0_B = [-7.23318048787475395456e-18, -4.83050448594418207126e-18, 4.46562142029675999901e-17,
         3.46122286769746109310e-17, -2.82762398051658348494e-16, -3.42548561967721913462e-16,
         1.77256013305652638360e-15, 3.81168066935262242075e-15, -9.55484669882830764870e-15,
         -4.15056934728722208663e-14, 1.54008621752140982691e-14, 3.85277838274214270114e-13,
         7.18012445138366623367e-13, -1.79417853150680611778e-12, -1.32158118404477131188e-11,
         -3.14991652796324136454e-11, 1.18891471078464383424e-11, 4.94060238822496958910e-10,
         3.39623202570838634515e-9, 2.26666899049817806459e-8, 2.04891858946906374183e-7,
         2.89137052083475648297e-6, 6.88975834691682398426e-5, 3.36911647825569408990e-3,
         8.04490411014108831608e-1]


def _chbevl(x, coeffs):
    b0 = _call("mul", (x, 0.0), _E)
    b1 = b0
    b2 = b0
    for c in coeffs:
        b2 = b1
        b1 = b0
        b0 = _call("add", (_call("sub", (_call("mul", (x, b1), _E), b2), _E), c), _E)
    return _call("mul", (_call("sub", (b0, b2), _E), 0.5), _E)


def i0(input, *, out=None):
    """The modified Bessel function of the first kind, order 0 (integer inputs give the default float dtype)."""
    x = input if input.dtype.is_floating_point else input.to(_C.get_default_dtype())
    ax = _call("abs", (x,), _E)
    small = _call("clamp", (ax,), {"max": 8.0})  # each branch sees only arguments in its range
    large = _call("clamp", (ax,), {"min": 8.0})
    a = _call("mul", (_call("exp", (small,), _E), _chbevl(_call("sub", (_call("div", (small, 2.0), _E), 2.0), _E),
                                                            _I0_A)), _E)
    b_poly = _chbevl(_call("sub", (_call("mul", (_call("reciprocal", (large,), _E), 32.0), _E), 2.0), _E), _I0_B)
    b = _call("div", (_call("mul", (_call("exp", (large,), _E), b_poly), _E), _call("sqrt", (large,), _E)), _E)
    return _out(_where(_call("le", (ax, 8.0), _E), a, b), out, "i0")


# ---- polygamma via the Hurwitz zeta function (Euler-Maclaurin summation, as Cephes' zeta)
_ZETA_A = [12.0, -720.0, 30240.0, -1209600.0, 47900160.0, -1.8924375803183791606e9, 7.47242496e10,
           -2.950130727918164224e12, 1.1646782814350067249e14, -4.5979787224074726105e15,
           1.8152105401943546773e17, -7.1661652561756670113e18]


def _zeta(s, q):
    """The Hurwitz zeta function sum_k (q + k) ** -s for an integer s > 1 (a Python int) and a tensor q:
    special.zeta's implementation (one Euler-Maclaurin summation for both)."""
    from tessera._special_functions import _hurwitz_zeta
    return _hurwitz_zeta(_call("full_like", (q, float(s)), _E), q)


def polygamma(n, input, *, out=None):
    """The n-th derivative of the digamma function: (-1) ** (n + 1) n! zeta(n + 1, x) for n >= 1."""
    if not isinstance(n, builtins.int) or isinstance(n, builtins.bool):
        raise TypeError(f"polygamma(): argument 'n' must be int, not {type(n).__name__}")
    if n < 0:
        raise RuntimeError("polygamma(n, x) does not support negative n.")
    x = input if input.dtype.is_floating_point else input.to(_C.get_default_dtype())
    if n == 0:
        return _out(_call("digamma", (x,), _E), out, "polygamma")
    xd = x.to(_F64)
    r = _call("mul", (_zeta(n + 1, xd), (-1.0) ** (n + 1) * math.factorial(n)), _E)
    return _out(r.to(x.dtype), out, "polygamma")


def mvlgamma(input, p, *, out=None):
    """The multivariate log-gamma function of dimension p: sum_i lgamma(x - i/2) + p(p-1)/4 log(pi)."""
    if not isinstance(p, builtins.int) or p < 1:
        raise RuntimeError(f"p has to be greater than or equal to 1, got {p}")
    x = input if input.dtype.is_floating_point else input.to(_C.get_default_dtype())
    total = _call("lgamma", (x,), _E)
    for i in builtins.range(1, p):
        total = _call("add", (total, _call("lgamma", (_call("sub", (x, i / 2.0), _E),), _E)), _E)
    return _out(_call("add", (total, p * (p - 1) / 4.0 * math.log(math.pi)), _E), out, "mvlgamma")


# ---- igamma / igammac: the regularized incomplete gamma functions P(a, x) and Q(a, x) = 1 - P.
# A power series where x < a + 1, a continued fraction (modified Lentz) elsewhere, each evaluated on
# every element with the other branch's arguments clamped into its range; iterations stop once
# every term is below float64 rounding (at most 2000: accurate for a, x up to about 10^5).
def _igamma_parts(a, x):
    f64 = _F64
    a, x = _call("broadcast_tensors", ([a.to(f64), x.to(f64)],), _E)
    use_series = _call("lt", (x, _call("add", (a, 1.0), _E)), _E)
    tiny = 1e-300
    eps = 1e-16
    # series for P on the series elements (others get x = 0.5 * (a + 1) so the series is tame)
    a_pos = _call("clamp", (a,), {"min": tiny})
    xs = _where(use_series, x, _call("mul", (_call("add", (a_pos, 1.0), _E), 0.5), _E))
    term = _call("reciprocal", (a_pos,), _E)
    total = term
    ap = a_pos
    for i in builtins.range(2000):
        ap = _call("add", (ap, 1.0), _E)
        term = _call("mul", (term, _call("div", (xs, ap), _E)), _E)
        total = _call("add", (total, term), _E)
        if i % 16 == 15 and not _call("any", (_call("gt", (_call("abs", (term,), _E),
                                                         _call("mul", (_call("abs", (total,), _E), eps), _E)), _E),),
                                      _E).item():
            break
    log_xs = _call("log", (_call("clamp", (xs,), {"min": tiny}),), _E)
    p_series = _call("mul", (total, _call("exp", (_call("sub", (_call("sub", (_call("mul", (a_pos, log_xs), _E), xs),
                                                                          _E), _call("lgamma", (a_pos,), _E)), _E),),
                                                  _E)), _E)
    # continued fraction for Q on the others (series elements get x = a + 2)
    xc = _where(use_series, _call("add", (a_pos, 2.0), _E), x)
    b = _call("sub", (_call("add", (xc, 1.0), _E), a_pos), _E)
    c = _call("full_like", (b, 1.0 / tiny), _E)
    d = _call("reciprocal", (b,), _E)
    h = d
    for i in builtins.range(1, 2001):
        an = _call("mul", (_call("sub", (a_pos, float(i)), _E), float(i)), _E)  # -i (i - a)
        b = _call("add", (b, 2.0), _E)
        d = _call("add", (_call("mul", (an, d), _E), b), _E)
        d = _where(_call("lt", (_call("abs", (d,), _E), tiny), _E), _call("full_like", (d, tiny), _E), d)
        c = _call("add", (b, _call("div", (an, c), _E)), _E)
        c = _where(_call("lt", (_call("abs", (c,), _E), tiny), _E), _call("full_like", (c, tiny), _E), c)
        d = _call("reciprocal", (d,), _E)
        delta = _call("mul", (d, c), _E)
        h = _call("mul", (h, delta), _E)
        if i % 16 == 0 and not _call("any", (_call("gt", (_call("abs", (_call("sub", (delta, 1.0), _E),), _E), eps),
                                                  _E),), _E).item():
            break
    log_xc = _call("log", (xc,), _E)
    q_cf = _call("mul", (h, _call("exp", (_call("sub", (_call("sub", (_call("mul", (a_pos, log_xc), _E), xc), _E),
                                                          _call("lgamma", (a_pos,), _E)), _E),), _E)), _E)
    return a, x, use_series, p_series, q_cf


def _igamma(input, other, upper, fname):
    other = _tensor_of(other, input)
    for t in (input, other):
        if t.dtype.is_complex or not t.dtype.is_floating_point:
            raise NotImplementedError(f'"{fname}_cpu" not implemented for \'{_type_name(t.dtype)}\'')
    from tessera._functions import result_type
    dt = result_type(input, other)
    a, x, use_series, p_series, q_cf = _igamma_parts(input, other)
    one = _C.tensor(1.0, dtype=_F64, device=a.device)
    p = _where(use_series, p_series, _call("sub", (one, q_cf), _E))
    q = _where(use_series, _call("sub", (one, p_series), _E), q_cf)
    r = q if upper else p
    zero = _call("full_like", (r, 0.0), _E)
    # edge cases as torch: a == 0 (x > 0) is all mass below x; x == 0 none; infinities; negatives are NaN
    r = _where(_call("logical_and", (_call("eq", (a, 0), _E), _call("gt", (x, 0), _E)), _E),
               zero if upper else _call("add", (zero, 1.0), _E), r)
    r = _where(_call("eq", (x, 0), _E), _call("add", (zero, 1.0), _E) if upper else zero, r)
    r = _where(_call("isposinf", (x,), _E), zero if upper else _call("add", (zero, 1.0), _E), r)
    r = _where(_call("logical_and", (_call("isposinf", (a,), _E), _call("isfinite", (x,), _E)), _E),
               _call("add", (zero, 1.0), _E) if upper else zero, r)
    r = _where(_call("logical_and", (_call("eq", (a, 0), _E), _call("eq", (x, 0), _E)), _E),
               _C.tensor(math.nan, dtype=_F64, device=a.device), r)
    bad = _call("logical_or", (_call("logical_or", (_call("lt", (a, 0), _E), _call("lt", (x, 0), _E)), _E),
                               _call("logical_or", (_call("isnan", (a,), _E), _call("isnan", (x,), _E)), _E)), _E)
    r = _where(bad, _C.tensor(math.nan, dtype=_F64, device=a.device), r)
    return r.to(dt)


def igamma(input, other, *, out=None):
    """The regularized lower incomplete gamma function P(input, other)."""
    return _out(_igamma(input, other, False, "igamma"), out, "igamma")


def igammac(input, other, *, out=None):
    """The regularized upper incomplete gamma function Q(input, other) = 1 - P(input, other)."""
    return _out(_igamma(input, other, True, "igammac"), out, "igammac")
