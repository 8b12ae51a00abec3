"""tessera.distributions: torch.distributions over tessera tensors. The families of
torch.distributions (Normal, Categorical, Bernoulli, Poisson, Binomial, MixtureSameFamily, ...), the
wrappers Independent and TransformedDistribution, the transforms, the constraints with the
biject_to/transform_to registries, and kl_divergence/register_kl.

    >>> import tessera as ts
    >>> d = ts.distributions.Normal(ts.zeros(3), 1.0)
    >>> x = d.rsample((10,))            # (10, 3), differentiable in loc and scale
    >>> d.log_prob(x).shape
    (10, 3)

Samples draw from tessera's random generators, so ts.manual_seed makes them reproducible."""
from tessera.distributions import constraints, transforms
from tessera.distributions.bernoulli import Bernoulli
from tessera.distributions.beta import Beta
from tessera.distributions.binomial import Binomial
from tessera.distributions.categorical import Categorical
from tessera.distributions.cauchy import Cauchy
from tessera.distributions.chi2 import Chi2
from tessera.distributions.constraint_registry import biject_to, transform_to
from tessera.distributions.continuous_bernoulli import ContinuousBernoulli
from tessera.distributions.dirichlet import Dirichlet
from tessera.distributions.distribution import Distribution
from tessera.distributions.exp_family import ExponentialFamily
from tessera.distributions.exponential import Exponential
from tessera.distributions.fishersnedecor import FisherSnedecor
from tessera.distributions.gamma import Gamma
from tessera.distributions.geometric import Geometric
from tessera.distributions.gumbel import Gumbel
from tessera.distributions.half_cauchy import HalfCauchy
from tessera.distributions.half_normal import HalfNormal
from tessera.distributions.independent import Independent
from tessera.distributions.kl import kl_divergence, register_kl
from tessera.distributions.kumaraswamy import Kumaraswamy
from tessera.distributions.laplace import Laplace
from tessera.distributions.lkj_cholesky import LKJCholesky
from tessera.distributions.generalized_pareto import GeneralizedPareto
from tessera.distributions.inverse_gamma import InverseGamma
from tessera.distributions.log_normal import LogNormal
from tessera.distributions.logistic_normal import LogisticNormal
from tessera.distributions.lowrank_multivariate_normal import LowRankMultivariateNormal
from tessera.distributions.mixture_same_family import MixtureSameFamily
from tessera.distributions.multinomial import Multinomial
from tessera.distributions.multivariate_normal import MultivariateNormal
from tessera.distributions.negative_binomial import NegativeBinomial
from tessera.distributions.normal import Normal
from tessera.distributions.one_hot_categorical import OneHotCategorical, OneHotCategoricalStraightThrough
from tessera.distributions.pareto import Pareto
from tessera.distributions.poisson import Poisson
from tessera.distributions.relaxed_bernoulli import RelaxedBernoulli
from tessera.distributions.relaxed_categorical import RelaxedOneHotCategorical
from tessera.distributions.studentT import StudentT
from tessera.distributions.transformed_distribution import TransformedDistribution
from tessera.distributions.transforms import (
    AbsTransform, AffineTransform, CatTransform, ComposeTransform, CorrCholeskyTransform,
    CumulativeDistributionTransform, ExpTransform, IndependentTransform, LowerCholeskyTransform,
    PositiveDefiniteTransform, PowerTransform, ReshapeTransform, SigmoidTransform, SoftmaxTransform,
    SoftplusTransform, StackTransform, StickBreakingTransform, TanhTransform, Transform, identity_transform,
)
from tessera.distributions.uniform import Uniform
from tessera.distributions.von_mises import VonMises
from tessera.distributions.weibull import Weibull
from tessera.distributions.wishart import Wishart

__all__ = [
    "AbsTransform", "AffineTransform", "Bernoulli", "Beta", "Binomial", "CatTransform", "Categorical", "Cauchy",
    "Chi2", "ComposeTransform", "ContinuousBernoulli", "CorrCholeskyTransform", "CumulativeDistributionTransform",
    "Dirichlet", "Distribution", "ExpTransform", "Exponential", "ExponentialFamily", "FisherSnedecor", "Gamma",
    "GeneralizedPareto", "Geometric", "Gumbel", "HalfCauchy", "HalfNormal", "Independent", "IndependentTransform",
    "InverseGamma", "Kumaraswamy", "LKJCholesky",
    "Laplace", "LogNormal", "LogisticNormal", "LowRankMultivariateNormal", "LowerCholeskyTransform",
    "MixtureSameFamily", "Multinomial", "MultivariateNormal", "NegativeBinomial", "Normal", "OneHotCategorical",
    "OneHotCategoricalStraightThrough", "Pareto", "Poisson", "PositiveDefiniteTransform", "PowerTransform",
    "RelaxedBernoulli", "RelaxedOneHotCategorical", "ReshapeTransform", "SigmoidTransform", "SoftmaxTransform",
    "SoftplusTransform", "StackTransform", "StickBreakingTransform", "StudentT", "TanhTransform", "Transform",
    "TransformedDistribution", "Uniform", "VonMises", "Weibull", "Wishart", "biject_to", "constraints",
    "identity_transform", "kl_divergence", "register_kl", "transform_to", "transforms",
]
