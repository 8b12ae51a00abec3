"""Adamax, torch's update rule: m = b1 m + (1 - b1) g; u = max(b2 u, |g| + eps);
p -= lr / (1 - b1^t) * m / u."""
import tessera
from tessera.optim.optimizer import _PerParameterOptimizer, _check_betas, _check_nonnegative


class Adamax(_PerParameterOptimizer):
    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, foreach=None, *,
                 maximize=False, differentiable=False, capturable=False):
        _check_nonnegative(lr=lr, eps=eps, weight_decay=weight_decay)
        _check_betas(betas)
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay, foreach=foreach,
                                      maximize=maximize, differentiable=differentiable, capturable=capturable))

    def _init_state(self, p, state, group):
        state["exp_avg"] = tessera.zeros_like(p)
        state["exp_inf"] = tessera.zeros_like(p)

    def _update(self, p, g, state, group, step):
        beta1, beta2 = group["betas"]
        exp_avg, exp_inf = state["exp_avg"], state["exp_inf"]
        exp_avg.mul_(beta1).add_(g, alpha=1 - beta1)
        exp_inf.copy_(tessera.maximum(exp_inf * beta2, g.abs() + group["eps"]))
        p.add_(exp_avg / exp_inf, alpha=-group["lr"] / (1 - beta1 ** step))
