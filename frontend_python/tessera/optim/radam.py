"""RAdam, torch's update rule: Adam whose adaptive term is used only once the variance of its
estimate is tractable (rho_t > 5), rectified by r_t; plain momentum SGD before that."""
import math

import tessera
from tessera.optim.optimizer import _PerParameterOptimizer, _check_betas, _check_nonnegative


class RAdam(_PerParameterOptimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, decoupled_weight_decay=False,
                 *, foreach=None, maximize=False, capturable=False, differentiable=False):
        _check_nonnegative(lr=lr, eps=eps, weight_decay=weight_decay)
        _check_betas(betas)
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                                      decoupled_weight_decay=decoupled_weight_decay, foreach=foreach,
                                      maximize=maximize, capturable=capturable, differentiable=differentiable))

    def _init_state(self, p, state, group):
        state["exp_avg"] = tessera.zeros_like(p)
        state["exp_avg_sq"] = tessera.zeros_like(p)

    def _update(self, p, g, state, group, step):
        lr, eps, wd = group["lr"], group["eps"], group["weight_decay"]
        beta1, beta2 = group["betas"]
        if wd != 0 and group["decoupled_weight_decay"]:
            p.mul_(1 - lr * wd)
        exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
        exp_avg.mul_(beta1).add_(g, alpha=1 - beta1)
        exp_avg_sq.mul_(beta2).add_(g * g, alpha=1 - beta2)
        corrected_avg = exp_avg / (1 - beta1 ** step)
        rho_inf = 2 / (1 - beta2) - 1
        rho_t = rho_inf - 2 * step * beta2 ** step / (1 - beta2 ** step)
        if rho_t > 5.0:
            rect = math.sqrt((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t))
            adaptive = math.sqrt(1 - beta2 ** step) / (exp_avg_sq.sqrt() + eps)
            p.add_(corrected_avg * adaptive, alpha=-lr * rect)
        else:
            p.add_(corrected_avg, alpha=-lr)
