"""Dirichlet(concentration): a distribution over the probability simplex (torch.distributions.Dirichlet)."""
import tessera as ts
from tessera.distributions import constraints
from tessera.distributions.distribution import Distribution
from tessera.distributions.exp_family import ExponentialFamily
from tessera.distributions.utils import _standard_gamma, digamma

__all__ = ["Dirichlet"]


class Dirichlet(ExponentialFamily):
    """Dirichlet(concentration): concentration (> 0) has the K categories in its last dimension;
    samples are K-vectors that sum to one. rsample normalises independent Gamma(concentration_k, 1)
    draws, so its gradients are the gamma draws' implicit reparameterisation gradients carried
    through the normalisation (torch differentiates the Beta marginals instead: both are unbiased
    gradients of expectations, though individual samples' gradients differ)."""

    arg_constraints = {"concentration": constraints.independent(constraints.positive, 1)}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, concentration, validate_args=None):
        if concentration.dim() < 1:
            raise ValueError("`concentration` parameter must be at least one-dimensional.")
        self.concentration = concentration
        batch_shape, event_shape = tuple(concentration.shape[:-1]), tuple(concentration.shape[-1:])
        super().__init__(batch_shape, event_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Dirichlet, _instance)
        batch_shape = tuple(batch_shape)
        new.concentration = self.concentration.expand(batch_shape + self.event_shape)
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        g = _standard_gamma(self.concentration.expand(shape))
        return g / g.sum(-1, keepdim=True)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        c = self.concentration
        return ts.xlogy(c - 1.0, value).sum(-1) + c.sum(-1).lgamma() - c.lgamma().sum(-1)

    @property
    def mean(self):
        return self.concentration / self.concentration.sum(-1, keepdim=True)

    @property
    def mode(self):
        cm1 = (self.concentration - 1).clamp(min=0.0)
        mode = cm1 / cm1.sum(-1, keepdim=True)
        # With every concentration below one the density is unbounded at every vertex: like torch,
        # the first vertex is reported.
        all_below = (self.concentration < 1).all(-1, keepdim=True)
        first = (ts.arange(cm1.shape[-1], device=cm1.device) == 0).to(mode.dtype).expand(mode.shape)
        return ts.where(all_below, first, mode)

    @property
    def variance(self):
        c0 = self.concentration.sum(-1, keepdim=True)
        return self.concentration * (c0 - self.concentration) / (c0.pow(2) * (c0 + 1))

    def entropy(self):
        c = self.concentration
        k = c.shape[-1]
        c0 = c.sum(-1)
        return c.lgamma().sum(-1) - c0.lgamma() - (k - c0) * digamma(c0) - ((c - 1.0) * digamma(c)).sum(-1)

    @property
    def _natural_params(self):
        return (self.concentration,)

    def _log_normalizer(self, x):
        return x.lgamma().sum(-1) - x.sum(-1).lgamma()
