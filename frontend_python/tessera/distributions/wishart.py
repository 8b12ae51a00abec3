"""Wishart(df, covariance_matrix | precision_matrix | scale_tril): a distribution over symmetric
positive definite matrices (torch.distributions.Wishart). Like MultivariateNormal, everything is
computed from the lower Cholesky factor L of the scale matrix (covariance = L L^T); samples come
from the Bartlett decomposition."""
import math
import warnings
from numbers import Number

import tessera as ts
from tessera.distributions import constraints
from tessera.distributions.chi2 import Chi2
from tessera.distributions.distribution import Distribution
from tessera.distributions.exp_family import ExponentialFamily
from tessera.distributions.multivariate_normal import _scale_tril_of
from tessera.distributions.utils import _size, broadcast_shapes, digamma, lazy_property

__all__ = ["Wishart"]

_LOG_2 = math.log(2.0)


def _mvdigamma(x, p):
    """The multivariate digamma function: sum_{i<p} psi(x - i/2), the derivative of mvlgamma(x, p)
    (with a gradient of its own, through utils.digamma)."""
    halves = ts.arange(p, dtype=x.dtype, device=x.device) / 2
    return digamma(x.unsqueeze(-1) - halves).sum(-1)


def _cholesky_solve(B, L):
    """(L L^T)^-1 B for matrices B (…, n, k) and L (…, n, n), batch dimensions broadcast first:
    ts.cholesky_solve hands the two to linalg.solve as they are, which reads a B with one dimension
    fewer than L as a batch of vectors."""
    batch = broadcast_shapes(B.shape[:-2], L.shape[:-2])
    return ts.cholesky_solve(B.expand(batch + tuple(B.shape[-2:])), L.expand(batch + tuple(L.shape[-2:])))


class Wishart(ExponentialFamily):
    """Wishart(df, covariance_matrix=, precision_matrix= or scale_tril=) (exactly one): df (a number
    or a tensor, > n - 1) and an (…, n, n) matrix, their batch dimensions broadcast; event_shape
    (n, n). The sum of df outer products x x^T of N(0, covariance_matrix) vectors, for integer df.
    rsample is differentiable in the scale matrix and (through the chi-squared draws' implicit
    gradient) in df. Singular samples (possible when df < n) are drawn again, up to
    max_try_correction times."""

    support = constraints.positive_definite
    has_rsample = True
    _mean_carrier_measure = 0

    @property
    def arg_constraints(self):
        return {
            "covariance_matrix": constraints.positive_definite,
            "precision_matrix": constraints.positive_definite,
            "scale_tril": constraints.lower_cholesky,
            "df": constraints.greater_than(self.event_shape[-1] - 1),
        }

    def __init__(self, df, covariance_matrix=None, precision_matrix=None, scale_tril=None, validate_args=None):
        given = (covariance_matrix is not None) + (precision_matrix is not None) + (scale_tril is not None)
        if given != 1:
            # (torch asserts this, raising AssertionError with the same sentence)
            raise ValueError("Exactly one of covariance_matrix or precision_matrix or scale_tril may be specified.")
        param, name = next((m, n) for m, n in ((covariance_matrix, "covariance_matrix"),
                                                (precision_matrix, "precision_matrix"),
                                                (scale_tril, "scale_tril")) if m is not None)
        if param.dim() < 2:
            # torch names scale_tril whichever matrix was given
            raise ValueError("scale_tril must be at least two-dimensional, with optional leading batch dimensions")
        n = param.shape[-1]
        event_shape = tuple(param.shape[-2:])
        if isinstance(df, Number):
            batch_shape = tuple(param.shape[:-2])
            self.df = ts.tensor(float(df), dtype=param.dtype, device=param.device)
        else:
            batch_shape = broadcast_shapes(param.shape[:-2], df.shape)
            self.df = df.expand(batch_shape)
        if bool((self.df <= n - 1).any()):
            raise ValueError(f"Value of df={df} expected to be greater than ndim - 1 = {n - 1}.")
        setattr(self, name, param.expand(batch_shape + event_shape))
        if bool((self.df < n).any()):
            warnings.warn("Low df values detected. Singular samples are highly likely to occur for ndim - 1 < df < "
                          "ndim.", stacklevel=2)
        super().__init__(batch_shape, event_shape, validate_args=validate_args)
        self._unbroadcasted_scale_tril = _scale_tril_of(scale_tril, covariance_matrix, precision_matrix)
        self._dist_chi2 = self._bartlett_chi2(batch_shape)

    def _bartlett_chi2(self, batch_shape):
        """The diagonal of the Bartlett factor: its squares are Chi2(df - i), i = 0 … n-1."""
        L = self._unbroadcasted_scale_tril
        offsets = ts.arange(self._event_shape[-1], dtype=L.dtype, device=L.device)
        return Chi2(self.df.unsqueeze(-1) - offsets.expand(tuple(batch_shape) + (-1,)), validate_args=False)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Wishart, _instance)
        batch_shape = tuple(batch_shape)
        cov_shape = batch_shape + self.event_shape
        new._unbroadcasted_scale_tril = self._unbroadcasted_scale_tril.expand(cov_shape)
        new.df = self.df.expand(batch_shape)
        for name in ("covariance_matrix", "scale_tril", "precision_matrix"):
            if name in self.__dict__:
                setattr(new, name, self.__dict__[name].expand(cov_shape))
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        new._dist_chi2 = new._bartlett_chi2(batch_shape)
        return new

    @lazy_property
    def scale_tril(self):
        return self._unbroadcasted_scale_tril.expand(self._batch_shape + self._event_shape)

    @lazy_property
    def covariance_matrix(self):
        L = self._unbroadcasted_scale_tril
        return (L @ L.mT).expand(self._batch_shape + self._event_shape)

    @lazy_property
    def precision_matrix(self):
        L = self._unbroadcasted_scale_tril
        eye = ts.eye(self._event_shape[-1], dtype=L.dtype, device=L.device)
        return _cholesky_solve(eye, L).expand(self._batch_shape + self._event_shape)

    def _df_matrix(self):
        """df with two trailing unit dimensions, to scale a batch of matrices (df may be 0-d when it
        was given as a number; torch's view() fails there, broadcasting does not)."""
        return self.df.unsqueeze(-1).unsqueeze(-1)

    @property
    def mean(self):
        return self._df_matrix() * self.covariance_matrix

    @property
    def mode(self):  # NaN where df <= n + 1 (no interior mode)
        factor = self.df - self._event_shape[-1] - 1
        factor = ts.where(factor > 0, factor, math.nan)
        return factor.unsqueeze(-1).unsqueeze(-1) * self.covariance_matrix

    @property
    def variance(self):
        # Var(W_ij) = df (V_ij^2 + V_ii V_jj)
        V = self.covariance_matrix
        diag = V.diagonal(dim1=-2, dim2=-1)
        return self._df_matrix() * (V.pow(2) + diag.unsqueeze(-1) * diag.unsqueeze(-2))

    def _bartlett_sampling(self, sample_shape):
        """W = (L A)(L A)^T with A lower triangular: A_ii = sqrt(Chi2(df - i)) (kept above eps),
        A_ij ~ N(0, 1) below the diagonal."""
        n = self._event_shape[-1]
        L = self._unbroadcasted_scale_tril
        chi = self._dist_chi2.rsample(sample_shape).sqrt()
        chi = chi.clamp(min=ts.finfo(chi.dtype).eps)
        below = ts.randn(tuple(sample_shape) + self._batch_shape + (n, n), dtype=chi.dtype, device=chi.device)
        factor = L @ (ts.diag_embed(chi) + below.tril(-1))
        return factor @ factor.mT

    def rsample(self, sample_shape=(), max_try_correction=None):
        """Bartlett samples, differentiable in the parameters. Samples that come out singular (not
        positive definite in floating point, likely only for n - 1 < df < n) are drawn again up to
        max_try_correction (default 10) times; any still singular are returned as they are (their
        log_prob may be -inf)."""
        if max_try_correction is None:
            max_try_correction = 10
        sample_shape = _size(sample_shape)
        sample = self._bartlett_sampling(sample_shape)
        singular = ~self.support.check(sample.detach())
        if bool(singular.any()):
            warnings.warn("Singular sample detected.", stacklevel=2)
            for _ in range(max_try_correction):
                fresh = self._bartlett_sampling(sample_shape)
                sample = ts.where(singular.unsqueeze(-1).unsqueeze(-1), fresh, sample)
                singular = ~self.support.check(sample.detach())
                if not bool(singular.any()):
                    break
        return sample

    def _log_normalizer_scale(self):
        # n log 2 / 2 + log det L: half of log det(2 covariance)
        n = self._event_shape[-1]
        return n * _LOG_2 / 2 + self._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        nu = self.df
        n = self._event_shape[-1]
        trace = _cholesky_solve(value, self._unbroadcasted_scale_tril).diagonal(dim1=-2, dim2=-1).sum(-1)
        return (-nu * self._log_normalizer_scale() - ts.mvlgamma(nu / 2, p=n)
                + (nu - n - 1) / 2 * ts.linalg.slogdet(value).logabsdet - trace / 2)

    def entropy(self):
        nu = self.df
        n = self._event_shape[-1]
        return ((n + 1) * self._log_normalizer_scale() + ts.mvlgamma(nu / 2, p=n)
                - (nu - n - 1) / 2 * _mvdigamma(nu / 2, n) + nu * n / 2)

    @property
    def _natural_params(self):
        n = self._event_shape[-1]
        return -self.precision_matrix / 2, (self.df - n - 1) / 2

    def _log_normalizer(self, x, y):
        n = self._event_shape[-1]
        half_df = y + (n + 1) / 2
        return half_df * (-ts.linalg.slogdet(-2 * x).logabsdet + _LOG_2 * n) + ts.mvlgamma(half_df, p=n)
