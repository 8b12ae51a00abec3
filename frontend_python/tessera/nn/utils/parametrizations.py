"""tessera.nn.utils.parametrizations: weight_norm, spectral_norm and orthogonal as
parametrizations (torch.nn.utils.parametrizations), registered with
tessera.nn.utils.parametrize.

orthogonal supports torch's three maps (matrix_exp, cayley, householder). tessera has no
matrix_exp, linalg.householder_product or geqrf operator, so they are written here over other
operators: the matrix exponential by scaling and squaring of a degree-18 Taylor polynomial (its
gradient is autograd's through the matrix products), the Householder product as k rank-one updates,
and geqrf (used only by right_inverse with use_trivialization=False and the householder map) as
LAPACK's column-by-column reflections. Making a matrix orthogonal (right_inverse) takes the Q of
linalg.qr with the signs of R's diagonal, which is what torch's geqrf + householder_product gives.
"""
import math
from enum import Enum, auto

import tessera
from tessera.nn import _autograd, functional as F
from tessera.nn.modules.module import Module
from tessera.nn.utils import parametrize

__all__ = ["orthogonal", "spectral_norm", "weight_norm"]

_Tensor = tessera.Tensor


def _mH(x):
    return x.mT.conj() if x.is_complex() else x.mT


def _eye_like(n, k, like):
    return tessera.eye(n, k, dtype=like.dtype, device=like.device)


def _matrix_exp(A):
    """exp(A) of a square matrix (or a batch): A / 2^s has norm <= 1/2, its exponential is the
    Taylor polynomial of degree 18 (truncation below float64's rounding), squared s times."""
    n = A.shape[-1]
    with _autograd.no_grad():
        norm = float(A.abs().sum(-1).amax()) if A.numel() else 0.0  # the largest row sum bounds every batch's norm
    s = max(0, math.ceil(math.log2(norm / 0.5))) if norm > 0.5 else 0
    X = A / (2.0 ** s) if s else A
    eye = _eye_like(n, n, A)
    result, term = eye + X, X
    for i in range(2, 19):
        term = (term @ X) / float(i)
        result = result + term
    for _ in range(s):
        result = result @ result
    return result


def _householder_product(A, tau):
    """linalg.householder_product: the first n columns of H_1 ... H_k (A of shape (..., m, n), tau
    (..., k)), H_i = I - tau_i v_i v_i^T with v_i = (0, ..., 0, 1, A[i+1:, i])."""
    m, n = A.shape[-2], A.shape[-1]
    k = tau.shape[-1]
    batch = tuple(A.shape[:-2])
    Q = _eye_like(m, n, A).expand(*batch, m, n)
    for i in reversed(range(k)):
        parts = []
        if i:
            parts.append(A.new_zeros(batch + (i,)))
        parts.append(A.new_ones(batch + (1,)))
        if i + 1 < m:
            parts.append(A[..., i + 1:, i])
        v = tessera.cat(parts, -1) if len(parts) > 1 else parts[0]
        Q = Q - (tau[..., i:i + 1].unsqueeze(-1) * v.unsqueeze(-1)) @ (v.unsqueeze(-2) @ Q)
    return Q


def _geqrf(A):
    """torch.geqrf (LAPACK's ?geqrf) of a real matrix or batch, without gradient: R on and above
    the diagonal, the Householder vectors below it, and tau."""
    with _autograd.no_grad():
        A = A.clone()
        m, n = A.shape[-2], A.shape[-1]
        taus = []
        for j in range(min(m, n)):
            alpha = A[..., j, j].clone()
            below = A[..., j + 1:, j]
            xnorm = tessera.linalg.vector_norm(below, 2, [-1]) if j + 1 < m else tessera.zeros_like(alpha)
            norm = tessera.sqrt(alpha * alpha + xnorm * xnorm)
            beta = tessera.where(alpha >= 0, -norm, norm)  # LAPACK: -sign(alpha) |(alpha, x)|, sign(0) = +
            degenerate = xnorm == 0  # H = I: tau 0, R's entry alpha
            safe_beta = tessera.where(degenerate, tessera.ones_like(beta), beta)
            tau = tessera.where(degenerate, tessera.zeros_like(alpha), (safe_beta - alpha) / safe_beta)
            denom = tessera.where(degenerate, tessera.ones_like(alpha), alpha - safe_beta)
            v = below / denom.unsqueeze(-1) if j + 1 < m else below
            A[..., j, j] = tessera.where(degenerate, alpha, beta)
            if j + 1 < m:
                A[..., j + 1:, j] = v
            if j + 1 < n:
                vf = tessera.cat([tessera.ones_like(alpha).unsqueeze(-1), v], -1)
                sub = A[..., j:, j + 1:]
                scaled_v = tau.unsqueeze(-1).unsqueeze(-1) * vf.unsqueeze(-1)
                A[..., j:, j + 1:] = sub - scaled_v @ (vf.unsqueeze(-2) @ sub)
            taus.append(tau)
        return A, tessera.stack(taus, -1)


def _is_orthogonal(Q, eps=None):
    n, k = Q.shape[-2], Q.shape[-1]
    Id = _eye_like(k, k, Q)
    eps = 10.0 * n * tessera.finfo(Q.dtype).eps
    return bool(tessera.allclose(_mH(Q) @ Q, Id, atol=eps))


def _make_orthogonal(A):
    """The Q of A's QR factorization with R's diagonal made positive (torch: geqrf,
    householder_product, times the sign of R's diagonal)."""
    Q, R = tessera.linalg.qr(A)
    return Q * R.diagonal(0, -2, -1).sgn().unsqueeze(-2)


class _OrthMaps(Enum):
    matrix_exp = auto()
    cayley = auto()
    householder = auto()


class _Orthogonal(Module):
    def __init__(self, weight, orthogonal_map, *, use_trivialization=True):
        super().__init__()
        if weight.is_complex() and orthogonal_map == _OrthMaps.householder:
            raise ValueError("The householder parametrization does not support complex tensors.")
        self.shape = tuple(weight.shape)
        self.orthogonal_map = orthogonal_map
        if use_trivialization:
            self.register_buffer("base", None)

    def forward(self, X):
        n, k = X.shape[-2], X.shape[-1]
        transposed = n < k
        if transposed:
            X = X.mT
            n, k = k, n
        if self.orthogonal_map in (_OrthMaps.matrix_exp, _OrthMaps.cayley):
            X = X.tril()
            if n != k:
                X = tessera.cat([X, X.new_zeros((n, n - k)).expand(*X.shape[:-2], -1, -1)], -1)
            A = X - _mH(X)
            if self.orthogonal_map == _OrthMaps.matrix_exp:
                Q = _matrix_exp(A)
            else:
                Id = _eye_like(n, n, A)
                Q = tessera.linalg.solve(Id - 0.5 * A, Id + 0.5 * A)
            if n != k:
                Q = Q[..., :k]
        else:
            A = X.tril(-1)
            tau = 2.0 / (1.0 + (A * A).sum(-2))
            Q = _householder_product(A, tau)
            Q = Q * X.diagonal(0, -2, -1).int().unsqueeze(-2)
        if "base" in self._buffers:
            Q = self.base @ Q
        if transposed:
            Q = Q.mT
        return Q

    def right_inverse(self, Q):
        with _autograd.no_grad():
            if tuple(Q.shape) != self.shape:
                raise ValueError(f"Expected a matrix or batch of matrices of shape {self.shape}. "
                                 f"Got a tensor of shape {tuple(Q.shape)}.")
            Q_init = Q
            n, k = Q.shape[-2], Q.shape[-1]
            transpose = n < k
            if transpose:
                Q = Q.mT
                n, k = k, n
            if "base" not in self._buffers:  # no trivialization
                if self.orthogonal_map in (_OrthMaps.cayley, _OrthMaps.matrix_exp):
                    raise NotImplementedError("It is not possible to assign to the matrix exponential or the Cayley "
                                              "parametrizations when use_trivialization=False.")
                A, tau = _geqrf(Q)
                # The diagonal holds the signs that forward multiplies by (-1 where the reflection was
                # the identity, tau = 0).
                diag = A.diagonal(0, -2, -1)
                signs = tessera.where(tau == 0.0, -diag.sign(), diag.sign())
                on_diagonal = _eye_like(n, k, A) != 0
                A = tessera.where(on_diagonal, signs.unsqueeze(-2), A)
                return A.mT if transpose else A
            if n == k:
                Q = Q.clone() if _is_orthogonal(Q) else _make_orthogonal(Q)
            else:  # complete the columns to a square orthogonal matrix
                N = tessera.randn(*(tuple(Q.shape[:-2]) + (n, n - k)), dtype=Q.dtype, device=Q.device)
                Q = _make_orthogonal(tessera.cat([Q, N], -1))
            self.base = Q
            # forward(-Id) is the identity for every map, so the parametrized value is base's columns.
            return tessera.zeros_like(Q_init) - _eye_like(Q_init.shape[-2], Q_init.shape[-1], Q_init)


def orthogonal(module, name="weight", orthogonal_map=None, *, use_trivialization=True):
    """Parametrizes module.<name> (a matrix or batch, n x k) to be orthogonal (unitary when
    complex): its columns orthonormal when n >= k, its rows when n < k. orthogonal_map:
    "matrix_exp" (default for square or complex), "cayley" or "householder" (default for the
    others). use_trivialization (default): a `base` buffer the map's result is multiplied by, which
    assigning to the weight sets."""
    weight = getattr(module, name, None)
    if not isinstance(weight, _Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if weight.ndim < 2:
        raise ValueError(f"Expected a matrix or batch of matrices. Got a tensor of {weight.ndim} dimensions.")
    if orthogonal_map is None:
        orthogonal_map = ("matrix_exp" if weight.shape[-2] == weight.shape[-1] or weight.is_complex()
                          else "householder")
    orth_enum = getattr(_OrthMaps, orthogonal_map, None) if isinstance(orthogonal_map, str) else None
    if orth_enum is None:
        raise ValueError('orthogonal_map has to be one of "matrix_exp", "cayley", "householder". '
                         f"Got: {orthogonal_map}")
    orth = _Orthogonal(weight, orth_enum, use_trivialization=use_trivialization)
    parametrize.register_parametrization(module, name, orth, unsafe=True)
    return module


def _norm_except_dim(v, pow, dim):
    """torch.norm_except_dim: the pow-norm of v over every dim but `dim` (kept, the others of size
    1); dim -1 is the norm of the whole tensor (0-dim)."""
    if dim == -1:
        return tessera.linalg.vector_norm(v, pow)
    d = dim % v.ndim
    others = [i for i in range(v.ndim) if i != d]
    if not others:
        return v.abs()
    return tessera.linalg.vector_norm(v, pow, others, keepdim=True)


def _weight_norm(v, g, dim):
    """torch._weight_norm: v scaled to the norm g along `dim` (v * g / norm_except_dim(v))."""
    return v * (g / _norm_except_dim(v, 2, dim))


class _WeightNorm(Module):
    def __init__(self, dim=0):
        super().__init__()
        if dim is None:
            dim = -1
        self.dim = dim

    def forward(self, weight_g, weight_v):
        return _weight_norm(weight_v, weight_g, self.dim)

    def right_inverse(self, weight):
        return _norm_except_dim(weight, 2, self.dim), weight


def weight_norm(module, name="weight", dim=0):
    """Parametrizes module.<name> as g * v / ||v|| (norms over every dim but `dim`; dim None: the
    whole tensor). g and v are module.parametrizations.<name>.original0 and original1; a
    state_dict of the old tessera.nn.utils.weight_norm (<name>_g, <name>_v) loads into it."""
    parametrize.register_parametrization(module, name, _WeightNorm(dim), unsafe=True)

    def _weight_norm_compat_hook(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                 error_msgs):
        g_key, v_key = f"{prefix}{name}_g", f"{prefix}{name}_v"
        if g_key in state_dict and v_key in state_dict:
            state_dict[f"{prefix}parametrizations.{name}.original0"] = state_dict.pop(g_key)
            state_dict[f"{prefix}parametrizations.{name}.original1"] = state_dict.pop(v_key)

    module._register_load_state_dict_pre_hook(_weight_norm_compat_hook)
    return module


class _SpectralNorm(Module):
    def __init__(self, weight, n_power_iterations=1, dim=0, eps=1e-12):
        super().__init__()
        ndim = weight.ndim
        if dim >= ndim or dim < -ndim:
            raise IndexError(f"Dimension out of range (expected to be in range of [-{ndim}, {ndim - 1}] but got {dim})")
        if n_power_iterations <= 0:
            raise ValueError("Expected n_power_iterations to be positive, but got "
                             f"n_power_iterations={n_power_iterations}")
        self.dim = dim if dim >= 0 else dim + ndim
        self.eps = eps
        if ndim > 1:
            self.n_power_iterations = n_power_iterations
            with _autograd.no_grad():
                weight_mat = self._reshape_weight_to_matrix(weight)
                h, w = weight_mat.shape
                u = weight_mat.new_empty((h,)).normal_(0, 1)
                v = weight_mat.new_empty((w,)).normal_(0, 1)
                self.register_buffer("_u", F.normalize(u, dim=0, eps=self.eps))
                self.register_buffer("_v", F.normalize(v, dim=0, eps=self.eps))
                self._power_method(weight_mat, 15)

    def _reshape_weight_to_matrix(self, weight):
        if self.dim != 0:
            weight = weight.permute(self.dim, *(d for d in range(weight.ndim) if d != self.dim))
        return weight.flatten(1)

    def _power_method(self, weight_mat, n_power_iterations):
        # u and v are updated in place (torch's out=), so a state_dict taken before sees them change.
        with _autograd.no_grad():
            weight_mat = weight_mat.detach()
            for _ in range(n_power_iterations):
                self._u.copy_(F.normalize(tessera.mv(weight_mat, self._v), dim=0, eps=self.eps))
                self._v.copy_(F.normalize(tessera.mv(_mH(weight_mat), self._u), dim=0, eps=self.eps))

    def forward(self, weight):
        if weight.ndim == 1:
            return F.normalize(weight, dim=0, eps=self.eps)
        weight_mat = self._reshape_weight_to_matrix(weight)
        if self.training:
            self._power_method(weight_mat, self.n_power_iterations)
        u, v = self._u.clone(), self._v.clone()
        sigma = tessera.vdot(u, tessera.mv(weight_mat, v))
        return weight / sigma

    def right_inverse(self, value):
        return value


def _conv_transpose_types():
    import tessera.nn as nn
    return tuple(getattr(nn, n) for n in ("ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d") if hasattr(nn, n))


def spectral_norm(module, name="weight", n_power_iterations=1, eps=1e-12, dim=None):
    """Parametrizes module.<name> as W / sigma(W), sigma the largest singular value of W as a
    matrix (dim first, the other dims flattened) estimated by power iteration: 15 steps at
    registration, n_power_iterations at each read in training mode (u and v are buffers of the
    parametrization, parametrizations.<name>.0._u / _v). dim defaults to 1 for the transposed
    convolutions, else 0."""
    weight = getattr(module, name, None)
    if not isinstance(weight, _Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if dim is None:
        dim = 1 if isinstance(module, _conv_transpose_types()) else 0
    parametrize.register_parametrization(module, name, _SpectralNorm(weight, n_power_iterations, dim, eps))
    return module
