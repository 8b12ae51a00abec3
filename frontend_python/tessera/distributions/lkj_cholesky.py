"""LKJCholesky(dim, concentration): the LKJ distribution over lower Cholesky factors of correlation
matrices (torch.distributions.LKJCholesky; Lewandowski, Kurowicka and Joe, 2009). The correlation
matrix M = L L^T has density proportional to det(M)^(concentration - 1)."""
import math

import tessera as ts
from tessera.distributions import constraints
from tessera.distributions.beta import Beta
from tessera.distributions.distribution import Distribution
from tessera.distributions.utils import broadcast_all

__all__ = ["LKJCholesky"]


class LKJCholesky(Distribution):
    """LKJCholesky(dim, concentration=1.0): dim >= 2; concentration (eta > 0, a number or a tensor)
    gives the batch shape; event_shape (dim, dim). concentration 1 is uniform over correlation
    matrices. Sampling is the onion method (Sec. 3.2 of the paper) for the Cholesky factor directly:
    row i (i >= 1) is sqrt(y_i) times a uniform direction in its first i coordinates, with
    y_i ~ Beta(i/2, eta + (dim - 2)/2 - (i - 1)/2), and the diagonal entry fills the row to unit
    norm; every off-diagonal correlation r then has (r + 1)/2 ~ Beta(eta - 1 + dim/2, same).
    Not reparameterised (has_rsample is False)."""

    arg_constraints = {"concentration": constraints.positive}
    support = constraints.corr_cholesky

    def __init__(self, dim, concentration=1.0, validate_args=None):
        if dim < 2:
            raise ValueError(f"Expected dim to be an integer greater than or equal to 2. Found dim={dim}.")
        self.dim = dim
        (self.concentration,) = broadcast_all(concentration)
        batch_shape = tuple(self.concentration.shape)
        # The onion method's Beta draws, one per row: row i >= 1 takes y_i ~ Beta(i/2, b - (i-1)/2),
        # b = concentration + (dim - 2)/2 (row 0's draw goes unused: that row is e_0). torch's sampler
        # takes Beta(i - 1/2, ...) from row 2 on, so its samples do not follow its own log_prob (their
        # correlations' marginals are not the Beta(b, b) on (-1, 1) of the paper's Sec. 3.2): the
        # paper's parameters are used here.
        c = self.concentration
        marginal = c + 0.5 * (dim - 2)
        offset = ts.arange(dim - 1, dtype=c.dtype, device=c.device)
        half = 0.5 * ts.cat([ts.zeros((1,), dtype=c.dtype, device=c.device), offset])  # 0, 0, 1/2, 1, ...
        # (built with the default validation, as torch's: a non-positive concentration can be
        # reported by the Beta's Dirichlet before the concentration check below)
        self._beta = Beta(half + 0.5, marginal.unsqueeze(-1) - half)
        super().__init__(batch_shape, (dim, dim), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(LKJCholesky, _instance)
        batch_shape = tuple(batch_shape)
        new.dim = self.dim
        new.concentration = self.concentration.expand(batch_shape)
        new._beta = self._beta.expand(batch_shape + (self.dim,))
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def sample(self, sample_shape=()):
        with ts.no_grad():
            y = self._beta.sample(sample_shape).unsqueeze(-1)
            u = ts.randn(self._extended_shape(sample_shape), dtype=y.dtype, device=y.device).tril(-1)
            norm = u.norm(dim=-1, keepdim=True)
            # Row 0 has no entries below the diagonal: it stays zero (rather than 0 / 0).
            direction = u / ts.where(norm > 0, norm, ts.ones_like(norm))
            w = y.sqrt() * direction
            tiny = ts.finfo(w.dtype).tiny
            diag = (1 - w.square().sum(-1)).clamp(min=tiny).sqrt()
            return w + ts.diag_embed(diag)

    def log_prob(self, value):
        # Rows counted from 0: the density of M = L L^T is proportional to det(M)^(eta-1) =
        # prod_i L_ii^(2(eta-1)), and the Jacobian of L -> M is prod_i L_ii^(dim-1-i), so
        # log p(L) = sum_{i>=1} order_i log L_ii with order_i = 2(eta-1) + dim - 1 - i, less the log
        # normaliser of the LKJ density.
        if self._validate_args:
            self._validate_sample(value)
        c = self.concentration
        diag = value.diagonal(dim1=-2, dim2=-1)[..., 1:]
        order = 2 * (c - 1).unsqueeze(-1) + self.dim - ts.arange(2, self.dim + 1, dtype=c.dtype, device=c.device)
        unnormalized = (order * diag.log()).sum(-1)
        dm1 = self.dim - 1
        alpha = c + 0.5 * dm1
        # The normaliser of the paper (p. 1999) written with mvlgamma, whose pi term
        # (dm1 (dm1 - 1) / 4 log pi) is dm1/2 log pi short of the paper's dim dm1 / 4 log pi.
        log_normalizer = 0.5 * dm1 * math.log(math.pi) + ts.mvlgamma(alpha - 0.5, p=dm1) - alpha.lgamma() * dm1
        return unnormalized - log_normalizer
