"""StudentT(df, loc, scale): Student's t distribution (torch.distributions.StudentT)."""
import math
from numbers import Number

import tessera as ts
from tessera.distributions import constraints
from tessera.distributions.chi2 import Chi2
from tessera.distributions.distribution import Distribution
from tessera.distributions.utils import _standard_normal, broadcast_all, digamma

__all__ = ["StudentT"]


class StudentT(Distribution):
    """StudentT(df, loc=0., scale=1.), df > 0 degrees of freedom, scale > 0. rsample draws
    loc + scale * Z / sqrt(V / df) with Z normal and V ~ Chi2(df) (reparameterised, df included)."""

    arg_constraints = {"df": constraints.positive, "loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, df, loc=0.0, scale=1.0, validate_args=None):
        self.df, self.loc, self.scale = broadcast_all(df, loc, scale)
        self._chi2 = Chi2(self.df)
        scalar = all(isinstance(v, Number) for v in (df, loc, scale))
        super().__init__(() if scalar else tuple(self.df.shape), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._expand_params(StudentT, batch_shape, _instance, ("df", "loc", "scale"))
        new._chi2 = self._chi2.expand(batch_shape)
        return new

    @property
    def mean(self):
        # Defined for df > 1 only.
        return ts.where(self.df > 1, self.loc, ts.full_like(self.loc, math.nan))

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        # scale^2 df / (df - 2) for df > 2; infinite for 1 < df <= 2; undefined for df <= 1.
        var = self.scale.pow(2) * self.df / (self.df - 2)
        var = ts.where(self.df > 2, var, ts.full_like(var, math.inf))
        return ts.where(self.df > 1, var, ts.full_like(var, math.nan))

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        z = _standard_normal(shape, self.df.dtype, self.df.device)
        v = self._chi2.rsample(sample_shape)
        return self.loc + self.scale * z * (v / self.df).rsqrt()

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        y = (value - self.loc) / self.scale
        half_df = 0.5 * self.df
        log_norm = (self.scale.log() + 0.5 * self.df.log() + 0.5 * math.log(math.pi) + half_df.lgamma()
                    - (half_df + 0.5).lgamma())
        return -0.5 * (self.df + 1.0) * (y.pow(2) / self.df).log1p() - log_norm

    def entropy(self):
        half_df = 0.5 * self.df
        log_beta = half_df.lgamma() + math.lgamma(0.5) - (half_df + 0.5).lgamma()
        return (self.scale.log() + (half_df + 0.5) * (digamma(half_df + 0.5) - digamma(half_df))
                + 0.5 * self.df.log() + log_beta)
