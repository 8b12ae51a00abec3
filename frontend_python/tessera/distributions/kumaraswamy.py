"""Kumaraswamy(concentration1, concentration0): a Beta-like distribution on [0, 1] with a closed-form
CDF (torch.distributions.Kumaraswamy)."""
import math

import tessera as ts
from tessera.distributions import constraints
from tessera.distributions.transformed_distribution import TransformedDistribution
from tessera.distributions.transforms import AffineTransform, PowerTransform
from tessera.distributions.uniform import Uniform
from tessera.distributions.utils import broadcast_all, digamma, euler_constant

__all__ = ["Kumaraswamy"]


def _moments(a, b, n):
    """E[X^n] = b B(1 + n/a, b)."""
    arg1 = 1 + n / a
    log_value = arg1.lgamma() + b.lgamma() - (arg1 + b).lgamma()
    return b * log_value.exp()


class Kumaraswamy(TransformedDistribution):
    """Kumaraswamy(a, b), both > 0: density a b x^(a-1) (1 - x^a)^(b-1); X = (1 - U^(1/b))^(1/a)."""

    arg_constraints = {"concentration1": constraints.positive, "concentration0": constraints.positive}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, concentration1, concentration0, validate_args=None):
        self.concentration1, self.concentration0 = broadcast_all(concentration1, concentration0)
        base_dist = Uniform(ts.full_like(self.concentration0, 0), ts.full_like(self.concentration0, 1),
                            validate_args=validate_args)
        transforms = [PowerTransform(exponent=self.concentration0.reciprocal()), AffineTransform(loc=1.0, scale=-1.0),
                      PowerTransform(exponent=self.concentration1.reciprocal())]
        super().__init__(base_dist, transforms, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Kumaraswamy, _instance)
        new.concentration1 = self.concentration1.expand(tuple(batch_shape))
        new.concentration0 = self.concentration0.expand(tuple(batch_shape))
        return super().expand(batch_shape, _instance=new)

    @property
    def mean(self):
        return _moments(self.concentration1, self.concentration0, 1)

    @property
    def mode(self):
        # ((a - 1) / (a b - 1))^(1/a) where a >= 1 and b >= 1 (not both 1); elsewhere the density
        # is unbounded or flat and there is no interior mode (NaN).
        a, b = self.concentration1, self.concentration0
        mode = ((a - 1) / (a * b - 1)).pow(a.reciprocal())
        ok = (a >= 1) & (b >= 1) & ((a > 1) | (b > 1))
        return ts.where(ok, mode, ts.full_like(mode, math.nan))

    @property
    def variance(self):
        return _moments(self.concentration1, self.concentration0, 2) - self.mean.pow(2)

    def entropy(self):
        t1 = 1 - self.concentration1.reciprocal()
        t0 = 1 - self.concentration0.reciprocal()
        h0 = digamma(self.concentration0 + 1) + euler_constant
        return t0 + t1 * h0 - self.concentration1.log() - self.concentration0.log()
