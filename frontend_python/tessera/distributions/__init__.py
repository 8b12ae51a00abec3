"""tessera.distributions: torch.distributions over tessera tensors. Families (Normal, Categorical,
Bernoulli, Uniform, Beta, Gamma, Dirichlet, MultivariateNormal), the wrappers Independent and
TransformedDistribution, the transforms, the constraints, and kl_divergence/register_kl.

    >>> import tessera as ts
    >>> d = ts.distributions.Normal(ts.zeros(3), 1.0)
    >>> x = d.rsample((10,))            # (10, 3), differentiable in loc and scale
    >>> d.log_prob(x).shape
    (10, 3)

Samples draw from tessera's random generators, so ts.manual_seed makes them reproducible."""
from tessera.distributions import constraints, transforms
from tessera.distributions.bernoulli import Bernoulli
from tessera.distributions.beta import Beta
from tessera.distributions.categorical import Categorical
from tessera.distributions.dirichlet import Dirichlet
from tessera.distributions.distribution import Distribution
from tessera.distributions.gamma import Gamma
from tessera.distributions.independent import Independent
from tessera.distributions.kl import kl_divergence, register_kl
from tessera.distributions.multivariate_normal import MultivariateNormal
from tessera.distributions.normal import Normal
from tessera.distributions.transformed_distribution import TransformedDistribution
from tessera.distributions.transforms import (
    AffineTransform, ComposeTransform, ExpTransform, SigmoidTransform, TanhTransform, Transform, identity_transform,
)
from tessera.distributions.uniform import Uniform

__all__ = [
    "AffineTransform", "Bernoulli", "Beta", "Categorical", "ComposeTransform", "Dirichlet", "Distribution",
    "ExpTransform", "Gamma", "Independent", "MultivariateNormal", "Normal", "SigmoidTransform", "TanhTransform",
    "Transform", "TransformedDistribution", "Uniform", "constraints", "identity_transform", "kl_divergence",
    "register_kl", "transforms",
]
