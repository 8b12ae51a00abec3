"""VonMises(loc, concentration): the circular normal distribution (torch.distributions.VonMises)."""
import math

import tessera as ts
from tessera.distributions import constraints
from tessera.distributions.distribution import Distribution
from tessera.distributions.utils import broadcast_all, lazy_property

__all__ = ["VonMises"]

# Abramowitz and Stegun 9.8.1-9.8.4: I_n(x) for |x| < 3.75 as a polynomial in (x/3.75)^2, and
# sqrt(x) e^-x I_n(x) for x >= 3.75 as a polynomial in 3.75/x (relative error below 2e-7).
_SMALL = {
    0: [1.0, 3.5156229, 3.0899424, 1.2067492, 0.2659732, 0.0360768, 0.0045813],
    1: [0.5, 0.87890594, 0.51498869, 0.15084934, 0.02658733, 0.00301532, 0.00032411],
}
_LARGE = {
    0: [0.39894228, 0.01328592, 0.00225319, -0.00157565, 0.00916281, -0.02057706, 0.02635537, -0.01647633,
        0.00392377],
    1: [0.39894228, -0.03988024, -0.00362018, 0.00163801, -0.01031555, 0.02282967, -0.02895312, 0.01787654,
        -0.00420059],
}


def _poly(coefs, y):
    result = ts.full_like(y, coefs[-1])
    for c in reversed(coefs[:-1]):
        result = c + y * result
    return result


def _log_modified_bessel_fn(x, order=0):
    """log I_order(x) for x > 0, order 0 or 1."""
    small = x < 3.75
    xs = ts.where(small, x, ts.full_like(x, 1.0))
    xl = ts.where(small, ts.full_like(x, 3.75), x)
    y = (xs / 3.75).pow(2)
    log_small = _poly(_SMALL[order], y).log()
    if order == 1:
        log_small = xs.log() + log_small
    log_large = xl - 0.5 * xl.log() + _poly(_LARGE[order], 3.75 / xl).log()
    return ts.where(small, log_small, log_large)


class VonMises(Distribution):
    """VonMises(loc, concentration), concentration > 0: density exp(k cos(x - loc)) / (2 pi I0(k)).
    Values are angles (any real, read modulo 2 pi); samples lie in [-pi, pi). mean and variance
    are the circular ones. Sampling is Best and Fisher's (1979) rejection method, in float64."""

    arg_constraints = {"loc": constraints.real, "concentration": constraints.positive}
    support = constraints.real
    has_rsample = False

    def __init__(self, loc, concentration, validate_args=None):
        self.loc, self.concentration = broadcast_all(loc, concentration)
        super().__init__(tuple(self.loc.shape), (), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_params(VonMises, batch_shape, _instance, ("loc", "concentration"))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return (self.concentration * (value - self.loc).cos() - math.log(2 * math.pi)
                - _log_modified_bessel_fn(self.concentration, order=0))

    @lazy_property
    def _proposal_r(self):
        kappa = self.concentration.detach().double()
        tau = 1 + (1 + 4 * kappa.pow(2)).sqrt()
        rho = (tau - (2 * tau).sqrt()) / (2 * kappa)
        r = (1 + rho.pow(2)) / (2 * rho)
        return ts.where(kappa < 1e-5, 1 / kappa + kappa, r)  # the Taylor form where rho -> 0

    def sample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        with ts.no_grad():
            kappa = self.concentration.detach().double().expand(shape)
            r = self._proposal_r.expand(shape)
            loc = self.loc.detach().double().expand(shape)
            result = ts.zeros(shape, dtype=ts.float64, device=self.loc.device)
            done = ts.zeros(shape, dtype=ts.bool, device=self.loc.device)
            for _ in range(1000):
                if bool(done.all()):
                    break
                u1, u2, u3 = (ts.rand(shape, dtype=ts.float64, device=self.loc.device) for _ in range(3))
                z = (math.pi * u1).cos()
                f = (1 + r * z) / (r + z)
                c = kappa * (r - f)
                accept = ((c * (2 - c) - u2) > 0) | ((c / u2).log() + 1 - c >= 0)
                theta = (u3 - 0.5).sign() * f.acos()
                take = accept & ~done
                result = ts.where(take, theta, result)
                done = done | take
            # Shift by loc and wrap into [-pi, pi).
            result = (result + math.pi + loc).remainder(2 * math.pi) - math.pi
            return result.to(self.loc.dtype)

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @lazy_property
    def variance(self):
        k = self.concentration
        return 1 - (_log_modified_bessel_fn(k, order=1) - _log_modified_bessel_fn(k, order=0)).exp()
