"""Helpers shared by the distributions (torch.distributions.utils): parameter broadcasting,
probs <-> logits, shapes, lazily computed attributes, and two special functions the operator set
lacks in differentiable form (digamma's derivative, and the regularised lower incomplete gamma)."""
import math
from numbers import Number

import tessera as ts
from tessera.autograd.function import Function

__all__ = ["broadcast_all", "broadcast_shapes", "clamp_probs", "euler_constant", "lazy_property",
           "logits_to_probs", "probs_to_logits"]

euler_constant = 0.57721566490153286060  # Euler–Mascheroni


def broadcast_all(*values):
    """Tensors of one broadcast shape from tensors and Python numbers. Numbers take the dtype and
    device of the first tensor given (the default dtype when there is none), as torch's do."""
    if not all(isinstance(v, ts.Tensor) or isinstance(v, Number) for v in values):
        raise ValueError("Input arguments must all be instances of numbers.Number, torch.Tensor or objects "
                         f"implementing __torch_function__; got {[type(v).__name__ for v in values]}")
    if not all(isinstance(v, ts.Tensor) for v in values):
        like = next((v for v in values if isinstance(v, ts.Tensor)), None)
        if like is None:
            values = [ts.tensor(float(v), dtype=ts.get_default_dtype()) for v in values]
        else:
            # A number joins a floating tensor's dtype; next to an integer tensor it stays its own kind.
            dtype = like.dtype if like.is_floating_point() else ts.get_default_dtype()
            values = [v if isinstance(v, ts.Tensor) else ts.tensor(float(v), dtype=dtype, device=like.device)
                      for v in values]
    return ts.broadcast_tensors(*values)


def broadcast_shapes(*shapes):
    """The shape every given shape broadcasts to (torch.broadcast_shapes); ValueError when none."""
    ndim = max((len(s) for s in shapes), default=0)
    out = [1] * ndim
    for s in shapes:
        for i, n in enumerate(tuple(s)[::-1]):
            j = ndim - 1 - i
            if n == 1:
                continue
            if out[j] not in (1, n):
                raise ValueError(f"Shapes {tuple(tuple(x) for x in shapes)} are not broadcastable: "
                                 f"size {out[j]} vs {n} at dimension {j - ndim}")
            out[j] = n
    return tuple(out)


def _size(shape):
    """sample_shape as a tuple (torch takes torch.Size, tuples and lists; an int is taken too)."""
    if isinstance(shape, int):
        return (shape,)
    return tuple(int(n) for n in shape)


def _sum_rightmost(value, dim):
    """Sums the rightmost `dim` dimensions (a Python number passes through)."""
    if dim == 0 or not isinstance(value, ts.Tensor):
        return value
    return value.reshape(tuple(value.shape[:value.dim() - dim]) + (-1,)).sum(-1)


def clamp_probs(probs):
    """Probabilities kept inside [eps, 1 - eps] so their logs and log1p(-p) stay finite."""
    eps = ts.finfo(probs.dtype).eps
    return probs.clamp(min=eps, max=1 - eps)


def logits_to_probs(logits, is_binary=False):
    return logits.sigmoid() if is_binary else ts.softmax(logits, -1)


def probs_to_logits(probs, is_binary=False):
    p = clamp_probs(probs)
    return p.log() - (-p).log1p() if is_binary else p.log()


def set_count_and_probs(dist, total_count, probs, logits):
    """Binomial-like parameters on `dist`: total_count broadcast with exactly one of probs / logits
    (the other is derived lazily); dist._param is the one given."""
    if (probs is None) == (logits is None):
        raise ValueError("Either `probs` or `logits` must be specified, but not both.")
    name, value = ("probs", probs) if probs is not None else ("logits", logits)
    count, param = broadcast_all(total_count, value)
    dist.total_count = count.type_as(param)
    setattr(dist, name, param)
    dist._param = param


class lazy_property:
    """A cached attribute computed on first read and then stored in the instance's __dict__
    (which is how Distribution validation tells a given parameter from a derived one)."""

    def __init__(self, wrapped):
        self.wrapped = wrapped
        self.__doc__ = wrapped.__doc__
        self.__name__ = wrapped.__name__

    def __get__(self, instance, obj_type=None):
        if instance is None:
            return self
        with ts.enable_grad():
            value = self.wrapped(instance)
        instance.__dict__[self.wrapped.__name__] = value
        return value


def _standard_normal(shape, dtype, device):
    return ts.randn(tuple(shape), dtype=dtype, device=device)


def _standard_uniform(shape, dtype, device):
    return ts.rand(tuple(shape), dtype=dtype, device=device)


def _tiny(dtype):
    return ts.finfo(dtype).tiny


# ---------------------------------------------------------------------------- digamma with a gradient
def _trigamma(x):
    """psi'(x) for x > 0: the recurrence psi'(x) = psi'(x + 1) + 1/x^2 moves x past 10, where the
    asymptotic series is accurate to about 1e-12."""
    acc = ts.zeros_like(x)
    for i in range(10):
        acc = acc + (x + i).square().reciprocal()
    z = x + 10
    iz = z.reciprocal()
    iz2 = iz * iz
    # 1/z + 1/(2z^2) + 1/(6z^3) - 1/(30z^5) + 1/(42z^7) - 1/(30z^9)
    series = iz * (1 + iz * (0.5 + iz * (1 / 6 + iz2 * (-1 / 30 + iz2 * (1 / 42 + iz2 * (-1 / 30))))))
    return acc + series


class _Digamma(Function):
    # The digamma operator has no derivative formula: this adds one (trigamma), which the entropies
    # and KL divergences of Gamma, Beta and Dirichlet need to be trained through.
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return ts.digamma(x)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * _trigamma(x)


def digamma(x):
    return _Digamma.apply(x) if x.requires_grad else ts.digamma(x)


# ---------------------------------------------------------------------------- the gamma sampler's gradient
# (the CDF itself is ts.special.gammainc.) _standard_gamma_grad below uses the series
# P(a, x) = sum_n t_n, t_n = x^(a+n) e^-x / Gamma(a+n+1), run as the ratios r_n = t_n / t_0
# (r_0 = 1, r_{n+1} = r_n x / (a+n+1)) so that nothing underflows.
# The terms grow until a+n passes x and then die off within ~9 sqrt(x) more terms; the number of
# terms is chosen from the largest x in the batch.
_FAR = 30.0  # x beyond a + _FAR (sqrt(a) + 1): P(a, x) is 1 to double precision


def _series_terms(a, x):
    top = float(ts.clamp_min(x - a, 0).max()) if x.numel() else 0.0
    return int(math.ceil(top + 9 * math.sqrt(float(x.max()) if x.numel() else 0.0) + 20))


def _standard_gamma_grad(a, x):
    """d x / d a for x ~ Gamma(a, 1) at fixed CDF value (implicit reparameterisation):
    dx/da = -(dP/da) / p(x) = -(x / a) sum_n r_n (log x - psi(a + n + 1)).
    For a >= 200 the series gets long; there the implicit derivative of the Wilson–Hilferty normal
    approximation is used instead (relative error below 1e-4 there, and falling as 1/a)."""
    dtype = x.dtype
    a, x = a.double(), x.double()
    big = a >= 200
    a_s = ts.where(big, ts.ones_like(a), a)
    x_s = ts.where(big, ts.ones_like(x), x).clamp(min=1e-300)
    far = x_s > a_s + _FAR * (a_s.sqrt() + 1)
    x_s = ts.where(far, a_s, x_s)
    log_x = x_s.log()
    r = ts.ones_like(x_s)
    psi = ts.digamma(a_s + 1)
    total = ts.zeros_like(x_s)
    for n in range(_series_terms(a_s, x_s)):
        total = total + r * (log_x - psi)
        step = a_s + (n + 1)
        r = r * x_s / step
        psi = psi + step.reciprocal()
    grad_series = -(x_s / a_s) * total
    # Wilson–Hilferty: z = 3 sqrt(a) ((x/a)^(1/3) - 1 + 1/(9a)) is ~N(0, 1); dx/da = -(dz/da) / (dz/dx).
    a_b = ts.where(big, a, ts.full_like(a, 200.0))
    x_b = ts.where(big, x, a_b).clamp(min=1e-300)
    u = (x_b / a_b).pow(1.0 / 3.0)
    dz_dx = a_b.sqrt() * u / x_b
    dz_da = 1.5 / a_b.sqrt() * (u - 1 + 1 / (9 * a_b)) - a_b.sqrt() * (u / a_b + 1 / (3 * a_b * a_b))
    grad_wh = -dz_da / dz_dx
    return ts.where(big, grad_wh, ts.where(far, ts.zeros_like(grad_series), grad_series)).to(dtype)


def _marsaglia_tsang(alpha):
    """Gamma(alpha, 1) samples by Marsaglia and Tsang's squeeze-free rejection method, vectorised:
    every round draws a normal and a uniform for every entry, and keeps the first accepted proposal
    of each (acceptance is above 95% for alpha >= 1, so a handful of rounds finish 1e6 entries).
    alpha < 1 samples alpha + 1 and multiplies by U^(1/alpha), done in log space because that
    factor underflows for small alpha."""
    dtype, device = alpha.dtype, alpha.device
    a = alpha.detach().double()
    shape = tuple(a.shape)
    valid = (a > 0) & ts.isfinite(a)
    a = ts.where(valid, a, ts.ones_like(a))
    boost = a < 1
    a1 = ts.where(boost, a + 1, a)
    d = a1 - 1.0 / 3.0
    c = (9 * d).rsqrt()
    log_x = ts.zeros_like(a)
    done = ~valid
    for _ in range(1000):  # the bound is never met in practice (each round leaves < 5% behind)
        if bool(done.all()):
            break
        eps = ts.randn(shape, dtype=ts.float64, device=device)
        u = ts.rand(shape, dtype=ts.float64, device=device)
        base = 1 + c * eps
        v = base * base * base
        safe_v = ts.where(v > 0, v, ts.ones_like(v))
        ok = (v > 0) & (u.log() < 0.5 * eps * eps + d - d * safe_v + d * safe_v.log())
        take = ok & ~done
        log_x = ts.where(take, (d * safe_v).log(), log_x)
        done = done | ok
    u = ts.rand(shape, dtype=ts.float64, device=device)
    log_x = ts.where(boost, log_x + u.log() / a, log_x)
    x = log_x.exp().clamp(min=_tiny(dtype))  # the smallest normal number stands in for an underflow
    x = ts.where(valid, x, ts.full_like(x, float("nan")))
    return x.to(dtype)


class _StandardGamma(Function):
    # Sampling is not differentiable as an operator sequence (it is a rejection loop), so the
    # gradient is the implicit one: d x / d alpha with the sample's CDF value held fixed.
    @staticmethod
    def forward(ctx, alpha):
        x = _marsaglia_tsang(alpha)
        ctx.save_for_backward(alpha, x)
        return x

    @staticmethod
    def backward(ctx, grad):
        alpha, x = ctx.saved_tensors
        return grad * _standard_gamma_grad(alpha.detach(), x)


def _standard_gamma(alpha):
    """Gamma(alpha, 1) samples of alpha's shape, differentiable in alpha (torch._standard_gamma)."""
    return _StandardGamma.apply(alpha)
