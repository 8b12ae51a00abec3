"""Poisson(rate): counts of events at a given rate (torch.distributions.Poisson), and the vectorised
Poisson sampler the count families share."""
from numbers import Number

import tessera as ts
from tessera.distributions import constraints
from tessera.distributions.exp_family import ExponentialFamily
from tessera.distributions.utils import broadcast_all

__all__ = ["Poisson"]

_SMALL_RATE = 10.0  # below: inversion; from here on: transformed rejection (PTRS)


def _poisson_inversion(lam, shape, device):
    """Sequential search of the CDF: the count is the number of n with U > F(n). Every entry runs
    the same loop (vectorised), so it ends once the largest draw is reached; for rates below 10
    the CDF is within 1e-16 of one by n ~ 45."""
    u = ts.rand(shape, dtype=ts.float64, device=device)
    pmf = (-lam).exp()
    cdf = pmf
    count = ts.zeros(shape, dtype=ts.float64, device=device)
    active = u > cdf
    n = 0
    while bool(active.any()) and n < 1000:
        n += 1
        count = count + active.to(ts.float64)
        pmf = pmf * lam / n
        cdf = cdf + pmf
        # Round-off can leave the summed CDF a hair below one: stop when it no longer grows.
        active = active & (u > cdf) & (pmf > 0)
    return count


def _poisson_ptrs(lam, shape, device):
    """Hörmann's transformed rejection with squeeze (PTRS, 1993) for rates >= 10, vectorised like
    the gamma sampler: each round proposes for every entry and keeps the first accepted proposal
    (acceptance is about 90%, so a few dozen rounds finish millions of entries)."""
    lam = ts.where(lam >= _SMALL_RATE, lam, ts.full_like(lam, _SMALL_RATE))  # other entries: stand-ins
    slam = lam.sqrt()
    log_lam = lam.log()
    b = 0.931 + 2.53 * slam
    a = -0.059 + 0.02483 * b
    inv_alpha = 1.1239 + 1.1328 / (b - 3.4)
    v_r = 0.9277 - 3.6224 / (b - 2)
    result = ts.zeros(shape, dtype=ts.float64, device=device)
    done = ts.zeros(shape, dtype=ts.bool, device=device)
    for _ in range(1000):
        if bool(done.all()):
            break
        u = ts.rand(shape, dtype=ts.float64, device=device) - 0.5
        v = ts.rand(shape, dtype=ts.float64, device=device)
        us = 0.5 - u.abs()
        k = ((2 * a / us + b) * u + lam + 0.43).floor()
        squeeze = (us >= 0.07) & (v <= v_r)
        k_safe = k.clamp(min=0)
        # log of the hat function's value against the log pmf at k.
        log_accept = v.log() + inv_alpha.log() - (a / us.square() + b).log()
        exact = (k >= 0) & ~((us < 0.013) & (v > us)) & (log_accept <= -lam + k_safe * log_lam - (k_safe + 1).lgamma())
        take = (squeeze | exact) & ~done
        result = ts.where(take, k, result)
        done = done | take
    return result


def _poisson_sample(rate):
    """Poisson(rate) counts of rate's shape and dtype (no gradient)."""
    lam = rate.detach().double()
    shape, device = tuple(lam.shape), lam.device
    small = lam < _SMALL_RATE
    result = _poisson_inversion(ts.where(small, lam, ts.zeros_like(lam)), shape, device)
    if not bool(small.all()):
        result = ts.where(small, result, _poisson_ptrs(lam, shape, device))
    return result.to(rate.dtype)


class Poisson(ExponentialFamily):
    """Poisson(rate), rate >= 0: P(k) = rate^k e^-rate / k!. Samples are float counts in rate's dtype."""

    arg_constraints = {"rate": constraints.nonnegative}
    support = constraints.nonnegative_integer

    def __init__(self, rate, validate_args=None):
        (self.rate,) = broadcast_all(rate)
        batch_shape = () if isinstance(rate, Number) else tuple(self.rate.shape)
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_params(Poisson, batch_shape, _instance, ("rate",))

    @property
    def mean(self):
        return self.rate

    @property
    def mode(self):
        return self.rate.floor()

    @property
    def variance(self):
        return self.rate

    def sample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        with ts.no_grad():
            return _poisson_sample(self.rate.expand(shape))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        rate, value = broadcast_all(self.rate, value)
        return ts.xlogy(value, rate) - rate - (value + 1).lgamma()

    @property
    def _natural_params(self):
        return (self.rate.log(),)

    def _log_normalizer(self, x):
        return x.exp()

    @property
    def _mean_carrier_measure(self):
        raise NotImplementedError("Poisson has no closed-form entropy")

    def entropy(self):
        raise NotImplementedError(f"{self.__class__.__name__} does not implement entropy")
