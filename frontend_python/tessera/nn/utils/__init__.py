"""tessera.nn.utils: gradient clipping, parameter/vector conversion, parametrizations
(parametrize, parametrizations) and the old weight_norm / spectral_norm hooks."""
import math

import tessera
from tessera.nn import _autograd


def _grads(parameters):
    if isinstance(parameters, tessera.Tensor):
        parameters = [parameters]
    return [g for g in (getattr(p, "grad", None) for p in parameters) if g is not None]


def _norm(t, norm_type):
    if norm_type == math.inf:
        return tessera.amax(tessera.abs(t)) if t.numel() else tessera.zeros((), dtype=t.dtype)
    if norm_type == 2.0:
        return tessera.sqrt(tessera.sum(t * t))
    return tessera.pow(tessera.sum(tessera.pow(tessera.abs(t), norm_type)), 1.0 / norm_type)


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """Scales the gradients in place so that their joint norm is at most max_norm; returns the
    norm before clipping (a 0-dim tensor)."""
    grads = _grads(parameters)
    norm_type = float(norm_type)
    if not grads:
        return tessera.tensor(0.0)
    with _autograd.no_grad():
        norms = tessera.stack([_norm(g, norm_type).to(tessera.float64) for g in grads])
        total = _norm(norms, norm_type)
        if error_if_nonfinite and not math.isfinite(total.item()):
            raise RuntimeError(f"The total norm of order {norm_type} for gradients from `parameters` is non-finite, so "
                               "it cannot be clipped. To disable this error and scale the gradients by the "
                               "non-finite norm anyway, set `error_if_nonfinite=False`")
        coef = min(float(max_norm) / (total.item() + 1e-6), 1.0)
        for g in grads:
            g.mul_(coef)
    return total.to(grads[0].dtype)


def clip_grad_value_(parameters, clip_value, foreach=None):
    """Clamps every gradient element to [-clip_value, clip_value] in place."""
    clip_value = float(clip_value)
    with _autograd.no_grad():
        for g in _grads(parameters):
            g.clamp_(-clip_value, clip_value)


def parameters_to_vector(parameters):
    return tessera.cat([p.reshape(-1) for p in parameters])


def vector_to_parameters(vec, parameters):
    offset = 0
    with _autograd.no_grad():
        for p in parameters:
            n = p.numel()
            p.copy_(vec[offset:offset + n].reshape(tuple(p.shape)))
            offset += n


from tessera.nn.utils import rnn  # noqa: E402,F401  (torch.nn.utils.rnn)
from tessera.nn.utils import parametrizations, parametrize  # noqa: E402,F401
# As in torch, the functions shadow their submodules' names (torch.nn.utils.weight_norm is the function).
from tessera.nn.utils.spectral_norm import remove_spectral_norm, spectral_norm  # noqa: E402,F401
from tessera.nn.utils.weight_norm import remove_weight_norm, weight_norm  # noqa: E402,F401
