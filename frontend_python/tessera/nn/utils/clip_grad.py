"""Gradient clipping: get_total_norm, clip_grads_with_norm_, clip_grad_norm_ (the two in turn),
clip_grad_value_ and the deprecated clip_grad_norm."""
import math
import warnings

import tessera
from tessera.nn import _autograd

__all__ = ["clip_grad_norm", "clip_grad_norm_", "clip_grad_value_", "clip_grads_with_norm_", "get_total_norm"]


def _tensors(tensors):
    return [tensors] if isinstance(tensors, tessera.Tensor) else list(tensors)


def _grads(parameters):
    return [g for g in (getattr(p, "grad", None) for p in _tensors(parameters)) if g is not None]


def _norm(t, norm_type):
    if norm_type == math.inf:
        return tessera.amax(tessera.abs(t)) if t.numel() else tessera.zeros((), dtype=t.dtype)
    if norm_type == 2.0:
        return tessera.sqrt(tessera.sum(t * t))
    return tessera.pow(tessera.sum(tessera.pow(tessera.abs(t), norm_type)), 1.0 / norm_type)


def get_total_norm(tensors, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """The norm of the tensors' norms (one norm over all of them as if concatenated); a 0-dim
    tensor, 0.0 when there are none. Mixed dtypes promote as torch.stack does."""
    tensors = _tensors(tensors)
    norm_type = float(norm_type)
    if not tensors:
        return tessera.tensor(0.0)
    with _autograd.no_grad():
        norms = [_norm(t, norm_type) for t in tensors]
        dtype = norms[0].dtype
        for n in norms[1:]:
            dtype = tessera.promote_types(dtype, n.dtype)
        total = _norm(tessera.stack([n.to(dtype) for n in norms]), norm_type)
    if error_if_nonfinite and not math.isfinite(total.item()):
        raise RuntimeError(f"The total norm of order {norm_type} for gradients from `parameters` is non-finite, so it "
                           "cannot be clipped. To disable this error and scale the gradients by the non-finite norm "
                           "anyway, set `error_if_nonfinite=False`")
    return total


def clip_grads_with_norm_(parameters, max_norm, total_norm, foreach=None):
    """Scales the gradients in place by min(max_norm / (total_norm + 1e-6), 1)."""
    grads = _grads(parameters)
    if not grads:
        return
    with _autograd.no_grad():
        coef = tessera.clamp(float(max_norm) / (total_norm + 1e-6), max=1.0)
        for g in grads:
            g.mul_(coef.to(g.dtype))


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """Scales the gradients in place so that their joint norm is at most max_norm; returns the
    norm before clipping (a 0-dim tensor)."""
    parameters = _tensors(parameters)  # iterated twice: a generator would be spent by the first
    total = get_total_norm(_grads(parameters), norm_type, error_if_nonfinite, foreach)
    clip_grads_with_norm_(parameters, max_norm, total, foreach)
    return total


def clip_grad_norm(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    warnings.warn("`torch.nn.utils.clip_grad_norm` is now deprecated in favor of `torch.nn.utils.clip_grad_norm_`.",
                  FutureWarning, stacklevel=2)
    return clip_grad_norm_(parameters, max_norm, norm_type, error_if_nonfinite, foreach)


def clip_grad_value_(parameters, clip_value, foreach=None):
    """Clamps every gradient element to [-clip_value, clip_value] in place."""
    clip_value = float(clip_value)
    with _autograd.no_grad():
        for g in _grads(parameters):
            g.clamp_(-clip_value, clip_value)
