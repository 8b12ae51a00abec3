"""Weibull(scale, concentration) (torch.distributions.Weibull)."""
import tessera as ts
from tessera.distributions import constraints
from tessera.distributions.exponential import Exponential
from tessera.distributions.transformed_distribution import TransformedDistribution
from tessera.distributions.transforms import AffineTransform, PowerTransform
from tessera.distributions.utils import broadcast_all, euler_constant

__all__ = ["Weibull"]


class Weibull(TransformedDistribution):
    """Weibull(scale, concentration), both > 0: scale * E^(1 / concentration) for E ~ Exponential(1)."""

    arg_constraints = {"scale": constraints.positive, "concentration": constraints.positive}
    support = constraints.positive

    def __init__(self, scale, concentration, validate_args=None):
        self.scale, self.concentration = broadcast_all(scale, concentration)
        self.concentration_reciprocal = self.concentration.reciprocal()
        base_dist = Exponential(ts.ones_like(self.scale), validate_args=validate_args)
        transforms = [PowerTransform(exponent=self.concentration_reciprocal), AffineTransform(loc=0, scale=self.scale)]
        super().__init__(base_dist, transforms, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Weibull, _instance)
        new.scale = self.scale.expand(tuple(batch_shape))
        new.concentration = self.concentration.expand(tuple(batch_shape))
        new.concentration_reciprocal = new.concentration.reciprocal()
        base_dist = self.base_dist.expand(batch_shape)
        transforms = [PowerTransform(exponent=new.concentration_reciprocal), AffineTransform(loc=0, scale=new.scale)]
        TransformedDistribution.__init__(new, base_dist, transforms, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self):
        return self.scale * (1 + self.concentration_reciprocal).lgamma().exp()

    @property
    def mode(self):
        k = self.concentration
        return self.scale * ((k - 1) / k).pow(k.reciprocal())

    @property
    def variance(self):
        r = self.concentration_reciprocal
        return self.scale.pow(2) * ((1 + 2 * r).lgamma().exp() - (2 * (1 + r).lgamma()).exp())

    def entropy(self):
        r = self.concentration_reciprocal
        return euler_constant * (1 - r) + (self.scale * r).log() + 1
