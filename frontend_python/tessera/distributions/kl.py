"""kl_divergence(p, q) and register_kl (torch.distributions.kl): closed-form KL(p || q) per pair of
families, looked up by the most specific registered (type(p), type(q)) pair."""
import math
import warnings

import tessera as ts
from tessera.distributions.bernoulli import Bernoulli
from tessera.distributions.beta import Beta
from tessera.distributions.categorical import Categorical
from tessera.distributions.dirichlet import Dirichlet
from tessera.distributions.distribution import Distribution
from tessera.distributions.gamma import Gamma
from tessera.distributions.independent import Independent
from tessera.distributions.multivariate_normal import MultivariateNormal, _batch_mahalanobis, _solve_lower
from tessera.distributions.normal import Normal
from tessera.distributions.binomial import Binomial
from tessera.distributions.exp_family import ExponentialFamily
from tessera.distributions.exponential import Exponential
from tessera.distributions.geometric import Geometric
from tessera.distributions.gumbel import Gumbel
from tessera.distributions.half_normal import HalfNormal
from tessera.distributions.laplace import Laplace
from tessera.distributions.lowrank_multivariate_normal import LowRankMultivariateNormal
from tessera.distributions.one_hot_categorical import OneHotCategorical
from tessera.distributions.pareto import Pareto
from tessera.distributions.poisson import Poisson
from tessera.distributions.transformed_distribution import TransformedDistribution
from tessera.distributions.transforms import _softplus
from tessera.distributions.uniform import Uniform
from tessera.distributions.utils import _sum_rightmost, broadcast_shapes, digamma, euler_constant

__all__ = ["kl_divergence", "register_kl"]

_KL_REGISTRY = {}  # (type_p, type_q) -> function, as registered
_KL_MEMOIZE = {}  # (type(p), type(q)) -> the function chosen for it


def register_kl(type_p, type_q):
    """Decorator registering fun(p, q) as KL(p || q) for p an instance of type_p, q of type_q.
    A lookup takes the most specific registered pair (by the classes' MROs); when p-first and
    q-first orderings disagree it warns, as torch does, naming the pair to register to settle it."""
    for name, t in (("type_p", type_p), ("type_q", type_q)):
        if not (isinstance(t, type) and issubclass(t, Distribution)):
            raise TypeError(f"register_kl: expected {name} to be a Distribution subclass but got {t!r}")

    def decorator(fun):
        _KL_REGISTRY[type_p, type_q] = fun
        _KL_MEMOIZE.clear()  # a new pair can change what an earlier lookup would pick
        return fun

    return decorator


def _dispatch_kl(type_p, type_q):
    mro_p, mro_q = type_p.__mro__, type_q.__mro__
    matches = [(mro_p.index(p), mro_q.index(q), p, q) for p, q in _KL_REGISTRY
               if issubclass(type_p, p) and issubclass(type_q, q)]
    if not matches:
        return NotImplemented
    p_first = min(matches, key=lambda m: (m[0], m[1]))
    q_first = min(matches, key=lambda m: (m[1], m[0]))
    fun = _KL_REGISTRY[p_first[2], p_first[3]]
    if fun is not _KL_REGISTRY[q_first[2], q_first[3]]:
        warnings.warn(f"Ambiguous kl_divergence({type_p.__name__}, {type_q.__name__}). "
                      f"Please register_kl({p_first[2].__name__}, {q_first[3].__name__})", RuntimeWarning, stacklevel=3)
    return fun


def kl_divergence(p, q):
    """KL(p || q) = E_p[log p(x) - log q(x)], batched over the (broadcast) batch shapes.
    NotImplementedError when no pair is registered for the two families."""
    key = (type(p), type(q))
    try:
        fun = _KL_MEMOIZE[key]
    except KeyError:
        fun = _KL_MEMOIZE[key] = _dispatch_kl(*key)
    if fun is NotImplemented:
        raise NotImplementedError(f"No KL(p || q) is implemented for p type {p.__class__.__name__} and "
                                  f"q type {q.__class__.__name__}")
    return fun(p, q)


def _infinite(p, q, like):
    shape = broadcast_shapes(p.batch_shape, q.batch_shape)
    return ts.full(shape, math.inf, dtype=like.dtype, device=like.device)


# ---------------------------------------------------------------------------- same family
@register_kl(Normal, Normal)
def _kl_normal_normal(p, q):
    var_ratio = (p.scale / q.scale).pow(2)
    t1 = ((p.loc - q.loc) / q.scale).pow(2)
    return 0.5 * (var_ratio + t1 - 1 - var_ratio.log())


@register_kl(Categorical, Categorical)
def _kl_categorical_categorical(p, q):
    p_probs, q_probs, p_logits, q_logits = ts.broadcast_tensors(p.probs, q.probs, p.logits, q.logits)
    t = p_probs * (p_logits - q_logits)
    t = ts.where(q_probs == 0, ts.full_like(t, math.inf), t)  # p puts mass where q has none
    t = ts.where(p_probs == 0, ts.zeros_like(t), t)  # 0 log 0 = 0
    return t.sum(-1)


@register_kl(Bernoulli, Bernoulli)
def _kl_bernoulli_bernoulli(p, q):
    pp, qp, pl, ql = ts.broadcast_tensors(p.probs, q.probs, p.logits, q.logits)
    inf = ts.full_like(pp, math.inf)
    zero = ts.zeros_like(pp)
    # p log(p/q) + (1-p) log((1-p)/(1-q)), from logits: log p = -softplus(-l), log(1-p) = -softplus(l).
    t1 = pp * (_softplus(-ql) - _softplus(-pl))
    t1 = ts.where(pp == 0, zero, ts.where(qp == 0, inf, t1))
    t2 = (1 - pp) * (_softplus(ql) - _softplus(pl))
    t2 = ts.where(pp == 1, zero, ts.where(qp == 1, inf, t2))
    return t1 + t2


@register_kl(Uniform, Uniform)
def _kl_uniform_uniform(p, q):
    result = ((q.high - q.low) / (p.high - p.low)).log()
    outside = (q.low > p.low) | (q.high < p.high)  # p's interval not inside q's
    return ts.where(outside, ts.full_like(result, math.inf), result)


@register_kl(Beta, Beta)
def _kl_beta_beta(p, q):
    a1, b1, a2, b2 = p.concentration1, p.concentration0, q.concentration1, q.concentration0
    s1, s2 = a1 + b1, a2 + b2
    t1 = a2.lgamma() + b2.lgamma() + s1.lgamma()
    t2 = a1.lgamma() + b1.lgamma() + s2.lgamma()
    t3 = (a1 - a2) * digamma(a1)
    t4 = (b1 - b2) * digamma(b1)
    t5 = (s2 - s1) * digamma(s1)
    return t1 - t2 + t3 + t4 + t5


@register_kl(Gamma, Gamma)
def _kl_gamma_gamma(p, q):
    t1 = q.concentration * (p.rate / q.rate).log()
    t2 = q.concentration.lgamma() - p.concentration.lgamma()
    t3 = (p.concentration - q.concentration) * digamma(p.concentration)
    t4 = (q.rate - p.rate) * (p.concentration / p.rate)
    return t1 + t2 + t3 + t4


@register_kl(Dirichlet, Dirichlet)
def _kl_dirichlet_dirichlet(p, q):
    sum_p = p.concentration.sum(-1)
    sum_q = q.concentration.sum(-1)
    t1 = sum_p.lgamma() - sum_q.lgamma()
    t2 = (p.concentration.lgamma() - q.concentration.lgamma()).sum(-1)
    t3 = p.concentration - q.concentration
    t4 = digamma(p.concentration) - digamma(sum_p).unsqueeze(-1)
    return t1 - t2 + (t3 * t4).sum(-1)


@register_kl(MultivariateNormal, MultivariateNormal)
def _kl_mvn_mvn(p, q):
    if p.event_shape != q.event_shape:
        raise ValueError("KL-divergence between two Multivariate Normals with different event shapes cannot be "
                         f"computed: {p.event_shape} vs {q.event_shape}")
    Lp, Lq = p._unbroadcasted_scale_tril, q._unbroadcasted_scale_tril
    half_term1 = Lq.diagonal(dim1=-2, dim2=-1).log().sum(-1) - Lp.diagonal(dim1=-2, dim2=-1).log().sum(-1)
    n = p.event_shape[0]
    term2 = _solve_lower(Lq, Lp).pow(2).sum((-2, -1))  # trace(Sigma_q^-1 Sigma_p) = |Lq^-1 Lp|_F^2
    term3 = _batch_mahalanobis(Lq, q.loc - p.loc)
    return half_term1 + 0.5 * (term2 + term3 - n)


@register_kl(Independent, Independent)
def _kl_independent_independent(p, q):
    if p.reinterpreted_batch_ndims != q.reinterpreted_batch_ndims:
        raise NotImplementedError("KL(Independent || Independent) is implemented only for equal "
                                  f"reinterpreted_batch_ndims, got {p.reinterpreted_batch_ndims} and "
                                  f"{q.reinterpreted_batch_ndims}")
    return _sum_rightmost(kl_divergence(p.base_dist, q.base_dist), p.reinterpreted_batch_ndims)


@register_kl(TransformedDistribution, TransformedDistribution)
def _kl_transformed_transformed(p, q):
    # KL is invariant under a shared bijection, so it is the bases' KL.
    if p.transforms != q.transforms:
        raise NotImplementedError("KL(TransformedDistribution || TransformedDistribution) needs equal transforms")
    if p.event_shape != q.event_shape:
        raise NotImplementedError("KL(TransformedDistribution || TransformedDistribution) needs equal event shapes, "
                                  f"got {p.event_shape} and {q.event_shape}")
    extra_event_dim = len(p.event_shape) - len(p.base_dist.event_shape)
    return _sum_rightmost(kl_divergence(p.base_dist, q.base_dist), extra_event_dim)


# ---------------------------------------------------------------------------- across families
# Where p has mass outside q's support the divergence is infinite.
@register_kl(Normal, Uniform)
@register_kl(Normal, Beta)
@register_kl(Normal, Gamma)
def _kl_normal_bounded(p, q):
    return _infinite(p, q, p.loc)


@register_kl(Gamma, Uniform)
@register_kl(Gamma, Beta)
def _kl_gamma_bounded(p, q):
    return _infinite(p, q, p.rate)


def _int_x_log_x(x):
    # An antiderivative of log x: x log x - x (0 at x = 0).
    return ts.xlogy(x, x) - x


@register_kl(Uniform, Normal)
def _kl_uniform_normal(p, q):
    width = p.high - p.low
    # E_p[(x - mu)^2] over the interval, from the antiderivative (x - mu)^3 / 3.
    second = ((p.high - q.loc).pow(3) - (p.low - q.loc).pow(3)) / (3 * width)
    return -width.log() + (q.scale * math.sqrt(2 * math.pi)).log() + second / (2 * q.scale.pow(2))


@register_kl(Uniform, Gamma)
def _kl_uniform_gamma(p, q):
    width = p.high - p.low
    mean_log_x = (_int_x_log_x(p.high) - _int_x_log_x(p.low)) / width
    a, b = q.concentration, q.rate
    result = -width.log() - a * b.log() - (a - 1) * mean_log_x + b * (p.high + p.low) / 2 + a.lgamma()
    return ts.where(p.low < 0, ts.full_like(result, math.inf), result)


@register_kl(Uniform, Beta)
def _kl_uniform_beta(p, q):
    width = p.high - p.low
    mean_log_x = (_int_x_log_x(p.high) - _int_x_log_x(p.low)) / width
    mean_log_1mx = (_int_x_log_x(1 - p.low) - _int_x_log_x(1 - p.high)) / width
    a, b = q.concentration1, q.concentration0
    log_beta_fn = a.lgamma() + b.lgamma() - (a + b).lgamma()
    result = -width.log() + log_beta_fn - (a - 1) * mean_log_x - (b - 1) * mean_log_1mx
    return ts.where((p.low < 0) | (p.high > 1), ts.full_like(result, math.inf), result)


@register_kl(Beta, Uniform)
def _kl_beta_uniform(p, q):
    result = -p.entropy() + (q.high - q.low).log()
    return ts.where((q.low > 0) | (q.high < 1), ts.full_like(result, math.inf), result)


@register_kl(Beta, Normal)
@register_kl(Gamma, Normal)
def _kl_moments_normal(p, q):
    # -H(p) + E_p[-log q(x)], and E_p[(x - mu)^2] = Var_p + (E_p x - mu)^2.
    second = p.variance + (p.mean - q.loc).pow(2)
    return -p.entropy() + (q.scale * math.sqrt(2 * math.pi)).log() + second / (2 * q.scale.pow(2))


@register_kl(Beta, Gamma)
def _kl_beta_gamma(p, q):
    a1, b1 = p.concentration1, p.concentration0
    mean_log_x = digamma(a1) - digamma(a1 + b1)
    a, r = q.concentration, q.rate
    return -p.entropy() - a * r.log() + a.lgamma() - (a - 1) * mean_log_x + r * p.mean


# ---------------------------------------------------------------------------- the further families
@register_kl(ExponentialFamily, ExponentialFamily)
def _kl_expfamily_expfamily(p, q):
    # The Bregman divergence of the log normalizer F: F(theta_q) - F(theta_p) - <theta_q - theta_p, grad F(theta_p)>.
    if type(p) is not type(q):
        raise NotImplementedError("The cross KL-divergence between different exponential families cannot be computed "
                                  "using Bregman divergences")
    p_nparams = [t.detach().requires_grad_() for t in p._natural_params]
    q_nparams = q._natural_params
    with ts.enable_grad():
        lg_normal = p._log_normalizer(*p_nparams)
        gradients = ts.autograd.grad(lg_normal.sum(), p_nparams, create_graph=True)
    result = q._log_normalizer(*q_nparams) - lg_normal
    for pnp, qnp, g in zip(p_nparams, q_nparams, gradients):
        result = result - _sum_rightmost((qnp - pnp) * g, len(q.event_shape))
    return result


@register_kl(Exponential, Exponential)
def _kl_exponential_exponential(p, q):
    rate_ratio = q.rate / p.rate
    return rate_ratio - rate_ratio.log() - 1


@register_kl(Laplace, Laplace)
def _kl_laplace_laplace(p, q):
    scale_ratio = p.scale / q.scale
    loc_abs_diff = (p.loc - q.loc).abs()
    return -scale_ratio.log() + loc_abs_diff / q.scale + scale_ratio * (-loc_abs_diff / p.scale).exp() - 1


@register_kl(Poisson, Poisson)
def _kl_poisson_poisson(p, q):
    return p.rate * (p.rate.log() - q.rate.log()) - (p.rate - q.rate)


@register_kl(Geometric, Geometric)
def _kl_geometric_geometric(p, q):
    return -p.entropy() - (-q.probs).log1p() / p.probs - q.logits


@register_kl(Binomial, Binomial)
def _kl_binomial_binomial(p, q):
    if bool((p.total_count < q.total_count).any()):
        raise NotImplementedError("KL between Binomials where q.total_count > p.total_count is not implemented")
    kl = p.total_count * (p.probs * (p.logits - q.logits) + (-p.probs).log1p() - (-q.probs).log1p())
    # More trials in p than in q: p reaches counts q cannot.
    return ts.where(p.total_count > q.total_count, ts.full_like(kl, math.inf), kl)


@register_kl(OneHotCategorical, OneHotCategorical)
def _kl_onehotcategorical_onehotcategorical(p, q):
    return _kl_categorical_categorical(p._categorical, q._categorical)


@register_kl(Gumbel, Gumbel)
def _kl_gumbel_gumbel(p, q):
    ct1 = p.scale / q.scale
    ct2 = q.loc / q.scale
    ct3 = p.loc / q.scale
    t1 = -ct1.log() - ct2 + ct3
    t2 = ct1 * euler_constant
    t3 = (ct2 + (1 + ct1).lgamma() - ct3).exp()
    return t1 + t2 + t3 - (1 + euler_constant)


@register_kl(HalfNormal, HalfNormal)
def _kl_halfnormal_halfnormal(p, q):
    return _kl_normal_normal(p.base_dist, q.base_dist)


@register_kl(Pareto, Pareto)
def _kl_pareto_pareto(p, q):
    scale_ratio = p.scale / q.scale
    alpha_ratio = q.alpha / p.alpha
    result = q.alpha * scale_ratio.log() - alpha_ratio.log() + alpha_ratio - 1
    # p's support starting below q's: infinite.
    return ts.where(p.scale < q.scale, ts.full_like(result, math.inf), result)


@register_kl(Exponential, Gamma)
def _kl_exponential_gamma(p, q):
    ratio = q.rate / p.rate
    return (-q.concentration * ratio.log() + ratio + q.concentration.lgamma() + q.concentration * euler_constant
            - (1 + euler_constant))


@register_kl(Gamma, Exponential)
def _kl_gamma_exponential(p, q):
    return -p.entropy() - q.rate.log() + q.rate * p.concentration / p.rate


def _as_full_mvn(d):
    # A low-rank Gaussian as a dense one: the KL formulas then reuse MultivariateNormal's.
    if isinstance(d, LowRankMultivariateNormal):
        return MultivariateNormal(d.loc, covariance_matrix=d.covariance_matrix, validate_args=False)
    return d


@register_kl(LowRankMultivariateNormal, LowRankMultivariateNormal)
@register_kl(LowRankMultivariateNormal, MultivariateNormal)
@register_kl(MultivariateNormal, LowRankMultivariateNormal)
def _kl_lowrank_mvn(p, q):
    if p.event_shape != q.event_shape:
        raise ValueError("KL-divergence between two (Low Rank) Multivariate Normals with different event shapes "
                         f"cannot be computed: {p.event_shape} vs {q.event_shape}")
    return _kl_mvn_mvn(_as_full_mvn(p), _as_full_mvn(q))
