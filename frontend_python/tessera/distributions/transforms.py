"""Transforms (torch.distributions.transforms): invertible maps with the log |det Jacobian| that
TransformedDistribution needs to move densities through them."""
import functools
import math
import operator
import weakref
from numbers import Number

import tessera as ts
from tessera.distributions import constraints
from tessera.distributions.utils import _sum_rightmost, broadcast_shapes

__all__ = ["AbsTransform", "AffineTransform", "CatTransform", "ComposeTransform", "CorrCholeskyTransform",
           "CumulativeDistributionTransform", "ExpTransform", "IndependentTransform", "LowerCholeskyTransform",
           "PositiveDefiniteTransform", "PowerTransform", "ReshapeTransform", "SigmoidTransform", "SoftmaxTransform",
           "SoftplusTransform", "StackTransform", "StickBreakingTransform", "TanhTransform", "Transform",
           "identity_transform"]


def _softplus(x):
    # log(1 + e^x) = max(x, 0) + log1p(e^-|x|), finite for every x.
    return x.clamp(min=0) + (-x.abs()).exp().log1p()


class Transform:
    """A map x -> y = t(x) from `domain` to `codomain`; `t.inv` is its inverse (a Transform too),
    `log_abs_det_jacobian(x, y)` is log |dy/dx|. cache_size=1 remembers the last (x, y) pair, so
    inverting a value this transform produced returns the exact x (what sampling then log_prob
    of the same value does)."""

    bijective = False
    domain = constraints.real
    codomain = constraints.real

    def __init__(self, cache_size=0):
        if cache_size not in (0, 1):
            raise ValueError("cache_size must be 0 or 1")
        self._cache_size = cache_size
        self._cached_x_y = (None, None)
        self._inv = None

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_inv"] = None  # a weak reference does not pickle
        return state

    @property
    def event_dim(self):
        if self.domain.event_dim == self.codomain.event_dim:
            return self.domain.event_dim
        raise ValueError("Please use either .domain.event_dim or .codomain.event_dim")

    @property
    def inv(self):
        inv = self._inv() if self._inv is not None else None
        if inv is None:
            # Held weakly: the inverse holds this transform strongly, and a cycle is avoided.
            inv = _InverseTransform(self)
            self._inv = weakref.ref(inv)
        return inv

    @property
    def sign(self):
        raise NotImplementedError(f"{type(self).__name__} has no constant Jacobian sign")

    def with_cache(self, cache_size=1):
        if self._cache_size == cache_size:
            return self
        if type(self).__init__ is Transform.__init__:
            return type(self)(cache_size=cache_size)
        raise NotImplementedError(f"{type(self)}.with_cache is not implemented")

    def __eq__(self, other):
        return self is other

    def __ne__(self, other):
        return not self.__eq__(other)

    def __hash__(self):
        return id(self)

    def __call__(self, x):
        if self._cache_size == 0:
            return self._call(x)
        x_old, y_old = self._cached_x_y
        if x is x_old:
            return y_old
        y = self._call(x)
        self._cached_x_y = (x, y)
        return y

    def _inv_call(self, y):
        if self._cache_size == 0:
            return self._inverse(y)
        x_old, y_old = self._cached_x_y
        if y is y_old:
            return x_old
        x = self._inverse(y)
        self._cached_x_y = (x, y)
        return x

    def _call(self, x):
        raise NotImplementedError(f"{type(self).__name__} does not implement the forward map")

    def _inverse(self, y):
        raise NotImplementedError(f"{type(self).__name__} does not implement the inverse map")

    def log_abs_det_jacobian(self, x, y):
        raise NotImplementedError(f"{type(self).__name__} does not implement log_abs_det_jacobian")

    def forward_shape(self, shape):
        return tuple(shape)

    def inverse_shape(self, shape):
        return tuple(shape)

    def __repr__(self):
        return self.__class__.__name__ + "()"


class _InverseTransform(Transform):
    """The inverse of a transform: calls its _inverse, negates its log |det J|."""

    def __init__(self, transform):
        super().__init__(cache_size=transform._cache_size)
        self._inv = transform

    @property
    def domain(self):
        return self._inv.codomain

    @property
    def codomain(self):
        return self._inv.domain

    @property
    def bijective(self):
        return self._inv.bijective

    @property
    def sign(self):
        return self._inv.sign

    @property
    def inv(self):
        return self._inv

    def with_cache(self, cache_size=1):
        return self.inv.with_cache(cache_size).inv

    def __eq__(self, other):
        return isinstance(other, _InverseTransform) and self._inv == other._inv

    def __hash__(self):
        return hash(("inverse", self._inv))

    def __repr__(self):
        return f"{self.__class__.__name__}({self._inv!r})"

    def __call__(self, x):
        return self._inv._inv_call(x)

    def log_abs_det_jacobian(self, x, y):
        return -self._inv.log_abs_det_jacobian(y, x)

    def forward_shape(self, shape):
        return self._inv.inverse_shape(shape)

    def inverse_shape(self, shape):
        return self._inv.forward_shape(shape)


class ComposeTransform(Transform):
    """parts applied left to right: ComposeTransform([f, g])(x) = g(f(x)). With no parts, the identity."""

    def __init__(self, parts, cache_size=0):
        if cache_size:
            parts = [part.with_cache(cache_size) for part in parts]
        super().__init__(cache_size=cache_size)
        self.parts = list(parts)
        if not all(isinstance(p, Transform) for p in self.parts):
            raise TypeError(f"ComposeTransform: expected Transforms, got {[type(p).__name__ for p in self.parts]}")

    def __eq__(self, other):
        return isinstance(other, ComposeTransform) and self.parts == other.parts

    def __hash__(self):
        return hash(tuple(self.parts))

    @property
    def domain(self):
        if not self.parts:
            return constraints.real
        domain = self.parts[0].domain
        # The composition's input event dimension: the last output's, walked back through each
        # part (a part may add or remove event dimensions, and needs at least its own).
        event_dim = self.parts[-1].codomain.event_dim
        for part in reversed(self.parts):
            event_dim = max(event_dim + part.domain.event_dim - part.codomain.event_dim, part.domain.event_dim)
        if event_dim > domain.event_dim:
            domain = constraints.independent(domain, event_dim - domain.event_dim)
        return domain

    @property
    def codomain(self):
        if not self.parts:
            return constraints.real
        codomain = self.parts[-1].codomain
        event_dim = self.parts[0].domain.event_dim
        for part in self.parts:
            event_dim = max(event_dim + part.codomain.event_dim - part.domain.event_dim, part.codomain.event_dim)
        if event_dim > codomain.event_dim:
            codomain = constraints.independent(codomain, event_dim - codomain.event_dim)
        return codomain

    @property
    def bijective(self):
        return all(p.bijective for p in self.parts)

    @property
    def sign(self):
        sign = 1
        for p in self.parts:
            sign = sign * p.sign
        return sign

    @property
    def inv(self):
        inv = self._inv() if self._inv is not None else None
        if inv is None:
            inv = ComposeTransform([p.inv for p in reversed(self.parts)])
            self._inv = weakref.ref(inv)
            inv._inv = weakref.ref(self)
        return inv

    def with_cache(self, cache_size=1):
        if self._cache_size == cache_size:
            return self
        return ComposeTransform(self.parts, cache_size=cache_size)

    def __call__(self, x):
        for part in self.parts:
            x = part(x)
        return x

    def log_abs_det_jacobian(self, x, y):
        if not self.parts:
            return ts.zeros_like(x)
        xs = [x]
        for part in self.parts[:-1]:
            xs.append(part(xs[-1]))
        xs.append(y)
        terms = []
        event_dim = self.domain.event_dim
        for part, a, b in zip(self.parts, xs[:-1], xs[1:]):
            # Each part's term is over its own event dimensions; sum the rest of the composition's.
            terms.append(_sum_rightmost(part.log_abs_det_jacobian(a, b), event_dim - part.domain.event_dim))
            event_dim += part.codomain.event_dim - part.domain.event_dim
        return functools.reduce(operator.add, terms)

    def forward_shape(self, shape):
        for part in self.parts:
            shape = part.forward_shape(shape)
        return tuple(shape)

    def inverse_shape(self, shape):
        for part in reversed(self.parts):
            shape = part.inverse_shape(shape)
        return tuple(shape)

    def __repr__(self):
        inner = ",\n    ".join(repr(p) for p in self.parts)
        return f"{self.__class__.__name__}(\n    {inner}\n)"


identity_transform = ComposeTransform([])


class ExpTransform(Transform):
    """y = exp(x)."""

    domain = constraints.real
    codomain = constraints.positive
    bijective = True
    sign = +1

    def __eq__(self, other):
        return isinstance(other, ExpTransform)

    def __hash__(self):
        return hash(ExpTransform)

    def _call(self, x):
        return x.exp()

    def _inverse(self, y):
        return y.log()

    def log_abs_det_jacobian(self, x, y):
        return x


class SigmoidTransform(Transform):
    """y = 1 / (1 + exp(-x)), kept inside (0, 1) so the inverse stays finite."""

    domain = constraints.real
    codomain = constraints.unit_interval
    bijective = True
    sign = +1

    def __eq__(self, other):
        return isinstance(other, SigmoidTransform)

    def __hash__(self):
        return hash(SigmoidTransform)

    def _call(self, x):
        info = ts.finfo(x.dtype)
        return x.sigmoid().clamp(min=info.tiny, max=1.0 - info.eps)

    def _inverse(self, y):
        info = ts.finfo(y.dtype)
        y = y.clamp(min=info.tiny, max=1.0 - info.eps)
        return y.log() - (-y).log1p()

    def log_abs_det_jacobian(self, x, y):
        # log sigmoid'(x) = log sigmoid(x) + log sigmoid(-x)
        return -_softplus(-x) - _softplus(x)


class TanhTransform(Transform):
    """y = tanh(x)."""

    domain = constraints.real
    codomain = constraints.interval(-1.0, 1.0)
    bijective = True
    sign = +1

    def __eq__(self, other):
        return isinstance(other, TanhTransform)

    def __hash__(self):
        return hash(TanhTransform)

    def _call(self, x):
        return x.tanh()

    def _inverse(self, y):
        return y.atanh()  # not clipped (as torch): cache_size=1 avoids inverting values near +-1

    def log_abs_det_jacobian(self, x, y):
        # log(1 - tanh(x)^2) = 2 (log 2 - x - softplus(-2x)), stable for large |x|.
        return 2.0 * (math.log(2.0) - x - _softplus(-2.0 * x))


class AffineTransform(Transform):
    """y = loc + scale * x; loc and scale are numbers or tensors. event_dim: how many rightmost
    dimensions form one value (their log |scale| terms are summed)."""

    bijective = True

    def __init__(self, loc, scale, event_dim=0, cache_size=0):
        super().__init__(cache_size=cache_size)
        self.loc = loc
        self.scale = scale
        self._event_dim = event_dim

    @property
    def event_dim(self):
        return self._event_dim

    @property
    def domain(self):
        return constraints.real if self._event_dim == 0 else constraints.independent(constraints.real, self._event_dim)

    @property
    def codomain(self):
        return self.domain

    def with_cache(self, cache_size=1):
        if self._cache_size == cache_size:
            return self
        return AffineTransform(self.loc, self.scale, self._event_dim, cache_size=cache_size)

    def __eq__(self, other):
        if not isinstance(other, AffineTransform):
            return False
        for a, b in ((self.loc, other.loc), (self.scale, other.scale)):
            if isinstance(a, Number) and isinstance(b, Number):
                if a != b:
                    return False
            elif not bool((ts.as_tensor(a) == ts.as_tensor(b)).all()):
                return False
        return True

    def __hash__(self):
        return id(self)

    @property
    def sign(self):
        if isinstance(self.scale, Number):
            return 1 if float(self.scale) > 0 else -1 if float(self.scale) < 0 else 0
        return self.scale.sign()

    def _call(self, x):
        return self.loc + self.scale * x

    def _inverse(self, y):
        return (y - self.loc) / self.scale

    def log_abs_det_jacobian(self, x, y):
        shape = tuple(x.shape)
        scale = self.scale
        if isinstance(scale, Number):
            result = ts.full_like(x, math.log(abs(scale)))
        else:
            result = scale.abs().log()
        if self._event_dim:
            result = result.reshape(tuple(result.shape[:result.dim() - self._event_dim]) + (-1,)).sum(-1)
            shape = shape[:len(shape) - self._event_dim]
        return result.expand(shape)

    def forward_shape(self, shape):
        return broadcast_shapes(shape, getattr(self.loc, "shape", ()), getattr(self.scale, "shape", ()))

    def inverse_shape(self, shape):
        return broadcast_shapes(shape, getattr(self.loc, "shape", ()), getattr(self.scale, "shape", ()))

    def __repr__(self):
        return f"{self.__class__.__name__}(loc={self.loc}, scale={self.scale}, event_dim={self._event_dim})"


class _Stateless(Transform):
    """A transform without parameters: all instances are equal."""

    def __eq__(self, other):
        return type(other) is type(self)

    def __hash__(self):
        return hash(type(self))


class AbsTransform(_Stateless):
    """y = |x| (not injective: the inverse returns the non-negative preimage)."""

    domain = constraints.real
    codomain = constraints.positive

    def _call(self, x):
        return x.abs()

    def _inverse(self, y):
        return y


class PowerTransform(Transform):
    """y = x ** exponent on the positive reals."""

    domain = constraints.positive
    codomain = constraints.positive
    bijective = True

    def __init__(self, exponent, cache_size=0):
        super().__init__(cache_size=cache_size)
        (self.exponent,) = _broadcast_numbers(exponent)

    def with_cache(self, cache_size=1):
        if self._cache_size == cache_size:
            return self
        return PowerTransform(self.exponent, cache_size=cache_size)

    def __eq__(self, other):
        return isinstance(other, PowerTransform) and bool((self.exponent == other.exponent).all())

    def __hash__(self):
        return id(self)

    @property
    def sign(self):
        return self.exponent.sign()

    def _call(self, x):
        return x.pow(self.exponent)

    def _inverse(self, y):
        return y.pow(1 / self.exponent)

    def log_abs_det_jacobian(self, x, y):
        return (self.exponent * y / x).abs().log()

    def forward_shape(self, shape):
        return broadcast_shapes(shape, tuple(self.exponent.shape))

    def inverse_shape(self, shape):
        return broadcast_shapes(shape, tuple(self.exponent.shape))


def _broadcast_numbers(*values):
    # A number parameter becomes a 0-d tensor of the default dtype, a tensor stays as given.
    return [v if isinstance(v, ts.Tensor) else ts.tensor(float(v), dtype=ts.get_default_dtype()) for v in values]


class SoftplusTransform(_Stateless):
    """y = log(1 + exp(x))."""

    domain = constraints.real
    codomain = constraints.positive
    bijective = True
    sign = +1

    def _call(self, x):
        return _softplus(x)

    def _inverse(self, y):
        # log(exp(y) - 1) = y + log(1 - exp(-y)), finite for large y.
        return y + (-(-y).expm1()).log()

    def log_abs_det_jacobian(self, x, y):
        return -_softplus(-x)


class SoftmaxTransform(_Stateless):
    """y = softmax(x) over the last dimension (not injective: the inverse is log y, one preimage)."""

    domain = constraints.real_vector
    codomain = constraints.simplex

    def _call(self, x):
        probs = (x - x.max(-1, keepdim=True)[0]).exp()
        return probs / probs.sum(-1, keepdim=True)

    def _inverse(self, y):
        return y.log()

    def forward_shape(self, shape):
        if len(shape) < 1:
            raise ValueError("Too few dimensions on input")
        return tuple(shape)

    def inverse_shape(self, shape):
        return self.forward_shape(shape)


class StickBreakingTransform(_Stateless):
    """The bijection from R^(K-1) to the K-simplex by stick breaking: piece k takes the fraction
    sigmoid(x_k - log(K - k)) of what is left (the offset makes x = 0 the simplex's centre)."""

    domain = constraints.real_vector
    codomain = constraints.simplex
    bijective = True

    @staticmethod
    def _offset(n, like):
        # log(n - k) for k = 0..n-1
        return (n + 1 - ts.ones(n, dtype=like.dtype, device=like.device).cumsum(-1)).log()

    def _call(self, x):
        z = (x - self._offset(x.shape[-1], x)).sigmoid()
        rest = (1 - z).cumprod(-1)
        one = ts.ones(tuple(x.shape[:-1]) + (1,), dtype=x.dtype, device=x.device)
        return ts.cat([z, one], -1) * ts.cat([one, rest], -1)

    def _inverse(self, y):
        y_crop = y[..., :-1]
        left = (1 - y_crop.cumsum(-1)).clamp(min=ts.finfo(y.dtype).tiny)
        return y_crop.log() - left.log() + self._offset(y_crop.shape[-1], y)

    def log_abs_det_jacobian(self, x, y):
        u = x - self._offset(x.shape[-1], x)
        # log sigmoid(u) - u = -softplus(u), plus the log of the stick left at each step.
        return (-_softplus(u) + y[..., :-1].log()).sum(-1)

    def forward_shape(self, shape):
        if len(shape) < 1:
            raise ValueError("Too few dimensions on input")
        return tuple(shape[:-1]) + (shape[-1] + 1,)

    def inverse_shape(self, shape):
        if len(shape) < 1:
            raise ValueError("Too few dimensions on input")
        return tuple(shape[:-1]) + (shape[-1] - 1,)


class LowerCholeskyTransform(_Stateless):
    """An unconstrained square matrix to a lower Cholesky factor: the strict lower triangle kept,
    the diagonal exponentiated (not injective: the upper triangle is dropped)."""

    domain = constraints.independent(constraints.real, 2)
    codomain = constraints.lower_cholesky

    def _call(self, x):
        return x.tril(-1) + ts.diag_embed(x.diagonal(dim1=-2, dim2=-1).exp())

    def _inverse(self, y):
        return y.tril(-1) + ts.diag_embed(y.diagonal(dim1=-2, dim2=-1).log())


class PositiveDefiniteTransform(_Stateless):
    """An unconstrained square matrix to a positive definite one, L L^T with L its lower Cholesky image."""

    domain = constraints.independent(constraints.real, 2)
    codomain = constraints.positive_definite

    def _call(self, x):
        L = LowerCholeskyTransform()(x)
        return L @ L.mT

    def _inverse(self, y):
        return LowerCholeskyTransform().inv(ts.linalg.cholesky(y))


def _vec_to_tril_indices(n):
    rows, cols = [], []
    for i in range(1, n):
        for j in range(i):
            rows.append(i)
            cols.append(j)
    return rows, cols


class CorrCholeskyTransform(_Stateless):
    """A vector of D(D-1)/2 reals to the lower Cholesky factor of a D x D correlation matrix:
    tanh gives partial correlations in (-1, 1), and each row is built by stick breaking so its
    squared entries sum to one."""

    domain = constraints.real_vector
    codomain = constraints.corr_cholesky
    bijective = True

    def _call(self, x):
        eps = ts.finfo(x.dtype).eps
        r = x.tanh().clamp(min=-1 + eps, max=1 - eps)
        n = self._dim(x.shape[-1])
        rows, cols = _vec_to_tril_indices(n)
        batch = tuple(x.shape[:-1])
        z = ts.zeros(batch + (n * n,), dtype=x.dtype, device=x.device)
        idx = ts.tensor([i * n + j for i, j in zip(rows, cols)], device=x.device).expand(batch + (len(rows),))
        z = z.scatter(-1, idx, r).reshape(batch + (n, n))
        # Row i: y_ij = z_ij sqrt(1 - sum_{k<j} y_ik^2), y_ii = sqrt(1 - sum_{k<i} y_ik^2).
        left = (1 - z.square()).cumprod(-1)
        one = ts.ones(batch + (n, 1), dtype=x.dtype, device=x.device)
        left = ts.cat([one, left[..., :-1]], -1).sqrt()
        eye = ts.eye(n, dtype=x.dtype, device=x.device)
        return (z + eye) * left

    def _inverse(self, y):
        # z_ij = y_ij / sqrt(1 - sum_{k<j} y_ik^2), x = atanh(z)
        n = y.shape[-1]
        sq = y.square().cumsum(-1)
        zero = ts.zeros(tuple(y.shape[:-1]) + (1,), dtype=y.dtype, device=y.device)
        left = (1 - ts.cat([zero, sq[..., :-1]], -1)).sqrt()
        z = y / left
        rows, cols = _vec_to_tril_indices(n)
        flat = z.reshape(tuple(y.shape[:-2]) + (n * n,))
        idx = ts.tensor([i * n + j for i, j in zip(rows, cols)], device=y.device)
        return flat.index_select(-1, idx).atanh()

    def log_abs_det_jacobian(self, x, y, intermediates=None):
        # d y_ij / d z_ij = sqrt(1 - sum_{k<j} y_ik^2) (the stick left), and dz/dx = 1 - z^2.
        n = y.shape[-1]
        rows, cols = _vec_to_tril_indices(n)
        sq = y.square().cumsum(-1)
        zero = ts.zeros(tuple(y.shape[:-1]) + (1,), dtype=y.dtype, device=y.device)
        left = (1 - ts.cat([zero, sq[..., :-1]], -1)).clamp(min=ts.finfo(y.dtype).tiny)
        idx = ts.tensor([i * n + j for i, j in zip(rows, cols)], device=y.device)
        half_log_left = 0.5 * left.log().reshape(tuple(y.shape[:-2]) + (n * n,)).index_select(-1, idx)
        # log(1 - tanh(x)^2), stably
        log_dtanh = 2.0 * (math.log(2.0) - x - _softplus(-2.0 * x))
        return (half_log_left + log_dtanh).sum(-1)

    @staticmethod
    def _dim(m):
        n = int(round((0.25 + 2 * m) ** 0.5 + 0.5))
        if n * (n - 1) // 2 != m:
            raise ValueError("The size of last dimension is not a triangular number")
        return n

    def forward_shape(self, shape):
        if len(shape) < 1:
            raise ValueError("Too few dimensions on input")
        n = self._dim(shape[-1])
        return tuple(shape[:-1]) + (n, n)

    def inverse_shape(self, shape):
        if len(shape) < 2:
            raise ValueError("Too few dimensions on input")
        if shape[-2] != shape[-1]:
            raise ValueError("Input is not square")
        n = shape[-1]
        return tuple(shape[:-2]) + (n * (n - 1) // 2,)


class ReshapeTransform(Transform):
    """Reshapes the rightmost dimensions in_shape to out_shape (same number of elements)."""

    bijective = True

    def __init__(self, in_shape, out_shape, cache_size=0):
        self.in_shape = tuple(int(n) for n in in_shape)
        self.out_shape = tuple(int(n) for n in out_shape)
        if math.prod(self.in_shape) != math.prod(self.out_shape):
            raise ValueError("in_shape, out_shape have different numbers of elements")
        super().__init__(cache_size=cache_size)

    @property
    def domain(self):
        return constraints.independent(constraints.real, len(self.in_shape))

    @property
    def codomain(self):
        return constraints.independent(constraints.real, len(self.out_shape))

    def with_cache(self, cache_size=1):
        if self._cache_size == cache_size:
            return self
        return ReshapeTransform(self.in_shape, self.out_shape, cache_size=cache_size)

    def _call(self, x):
        batch = tuple(x.shape[:x.dim() - len(self.in_shape)])
        return x.reshape(batch + self.out_shape)

    def _inverse(self, y):
        batch = tuple(y.shape[:y.dim() - len(self.out_shape)])
        return y.reshape(batch + self.in_shape)

    def log_abs_det_jacobian(self, x, y):
        batch = tuple(x.shape[:x.dim() - len(self.in_shape)])
        return ts.zeros(batch, dtype=x.dtype, device=x.device)

    def forward_shape(self, shape):
        return self._swap(shape, self.in_shape, self.out_shape)

    def inverse_shape(self, shape):
        return self._swap(shape, self.out_shape, self.in_shape)

    @staticmethod
    def _swap(shape, old, new):
        shape = tuple(shape)
        if len(shape) < len(old):
            raise ValueError("Too few dimensions on input")
        cut = len(shape) - len(old)
        if shape[cut:] != old:
            raise ValueError(f"Shape mismatch: expected {shape[cut:]} but got {old}")
        return shape[:cut] + new


class IndependentTransform(Transform):
    """base_transform with `reinterpreted_batch_ndims` more rightmost dimensions treated as event
    dimensions (its log |det J| summed over them)."""

    def __init__(self, base_transform, reinterpreted_batch_ndims, cache_size=0):
        super().__init__(cache_size=cache_size)
        self.base_transform = base_transform.with_cache(cache_size)
        self.reinterpreted_batch_ndims = reinterpreted_batch_ndims

    def with_cache(self, cache_size=1):
        if self._cache_size == cache_size:
            return self
        return IndependentTransform(self.base_transform, self.reinterpreted_batch_ndims, cache_size=cache_size)

    @property
    def domain(self):
        return constraints.independent(self.base_transform.domain, self.reinterpreted_batch_ndims)

    @property
    def codomain(self):
        return constraints.independent(self.base_transform.codomain, self.reinterpreted_batch_ndims)

    @property
    def bijective(self):
        return self.base_transform.bijective

    @property
    def sign(self):
        return self.base_transform.sign

    def _call(self, x):
        if x.dim() < self.domain.event_dim:
            raise ValueError("Too few dimensions on input")
        return self.base_transform(x)

    def _inverse(self, y):
        if y.dim() < self.codomain.event_dim:
            raise ValueError("Too few dimensions on input")
        return self.base_transform.inv(y)

    def log_abs_det_jacobian(self, x, y):
        return _sum_rightmost(self.base_transform.log_abs_det_jacobian(x, y), self.reinterpreted_batch_ndims)

    def forward_shape(self, shape):
        return self.base_transform.forward_shape(shape)

    def inverse_shape(self, shape):
        return self.base_transform.inverse_shape(shape)

    def __repr__(self):
        return f"{self.__class__.__name__}({self.base_transform!r}, {self.reinterpreted_batch_ndims})"


class CatTransform(Transform):
    """Transforms applied to consecutive slices (of the given lengths, default 1) along dim, the
    results concatenated (as torch.cat)."""

    def __init__(self, tseq, dim=0, lengths=None, cache_size=0):
        if not all(isinstance(t, Transform) for t in tseq):
            raise TypeError("CatTransform: expected Transforms")
        if cache_size:
            tseq = [t.with_cache(cache_size) for t in tseq]
        super().__init__(cache_size=cache_size)
        self.transforms = list(tseq)
        self.lengths = [1] * len(self.transforms) if lengths is None else list(lengths)
        if len(self.lengths) != len(self.transforms):
            raise ValueError(f"CatTransform: {len(self.transforms)} transforms but {len(self.lengths)} lengths")
        self.dim = dim

    @functools.cached_property
    def event_dim(self):
        return max(t.event_dim for t in self.transforms)

    @functools.cached_property
    def length(self):
        return sum(self.lengths)

    def with_cache(self, cache_size=1):
        if self._cache_size == cache_size:
            return self
        return CatTransform(self.transforms, self.dim, self.lengths, cache_size)

    def _check_dim(self, x):
        if not -x.dim() <= self.dim < x.dim():
            raise ValueError(f"CatTransform: dim {self.dim} out of range for {x.dim()} dimensions")
        if x.shape[self.dim] != self.length:
            raise ValueError(f"CatTransform: expected size {self.length} along dim {self.dim}, got {x.shape[self.dim]}")

    def _map(self, x, fns):
        self._check_dim(x)
        out, start = [], 0
        for fn, length in zip(fns, self.lengths):
            out.append(fn(x.narrow(self.dim, start, length)))
            start += length
        return ts.cat(out, self.dim)

    def _call(self, x):
        return self._map(x, self.transforms)

    def _inverse(self, y):
        return self._map(y, [t.inv for t in self.transforms])

    def log_abs_det_jacobian(self, x, y):
        self._check_dim(x)
        terms, start = [], 0
        for t, length in zip(self.transforms, self.lengths):
            term = t.log_abs_det_jacobian(x.narrow(self.dim, start, length), y.narrow(self.dim, start, length))
            if t.event_dim < self.event_dim:
                term = _sum_rightmost(term, self.event_dim - t.event_dim)
            terms.append(term)
            start += length
        # A dim among the batch dimensions concatenates the terms; one inside the event sums them.
        dim = (self.dim - x.dim() if self.dim >= 0 else self.dim) + self.event_dim
        return ts.cat(terms, dim) if dim < 0 else functools.reduce(operator.add, terms)

    @property
    def bijective(self):
        return all(t.bijective for t in self.transforms)

    @property
    def domain(self):
        return constraints.cat([t.domain for t in self.transforms], self.dim, self.lengths)

    @property
    def codomain(self):
        return constraints.cat([t.codomain for t in self.transforms], self.dim, self.lengths)


class StackTransform(Transform):
    """Transforms applied to the slices x.select(dim, i), the results stacked (as torch.stack)."""

    def __init__(self, tseq, dim=0, cache_size=0):
        if not all(isinstance(t, Transform) for t in tseq):
            raise TypeError("StackTransform: expected Transforms")
        if cache_size:
            tseq = [t.with_cache(cache_size) for t in tseq]
        super().__init__(cache_size=cache_size)
        self.transforms = list(tseq)
        self.dim = dim

    def with_cache(self, cache_size=1):
        if self._cache_size == cache_size:
            return self
        return StackTransform(self.transforms, self.dim, cache_size)

    def _slices(self, x):
        if not -x.dim() <= self.dim < x.dim():
            raise ValueError(f"StackTransform: dim {self.dim} out of range for {x.dim()} dimensions")
        if x.shape[self.dim] != len(self.transforms):
            raise ValueError(f"StackTransform: expected size {len(self.transforms)} along dim {self.dim}, "
                             f"got {x.shape[self.dim]}")
        return [x.select(self.dim, i) for i in range(x.shape[self.dim])]

    def _call(self, x):
        return ts.stack([t(v) for t, v in zip(self.transforms, self._slices(x))], self.dim)

    def _inverse(self, y):
        return ts.stack([t.inv(v) for t, v in zip(self.transforms, self._slices(y))], self.dim)

    def log_abs_det_jacobian(self, x, y):
        xs, ys = self._slices(x), self._slices(y)
        return ts.stack([t.log_abs_det_jacobian(a, b) for t, a, b in zip(self.transforms, xs, ys)], self.dim)

    @property
    def bijective(self):
        return all(t.bijective for t in self.transforms)

    @property
    def domain(self):
        return constraints.stack([t.domain for t in self.transforms], self.dim)

    @property
    def codomain(self):
        return constraints.stack([t.codomain for t in self.transforms], self.dim)


class CumulativeDistributionTransform(Transform):
    """y = distribution.cdf(x): maps the distribution's support onto the unit interval (a copula)."""

    bijective = True
    codomain = constraints.unit_interval
    sign = +1

    def __init__(self, distribution, cache_size=0):
        super().__init__(cache_size=cache_size)
        self.distribution = distribution

    @property
    def domain(self):
        return self.distribution.support

    def _call(self, x):
        return self.distribution.cdf(x)

    def _inverse(self, y):
        return self.distribution.icdf(y)

    def log_abs_det_jacobian(self, x, y):
        return self.distribution.log_prob(x)

    def with_cache(self, cache_size=1):
        if self._cache_size == cache_size:
            return self
        return type(self)(self.distribution, cache_size=cache_size)
