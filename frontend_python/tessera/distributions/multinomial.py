"""Multinomial(total_count, probs | logits): counts of total_count categorical draws
(torch.distributions.Multinomial)."""
import tessera as ts
from tessera.distributions import constraints
from tessera.distributions.binomial import Binomial
from tessera.distributions.categorical import Categorical
from tessera.distributions.distribution import Distribution
from tessera.distributions.utils import broadcast_all

__all__ = ["Multinomial"]


class Multinomial(Distribution):
    """Multinomial(total_count=1, probs=None, logits=None): total_count a Python int (as torch:
    one count for the whole batch); probs need not be normalised. log_prob does not require the
    counts to sum to total_count (as torch), so total_count may be left at 1 for log_prob alone."""

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    total_count: int

    def __init__(self, total_count=1, probs=None, logits=None, validate_args=None):
        if not isinstance(total_count, int):
            raise NotImplementedError("inhomogeneous total_count is not supported")
        self.total_count = total_count
        self._categorical = Categorical(probs=probs, logits=logits)
        self._binomial = Binomial(total_count=total_count, probs=self.probs)
        batch_shape = self._categorical.batch_shape
        event_shape = tuple(self._categorical.param_shape[-1:])
        super().__init__(batch_shape, event_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Multinomial, _instance)
        batch_shape = tuple(batch_shape)
        new.total_count = self.total_count
        new._categorical = self._categorical.expand(batch_shape)
        new._binomial = self._binomial.expand(batch_shape + self.event_shape)
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _new(self, *args, **kwargs):
        return self._categorical._new(*args, **kwargs)

    @constraints.dependent_property(is_discrete=True, event_dim=1)
    def support(self):
        return constraints.multinomial(self.total_count)

    @property
    def mean(self):
        return self.probs * self.total_count

    @property
    def variance(self):
        return self.total_count * self.probs * (1 - self.probs)

    @property
    def logits(self):
        return self._categorical.logits

    @property
    def probs(self):
        return self._categorical.probs

    @property
    def param_shape(self):
        return self._categorical.param_shape

    def sample(self, sample_shape=()):
        sample_shape = tuple(sample_shape) if not isinstance(sample_shape, int) else (sample_shape,)
        k = self._event_shape[0]
        with ts.no_grad():
            # total_count category draws per entry, counted with a one-hot sum.
            draws = self._categorical.sample((self.total_count,) + sample_shape)
            counts = ts.nn.functional.one_hot(draws, k).to(self.probs.dtype).sum(0)
            return counts.reshape(self._extended_shape(sample_shape))

    def entropy(self):
        n = ts.tensor(float(self.total_count), dtype=self.probs.dtype, device=self.probs.device)
        term1 = n * self._categorical.entropy() - (n + 1).lgamma()
        # E[sum_i log x_i!] from the binomial marginals.
        support = self._binomial.enumerate_support(expand=False)[1:]
        binomial_probs = self._binomial.log_prob(support).exp()
        term2 = (binomial_probs * (support + 1).lgamma()).sum(0).sum(-1)
        return term1 + term2

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        # A category of probability zero with no counts contributes 0 (not 0 * -inf).
        logits = ts.where((value == 0) & (logits == -float("inf")), ts.zeros_like(logits), logits)
        log_factorial_n = (value.sum(-1) + 1).lgamma()
        log_factorial_xs = (value + 1).lgamma().sum(-1)
        return log_factorial_n - log_factorial_xs + (logits * value).sum(-1)
