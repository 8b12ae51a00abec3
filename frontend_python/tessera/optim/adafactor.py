"""Adafactor (Shazeer & Stern, 2018) with torch.optim.Adafactor's rule: no momentum; the second
moment of a >= 2-D parameter is factored into row and column means of g^2 over the last two dims
(their outer product over the row means' mean estimates it), a vector's is kept whole. With
t the step, beta2_t = 1 - t^beta2_decay, rho_t = min(lr, 1 / sqrt(t)) and
alpha = max(eps2, RMS(p)) rho_t:
    p *= 1 - lr weight_decay;  v = lerp(v, g^2 means, 1 - beta2_t);
    u = g / sqrt(max(v_hat, eps1^2));  p -= alpha / max(1, RMS(u) / d) u."""
import math

import tessera
from tessera.nn import _autograd
from tessera.optim.optimizer import Optimizer, _step_tensor

__all__ = ["Adafactor"]


class Adafactor(Optimizer):
    def __init__(self, params, lr=1e-2, beta2_decay=-0.8, eps=(None, 1e-3), d=1.0, weight_decay=0.0, *,
                 foreach=None, maximize=False):
        if isinstance(lr, tessera.Tensor) and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        if not 0.0 <= lr:
            raise ValueError(f"Learning rate should be >= 0 but is: {lr}")
        if not 0.0 >= beta2_decay:
            raise ValueError(f"beta2_decay should be <= 0 but is: {beta2_decay}")
        if eps[0] is not None and not 0.0 <= eps[0]:
            raise ValueError(f"epsilon1 should be >= 0 but is: {eps[0]}")
        if not 0.0 <= eps[1]:
            raise ValueError(f"epsilon2 should be >= 0 but is: {eps[1]}")
        if not 1.0 <= d:
            raise ValueError(f"Clipping threshold d should be >= 1 but is: {d}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"weight_decay should be >= 0 but is: {weight_decay}")
        super().__init__(params, dict(lr=lr, beta2_decay=beta2_decay, eps=eps, d=d, weight_decay=weight_decay,
                                      foreach=foreach, maximize=maximize))

    def _init_state(self, p, state):
        state["step"] = tessera.tensor(0.0, dtype=tessera.float32)
        if p.grad.dim() > 1:
            # The factors keep the reduced dim as size 1, so row_var @ col_var is the full estimate.
            state["row_var"] = tessera.zeros(tuple(p.shape[:-1]) + (1,), dtype=p.dtype, device=p.device)
            state["col_var"] = tessera.zeros(tuple(p.shape[:-2]) + (1, p.shape[-1]), dtype=p.dtype, device=p.device)
        else:
            state["variance"] = tessera.zeros_like(p)

    def _update(self, p, grad, state, group):
        lr = float(group["lr"])
        eps1, eps2 = group["eps"]
        if eps1 is None:
            eps1 = tessera.finfo(p.dtype).eps
        step = _step_tensor(state)
        one_minus_beta2 = step ** group["beta2_decay"]
        rho = min(lr, 1 / math.sqrt(step))
        alpha = max(eps2, _rms(p)) * rho
        if group["weight_decay"] != 0:
            p.mul_(1 - lr * group["weight_decay"])
        if grad.dim() > 1:
            row_var, col_var = state["row_var"], state["col_var"]
            sq = grad * grad
            row_var.lerp_(sq.mean(-1, keepdim=True), one_minus_beta2)
            col_var.lerp_(sq.mean(-2, keepdim=True), one_minus_beta2)
            estimate = (row_var @ col_var) / row_var.mean(-2, keepdim=True).clamp(min=eps1)
        else:
            variance = state["variance"]
            variance.lerp_(grad * grad, one_minus_beta2)
            estimate = variance
        update = estimate.clamp(min=eps1 * eps1).rsqrt() * grad
        denom = max(1.0, _rms(update) / group["d"])
        p.add_(update, alpha=-alpha / denom)

    def step(self, closure=None):
        loss = None
        if closure is not None:
            with _autograd.enable_grad():
                loss = closure()
        with _autograd.no_grad():
            for group in self.param_groups:
                for p in group["params"]:
                    if getattr(p, "grad", None) is None:
                        continue
                    if p.dtype.is_complex:
                        raise RuntimeError("Adafactor does not support complex parameters")
                    state = self.state[p]
                    if len(state) == 0:
                        self._init_state(p, state)
                    self._update(p, -p.grad if group["maximize"] else p.grad, state, group)
        return loss


def _rms(t):
    """The root mean square of t's elements, as a float."""
    return t.norm(2).item() / math.sqrt(t.numel())
