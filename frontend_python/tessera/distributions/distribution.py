"""Distribution: the base class of torch.distributions' families (shapes, validation, sampling)."""
import warnings

import tessera as ts
from tessera.distributions import constraints
from tessera.distributions.utils import _size, lazy_property

__all__ = ["Distribution"]


class Distribution:
    """A batch of probability distributions. batch_shape: the shape of the batch of independent
    (not necessarily identical) distributions; event_shape: the shape of one sample of one of them.
    validate_args (default on, as in torch, unless Python runs with -O) checks the parameters on
    construction and the values given to log_prob/cdf/icdf, raising ValueError."""

    has_rsample = False
    has_enumerate_support = False
    _validate_args = __debug__

    @staticmethod
    def set_default_validate_args(value):
        if value not in (True, False):
            raise ValueError(f"Distribution.set_default_validate_args: expected True or False, got {value!r}")
        Distribution._validate_args = value

    def __init__(self, batch_shape=(), event_shape=(), validate_args=None):
        self._batch_shape = _size(batch_shape)
        self._event_shape = _size(event_shape)
        if validate_args is not None:
            self._validate_args = validate_args
        if self._validate_args:
            try:
                arg_constraints = self.arg_constraints
            except NotImplementedError:
                arg_constraints = {}
                warnings.warn(f"{self.__class__} does not define `arg_constraints`. Please set "
                              "`arg_constraints = {}` or initialize the distribution with `validate_args=False` "
                              "to turn off validation.",
                              stacklevel=2)
            for param, constraint in arg_constraints.items():
                if constraints.is_dependent(constraint):
                    continue  # depends on other parameters: cannot be checked alone
                if param not in self.__dict__ and isinstance(getattr(type(self), param, None), lazy_property):
                    continue  # derived from the given parameter (probs from logits): not the caller's value
                value = getattr(self, param)
                if not bool(constraint.check(value).all()):
                    raise ValueError(f"Expected parameter {param} ({type(value).__name__} of shape "
                                     f"{tuple(value.shape)}) of distribution {self!r} to satisfy the constraint "
                                     f"{constraint!r}, but found invalid values:\n{value}")
        super().__init__()

    def expand(self, batch_shape, _instance=None):
        """A new distribution with the parameters expanded (not copied) to batch_shape."""
        raise NotImplementedError(f"{type(self).__name__}.expand is not implemented")

    @property
    def batch_shape(self):
        return self._batch_shape

    @property
    def event_shape(self):
        return self._event_shape

    @property
    def arg_constraints(self):
        raise NotImplementedError

    @property
    def support(self):
        raise NotImplementedError

    @property
    def mean(self):
        raise NotImplementedError(f"{self.__class__} does not implement mean")

    @property
    def mode(self):
        raise NotImplementedError(f"{self.__class__} does not implement mode")

    @property
    def variance(self):
        raise NotImplementedError(f"{self.__class__} does not implement variance")

    @property
    def stddev(self):
        return self.variance.sqrt()

    def sample(self, sample_shape=()):
        """sample_shape + batch_shape + event_shape values, outside autograd."""
        with ts.no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape=()):
        """Reparameterised samples: gradients flow back to the parameters."""
        raise NotImplementedError(f"{self.__class__.__name__} does not implement rsample (has_rsample is False)")

    def sample_n(self, n):
        warnings.warn("`sample_n(n)` will be deprecated. Use `sample((n,))` instead.", FutureWarning, stacklevel=2)
        return self.sample((n,))

    def log_prob(self, value):
        raise NotImplementedError(f"{self.__class__.__name__} does not implement log_prob")

    def cdf(self, value):
        raise NotImplementedError(f"{self.__class__.__name__} does not implement cdf")

    def icdf(self, value):
        raise NotImplementedError(f"{self.__class__.__name__} does not implement icdf")

    def enumerate_support(self, expand=True):
        raise NotImplementedError(f"{self.__class__.__name__} does not implement enumerate_support")

    def entropy(self):
        raise NotImplementedError(f"{self.__class__.__name__} does not implement entropy")

    def perplexity(self):
        return self.entropy().exp()

    def _extended_shape(self, sample_shape=()):
        return _size(sample_shape) + self._batch_shape + self._event_shape

    def _validate_sample(self, value):
        """The checks torch makes on a value given to log_prob/cdf/icdf: a tensor, whose rightmost
        dimensions are the event shape, broadcastable with the batch, and inside the support."""
        if not isinstance(value, ts.Tensor):
            raise ValueError("The value argument to log_prob must be a Tensor")
        shape = tuple(value.shape)
        event_start = len(shape) - len(self._event_shape)
        if shape[event_start:] != self._event_shape:
            raise ValueError(f"The right-most size of value must match event_shape: {shape} vs {self._event_shape}.")
        expected = self._batch_shape + self._event_shape
        for i, j in zip(reversed(shape), reversed(expected)):
            if i != 1 and j != 1 and i != j:
                raise ValueError(f"Value is not broadcastable with batch_shape+event_shape: {shape} vs {expected}.")
        try:
            support = self.support
        except NotImplementedError:
            warnings.warn(f"{self.__class__} does not define `support` to enable sample validation. Please initialize "
                          "the distribution with `validate_args=False` to turn off validation.", stacklevel=2)
            return
        if not bool(support.check(value).all()):
            raise ValueError(f"Expected value argument ({type(value).__name__} of shape {shape}) to be within the "
                             f"support ({support!r}) of the distribution {self!r}, but found invalid values:\n{value}")

    def _get_checked_instance(self, cls, _instance=None):
        if _instance is None and type(self).__init__ != cls.__init__:
            raise NotImplementedError(f"Subclass {self.__class__.__name__} of {cls.__name__} that defines a custom "
                                      "__init__ method must also define a custom .expand() method.")
        return self.__new__(type(self)) if _instance is None else _instance

    def _expand_params(self, cls, batch_shape, _instance, names, event_shape=None):
        """expand() for a family whose parameters (named) each have shape batch_shape + event_shape:
        a new instance of cls sharing them, expanded (not copied)."""
        new = self._get_checked_instance(cls, _instance)
        batch_shape = tuple(batch_shape)
        event_shape = self._event_shape if event_shape is None else tuple(event_shape)
        for name in names:
            if name in self.__dict__:
                value = self.__dict__[name]
                param_shape = batch_shape + tuple(value.shape[len(self._batch_shape):])
                new.__dict__[name] = value.expand(param_shape)
        Distribution.__init__(new, batch_shape, event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def __repr__(self):
        try:
            names = [k for k in self.arg_constraints if k in self.__dict__]
        except NotImplementedError:
            names = []
        parts = []
        for name in names:
            value = self.__dict__[name]
            # One value is shown; a larger parameter shows its shape.
            big = isinstance(value, ts.Tensor) and value.numel() != 1
            parts.append(f"{name}: {tuple(value.shape) if big else value}")
        return f"{self.__class__.__name__}({', '.join(parts)})"
