"""tessera.special: torch.special's common functions under their PyTorch names, over Tessera's
operators (the ones without a primitive are composites in composites/src/elementwise.cpp)."""
from tessera import _C

_call = _C.call_op
_E = {}


def _out(out):
    return _E if out is None else {"out": out}


def _unary(op):
    def f(input, *, out=None):
        return _call(op, (input,), _out(out))
    f.__name__ = op
    return f


expit = _unary("sigmoid")
erf = _unary("erf")
erfc = _unary("erfc")
erfinv = _unary("erfinv")
expm1 = _unary("expm1")
exp2 = _unary("exp2")
log1p = _unary("log1p")
digamma = psi = _unary("digamma")
gammaln = _unary("lgamma")
sinc = _unary("sinc")
entr = _unary("special_entr")
ndtr = _unary("special_ndtr")
ndtri = _unary("special_ndtri")
log_ndtr = _unary("special_log_ndtr")


def logit(input, eps=None, *, out=None):
    return _call("logit", (input, eps), _out(out))


def round(input, decimals=0, *, out=None):
    kwargs = {"decimals": decimals} if decimals else {}
    if out is not None:
        kwargs["out"] = out
    return _call("round", (input,), kwargs)


def xlogy(input, other, *, out=None):
    return _call("xlogy", (input, other), _out(out))


def xlog1py(input, other, *, out=None):
    return _call("special_xlog1py", (input, other), _out(out))


def softmax(input, dim, *, dtype=None):
    return _call("softmax", (input, dim, dtype), _E)


def log_softmax(input, dim, *, dtype=None):
    return _call("log_softmax", (input, dim, dtype), _E)


def logsumexp(input, dim, keepdim=False):
    return _call("logsumexp", (input, dim, keepdim), _E)


# Bessel, Airy, erfcx, zeta, the orthogonal polynomials, and the functions shared with the top level
# (i0, polygamma, multigammaln = mvlgamma, gammainc/gammaincc = igamma/igammac): composites in _special_functions.
from tessera._special_functions import (  # noqa: E402
    airy_ai, bessel_j0, bessel_j1, bessel_y0, bessel_y1, chebyshev_polynomial_t, chebyshev_polynomial_u,
    chebyshev_polynomial_v, chebyshev_polynomial_w, erfcx, gammainc, gammaincc, hermite_polynomial_h,
    hermite_polynomial_he, i0, i0e, i1, i1e, laguerre_polynomial_l, legendre_polynomial_p, modified_bessel_i0,
    modified_bessel_i1, modified_bessel_k0, modified_bessel_k1, multigammaln, polygamma, scaled_modified_bessel_k0,
    scaled_modified_bessel_k1, shifted_chebyshev_polynomial_t, shifted_chebyshev_polynomial_u,
    shifted_chebyshev_polynomial_v, shifted_chebyshev_polynomial_w, spherical_bessel_j0, zeta)
