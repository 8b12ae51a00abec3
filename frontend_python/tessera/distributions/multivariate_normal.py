"""MultivariateNormal(loc, covariance_matrix | precision_matrix | scale_tril): the Gaussian over
vectors (torch.distributions.MultivariateNormal). Everything is computed from the lower Cholesky
factor L of the covariance (covariance = L L^T)."""
import math

import tessera as ts
from tessera.distributions import constraints
from tessera.distributions.distribution import Distribution
from tessera.distributions.utils import _standard_normal, broadcast_shapes, lazy_property

__all__ = ["MultivariateNormal"]


def _solve_lower(L, b):
    """L^-1 b for lower-triangular L (…, n, n) and b (…, n, k), batch dimensions broadcast.
    Tessera has no triangular solver, so this is the general (LU) solve, differentiable in both;
    L.tril() reads only the lower triangle, as a triangular solver would (so entries above the
    diagonal get no gradient, as in torch)."""
    L = L.tril()
    batch = broadcast_shapes(L.shape[:-2], b.shape[:-2])
    return ts.linalg.solve(L.expand(batch + tuple(L.shape[-2:])), b.expand(batch + tuple(b.shape[-2:])))


def _batch_mahalanobis(L, x):
    """The squared Mahalanobis distance x^T (L L^T)^-1 x = |L^-1 x|^2 over x's batch dimensions."""
    z = _solve_lower(L, x.unsqueeze(-1)).squeeze(-1)
    return z.pow(2).sum(-1)


def _precision_to_scale_tril(P):
    """The lower factor L of the covariance P^-1 without inverting P first: with J the reversal
    permutation, J P J = Lf Lf^T gives P = U U^T with U = J Lf J upper-triangular, so
    P^-1 = U^-T U^-1 and L = U^-T (lower, positive diagonal)."""
    U = ts.linalg.cholesky(P.flip(-2, -1)).flip(-2, -1)
    eye = ts.eye(P.shape[-1], dtype=P.dtype, device=P.device)
    return ts.linalg.solve(U, eye.expand(tuple(U.shape))).mT


def _scale_tril_of(scale_tril, covariance_matrix, precision_matrix):
    """The lower Cholesky factor of whichever of the three parameterisations was given."""
    if scale_tril is not None:
        return scale_tril
    if covariance_matrix is not None:
        return ts.linalg.cholesky(covariance_matrix)
    return _precision_to_scale_tril(precision_matrix)


class MultivariateNormal(Distribution):
    """MultivariateNormal(loc, covariance_matrix=, precision_matrix= or scale_tril=) (exactly one):
    loc (…, n) and an (…, n, n) matrix, their batch dimensions broadcast; event_shape (n,)."""

    arg_constraints = {
        "loc": constraints.real_vector,
        "covariance_matrix": constraints.positive_definite,
        "precision_matrix": constraints.positive_definite,
        "scale_tril": constraints.lower_cholesky,
    }
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, loc, covariance_matrix=None, precision_matrix=None, scale_tril=None, validate_args=None):
        if loc.dim() < 1:
            raise ValueError("loc must be at least one-dimensional.")
        given = (covariance_matrix is not None) + (precision_matrix is not None) + (scale_tril is not None)
        if given != 1:
            raise ValueError("Exactly one of covariance_matrix or precision_matrix or scale_tril may be specified.")
        matrix, name = next((m, n) for m, n in ((scale_tril, "scale_tril"), (covariance_matrix, "covariance_matrix"),
                                                 (precision_matrix, "precision_matrix")) if m is not None)
        if matrix.dim() < 2:
            raise ValueError(f"{name} matrix must be at least two-dimensional, with optional leading batch dimensions"
                             if name == "scale_tril" else
                             f"{name} must be at least two-dimensional, with optional leading batch dimensions")
        n = loc.shape[-1]
        if tuple(matrix.shape[-2:]) != (n, n):
            raise ValueError(f"MultivariateNormal: expected {name} of shape (..., {n}, {n}) to match loc's last "
                             f"dimension {n}, got {tuple(matrix.shape)}")
        batch_shape = broadcast_shapes(matrix.shape[:-2], loc.shape[:-1])
        setattr(self, name, matrix.expand(batch_shape + (n, n)))
        self.loc = loc.expand(batch_shape + (n,))
        super().__init__(batch_shape, (n,), validate_args=validate_args)
        self._unbroadcasted_scale_tril = _scale_tril_of(scale_tril, covariance_matrix, precision_matrix)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(MultivariateNormal, _instance)
        batch_shape = tuple(batch_shape)
        loc_shape = batch_shape + self.event_shape
        cov_shape = batch_shape + self.event_shape + self.event_shape
        new.loc = self.loc.expand(loc_shape)
        new._unbroadcasted_scale_tril = self._unbroadcasted_scale_tril
        for name in ("covariance_matrix", "scale_tril", "precision_matrix"):
            if name in self.__dict__:
                setattr(new, name, self.__dict__[name].expand(cov_shape))
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @lazy_property
    def scale_tril(self):
        return self._unbroadcasted_scale_tril.expand(self._batch_shape + self._event_shape + self._event_shape)

    @lazy_property
    def covariance_matrix(self):
        L = self._unbroadcasted_scale_tril
        return (L @ L.mT).expand(self._batch_shape + self._event_shape + self._event_shape)

    @lazy_property
    def precision_matrix(self):
        L = self._unbroadcasted_scale_tril
        eye = ts.eye(L.shape[-1], dtype=L.dtype, device=L.device)
        L_inv = _solve_lower(L, eye.expand(tuple(L.shape)))
        return (L_inv.mT @ L_inv).expand(self._batch_shape + self._event_shape + self._event_shape)

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        return self._unbroadcasted_scale_tril.pow(2).sum(-1).expand(self._batch_shape + self._event_shape)

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        eps = _standard_normal(shape, self.loc.dtype, self.loc.device)
        return self.loc + (self._unbroadcasted_scale_tril @ eps.unsqueeze(-1)).squeeze(-1)

    def _half_log_det(self):
        return self._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        diff = value - self.loc
        m = _batch_mahalanobis(self._unbroadcasted_scale_tril, diff)
        n = self._event_shape[0]
        return -0.5 * (n * math.log(2 * math.pi) + m) - self._half_log_det()

    def entropy(self):
        n = self._event_shape[0]
        h = 0.5 * n * (1.0 + math.log(2 * math.pi)) + self._half_log_det()
        return h.expand(self._batch_shape) if self._batch_shape else h
