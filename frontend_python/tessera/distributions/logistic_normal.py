"""LogisticNormal(loc, scale): stick-breaking image of a diagonal Normal on the simplex
(torch.distributions.LogisticNormal)."""
from tessera.distributions import constraints
from tessera.distributions.independent import Independent
from tessera.distributions.normal import Normal
from tessera.distributions.transformed_distribution import TransformedDistribution
from tessera.distributions.transforms import StickBreakingTransform

__all__ = ["LogisticNormal"]


class LogisticNormal(TransformedDistribution):
    """LogisticNormal(loc, scale): X = StickBreaking(Y), Y ~ Normal(loc, scale) over the last
    dimension (K - 1 values give points of the K-simplex)."""

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        base_dist = Normal(loc, scale, validate_args=validate_args)
        if not base_dist.batch_shape:
            base_dist = base_dist.expand((1,))
        super().__init__(Independent(base_dist, 1), StickBreakingTransform(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(LogisticNormal, _instance)
        return super().expand(batch_shape, _instance=new)

    @property
    def loc(self):
        return self.base_dist.base_dist.loc

    @property
    def scale(self):
        return self.base_dist.base_dist.scale
