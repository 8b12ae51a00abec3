"""Gamma(concentration, rate): the gamma distribution (torch.distributions.Gamma)."""
from numbers import Number

import tessera as ts
from tessera._generator import using
from tessera.distributions import constraints
from tessera.distributions.distribution import Distribution
from tessera.distributions.exp_family import ExponentialFamily
from tessera.distributions.utils import _standard_gamma, _tiny, broadcast_all, digamma

__all__ = ["Gamma"]


def _keep_above_tiny(value):
    # Raises underflowed samples to the smallest normal number without cutting their gradient
    # (torch clamps the detached tensor in place for the same effect).
    return value + (value.detach().clamp(min=_tiny(value.dtype)) - value.detach())


class Gamma(ExponentialFamily):
    """Gamma(concentration, rate): density rate^a x^(a-1) e^(-rate x) / Gamma(a), both > 0.
    rsample's gradient in concentration is the implicit reparameterisation gradient (see
    distributions.utils._standard_gamma_grad); in rate it is exact (x = standard_gamma / rate)."""

    arg_constraints = {"concentration": constraints.positive, "rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True
    _mean_carrier_measure = 0

    def __init__(self, concentration, rate, validate_args=None):
        self.concentration, self.rate = broadcast_all(concentration, rate)
        if isinstance(concentration, Number) and isinstance(rate, Number):
            batch_shape = ()
        else:
            batch_shape = tuple(self.concentration.shape)
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Gamma, _instance)
        batch_shape = tuple(batch_shape)
        new.concentration = self.concentration.expand(batch_shape)
        new.rate = self.rate.expand(batch_shape)
        Distribution.__init__(new, batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self):
        return self.concentration / self.rate

    @property
    def mode(self):
        return ((self.concentration - 1) / self.rate).clamp(min=0)

    @property
    def variance(self):
        return self.concentration / self.rate.pow(2)

    def sample(self, sample_shape=(), generator=None):
        with ts.no_grad():
            return self.rsample(sample_shape, generator=generator)

    def rsample(self, sample_shape=(), generator=None):
        shape = self._extended_shape(sample_shape)
        with using(generator):
            value = _standard_gamma(self.concentration.expand(shape)) / self.rate.expand(shape)
        return _keep_above_tiny(value)

    def log_prob(self, value):
        value = ts.as_tensor(value, dtype=self.rate.dtype, device=self.rate.device)
        if self._validate_args:
            self._validate_sample(value)
        a, b = self.concentration, self.rate
        return ts.xlogy(a, b) + ts.xlogy(a - 1, value) - b * value - a.lgamma()

    def entropy(self):
        a = self.concentration
        return a - self.rate.log() + a.lgamma() + (1.0 - a) * digamma(a)

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return ts.special.gammainc(self.concentration, self.rate * value)

    @property
    def _natural_params(self):
        return (self.concentration - 1, -self.rate)

    def _log_normalizer(self, x, y):
        return (x + 1).lgamma() + (x + 1) * (-y.reciprocal()).log()
