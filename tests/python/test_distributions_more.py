"""tessera.distributions, the further families (Exponential ... VonMises), transforms, the
biject_to/transform_to registries and KL pairs: log_prob, cdf, icdf, entropy and moments against
torch.distributions on the same parameters (when PyTorch is importable); sample moments of seeded
large samples against closed forms; rsample gradients against finite differences / closed forms;
invalid parameters raising ValueError as torch does."""
import math
import warnings

import numpy as np
import pytest

import tessera as ts
from conftest import from_np, to_np

D = None


def setup_module(module):
    global D
    import tessera.distributions as dists
    D = dists


def T(a, dtype=ts.float64):
    return from_np(np.asarray(a, dtype=np.float64), dtype)


def npa(t):
    return to_np(t).astype(np.float64) if t.dtype != ts.bool else to_np(t)


def close(got, expected, rtol=1e-10, atol=1e-10):
    if isinstance(got, ts.Tensor) and got.dtype == ts.float32:
        rtol, atol = max(rtol, 2e-5), max(atol, 1e-6)
    np.testing.assert_allclose(npa(got) if isinstance(got, ts.Tensor) else got, np.asarray(expected, dtype=np.float64),
                               rtol=rtol, atol=atol, equal_nan=True)


def _tt(torch):
    return lambda a: torch.tensor(np.asarray(a, dtype=np.float64))


_W = np.array([[[1.0, 0.5], [0.0, -1.0], [2.0, 0.3]], [[0.2, 0.1], [0.4, 0.0], [-0.3, 1.0]]])
_PROBS = np.array([[0.1, 0.2, 0.3, 0.4], [0.25, 0.25, 0.4, 0.1]])

# name -> (builder(lib, tensor), value for log_prob/cdf, probabilities for icdf or None)
CASES = {
    "Exponential": (lambda d, t: d.Exponential(t([0.5, 2.0, 7.0])), [0.3, 1.0, 0.01], [0.1, 0.5, 0.9]),
    "Exponential_scalar": (lambda d, t: d.Exponential(1.5), [0.2, 3.0], [0.3]),
    "Laplace": (lambda d, t: d.Laplace(t([0.0, 1.0, -2.0]), t([1.0, 0.5, 3.0])), [-1.0, 1.2, 4.0], [0.1, 0.5, 0.8]),
    "LogNormal": (lambda d, t: d.LogNormal(t([0.0, 1.0]), t([1.0, 0.3])), [0.5, 3.0], [0.2, 0.7]),
    "Cauchy": (lambda d, t: d.Cauchy(t([0.0, 2.0]), t([1.0, 0.5])), [0.3, -4.0], [0.1, 0.6]),
    "HalfNormal": (lambda d, t: d.HalfNormal(t([1.0, 2.5])), [0.3, 4.0], [0.2, 0.9]),
    "HalfCauchy": (lambda d, t: d.HalfCauchy(t([1.0, 0.2])), [0.3, 4.0], [0.2, 0.9]),
    "Poisson": (lambda d, t: d.Poisson(t([0.5, 3.0, 40.0])), [0.0, 2.0, 35.0], None),
    "Binomial": (lambda d, t: d.Binomial(t([10.0, 10.0, 10.0]), t([0.1, 0.5, 0.95])), [0.0, 5.0, 10.0], None),
    "Binomial_logits": (lambda d, t: d.Binomial(5, logits=t([-1.0, 0.3])), [[1.0, 4.0], [5.0, 0.0]], None),
    "Multinomial": (lambda d, t: d.Multinomial(6, probs=t(_PROBS)), [[1.0, 2.0, 3.0, 0.0], [0.0, 0.0, 6.0, 0.0]],
                    None),
    "OneHotCategorical": (lambda d, t: d.OneHotCategorical(probs=t(_PROBS)),
                          [[0.0, 0.0, 1.0, 0.0], [1.0, 0.0, 0.0, 0.0]], None),
    "OneHotCategoricalStraightThrough": (lambda d, t: d.OneHotCategoricalStraightThrough(logits=t(_PROBS)),
                                         [[0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0]], None),
    "StudentT": (lambda d, t: d.StudentT(t([0.8, 1.5, 3.0, 30.0]), t([0.0, 1.0, -1.0, 2.0]), t([1.0, 2.0, 0.5, 1.0])),
                 [0.5, -2.0, 0.0, 3.0], None),
    "Gumbel": (lambda d, t: d.Gumbel(t([0.0, 1.0]), t([1.0, 2.0])), [0.5, -1.0], [0.3, 0.8]),
    "Geometric": (lambda d, t: d.Geometric(t([0.2, 0.9, 1.0])), [3.0, 0.0, 0.0], None),
    "Geometric_logits": (lambda d, t: d.Geometric(logits=t([-1.0, 2.0])), [2.0, 5.0], None),
    "Chi2": (lambda d, t: d.Chi2(t([1.0, 4.0, 10.0])), [0.5, 3.0, 12.0], None),
    "Weibull": (lambda d, t: d.Weibull(t([1.0, 2.0]), t([0.7, 3.0])), [0.5, 2.5], [0.25, 0.6]),
    "Pareto": (lambda d, t: d.Pareto(t([1.0, 2.0]), t([0.7, 3.0])), [1.5, 2.5], [0.25, 0.6]),
    "InverseGamma": (lambda d, t: d.InverseGamma(t([0.7, 2.5, 4.0]), t([1.0, 3.0, 0.5])), [0.3, 1.5, 0.2], None),
    "NegativeBinomial": (lambda d, t: d.NegativeBinomial(t([2.0, 5.5]), t([0.3, 0.8])), [0.0, 7.0], None),
    "NegativeBinomial_logits": (lambda d, t: d.NegativeBinomial(t([3.0]), logits=t([-0.5, 1.0])), [4.0, 1.0], None),
    "RelaxedBernoulli": (lambda d, t: d.RelaxedBernoulli(t(0.5), t([0.2, 0.7])), [0.3, 0.99], None),
    "RelaxedOneHotCategorical": (lambda d, t: d.RelaxedOneHotCategorical(t(0.7), t(_PROBS)),
                                 [[0.1, 0.2, 0.3, 0.4], [0.7, 0.1, 0.1, 0.1]], None),
    "LowRankMVN": (lambda d, t: d.LowRankMultivariateNormal(t([[0.0, 1.0, -1.0]]), t(_W), t([1.0, 0.5, 2.0])),
                   [[0.3, 0.2, 0.1], [1.0, -1.0, 0.0]], None),
    "MixtureSameFamily": (lambda d, t: d.MixtureSameFamily(d.Categorical(t([[0.3, 0.7], [0.5, 0.5]])),
                                                           d.Normal(t([[-1.0, 2.0], [0.0, 1.0]]), t([1.0, 0.5]))),
                          [0.5, -1.5], None),
    "MixtureSameFamily_mvn": (lambda d, t: d.MixtureSameFamily(
        d.Categorical(t([0.2, 0.3, 0.5])), d.Independent(d.Normal(t(np.arange(6.0).reshape(3, 2)), 1.5), 1)),
        [[0.5, 1.0], [4.0, 5.0]], None),
    "ContinuousBernoulli": (lambda d, t: d.ContinuousBernoulli(t([0.1, 0.4995, 0.7, 0.99])), [0.2, 0.5, 0.9, 0.01],
                            [0.3, 0.5, 0.7, 0.1]),
    "ContinuousBernoulli_logits": (lambda d, t: d.ContinuousBernoulli(logits=t([-2.0, 1.0])), [0.2, 0.6], [0.4, 0.9]),
    "FisherSnedecor": (lambda d, t: d.FisherSnedecor(t([1.0, 3.0, 10.0]), t([3.0, 5.0, 12.0])), [0.5, 1.0, 2.0], None),
    "Kumaraswamy": (lambda d, t: d.Kumaraswamy(t([0.5, 2.0, 3.0]), t([0.7, 1.0, 4.0])), [0.2, 0.5, 0.9], None),
    "LogisticNormal": (lambda d, t: d.LogisticNormal(t([0.0, 1.0]), t([1.0, 0.5])), [0.2, 0.5, 0.3], None),
    "VonMises": (lambda d, t: d.VonMises(t([0.0, 1.0, -2.0]), t([0.5, 4.0, 50.0])), [0.3, 1.5, 7.0], None),
}


@pytest.mark.torch
@pytest.mark.parametrize("name", list(CASES))
def test_matches_torch(name):
    torch = pytest.importorskip("torch")
    build, value, q = CASES[name]
    ours, theirs = build(D, T), build(torch.distributions, _tt(torch))
    assert type(ours).__name__ == type(theirs).__name__
    assert tuple(ours.batch_shape) == tuple(theirs.batch_shape)
    assert tuple(ours.event_shape) == tuple(theirs.event_shape)
    assert ours.has_rsample == theirs.has_rsample
    assert ours.has_enumerate_support == theirs.has_enumerate_support
    # (a parameter-dependent support prints its bound tensors: their dtypes read tessera.* here)
    assert repr(ours.support) == repr(theirs.support).replace("torch.", "tessera.") or name.startswith("Binomial") \
        or name == "Pareto"
    # torch's Kumaraswamy.mode is NaN for every b > 1 (it takes log1p(-b)): ours is the true mode, tested below.
    for attr in ("mean", "mode", "variance", "stddev"):
        if name == "Kumaraswamy" and attr == "mode":
            continue
        try:
            expected = getattr(theirs, attr).numpy()
        except NotImplementedError:
            with pytest.raises(NotImplementedError):
                getattr(ours, attr)
            continue
        close(getattr(ours, attr), expected, rtol=1e-9, atol=1e-12)
    try:
        expected = theirs.entropy().numpy()
    except NotImplementedError:
        with pytest.raises(NotImplementedError):
            ours.entropy()
    else:
        close(ours.entropy(), expected, rtol=1e-9, atol=1e-12)
    v_ours, v_theirs = T(value), _tt(torch)(value)
    # VonMises: the Bessel polynomials' rounding; a number parameter is float32 (in both libraries).
    rtol = 2e-7 if name == "VonMises" else 1e-6 if name.endswith("_scalar") else 1e-9
    close(ours.log_prob(v_ours), theirs.log_prob(v_theirs).numpy(), rtol=rtol, atol=1e-12)
    try:
        expected = theirs.cdf(v_theirs).numpy()
    except NotImplementedError:
        with pytest.raises(NotImplementedError):
            ours.cdf(v_ours)
    else:
        close(ours.cdf(v_ours), expected, rtol=1e-9, atol=1e-12)
    if q is not None:
        close(ours.icdf(T(q)), theirs.icdf(torch.tensor(q, dtype=torch.float64)).numpy(), rtol=1e-9, atol=1e-12)
    if theirs.has_enumerate_support:
        for expand in (True, False):
            close(ours.enumerate_support(expand), theirs.enumerate_support(expand).numpy(), 0, 0)


@pytest.mark.torch
@pytest.mark.parametrize("name", ["Exponential", "Laplace", "Cauchy", "StudentT", "Gumbel", "Binomial_logits",
                                  "Poisson", "LowRankMVN", "MixtureSameFamily", "Kumaraswamy", "RelaxedBernoulli",
                                  "NegativeBinomial", "VonMises", "Geometric_logits"])
def test_log_prob_gradients_match_torch(name):
    torch = pytest.importorskip("torch")
    build, value, _ = CASES[name]
    leaves = [[], []]

    def maker(lib_index, make):
        def f(a):
            x = make(a)
            leaves[lib_index].append(x)
            return x
        return f

    ours = build(D, maker(0, lambda a: T(a).requires_grad_()))
    theirs = build(torch.distributions, maker(1, lambda a: torch.tensor(np.asarray(a, dtype=np.float64),
                                                                         requires_grad=True)))
    lo, lt = ours.log_prob(T(value)).sum(), theirs.log_prob(_tt(torch)(value)).sum()
    if name in ("Exponential", "Laplace", "StudentT", "Gumbel", "Kumaraswamy"):
        lo, lt = lo + ours.entropy().sum(), lt + theirs.entropy().sum()
    lo.backward()
    lt.backward()
    rtol = 2e-6 if name == "VonMises" else 1e-7
    for a, b in zip(*leaves):
        if b.grad is not None:
            close(a.grad, b.grad.numpy(), rtol=rtol, atol=1e-10)


def test_names_and_torch_names():
    import importlib
    mod = importlib.import_module("tessera.distributions")
    for name in mod.__all__:
        assert hasattr(mod, name), name
    assert issubclass(D.Exponential, D.ExponentialFamily) and issubclass(D.Poisson, D.ExponentialFamily)
    assert issubclass(D.LogNormal, D.TransformedDistribution) and issubclass(D.Chi2, D.Gamma)


@pytest.mark.torch
def test_every_name_is_a_torch_name():
    torch = pytest.importorskip("torch")
    assert [n for n in D.__all__ if not hasattr(torch.distributions, n)] == []
    assert [n for n in D.constraints.__all__ if not hasattr(torch.distributions.constraints, n)] == []


# ---------------------------------------------------------------------------- closed forms
def test_closed_forms():
    close(D.Exponential(T([2.0])).log_prob(T([0.5])), [math.log(2) - 1.0])
    close(D.Laplace(T([0.0]), T([2.0])).cdf(T([0.0])), [0.5])
    close(D.Cauchy(T([0.0]), T([1.0])).cdf(T([1.0])), [0.75])
    close(D.Poisson(T([2.0])).log_prob(T([3.0])), [3 * math.log(2) - 2 - math.log(6)], rtol=1e-12)
    close(D.Binomial(T([4.0]), T([0.5])).log_prob(T([2.0])), [math.log(6 / 16)], rtol=1e-12)
    close(D.Geometric(T([0.25])).log_prob(T([2.0])), [math.log(0.75 ** 2 * 0.25)], rtol=1e-12)
    close(D.Multinomial(3, probs=T([0.5, 0.5])).log_prob(T([1.0, 2.0])), [math.log(3 / 8)], rtol=1e-12)
    k = D.Kumaraswamy(T([2.0, 3.0]), T([2.0, 5.0]))
    a, b = np.array([2.0, 3.0]), np.array([2.0, 5.0])
    close(k.mode, ((a - 1) / (a * b - 1)) ** (1 / a))
    close(D.LogNormal(T([0.0]), T([1.0])).mean, [math.exp(0.5)])
    # Entropies from the ExponentialFamily (Bregman) form agree with the closed forms.
    e = D.Exponential(T([0.5, 3.0]))
    close(D.ExponentialFamily.entropy(e), npa(e.entropy()), rtol=1e-12)


# ---------------------------------------------------------------------------- shapes, expand, support
SHAPES = {
    "Exponential": lambda: D.Exponential(T([1.0, 2.0])),
    "Laplace": lambda: D.Laplace(T([0.0, 1.0]), 1.0),
    "LogNormal": lambda: D.LogNormal(T([0.0, 1.0]), 1.0),
    "Cauchy": lambda: D.Cauchy(T([0.0, 1.0]), 1.0),
    "HalfNormal": lambda: D.HalfNormal(T([1.0, 2.0])),
    "HalfCauchy": lambda: D.HalfCauchy(T([1.0, 2.0])),
    "Poisson": lambda: D.Poisson(T([1.0, 20.0])),
    "Binomial": lambda: D.Binomial(T([5.0, 50.0]), T([0.3, 0.6])),
    "Multinomial": lambda: D.Multinomial(5, T([[0.2, 0.8], [0.5, 0.5]])),
    "OneHotCategorical": lambda: D.OneHotCategorical(T([[0.2, 0.8], [0.5, 0.5]])),
    "StudentT": lambda: D.StudentT(T([3.0, 5.0])),
    "Gumbel": lambda: D.Gumbel(T([0.0, 1.0]), 2.0),
    "Geometric": lambda: D.Geometric(T([0.3, 0.6])),
    "Chi2": lambda: D.Chi2(T([1.0, 3.0])),
    "Weibull": lambda: D.Weibull(T([1.0, 2.0]), 1.5),
    "Pareto": lambda: D.Pareto(T([1.0, 2.0]), 3.0),
    "InverseGamma": lambda: D.InverseGamma(T([2.0, 3.0]), 1.5),
    "GeneralizedPareto": lambda: D.GeneralizedPareto(T([0.0, 1.0]), 2.0, T([0.3, -0.5])),
    "NegativeBinomial": lambda: D.NegativeBinomial(T([2.0, 3.0]), T([0.3, 0.6])),
    "RelaxedBernoulli": lambda: D.RelaxedBernoulli(T(0.5), T([0.3, 0.6])),
    "RelaxedOneHotCategorical": lambda: D.RelaxedOneHotCategorical(T(0.5), T([[0.2, 0.8], [0.5, 0.5]])),
    "LowRankMVN": lambda: D.LowRankMultivariateNormal(T(np.zeros((2, 3))), T(_W[0]), T([1.0, 1.0, 1.0])),
    "MixtureSameFamily": lambda: D.MixtureSameFamily(D.Categorical(T([0.3, 0.7])), D.Normal(T([[0.0, 1.0]] * 2), 1.0)),
    "ContinuousBernoulli": lambda: D.ContinuousBernoulli(T([0.2, 0.6])),
    "FisherSnedecor": lambda: D.FisherSnedecor(T([2.0, 5.0]), T([3.0, 8.0])),
    "Kumaraswamy": lambda: D.Kumaraswamy(T([2.0, 5.0]), T([3.0, 8.0])),
    "LogisticNormal": lambda: D.LogisticNormal(T(np.zeros((2, 3))), 1.0),
    "VonMises": lambda: D.VonMises(T([0.0, 3.0]), T([1.0, 5.0])),
}


@pytest.mark.torch
def test_generalized_pareto_matches_torch_in_float32():
    # (torch's own GeneralizedPareto fails on float64 parameters: it compares them with a float32 zero)
    torch = pytest.importorskip("torch")
    params = ([0.0, 1.0, -1.0, 0.5], [1.0, 2.0, 0.5, 1.5], [0.0, 0.4, -0.5, -1.0])
    ours = D.GeneralizedPareto(*(ts.tensor(p) for p in params))
    theirs = torch.distributions.GeneralizedPareto(*(torch.tensor(p) for p in params))
    assert repr(ours.support) == repr(theirs.support).replace("torch.", "tessera.")
    for attr in ("mean", "mode", "variance"):
        close(getattr(ours, attr), getattr(theirs, attr).numpy(), rtol=1e-6, atol=1e-7)
    close(ours.entropy(), theirs.entropy().numpy(), rtol=1e-6, atol=1e-7)
    value = [0.5, 3.0, -0.9, 1.0]
    for method in ("log_prob", "cdf", "log_cdf", "log_survival_function"):
        close(getattr(ours, method)(ts.tensor(value)), getattr(theirs, method)(torch.tensor(value)).numpy(),
              rtol=2e-6, atol=1e-7)
    q = [0.1, 0.5, 0.9, 0.3]
    close(ours.icdf(ts.tensor(q)), theirs.icdf(torch.tensor(q)).numpy(), rtol=2e-6, atol=1e-7)
    with pytest.raises(ValueError):
        ours.log_prob(ts.tensor([-5.0, 0.0, 0.0, 0.0]))  # below loc: outside the support


@pytest.mark.parametrize("name", list(SHAPES))
def test_sample_shapes_expand_and_support(name):
    d = SHAPES[name]()
    batch, event = tuple(d.batch_shape), tuple(d.event_shape)
    assert batch == (2,)
    for sample_shape in ((), (4,), (3, 2)):
        s = d.sample(sample_shape)
        assert tuple(s.shape) == sample_shape + batch + event
        assert tuple(d.log_prob(s).shape) == sample_shape + batch
        assert bool(d.support.check(s).all())
        if d.has_rsample:
            assert tuple(d.rsample(sample_shape).shape) == sample_shape + batch + event
    e = d.expand((5,) + batch)
    assert tuple(e.batch_shape) == (5,) + batch and tuple(e.event_shape) == event
    s = e.sample((2,))
    assert tuple(s.shape) == (2, 5) + batch + event
    close(e.log_prob(s)[:, 0], npa(d.log_prob(s[:, 0])), rtol=1e-12)


# ---------------------------------------------------------------------------- sample moments
N = 100_000


def _check_moments(samples, mean, var, mean_sigmas=5.0, var_rtol=0.05):
    s = npa(samples).reshape(N, -1)
    mean, var = np.asarray(mean, dtype=np.float64).reshape(-1), np.asarray(var, dtype=np.float64).reshape(-1)
    se = np.sqrt(var / N)
    assert np.all(np.abs(s.mean(0) - mean) <= mean_sigmas * se + 1e-12), (s.mean(0), mean)
    np.testing.assert_allclose(s.var(0), var, rtol=var_rtol, atol=1e-12)


@pytest.mark.parametrize("name,make", [
    ("Exponential", lambda: D.Exponential(T([0.5, 4.0]))),
    ("Laplace", lambda: D.Laplace(T([-1.0, 2.0]), T([0.5, 3.0]))),
    ("LogNormal", lambda: D.LogNormal(T([0.0, 1.0]), T([0.3, 0.5]))),
    ("HalfNormal", lambda: D.HalfNormal(T([1.0, 3.0]))),
    ("Poisson", lambda: D.Poisson(T([0.0, 0.05, 1.0, 7.5, 10.0, 33.0, 2000.0]))),
    ("Binomial", lambda: D.Binomial(T([0.0, 1.0, 12.0, 40.0, 40.0, 500.0, 3.0]),
                                    T([0.4, 0.3, 0.5, 0.1, 0.8, 0.3, 1.0]))),
    ("Multinomial", lambda: D.Multinomial(10, T([0.1, 0.3, 0.6]))),
    ("OneHotCategorical", lambda: D.OneHotCategorical(T([0.1, 0.3, 0.6]))),
    ("StudentT", lambda: D.StudentT(T([5.0, 12.0]), T([1.0, -1.0]), T([1.0, 2.0]))),
    ("Gumbel", lambda: D.Gumbel(T([0.0, 3.0]), T([1.0, 0.5]))),
    ("Geometric", lambda: D.Geometric(T([0.1, 0.5, 0.95]))),
    ("Chi2", lambda: D.Chi2(T([1.0, 6.0]))),
    ("Weibull", lambda: D.Weibull(T([1.0, 2.0]), T([1.5, 4.0]))),
    ("Pareto", lambda: D.Pareto(T([1.0, 2.0]), T([5.0, 9.0]))),
    ("InverseGamma", lambda: D.InverseGamma(T([6.0, 9.0]), T([2.0, 5.0]))),
    ("GeneralizedPareto", lambda: D.GeneralizedPareto(T([0.0, 1.0, 2.0]), T([1.0, 2.0, 0.5]), T([0.0, 0.1, -0.4]))),
    ("NegativeBinomial", lambda: D.NegativeBinomial(T([2.0, 7.5]), T([0.3, 0.8]))),
    ("LowRankMVN", lambda: D.LowRankMultivariateNormal(T([0.0, 1.0, -1.0]), T(_W[0]), T([1.0, 0.5, 2.0]))),
    ("MixtureSameFamily", lambda: D.MixtureSameFamily(D.Categorical(T([0.3, 0.7])), D.Normal(T([-2.0, 3.0]),
                                                                                              T([1.0, 0.5])))),
    ("ContinuousBernoulli", lambda: D.ContinuousBernoulli(T([0.1, 0.5, 0.8]))),
    ("FisherSnedecor", lambda: D.FisherSnedecor(T([5.0, 10.0]), T([12.0, 20.0]))),
    ("Kumaraswamy", lambda: D.Kumaraswamy(T([0.5, 2.0]), T([2.0, 3.0]))),
])
def test_sample_moments(name, make):
    ts.manual_seed(2025)
    d = make()
    # Heavy-tailed families' sample variances vary more: their tolerance is wider.
    var_rtol = 0.15 if name in ("StudentT", "FisherSnedecor", "Pareto") else 0.05
    _check_moments(d.sample((N,)), d.mean, d.variance, var_rtol=var_rtol)


def test_count_samplers_follow_the_pmf():
    """Chi-squared goodness of fit of the Poisson and Binomial samplers (both branches of each):
    the statistic stays below the 99.9% quantile (about df + 3.1 sqrt(2 df) + 5)."""
    from math import comb, exp, lgamma, log
    ts.manual_seed(3)
    cases = [("Poisson", D.Poisson(T([0.7, 6.0, 25.0, 300.0])), None),
             ("Binomial", D.Binomial(T([6.0, 30.0, 200.0, 60.0]), T([0.5, 0.2, 0.3, 0.9])), None)]
    for name, d, _ in cases:
        s = npa(d.sample((N,)))
        for j in range(s.shape[1]):
            if name == "Poisson":
                lam = float(npa(d.rate)[j])
                ks = np.arange(int(lam + 12 * math.sqrt(lam) + 20))
                pmf = np.array([exp(k * log(lam) - lam - lgamma(k + 1)) for k in ks])
            else:
                n, p = int(npa(d.total_count)[j]), float(npa(d.probs)[j])
                ks = np.arange(n + 1)
                pmf = np.array([comb(n, int(k)) * p ** k * (1 - p) ** (n - k) for k in ks])
            counts = np.bincount(s[:, j].astype(np.int64), minlength=len(ks))[:len(ks)]
            expected = pmf * N
            keep = expected > 20
            stat = np.sum((counts[keep] - expected[keep]) ** 2 / expected[keep])
            df = keep.sum() - 1
            assert stat < df + 3.1 * math.sqrt(2 * df) + 5, (name, j, stat, df)


def test_von_mises_samples():
    ts.manual_seed(9)
    d = D.VonMises(T([0.5, -3.0, 2.0]), T([0.1, 2.0, 40.0]))
    s = npa(d.sample((N,)))
    assert np.all(s >= -math.pi) and np.all(s < math.pi)
    # The circular mean direction and the mean resultant length 1 - variance.
    c, sn = np.cos(s).mean(0), np.sin(s).mean(0)
    r = np.hypot(c, sn)
    np.testing.assert_allclose(r, 1 - npa(d.variance), atol=0.01)
    np.testing.assert_allclose(np.arctan2(sn, c)[1:], [-3.0, 2.0], atol=0.03)


# ---------------------------------------------------------------------------- rsample gradients
def _fd_grad(f, x, h=1e-6):
    """Central finite differences of a scalar function of a float64 numpy array."""
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = h
        g[i] = (f(x + e) - f(x - e)) / (2 * h)
    return g


@pytest.mark.parametrize("name,make,params", [
    ("Exponential", lambda p: D.Exponential(p[0]), [[0.5, 2.0]]),
    ("Laplace", lambda p: D.Laplace(p[0], p[1]), [[0.0, 1.0], [1.0, 0.5]]),
    ("Cauchy", lambda p: D.Cauchy(p[0], p[1]), [[0.0, 1.0], [1.0, 0.5]]),
    ("LogNormal", lambda p: D.LogNormal(p[0], p[1]), [[0.0, 1.0], [1.0, 0.5]]),
    ("HalfNormal", lambda p: D.HalfNormal(p[0]), [[1.0, 2.0]]),
    ("Gumbel", lambda p: D.Gumbel(p[0], p[1]), [[0.0, 1.0], [1.0, 0.5]]),
    ("Weibull", lambda p: D.Weibull(p[0], p[1]), [[1.0, 2.0], [1.5, 0.7]]),
    ("Pareto", lambda p: D.Pareto(p[0], p[1]), [[1.0, 2.0], [1.5, 3.0]]),
    ("GeneralizedPareto", lambda p: D.GeneralizedPareto(p[0], p[1], p[2]), [[0.0, 1.0], [1.0, 2.0], [0.3, -0.4]]),
    ("Kumaraswamy", lambda p: D.Kumaraswamy(p[0], p[1]), [[1.0, 2.0], [1.5, 3.0]]),
    ("ContinuousBernoulli", lambda p: D.ContinuousBernoulli(p[0]), [[0.2, 0.8]]),
    ("LowRankMVN", lambda p: D.LowRankMultivariateNormal(p[0], p[1], p[2]),
     [[0.0, 1.0, 2.0], _W[0].tolist(), [1.0, 0.5, 2.0]]),
    ("RelaxedBernoulli", lambda p: D.RelaxedBernoulli(T(0.5), logits=p[0]), [[-1.0, 2.0]]),
    ("RelaxedOneHotCategorical", lambda p: D.RelaxedOneHotCategorical(T(0.7), logits=p[0]), [[-1.0, 2.0, 0.5]]),
])
def test_rsample_gradients_by_finite_differences(name, make, params):
    """With the generator reseeded, rsample is a deterministic function of the parameters: its
    autograd gradient (of a weighted sum) matches central finite differences."""
    for i in range(len(params)):
        def f(x, i=i):
            ps = [T(p) for p in params]
            ps[i] = T(x)
            ts.manual_seed(17)
            y = make(ps).rsample((3,))
            return float((y * T(np.linspace(0.5, 1.5, y.numel()).reshape(tuple(y.shape)))).sum())
        ps = [T(p).requires_grad_() for p in params]
        ts.manual_seed(17)
        y = make(ps).rsample((3,))
        weights = T(np.linspace(0.5, 1.5, y.numel()).reshape(tuple(y.shape)))
        (y * weights).sum().backward()
        close(ps[i].grad, _fd_grad(f, np.asarray(params[i], dtype=np.float64)), rtol=1e-5, atol=1e-6)


def test_straight_through_gradient_and_studentt_rsample():
    logits = T([0.1, 0.5, -0.3]).requires_grad_()
    d = D.OneHotCategoricalStraightThrough(logits=logits)
    s = d.rsample((4,))
    assert bool(((s.detach() == 0) | (s.detach() == 1)).all())
    (s * T([1.0, 2.0, 3.0])).sum().backward()
    p = npa(d.probs.detach())
    w = np.array([1.0, 2.0, 3.0])
    close(logits.grad, 4 * p * (w - (p * w).sum()), rtol=1e-10)  # d/dlogits of 4 * sum(w * softmax)
    loc = T([1.0]).requires_grad_()
    D.StudentT(T([4.0]), loc, T([2.0])).rsample((5,)).sum().backward()
    close(loc.grad, [5.0])


# ---------------------------------------------------------------------------- validation
@pytest.mark.torch
@pytest.mark.parametrize("build", [
    lambda d, t: d.Exponential(t([1.0, -1.0])),
    lambda d, t: d.Laplace(t([0.0]), t([0.0])),
    lambda d, t: d.Poisson(t([-0.5])),
    lambda d, t: d.Binomial(t([2.5]), t([0.5])),
    lambda d, t: d.Binomial(t([2.0]), t([1.5])),
    lambda d, t: d.StudentT(t([-1.0])),
    lambda d, t: d.Gumbel(t([0.0]), t([-1.0])),
    lambda d, t: d.Geometric(t([0.0])),
    lambda d, t: d.Pareto(t([1.0]), t([-2.0])),
    lambda d, t: d.HalfNormal(t([-2.0])),
    lambda d, t: d.Multinomial(3, t([0.5, -0.5])),
    lambda d, t: d.LowRankMultivariateNormal(t([0.0, 0.0]), t([[1.0], [0.0]]), t([1.0, -1.0])),
    lambda d, t: d.VonMises(t([0.0]), t([-1.0])),
    lambda d, t: d.Weibull(t([1.0]), t([0.0])),
])
def test_invalid_parameters_raise_value_error_as_torch(build):
    torch = pytest.importorskip("torch")
    msgs = []
    for lib, t in ((D, T), (torch.distributions, _tt(torch))):
        with pytest.raises(ValueError) as info:
            build(lib, t)
        msgs.append(str(info.value))
    # The same sentence up to the distribution's repr (tensor printing differs).
    assert msgs[0].split(" of distribution")[0] == msgs[1].split(" of distribution")[0]


@pytest.mark.torch
@pytest.mark.parametrize("build,value", [
    (lambda d, t: d.Exponential(t([1.0])), [-1.0]),
    (lambda d, t: d.Poisson(t([1.0])), [1.5]),
    (lambda d, t: d.Binomial(t([3.0]), t([0.5])), [4.0]),
    (lambda d, t: d.OneHotCategorical(t([0.5, 0.5])), [1.0, 1.0]),
    (lambda d, t: d.Multinomial(2, t([0.5, 0.5])), [-1.0, 1.0]),
    (lambda d, t: d.HalfCauchy(t([1.0])), [-1.0]),
    (lambda d, t: d.Pareto(t([2.0]), t([1.0])), [1.0]),
    (lambda d, t: d.Kumaraswamy(t([2.0]), t([1.0])), [1.5]),
])
def test_out_of_support_raises_as_torch(build, value):
    torch = pytest.importorskip("torch")
    for lib, t in ((D, T), (torch.distributions, _tt(torch))):
        with pytest.raises(ValueError, match="to be within the support"):
            build(lib, t).log_prob(t(value))


def test_constructor_errors():
    with pytest.raises(ValueError, match="Either `probs` or `logits` must be specified, but not both"):
        D.Binomial(3, T([0.5]), T([0.0]))
    with pytest.raises(ValueError, match="cov_factor must be a batch of matrices with shape 3 x m"):
        D.LowRankMultivariateNormal(T([0.0, 0.0, 0.0]), T([[1.0], [1.0]]), T([1.0, 1.0, 1.0]))
    with pytest.raises(ValueError, match="cov_diag must be a batch of vectors"):
        D.LowRankMultivariateNormal(T([0.0, 0.0]), T([[1.0], [1.0]]), T([1.0, 1.0, 1.0]))
    with pytest.raises(ValueError, match="needs to be an  instance of torch.distributions.Categorical"):
        D.MixtureSameFamily(D.Normal(0.0, 1.0), D.Normal(T([0.0]), 1.0))
    with pytest.raises(ValueError, match="does not equal `component_distribution.batch_shape"):
        D.MixtureSameFamily(D.Categorical(T([0.5, 0.5])), D.Normal(T([0.0, 1.0, 2.0]), 1.0))
    with pytest.raises(NotImplementedError, match="inhomogeneous total_count"):
        D.Multinomial(T([2.0]), T([0.5, 0.5]))
    with pytest.raises(NotImplementedError, match="Inhomogeneous total count"):
        D.Binomial(T([2.0, 3.0]), T([0.5, 0.5])).entropy()


# ---------------------------------------------------------------------------- KL divergence
KL_PAIRS = {
    "Exponential": (lambda d, t: d.Exponential(t([0.5, 2.0])), lambda d, t: d.Exponential(t([1.0, 0.3]))),
    "Laplace": (lambda d, t: d.Laplace(t([0.0, 1.0]), t([1.0, 2.0])), lambda d, t: d.Laplace(t([0.5, -1.0]), 3.0)),
    "Poisson": (lambda d, t: d.Poisson(t([0.5, 4.0])), lambda d, t: d.Poisson(t([1.0, 3.0]))),
    "Geometric": (lambda d, t: d.Geometric(t([0.2, 0.7])), lambda d, t: d.Geometric(t([0.5, 0.1]))),
    "Binomial": (lambda d, t: d.Binomial(t([5.0, 6.0]), t([0.3, 0.6])), lambda d, t: d.Binomial(t([5.0, 5.0]),
                                                                                                  t([0.5, 0.2]))),
    "OneHotCategorical": (lambda d, t: d.OneHotCategorical(t(_PROBS)),
                          lambda d, t: d.OneHotCategorical(t(_PROBS[::-1].copy()))),
    "Gumbel": (lambda d, t: d.Gumbel(t([0.0, 1.0]), t([1.0, 2.0])), lambda d, t: d.Gumbel(t([0.5, -1.0]), 3.0)),
    "HalfNormal": (lambda d, t: d.HalfNormal(t([1.0, 2.0])), lambda d, t: d.HalfNormal(t([0.5, 3.0]))),
    "Pareto": (lambda d, t: d.Pareto(t([1.0, 2.0]), t([2.0, 3.0])),
               lambda d, t: d.Pareto(t([0.5, 3.0]), t([1.0, 2.0]))),
    "Exponential_Gamma": (lambda d, t: d.Exponential(t([0.5, 2.0])),
                          lambda d, t: d.Gamma(t([2.0, 0.5]), t([1.0, 3.0]))),
    "Gamma_Exponential": (lambda d, t: d.Gamma(t([2.0, 0.5]), t([1.0, 3.0])),
                          lambda d, t: d.Exponential(t([0.5, 2.0]))),
    "LowRank_LowRank": (lambda d, t: d.LowRankMultivariateNormal(t([0.0, 1.0, -1.0]), t(_W), t([1.0, 0.5, 2.0])),
                        lambda d, t: d.LowRankMultivariateNormal(t([1.0, 0.0, 0.0]), t(_W[1]), t([2.0, 1.0, 1.0]))),
    "LowRank_MVN": (lambda d, t: d.LowRankMultivariateNormal(t([0.0, 1.0, -1.0]), t(_W), t([1.0, 0.5, 2.0])),
                    lambda d, t: d.MultivariateNormal(t([1.0, 0.0, 0.0]), t(np.diag([1.0, 2.0, 3.0])))),
    "MVN_LowRank": (lambda d, t: d.MultivariateNormal(t([1.0, 0.0, 0.0]), t(np.diag([1.0, 2.0, 3.0]))),
                    lambda d, t: d.LowRankMultivariateNormal(t([0.0, 1.0, -1.0]), t(_W), t([1.0, 0.5, 2.0]))),
    "ContinuousBernoulli": (lambda d, t: d.ContinuousBernoulli(t([0.2, 0.7])),
                            lambda d, t: d.ContinuousBernoulli(t([0.6, 0.1]))),
}


@pytest.mark.torch
@pytest.mark.parametrize("name", list(KL_PAIRS))
def test_kl_matches_torch(name):
    torch = pytest.importorskip("torch")
    make_p, make_q = KL_PAIRS[name]
    ours = D.kl_divergence(make_p(D, T), make_q(D, T))
    theirs = torch.distributions.kl_divergence(make_p(torch.distributions, _tt(torch)),
                                               make_q(torch.distributions, _tt(torch)))
    assert tuple(ours.shape) == tuple(theirs.shape)
    close(ours, theirs.numpy(), rtol=1e-8, atol=1e-11)


def test_kl_self_is_zero_and_bregman_form():
    for make in (lambda: D.Exponential(T([0.5, 2.0])), lambda: D.Laplace(T([0.0]), T([2.0])),
                 lambda: D.Poisson(T([3.0])), lambda: D.Gumbel(T([1.0]), T([2.0])),
                 lambda: D.Geometric(T([0.3])), lambda: D.Pareto(T([1.0]), T([2.0]))):
        close(D.kl_divergence(make(), make()), np.zeros(tuple(make().batch_shape)), atol=1e-12)
    p, q = D.Exponential(T([0.5, 2.0])), D.Exponential(T([1.0, 0.3]))
    from tessera.distributions.kl import _kl_expfamily_expfamily
    close(_kl_expfamily_expfamily(p, q), npa(D.kl_divergence(p, q)), rtol=1e-12)


# ---------------------------------------------------------------------------- transforms and registries
@pytest.mark.torch
@pytest.mark.parametrize("name,args,x", [
    ("AbsTransform", (), [-2.0, 0.5, 3.0]),
    ("PowerTransform", (2.5,), [0.3, 1.0, 2.0]),
    ("SoftplusTransform", (), [-30.0, -1.0, 0.0, 2.0, 40.0]),
    ("SoftmaxTransform", (), [[-1.0, 0.0, 2.0], [3.0, 3.0, 0.0]]),
    ("StickBreakingTransform", (), [[-1.0, 0.0, 2.0], [3.0, 3.0, 0.0]]),
    ("LowerCholeskyTransform", (), [[[1.0, 2.0], [-0.5, 0.3]]]),
    ("PositiveDefiniteTransform", (), [[[1.0, 2.0], [-0.5, 0.3]]]),
    ("CorrCholeskyTransform", (), [[0.3, -1.0, 2.0], [0.0, 0.5, -0.2]]),
    ("ReshapeTransform", ((2, 3), (3, 2)), np.arange(12.0).reshape(2, 2, 3)),
])
def test_transforms_match_torch(name, args, x):
    torch = pytest.importorskip("torch")
    ours = getattr(D.transforms, name)(*args)
    theirs = getattr(torch.distributions.transforms, name)(*args)
    x = np.asarray(x, dtype=np.float64)
    y_ours, y_theirs = ours(T(x)), theirs(torch.tensor(x))
    close(y_ours, y_theirs.numpy(), rtol=1e-12, atol=1e-14)
    close(ours.inv(y_ours), theirs.inv(y_theirs).numpy(), rtol=1e-9, atol=1e-12)
    try:
        expected = theirs.log_abs_det_jacobian(torch.tensor(x), y_theirs).numpy()
    except NotImplementedError:
        pass
    else:
        close(ours.log_abs_det_jacobian(T(x), y_ours), expected, rtol=1e-10, atol=1e-12)
    assert ours.bijective == theirs.bijective
    assert repr(ours.domain) == repr(theirs.domain) and repr(ours.codomain) == repr(theirs.codomain)
    assert ours.forward_shape(x.shape) == tuple(theirs.forward_shape(torch.Size(x.shape)))
    assert ours.inverse_shape(tuple(y_ours.shape)) == tuple(theirs.inverse_shape(y_theirs.shape))


@pytest.mark.torch
def test_composite_transforms_match_torch():
    torch = pytest.importorskip("torch")
    x = np.array([[-1.0, 0.5, 2.0, 0.3], [0.2, -0.4, 1.0, -2.0]])
    for build in (lambda tr: tr.CatTransform([tr.ExpTransform(), tr.SigmoidTransform()], dim=1, lengths=[1, 3]),
                  lambda tr: tr.CatTransform([tr.ExpTransform(), tr.AffineTransform(1.0, 2.0)], dim=0, lengths=[1, 1]),
                  lambda tr: tr.StackTransform([tr.ExpTransform(), tr.TanhTransform()], dim=0),
                  lambda tr: tr.IndependentTransform(tr.SigmoidTransform(), 1),
                  lambda tr: tr.IndependentTransform(tr.ExpTransform(), 2)):
        ours, theirs = build(D.transforms), build(torch.distributions.transforms)
        y_ours, y_theirs = ours(T(x)), theirs(torch.tensor(x))
        close(y_ours, y_theirs.numpy(), rtol=1e-12)
        close(ours.inv(y_ours), theirs.inv(y_theirs).numpy(), rtol=1e-9, atol=1e-12)
        close(ours.log_abs_det_jacobian(T(x), y_ours), theirs.log_abs_det_jacobian(torch.tensor(x), y_theirs).numpy(),
              rtol=1e-10, atol=1e-12)
        assert ours.domain.event_dim == theirs.domain.event_dim
    d_ours, d_theirs = D.Normal(T([0.0]), T([2.0])), torch.distributions.Normal(_tt(torch)([0.0]), _tt(torch)([2.0]))
    c_ours = D.CumulativeDistributionTransform(d_ours)
    c_theirs = torch.distributions.transforms.CumulativeDistributionTransform(d_theirs)
    v = np.array([-1.0, 0.5])
    close(c_ours(T(v)), c_theirs(torch.tensor(v)).numpy(), rtol=1e-12)
    close(c_ours.inv(c_ours(T(v))), v, rtol=1e-9)
    close(c_ours.log_abs_det_jacobian(T(v), None), c_theirs.log_abs_det_jacobian(torch.tensor(v), None).numpy())


@pytest.mark.torch
def test_biject_to_and_transform_to_match_torch():
    torch = pytest.importorskip("torch")
    C, TC = D.constraints, torch.distributions.constraints
    x = np.array([[-1.0, 0.5, 2.0], [0.0, 0.3, -0.7]])
    pairs = [(lambda c: c.real, x), (lambda c: c.positive, x), (lambda c: c.greater_than(2.0), x),
             (lambda c: c.less_than(-1.0), x), (lambda c: c.unit_interval, x), (lambda c: c.interval(-2.0, 5.0), x),
             (lambda c: c.simplex, x), (lambda c: c.real_vector, x), (lambda c: c.independent(c.positive, 1), x),
             (lambda c: c.lower_cholesky, np.array([[1.0, 2.0], [0.3, -0.4]])),
             (lambda c: c.positive_definite, np.array([[1.0, 2.0], [0.3, -0.4]])),
             (lambda c: c.corr_cholesky, x),
             (lambda c: c.cat([c.positive, c.real], 1, [1, 2]), x),
             (lambda c: c.stack([c.positive, c.unit_interval], 0), x)]
    for make, v in pairs:
        for registry in ("biject_to", "transform_to"):
            try:
                theirs = getattr(torch.distributions, registry)(make(TC))
            except NotImplementedError:
                with pytest.raises(NotImplementedError):
                    getattr(D, registry)(make(C))
                continue
            ours = getattr(D, registry)(make(C))
            close(ours(T(v)), theirs(torch.tensor(v)).numpy(), rtol=1e-12, atol=1e-14)
            assert bool(make(C).check(ours(T(v))).all())
    with pytest.raises(TypeError):
        D.biject_to.register(int, lambda c: None)


@pytest.mark.torch
def test_new_constraints_match_torch():
    torch = pytest.importorskip("torch")
    C, TC = D.constraints, torch.distributions.constraints
    oh = np.array([[0.0, 1.0], [1.0, 1.0], [0.5, 0.5]])
    close(C.one_hot.check(T(oh)), TC.one_hot.check(torch.tensor(oh)).numpy(), 0, 0)
    counts = np.array([[1.0, 2.0], [3.0, 1.0], [-1.0, 0.0]])
    close(C.multinomial(3).check(T(counts)), TC.multinomial(3).check(torch.tensor(counts)).numpy(), 0, 0)
    mats = np.array([[[2.0, 0.0], [0.0, 0.0]], [[1.0, 2.0], [2.0, 1.0]]])
    close(C.positive_semidefinite.check(T(mats)), TC.positive_semidefinite.check(torch.tensor(mats)).numpy(), 0, 0)
    st = np.array([[1.0, 0.5], [-1.0, 0.2]])
    close(C.stack([C.positive, C.unit_interval], 1).check(T(st)),
          TC.stack([TC.positive, TC.unit_interval], 1).check(torch.tensor(st)).numpy(), 0, 0)


@pytest.mark.parametrize("make", [
    lambda: D.Normal(T([0.0, 1.0]), T([1.0, 2.0])), lambda: D.Bernoulli(logits=T([-1.0, 0.5])),
    lambda: D.Gamma(T([0.5, 3.0]), T([2.0, 1.0])), lambda: D.Beta(T([0.5, 3.0]), T([2.0, 1.5])),
    lambda: D.Dirichlet(T([[0.5, 3.0, 1.0]])), lambda: D.Exponential(T([0.3])),
    lambda: D.ContinuousBernoulli(T([0.2, 0.9])),
])
def test_exponential_family_forms_agree_with_closed_forms(make):
    """The Bregman entropy and KL (from the natural parameters and the log normalizer) agree with
    each family's closed forms: a check of _natural_params/_log_normalizer."""
    from tessera.distributions.kl import _kl_expfamily_expfamily
    d = make()
    assert isinstance(d, D.ExponentialFamily)
    if not isinstance(d, (D.Beta, D.Dirichlet)):  # these two have a non-zero carrier measure
        close(D.ExponentialFamily.entropy(d), npa(d.entropy()), rtol=1e-9, atol=1e-12)
    q = make().expand(d.batch_shape)
    close(_kl_expfamily_expfamily(d, q), np.zeros(tuple(d.batch_shape)), atol=1e-12)


# ---------------------------------------------------------------------------- Wishart and LKJCholesky
def _spd(n, batch=(), seed=0):
    """A batch of well-conditioned symmetric positive definite matrices."""
    a = np.random.default_rng(seed).standard_normal(tuple(batch) + (n, n))
    return a @ np.swapaxes(a, -1, -2) / n + np.eye(n)


def _wishart_param(kind, cov):
    if kind == "covariance_matrix":
        return cov
    if kind == "precision_matrix":
        return np.linalg.inv(cov)
    return np.linalg.cholesky(cov)


def _torch_dtype(torch, dtype):
    return torch.float32 if dtype == ts.float32 else torch.float64


# (n, df: a number or nested list, batch shape of the matrix)
WISHART_CASES = {
    "n2_number": (2, 3.5, ()),
    "n3_batch": (3, [2.5, 4.0, 9.0], (3,)),
    "n4_broadcast": (4, [[3.2], [6.0]], (3,)),
    "n5_number_batched_matrix": (5, 7.0, (2,)),
    "n3_batched_df_only": (3, [2.2, 5.0], ()),
}


def _build_wishart(kind, case, dtype, torch=None):
    """Ours, or torch's when torch is given."""
    n, df, batch = WISHART_CASES[case]
    mat = _wishart_param(kind, _spd(n, batch, seed=n))
    if torch is None:
        df_arg = df if isinstance(df, float) else T(df, dtype)
        return D.Wishart(df_arg, **{kind: T(mat, dtype)})
    tdt = _torch_dtype(torch, dtype)
    df_arg = df if isinstance(df, float) else torch.tensor(df, dtype=tdt)
    return torch.distributions.Wishart(df_arg, **{kind: torch.tensor(mat, dtype=tdt)})


@pytest.mark.torch
@pytest.mark.filterwarnings("ignore:Singular sample detected")  # torch warns for every sample drawn
@pytest.mark.parametrize("dtype", [ts.float64, ts.float32])
@pytest.mark.parametrize("kind", ["covariance_matrix", "precision_matrix", "scale_tril"])
@pytest.mark.parametrize("case", list(WISHART_CASES))
def test_wishart_matches_torch(case, kind, dtype):
    torch = pytest.importorskip("torch")
    n, df, batch = WISHART_CASES[case]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # both warn about df < n
        ours = _build_wishart(kind, case, dtype)
        theirs = _build_wishart(kind, case, dtype, torch)
        # torch's mean/mode/variance fail for a number df with batched matrices (df.view(batch + (1, 1))
        # of a 0-d tensor): their moments come from the same distribution with df given as a tensor.
        moments = theirs
        if isinstance(df, float) and theirs.batch_shape:
            moments = torch.distributions.Wishart(torch.full(tuple(theirs.batch_shape), df, dtype=theirs.df.dtype),
                                                  **{kind: getattr(theirs, kind)})
    assert isinstance(ours, D.ExponentialFamily)
    assert tuple(ours.batch_shape) == tuple(theirs.batch_shape) and tuple(ours.event_shape) == (n, n)
    assert tuple(ours.df.shape) == tuple(theirs.df.shape)
    assert ours.has_rsample is True and ours.has_enumerate_support is False
    assert repr(ours.support) == repr(theirs.support) == "PositiveDefinite()"
    assert {k: repr(v) for k, v in ours.arg_constraints.items()} == \
        {k: repr(v) for k, v in theirs.arg_constraints.items()}
    f32 = dtype == ts.float32
    rtol, atol = (2e-4, 2e-4) if f32 else (1e-9, 1e-9)
    for attr in ("mean", "mode", "variance", "covariance_matrix", "precision_matrix", "scale_tril"):
        close(getattr(ours, attr), getattr(moments, attr).double().numpy(), rtol=rtol, atol=atol)
    if not isinstance(df, float) or not batch:
        assert bool(ts.isnan(ours.mode).any()) == bool(torch.isnan(theirs.mode).any())
    close(ours.entropy(), theirs.entropy().double().numpy(), rtol=rtol, atol=atol)
    # Values well inside the support (a larger df keeps them far from singular, for float32).
    torch.manual_seed(0)
    cov = torch.tensor(_spd(n, batch, seed=n)).expand(tuple(theirs.batch_shape) + (n, n))
    values = torch.distributions.Wishart(torch.tensor(n + 6.0, dtype=torch.float64), cov).sample((4,))
    lp_ours = ours.log_prob(T(values.numpy(), dtype))
    assert lp_ours.dtype == dtype
    assert tuple(lp_ours.shape) == (4,) + tuple(theirs.batch_shape)
    close(lp_ours, theirs.log_prob(values.to(_torch_dtype(torch, dtype))).double().numpy(), rtol=rtol, atol=atol)
    single = values.reshape(-1, n, n)[0]  # one matrix against the whole batch
    lp_ours = ours.log_prob(T(single.numpy(), dtype))
    assert tuple(lp_ours.shape) == tuple(theirs.batch_shape)
    close(lp_ours, theirs.log_prob(single.to(_torch_dtype(torch, dtype))).double().numpy(), rtol=rtol, atol=atol)


@pytest.mark.torch
@pytest.mark.filterwarnings("ignore:Singular sample detected")
@pytest.mark.parametrize("kind", ["covariance_matrix", "precision_matrix", "scale_tril"])
def test_wishart_log_prob_and_entropy_gradients_match_torch(kind):
    torch = pytest.importorskip("torch")
    mat = _wishart_param(kind, _spd(3, (2,), seed=5))
    df = np.array([3.5, 8.0])
    torch.manual_seed(1)
    values = torch.distributions.Wishart(torch.tensor(df), torch.tensor(_spd(3, (2,), seed=5))).sample((3,))
    m_ours, df_ours = T(mat).requires_grad_(), T(df).requires_grad_()
    m_theirs = torch.tensor(mat, requires_grad=True)
    df_theirs = torch.tensor(df, requires_grad=True)
    ours = D.Wishart(df_ours, **{kind: m_ours})
    theirs = torch.distributions.Wishart(df_theirs, **{kind: m_theirs})
    (ours.log_prob(T(values.numpy())).sum() + ours.entropy().sum()).backward()
    (theirs.log_prob(values).sum() + theirs.entropy().sum()).backward()
    close(m_ours.grad, m_theirs.grad.numpy(), rtol=1e-8, atol=1e-10)
    close(df_ours.grad, df_theirs.grad.numpy(), rtol=1e-8, atol=1e-9)


@pytest.mark.torch
def test_wishart_kl_and_exponential_family_forms():
    """The Bregman-form entropy (from _natural_params and _log_normalizer, with no carrier measure)
    equals the closed form; KL(p, p) is zero and KL(p, q) matches torch's (same Bregman rule)."""
    torch = pytest.importorskip("torch")
    from tessera.distributions.kl import _kl_expfamily_expfamily
    p = D.Wishart(T([3.5, 8.0]), covariance_matrix=T(_spd(3, (2,), seed=2)))
    close(D.ExponentialFamily.entropy(p), npa(p.entropy()), rtol=1e-9, atol=1e-10)
    close(_kl_expfamily_expfamily(p, p.expand(p.batch_shape)), np.zeros(2), atol=1e-9)
    a, b = _spd(3, seed=3), _spd(3, seed=4)
    ours = D.kl_divergence(D.Wishart(T(4.5), covariance_matrix=T(a)), D.Wishart(T(6.0), precision_matrix=T(b)))
    theirs = torch.distributions.kl_divergence(
        torch.distributions.Wishart(torch.tensor(4.5, dtype=torch.float64), covariance_matrix=torch.tensor(a)),
        torch.distributions.Wishart(torch.tensor(6.0, dtype=torch.float64), precision_matrix=torch.tensor(b)))
    assert float(theirs.detach()) > 0.1
    close(ours, theirs.detach().numpy(), rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("dtype", [ts.float64, ts.float32])
@pytest.mark.parametrize("make,batch", [
    (lambda t: D.Wishart(4.0, covariance_matrix=t(_spd(2))), ()),
    (lambda t: D.Wishart(t([3.5, 6.0]), scale_tril=t(np.linalg.cholesky(_spd(3)))), (2,)),
    (lambda t: D.Wishart(t([[4.0], [9.0]]), precision_matrix=t(_spd(4, (3,)))), (2, 3)),
])
def test_wishart_sample_shapes_expand_and_support(make, batch, dtype):
    ts.manual_seed(4)
    d = make(lambda a: T(a, dtype))
    n = d.event_shape[-1]
    assert tuple(d.batch_shape) == batch
    for sample_shape in ((), (4,), (3, 2)):
        for s in (d.sample(sample_shape), d.rsample(sample_shape)):
            assert tuple(s.shape) == sample_shape + batch + (n, n) and s.dtype == dtype
            assert bool(d.support.check(s).all())
            a = npa(s)
            np.testing.assert_allclose(a, np.swapaxes(a, -1, -2), rtol=1e-5, atol=1e-6)
            assert np.all(np.linalg.eigvalsh(a) > 0)
            assert tuple(d.log_prob(s).shape) == sample_shape + batch
    assert not d.sample().requires_grad
    e = d.expand((5,) + batch)
    assert tuple(e.batch_shape) == (5,) + batch and tuple(e.event_shape) == (n, n)
    assert tuple(e.df.shape) == (5,) + batch and tuple(e.covariance_matrix.shape) == (5,) + batch + (n, n)
    s = e.sample((2,))
    assert tuple(s.shape) == (2, 5) + batch + (n, n)
    close(e.log_prob(s)[:, 0], npa(d.log_prob(s[:, 0])), rtol=1e-5 if dtype == ts.float32 else 1e-12)
    close(e.mean[0], npa(d.mean), rtol=1e-12)
    close(e.entropy()[0], npa(d.entropy()), rtol=1e-12)


@pytest.mark.parametrize("kind", ["covariance_matrix", "precision_matrix"])
def test_wishart_sample_moments(kind):
    ts.manual_seed(2026)
    cov = np.array([[2.0, 0.3, -0.4], [0.3, 1.0, 0.2], [-0.4, 0.2, 1.5]])
    d = D.Wishart(T([3.5, 7.0]), **{kind: T(_wishart_param(kind, cov))})
    # E[W] = df V, Var(W_ij) = df (V_ij^2 + V_ii V_jj)
    close(d.mean, np.array([3.5, 7.0])[:, None, None] * cov, rtol=1e-12)
    close(d.variance, np.array([3.5, 7.0])[:, None, None] * (cov ** 2 + np.outer(np.diag(cov), np.diag(cov))),
          rtol=1e-12)
    _check_moments(d.sample((N,)), d.mean, d.variance)


@pytest.mark.parametrize("kind", ["covariance_matrix", "precision_matrix", "scale_tril"])
def test_wishart_rsample_gradients_by_finite_differences(kind):
    """With the generator reseeded, rsample is a deterministic function of the scale matrix (the
    Bartlett draws do not depend on it): its autograd gradient matches central differences. The
    matrix is built from a free (n, n) array x: tril(x) with a positive diagonal for scale_tril,
    (x + x^T) / 2 otherwise."""
    n = 3
    cov = _spd(n, seed=7)
    base = _wishart_param(kind, cov)
    df = T([4.0, 6.5])
    weights = T(np.linspace(0.5, 1.5, 3 * 2 * n * n).reshape(3, 2, n, n))

    def build(x):
        return x.tril() if kind == "scale_tril" else (x + x.mT) / 2

    def f(x):
        ts.manual_seed(23)
        return float((D.Wishart(df, **{kind: build(T(x))}).rsample((3,)) * weights).sum())

    x = T(base).requires_grad_()
    ts.manual_seed(23)
    (D.Wishart(df, **{kind: build(x)}).rsample((3,)) * weights).sum().backward()
    fd = _fd_grad(f, base)
    assert np.abs(fd).max() > 1.0
    close(x.grad, fd, rtol=1e-5, atol=1e-5)


def test_wishart_rsample_gradient_in_df():
    """d/d df of E[sum W] = sum V: the mean of the (implicit chi-squared) pathwise gradients over
    many samples approaches it; the scale matrix gets no gradient when only df is a leaf."""
    ts.manual_seed(31)
    cov = np.array([[2.0, 0.3, -0.4], [0.3, 1.0, 0.2], [-0.4, 0.2, 1.5]])
    df = T([3.5, 9.0]).requires_grad_()
    n_samples = 20_000
    D.Wishart(df, covariance_matrix=T(cov)).rsample((n_samples,)).sum().backward()
    np.testing.assert_allclose(npa(df.grad) / n_samples, [cov.sum()] * 2, rtol=0.04)


@pytest.mark.torch
def test_wishart_low_df_and_singular_samples():
    torch = pytest.importorskip("torch")
    cov = _spd(3, seed=1)
    for lib, t in ((D, T), (torch.distributions, _tt(torch))):
        with pytest.warns(UserWarning, match="Low df values detected"):
            lib.Wishart(t(2.5), covariance_matrix=t(cov))
    # df barely above n - 1: the last Bartlett diagonal entry is sqrt(Chi2(1e-4)), mostly tiny, so
    # singular draws are common; they are drawn again (and warned about), which leaves fewer.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        d = D.Wishart(T(2.0001, ts.float32), covariance_matrix=T(cov, ts.float32))
        ts.manual_seed(5)
        raw = d.rsample((2000,), max_try_correction=0)
    with pytest.warns(UserWarning, match="Singular sample detected"):
        ts.manual_seed(5)
        fixed = d.rsample((2000,))
    assert tuple(fixed.shape) == (2000, 3, 3)
    bad_raw = float((~d.support.check(raw)).double().sum())
    bad_fixed = float((~d.support.check(fixed)).double().sum())
    assert bad_raw > 20 and bad_fixed < bad_raw / 3, (bad_raw, bad_fixed)
    # No warning when every draw is positive definite (torch warns "Singular sample detected." for
    # every call, testing the support check's result the wrong way round).
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        D.Wishart(T(5.0), covariance_matrix=T(cov)).rsample((100,))


@pytest.mark.torch
@pytest.mark.parametrize("build,error", [
    (lambda d, t: d.Wishart(t([0.5]), covariance_matrix=t(np.eye(2))), "Value of df="),
    (lambda d, t: d.Wishart(1.0, covariance_matrix=t(np.eye(2))), "Value of df=1.0 expected to be greater than"),
    (lambda d, t: d.Wishart(t(4.0), covariance_matrix=t([[1.0, 2.0], [2.0, 1.0]])), "Expected parameter covariance"),
    (lambda d, t: d.Wishart(t(4.0), precision_matrix=t([[1.0, 0.5], [0.0, 1.0]])), "Expected parameter precision"),
    (lambda d, t: d.Wishart(t(4.0), scale_tril=t([[1.0, 0.5], [0.0, 1.0]])), "Expected parameter scale_tril"),
    (lambda d, t: d.Wishart(t(4.0), scale_tril=t([[-1.0, 0.0], [0.0, 1.0]])), "Expected parameter scale_tril"),
    (lambda d, t: d.Wishart(t(4.0), precision_matrix=t([1.0, 2.0])), "scale_tril must be at least two-dimensional"),
    (lambda d, t: d.Wishart(t(4.0), covariance_matrix=t(np.eye(2)), validate_args=True).log_prob(t(-np.eye(2))),
     "to be within the support"),
    (lambda d, t: d.LKJCholesky(1, t(1.0)), "Expected dim to be an integer greater than or equal to 2. Found dim=1."),
    (lambda d, t: d.LKJCholesky(4, t([1.0, 0.0])), "Expected parameter concentration"),
    (lambda d, t: d.LKJCholesky(3, t(-2.0)), "Expected parameter concentration"),  # (the Beta's Dirichlet's)
    (lambda d, t: d.LKJCholesky(3, t(1.0)).log_prob(t([[1.0, 0, 0], [0.5, 0.5, 0], [0, 0, 1.0]])),
     "to be within the support"),
    (lambda d, t: d.LKJCholesky(2, t(1.0)).log_prob(t([[1.0, 0.1], [0.0, 1.0]])), "to be within the support"),
])
def test_wishart_lkj_invalid_arguments_raise_value_error_as_torch(build, error):
    torch = pytest.importorskip("torch")
    msgs = []
    for lib, t in ((D, T), (torch.distributions, _tt(torch))):
        with pytest.raises(ValueError, match=error) as info:
            build(lib, t)
        msgs.append(str(info.value))
    # The same sentence up to the distribution's repr or a printed tensor.
    cut = [m.split(" of distribution")[0].split(" of the distribution")[0].split("tensor(")[0] for m in msgs]
    assert cut[0] == cut[1]


@pytest.mark.torch
def test_wishart_needs_exactly_one_matrix():
    torch = pytest.importorskip("torch")
    msg = "Exactly one of covariance_matrix or precision_matrix or scale_tril may be specified."
    for kwargs in ({}, {"covariance_matrix": np.eye(2), "scale_tril": np.eye(2)}):
        # torch asserts it (AssertionError); ours is the ValueError of the other argument checks.
        with pytest.raises(ValueError, match=msg):
            D.Wishart(T(3.0), **{k: T(v) for k, v in kwargs.items()})
        with pytest.raises(AssertionError, match=msg):
            torch.distributions.Wishart(torch.tensor(3.0), **{k: torch.tensor(v) for k, v in kwargs.items()})


# (dim, concentration: a number or nested list)
LKJ_CASES = [(dim, conc) for dim in (2, 3, 4, 5) for conc in (1.0, 0.5, [0.3, 1.0, 2.5, 10.0], [[0.8], [4.0]])]


@pytest.mark.torch
@pytest.mark.parametrize("dtype", [ts.float64, ts.float32])
@pytest.mark.parametrize("dim,conc", LKJ_CASES)
def test_lkj_cholesky_matches_torch(dim, conc, dtype):
    torch = pytest.importorskip("torch")
    tdt = _torch_dtype(torch, dtype)
    if isinstance(conc, float):  # a number: the default dtype, in both libraries
        ours, theirs = D.LKJCholesky(dim, conc), torch.distributions.LKJCholesky(dim, conc)
        dtype, tdt = ts.float32, torch.float32
    else:
        ours = D.LKJCholesky(dim, T(conc, dtype))
        theirs = torch.distributions.LKJCholesky(dim, torch.tensor(conc, dtype=tdt))
    assert tuple(ours.batch_shape) == tuple(theirs.batch_shape)
    assert tuple(ours.event_shape) == tuple(theirs.event_shape) == (dim, dim)
    assert ours.concentration.dtype == dtype and ours.dim == dim
    assert ours.has_rsample is theirs.has_rsample is False
    assert repr(ours.support) == repr(theirs.support) == "CorrCholesky()"
    assert repr(ours.arg_constraints) == repr(theirs.arg_constraints)
    for attr in ("mean", "mode", "variance"):
        with pytest.raises(NotImplementedError):
            getattr(theirs, attr)
        with pytest.raises(NotImplementedError):
            getattr(ours, attr)
    for method in ("entropy", "rsample"):
        with pytest.raises(NotImplementedError):
            getattr(theirs, method)()
        with pytest.raises(NotImplementedError):
            getattr(ours, method)()
    torch.manual_seed(dim)
    values = theirs.sample((5,))
    lp = ours.log_prob(T(values.double().numpy(), dtype))
    assert lp.dtype == dtype and tuple(lp.shape) == (5,) + tuple(theirs.batch_shape)
    f32 = dtype == ts.float32
    close(lp, theirs.log_prob(values).double().numpy(), rtol=1e-4 if f32 else 1e-11, atol=1e-4 if f32 else 1e-11)


@pytest.mark.torch
@pytest.mark.parametrize("dim", [2, 3, 5])
def test_lkj_cholesky_log_prob_gradient_matches_torch(dim):
    torch = pytest.importorskip("torch")
    conc = [0.4, 1.0, 3.0]
    torch.manual_seed(11)
    values = torch.distributions.LKJCholesky(dim, torch.tensor(conc, dtype=torch.float64)).sample((4,))
    c_ours, c_theirs = T(conc).requires_grad_(), torch.tensor(conc, dtype=torch.float64, requires_grad=True)
    D.LKJCholesky(dim, c_ours).log_prob(T(values.numpy())).sum().backward()
    torch.distributions.LKJCholesky(dim, c_theirs).log_prob(values).sum().backward()
    close(c_ours.grad, c_theirs.grad.numpy(), rtol=1e-9, atol=1e-10)


def test_lkj_cholesky_two_dimensional_density_integrates_to_one():
    """dim 2: L = [[1, 0], [r, sqrt(1 - r^2)]], and exp(log_prob) is a density in r on (-1, 1),
    proportional to (1 - r^2)^(concentration - 1)."""
    h = 2.0 / 200_000
    r = -1.0 + h * (np.arange(200_000) + 0.5)  # midpoints
    L = np.zeros((r.size, 2, 2))
    L[:, 0, 0], L[:, 1, 0], L[:, 1, 1] = 1.0, r, np.sqrt(1 - r * r)
    for eta in (1.0, 2.5, 4.0):
        p = np.exp(npa(D.LKJCholesky(2, T(eta)).log_prob(T(L))))
        np.testing.assert_allclose(p.sum() * h, 1.0, rtol=1e-6)
        # at r = 0: 1 / B(1/2, eta) = Gamma(eta + 1/2) / (sqrt(pi) Gamma(eta))
        at_zero = math.gamma(eta + 0.5) / (math.sqrt(math.pi) * math.gamma(eta))
        np.testing.assert_allclose(np.exp(npa(D.LKJCholesky(2, T(eta)).log_prob(T(np.eye(2))))), at_zero, rtol=1e-10)


@pytest.mark.parametrize("dtype", [ts.float64, ts.float32])
@pytest.mark.parametrize("dim,conc,batch", [(2, 1.5, ()), (3, [0.5, 2.0], (2,)), (5, [[1.0, 3.0, 0.2]], (1, 3))])
def test_lkj_cholesky_samples_shapes_expand_and_support(dim, conc, batch, dtype):
    ts.manual_seed(8)
    d = D.LKJCholesky(dim, T(conc, dtype))
    assert tuple(d.batch_shape) == batch
    tol = 1e-5 if dtype == ts.float32 else 1e-12
    for sample_shape in ((), (4,), (3, 2)):
        s = d.sample(sample_shape)
        assert tuple(s.shape) == sample_shape + batch + (dim, dim) and s.dtype == dtype
        assert bool(d.support.check(s).all())
        a = npa(s)
        assert np.all(np.triu(a, 1) == 0)  # lower triangular
        assert np.all(np.diagonal(a, axis1=-2, axis2=-1) > 0)
        np.testing.assert_allclose(np.linalg.norm(a, axis=-1), 1.0, atol=tol)  # unit-norm rows
        np.testing.assert_allclose(a[..., 0, 0], 1.0, atol=tol)
        assert tuple(d.log_prob(s).shape) == sample_shape + batch
        assert np.all(np.isfinite(npa(d.log_prob(s))))
    e = d.expand((4,) + batch)
    assert tuple(e.batch_shape) == (4,) + batch and e.dim == dim
    s = e.sample((2,))
    assert tuple(s.shape) == (2, 4) + batch + (dim, dim)
    close(e.log_prob(s)[:, 0], npa(d.log_prob(s[:, 0])), rtol=1e-12)
    # The constraint rejects what is not a Cholesky factor of a correlation matrix.
    bad = np.eye(dim)
    bad[1, 0] = 0.5  # a row of norm above one
    assert not bool(D.constraints.corr_cholesky.check(T(bad, dtype)))
    bad = np.eye(dim)
    bad[0, 0] = -1.0  # a negative diagonal entry
    assert not bool(D.constraints.corr_cholesky.check(T(bad, dtype)))


@pytest.mark.parametrize("dim", [2, 3, 5])
def test_lkj_cholesky_sample_moments(dim):
    """The correlation matrix L L^T: unit diagonal, and each off-diagonal correlation r has
    (r + 1) / 2 ~ Beta(b, b) with b = concentration - 1 + dim / 2, so E r = 0 and Var r = 1 / (2b + 1)."""
    ts.manual_seed(99)
    conc = np.array([0.5, 1.0, 4.0])
    d = D.LKJCholesky(dim, T(conc))
    s = npa(d.sample((N,)))
    m = s @ np.swapaxes(s, -1, -2)
    np.testing.assert_allclose(np.diagonal(m, axis1=-2, axis2=-1), 1.0, atol=1e-12)
    i, j = np.tril_indices(dim, -1)
    r = m[..., i, j]  # (N, 3, dim (dim - 1) / 2)
    var = 1.0 / (2 * (conc - 1 + dim / 2) + 1)
    expected_var = np.broadcast_to(var[:, None], r.shape[1:])
    assert np.all(np.abs(r.mean(0)) <= 5 * np.sqrt(expected_var / N)), r.mean(0)
    np.testing.assert_allclose(r.var(0), expected_var, rtol=0.03)
    if dim == 2:  # concentration 1: r uniform on (-1, 1)
        np.testing.assert_allclose(np.quantile(r[:, 1, 0], [0.1, 0.25, 0.5, 0.75, 0.9]), [-0.8, -0.5, 0.0, 0.5, 0.8],
                                   atol=0.01)


@pytest.mark.torch
def test_wishart_lkj_registered_as_in_torch():
    torch = pytest.importorskip("torch")
    import tessera.distributions as mod
    for name in ("Wishart", "LKJCholesky", "CorrCholeskyTransform"):
        assert name in mod.__all__ and name in torch.distributions.__all__
    for name in ("corr_cholesky", "positive_definite"):
        assert name in mod.constraints.__all__
    assert mod.Wishart.__module__ == "tessera.distributions.wishart"
    assert mod.LKJCholesky.__module__ == "tessera.distributions.lkj_cholesky"
    assert issubclass(mod.Wishart, mod.ExponentialFamily) and not issubclass(mod.LKJCholesky, mod.ExponentialFamily)
    # biject_to(corr_cholesky) maps reals onto LKJCholesky's support.
    x = T(np.random.default_rng(0).standard_normal((4, 6)))
    y = mod.biject_to(mod.LKJCholesky(4, T(2.0)).support)(x)
    assert bool(mod.constraints.corr_cholesky.check(y).all())
    assert np.all(np.isfinite(npa(mod.LKJCholesky(4, T(2.0)).log_prob(y))))
