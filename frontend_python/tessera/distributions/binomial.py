"""Binomial(total_count, probs | logits) (torch.distributions.Binomial), and its vectorised sampler."""
import tessera as ts
from tessera.distributions import constraints
from tessera.distributions.distribution import Distribution
from tessera.distributions.utils import lazy_property, logits_to_probs, probs_to_logits, set_count_and_probs

__all__ = ["Binomial"]

_SMALL_MEAN = 10.0  # n min(p, 1-p) below: inversion; from here on: transformed rejection (BTRS)


def _binomial_inversion(n, p, shape, device):
    """Sequential search of the CDF from k = 0 with the pmf recurrence f(k+1) = f(k) (n-k)/(k+1) p/q;
    for n p < 10 (p <= 1/2) the loop ends within a few dozen steps."""
    q = 1 - p
    u = ts.rand(shape, dtype=ts.float64, device=device)
    pmf = (n * (-p).log1p()).exp()
    cdf = pmf
    ratio = p / q
    count = ts.zeros(shape, dtype=ts.float64, device=device)
    active = (u > cdf) & (n > 0)
    k = 0
    while bool(active.any()) and k < 10000:
        count = count + active.to(ts.float64)
        pmf = pmf * ((n - k) / (k + 1)).clamp(min=0) * ratio
        cdf = cdf + pmf
        k += 1
        active = active & (u > cdf) & (pmf > 0) & (count < n)
    return count


def _binomial_btrs(n, p, shape, device):
    """Hörmann's transformed rejection with squeeze (BTRS, 1993) for n p >= 10, p <= 1/2; the
    acceptance test compares with the exact log pmf ratio log f(k) / f(m) (m the mode)."""
    big = n * p >= _SMALL_MEAN
    n = ts.where(big, n, ts.full_like(n, 100.0))  # other entries: stand-ins
    p = ts.where(big, p, ts.full_like(p, 0.5))
    q = 1 - p
    spq = (n * p * q).sqrt()
    b = 1.15 + 2.53 * spq
    a = -0.0873 + 0.0248 * b + 0.01 * p
    c = n * p + 0.5
    v_r = 0.92 - 4.2 / b
    alpha = (2.83 + 5.1 / b) * spq
    log_r = p.log() - q.log()
    m = ((n + 1) * p).floor()
    log_fm = -(m + 1).lgamma() - (n - m + 1).lgamma()
    result = ts.zeros(shape, dtype=ts.float64, device=device)
    done = ts.zeros(shape, dtype=ts.bool, device=device)
    for _ in range(1000):
        if bool(done.all()):
            break
        u = ts.rand(shape, dtype=ts.float64, device=device) - 0.5
        v = ts.rand(shape, dtype=ts.float64, device=device)
        us = 0.5 - u.abs()
        k = ((2 * a / us + b) * u + c).floor()
        inside = (k >= 0) & (k <= n)
        squeeze = (us >= 0.07) & (v <= v_r)
        ks = k.clamp(min=0).minimum(n)
        log_v = (v * alpha / (a / us.square() + b)).log()
        log_ratio = -(ks + 1).lgamma() - (n - ks + 1).lgamma() - log_fm + (ks - m) * log_r
        take = inside & (squeeze | (log_v <= log_ratio)) & ~done
        result = ts.where(take, k, result)
        done = done | take
    return result


def _binomial_sample(total_count, probs):
    """Binomial counts of the broadcast shape, in probs' dtype (no gradient)."""
    n, p = ts.broadcast_tensors(total_count.detach().double(), probs.detach().double())
    shape, device = tuple(n.shape), n.device
    flip = p > 0.5  # sample the rarer outcome, then count the other
    p = ts.where(flip, 1 - p, p)
    small = n * p < _SMALL_MEAN
    result = _binomial_inversion(ts.where(small, n, ts.zeros_like(n)), p, shape, device)
    if not bool(small.all()):
        result = ts.where(small, result, _binomial_btrs(n, p, shape, device))
    result = ts.where(flip, n - result, result)
    return result.to(probs.dtype)


class Binomial(Distribution):
    """Binomial(total_count=1, probs=None, logits=None): successes in total_count (a non-negative
    integer, tensors allowed) trials of probability probs (or sigmoid(logits)); exactly one of
    probs and logits."""

    arg_constraints = {"total_count": constraints.nonnegative_integer, "probs": constraints.unit_interval,
                       "logits": constraints.real}
    has_enumerate_support = True

    def __init__(self, total_count=1, probs=None, logits=None, validate_args=None):
        set_count_and_probs(self, total_count, probs, logits)
        super().__init__(tuple(self._param.shape), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._expand_params(Binomial, batch_shape, _instance, ("total_count", "probs", "logits"))
        new._param = new.__dict__["probs"] if "probs" in self.__dict__ else new.__dict__["logits"]
        return new

    def _new(self, *args, **kwargs):
        return self._param.new_tensor(*args, **kwargs)

    @constraints.dependent_property(is_discrete=True, event_dim=0)
    def support(self):
        return constraints.integer_interval(0, self.total_count)

    @property
    def mean(self):
        return self.total_count * self.probs

    @property
    def mode(self):
        return ((self.total_count + 1) * self.probs).floor().minimum(self.total_count)

    @property
    def variance(self):
        return self.total_count * self.probs * (1 - self.probs)

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self):
        return logits_to_probs(self.logits, is_binary=True)

    @property
    def param_shape(self):
        return tuple(self._param.shape)

    def sample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        with ts.no_grad():
            return _binomial_sample(self.total_count.expand(shape), self.probs.expand(shape))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        n, logits = self.total_count, self.logits
        log_choose = (n + 1).lgamma() - (value + 1).lgamma() - (n - value + 1).lgamma()
        # k log p + (n-k) log(1-p) = k l - n log(1 + e^l), the softplus written so it cannot overflow
        # (and so that l = +-inf with k at the matching end gives 0, not NaN).
        log_one_plus = logits.clamp(min=0) + (-logits.abs()).exp().log1p()
        return log_choose + value * logits - n * log_one_plus

    def entropy(self):
        total_count = int(self.total_count.max())
        if not bool(self.total_count.min() == total_count):
            raise NotImplementedError("Inhomogeneous total count not supported by `entropy`.")
        log_prob = self.log_prob(self.enumerate_support(False))
        return -(log_prob.exp() * log_prob).sum(0)

    def enumerate_support(self, expand=True):
        total_count = int(self.total_count.max())
        if not bool(self.total_count.min() == total_count):
            raise NotImplementedError("Inhomogeneous total count not supported by `enumerate_support`.")
        values = ts.arange(1 + total_count, dtype=self._param.dtype, device=self._param.device)
        values = values.reshape((-1,) + (1,) * len(self._batch_shape))
        if expand:
            values = values.expand((-1,) + self._batch_shape)
        return values
