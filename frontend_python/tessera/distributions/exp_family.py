"""ExponentialFamily: the base of families with density exp(<t(x), theta> - F(theta) + k(x))
(torch.distributions.ExponentialFamily); entropy and same-family KL come from F by autograd."""
import tessera as ts
from tessera.distributions.distribution import Distribution

__all__ = ["ExponentialFamily"]


class ExponentialFamily(Distribution):
    """Subclasses give _natural_params (theta), _log_normalizer(*theta) (F) and
    _mean_carrier_measure (E[k(x)]); entropy is then F(theta) - <theta, grad F(theta)> - E[k(x)]
    (the Bregman divergence form)."""

    @property
    def _natural_params(self):
        raise NotImplementedError

    def _log_normalizer(self, *natural_params):
        raise NotImplementedError

    @property
    def _mean_carrier_measure(self):
        raise NotImplementedError

    def entropy(self):
        result = -self._mean_carrier_measure
        nparams = [p.detach().requires_grad_() for p in self._natural_params]
        with ts.enable_grad():
            lg_normal = self._log_normalizer(*nparams)
            gradients = ts.autograd.grad(lg_normal.sum(), nparams, create_graph=True)
        result = result + lg_normal
        for p, g in zip(nparams, gradients):
            result = result - (p * g).reshape(self._batch_shape + (-1,)).sum(-1)
        return result
