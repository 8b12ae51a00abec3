"""GeneralizedPareto(loc, scale, concentration) (torch.distributions.GeneralizedPareto)."""
import math
from numbers import Number

import tessera as ts
from tessera.distributions import constraints
from tessera.distributions.distribution import Distribution
from tessera.distributions.utils import _standard_uniform, broadcast_all

__all__ = ["GeneralizedPareto"]


class GeneralizedPareto(Distribution):
    """GeneralizedPareto(loc, scale > 0, concentration xi), z = (x - loc) / scale: survival
    (1 + xi z)^(-1/xi), or e^-z for xi = 0 (Exponential); support [loc, loc - scale / xi] for
    xi < 0 (xi = -1 is uniform), [loc, inf) otherwise. Sampled through the inverse CDF."""

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive, "concentration": constraints.real}
    has_rsample = True

    def __init__(self, loc, scale, concentration, validate_args=None):
        self.loc, self.scale, self.concentration = broadcast_all(loc, scale, concentration)
        numbers = all(isinstance(v, Number) for v in (loc, scale, concentration))
        super().__init__(() if numbers else tuple(self.loc.shape), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(GeneralizedPareto, _instance)
        shape = tuple(batch_shape)
        new.loc, new.scale = self.loc.expand(shape), self.scale.expand(shape)
        new.concentration = self.concentration.expand(shape)
        Distribution.__init__(new, shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _xi(self):
        """(xi == 0 as torch.isclose(xi, 0) tests it, xi with those entries replaced by 1)."""
        zero = self.concentration.abs() <= 1e-8
        return zero, ts.where(zero, ts.ones_like(self.concentration), self.concentration)

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        return self.icdf(_standard_uniform(shape, self.loc.dtype, self.loc.device))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        z = (value - self.loc) / self.scale
        zero, xi = self._xi()
        power = 1 / xi + 1
        # power == 0 (xi = -1, the uniform case): the density is flat, whatever log1p gives.
        tail = ts.where(power == 0, power, power * ts.log1p(xi * z))
        return -self.scale.log() - ts.where(zero, z, tail)

    def log_survival_function(self, value):
        if self._validate_args:
            self._validate_sample(value)
        z = (value - self.loc) / self.scale
        zero, xi = self._xi()
        return ts.where(zero, -z, -ts.log1p(xi * z) / xi)

    def log_cdf(self, value):
        return ts.log1p(-ts.exp(self.log_survival_function(value)))

    def cdf(self, value):
        return ts.exp(self.log_cdf(value))

    def icdf(self, value):
        zero, xi = self._xi()
        log_survival = ts.log1p(-value)
        return ts.where(zero, self.loc - self.scale * log_survival,
                        self.loc + self.scale / xi * ts.expm1(-xi * log_survival))

    @property
    def mean(self):  # NaN for xi >= 1
        xi = self.concentration
        safe = ts.where(xi < 1, xi, 0.5)
        return ts.where(xi < 1, self.loc + self.scale / (1 - safe), math.nan)

    @property
    def variance(self):  # NaN for xi >= 1/2
        xi = self.concentration
        safe = ts.where(xi < 0.5, xi, 0.25)
        return ts.where(xi < 0.5, self.scale.square() / ((1 - safe).square() * (1 - 2 * safe)), math.nan)

    @property
    def mode(self):
        return self.loc

    def entropy(self):
        return (self.scale.log() + self.concentration + 1).broadcast_to(tuple(self.batch_shape))

    @constraints.dependent_property(is_discrete=False, event_dim=0)
    def support(self):
        xi = self.concentration
        upper = ts.where(xi < 0, self.loc - self.scale / ts.where(xi < 0, xi, -1.0), math.inf)
        return constraints.interval(self.loc, upper)
