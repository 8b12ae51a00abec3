"""Adadelta, torch's update rule: v = rho v + (1 - rho) g^2; d = sqrt(u + eps) / sqrt(v + eps) * g;
u = rho u + (1 - rho) d^2; p -= lr d."""
import tessera
from tessera.optim.optimizer import _PerParameterOptimizer, _check_nonnegative


class Adadelta(_PerParameterOptimizer):
    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, foreach=None, *, capturable=False,
                 maximize=False, differentiable=False):
        _check_nonnegative(lr=lr, eps=eps, weight_decay=weight_decay)
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f"Invalid rho value: {rho}")
        super().__init__(params, dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, foreach=foreach,
                                      capturable=capturable, maximize=maximize, differentiable=differentiable))

    def _init_state(self, p, state, group):
        state["square_avg"] = tessera.zeros_like(p)
        state["acc_delta"] = tessera.zeros_like(p)

    def _update(self, p, g, state, group, step):
        rho, eps = group["rho"], group["eps"]
        square_avg, acc_delta = state["square_avg"], state["acc_delta"]
        square_avg.mul_(rho).add_(g * g, alpha=1 - rho)
        delta = (acc_delta + eps).sqrt() / (square_avg + eps).sqrt() * g
        acc_delta.mul_(rho).add_(delta * delta, alpha=1 - rho)
        p.add_(delta, alpha=-group["lr"])
