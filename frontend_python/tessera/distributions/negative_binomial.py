"""NegativeBinomial(total_count, probs | logits) (torch.distributions.NegativeBinomial)."""
import tessera as ts
from tessera.distributions import constraints
from tessera.distributions.distribution import Distribution
from tessera.distributions.gamma import Gamma
from tessera.distributions.poisson import _poisson_sample
from tessera.distributions.utils import lazy_property, logits_to_probs, probs_to_logits, set_count_and_probs

__all__ = ["NegativeBinomial"]


def _logsigmoid(x):
    # log sigmoid(x) = -softplus(-x), without overflow.
    return -((-x).clamp(min=0) + (-x.abs()).exp().log1p())


class NegativeBinomial(Distribution):
    """NegativeBinomial(total_count, probs=None, logits=None): the number of successes (each of
    probability probs) before total_count (> 0, real) failures. Sampled as a Poisson with a
    Gamma(total_count, (1 - p) / p) rate."""

    arg_constraints = {"total_count": constraints.greater_than_eq(0), "probs": constraints.half_open_interval(0.0, 1.0),
                       "logits": constraints.real}
    support = constraints.nonnegative_integer

    def __init__(self, total_count, probs=None, logits=None, validate_args=None):
        set_count_and_probs(self, total_count, probs, logits)
        super().__init__(tuple(self._param.shape), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._expand_params(NegativeBinomial, batch_shape, _instance, ("total_count", "probs", "logits"))
        new._param = new.__dict__["probs"] if "probs" in self.__dict__ else new.__dict__["logits"]
        return new

    def _new(self, *args, **kwargs):
        return self._param.new_tensor(*args, **kwargs)

    @property
    def mean(self):
        return self.total_count * self.logits.exp()

    @property
    def mode(self):
        return ((self.total_count - 1) * self.logits.exp()).floor().clamp(min=0.0)

    @property
    def variance(self):
        return self.mean / (-self.logits).sigmoid()

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self):
        return logits_to_probs(self.logits, is_binary=True)

    @property
    def param_shape(self):
        return tuple(self._param.shape)

    @lazy_property
    def _gamma(self):
        # validate_args off: total_count may be 0, which Gamma does not allow.
        return Gamma(concentration=self.total_count, rate=(-self.logits).exp(), validate_args=False)

    def sample(self, sample_shape=()):
        with ts.no_grad():
            rate = self._gamma.sample(sample_shape)
            return _poisson_sample(rate)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        r, logits = self.total_count, self.logits
        log_unnormalized = r * _logsigmoid(-logits) + value * _logsigmoid(logits)
        log_normalization = -(r + value).lgamma() + (1.0 + value).lgamma() + r.lgamma()
        # total_count = 0 and value = 0: probability one (the Gamma functions' poles cancel).
        log_normalization = ts.where(r + value == 0, ts.zeros_like(log_normalization), log_normalization)
        return log_unnormalized - log_normalization
