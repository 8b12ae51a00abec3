"""NAdam, torch's update rule: Adam with Nesterov momentum whose coefficient follows
mu_t = b1 (1 - 0.5 * 0.96^(t * momentum_decay)); decoupled_weight_decay as AdamW."""
import math

import tessera
from tessera.optim.optimizer import _PerParameterOptimizer, _check_betas, _check_nonnegative


class NAdam(_PerParameterOptimizer):
    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, momentum_decay=4e-3,
                 decoupled_weight_decay=False, *, foreach=None, maximize=False, capturable=False, differentiable=False):
        _check_nonnegative(lr=lr, eps=eps, weight_decay=weight_decay, momentum_decay=momentum_decay)
        _check_betas(betas)
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                                      momentum_decay=momentum_decay, decoupled_weight_decay=decoupled_weight_decay,
                                      foreach=foreach, maximize=maximize, capturable=capturable,
                                      differentiable=differentiable))

    def _init_state(self, p, state, group):
        state["mu_product"] = 1.0
        state["exp_avg"] = tessera.zeros_like(p)
        state["exp_avg_sq"] = tessera.zeros_like(p)

    def _update(self, p, g, state, group, step):
        lr, eps, wd = group["lr"], group["eps"], group["weight_decay"]
        beta1, beta2 = group["betas"]
        if wd != 0 and group["decoupled_weight_decay"]:
            p.mul_(1 - lr * wd)
        mu = beta1 * (1.0 - 0.5 * 0.96 ** (step * group["momentum_decay"]))
        mu_next = beta1 * (1.0 - 0.5 * 0.96 ** ((step + 1) * group["momentum_decay"]))
        mu_product = state["mu_product"] * mu
        state["mu_product"] = mu_product
        exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
        exp_avg.mul_(beta1).add_(g, alpha=1 - beta1)
        exp_avg_sq.mul_(beta2).add_(g * g, alpha=1 - beta2)
        denom = (exp_avg_sq / (1 - beta2 ** step)).sqrt().add_(eps)
        p.add_(g / denom, alpha=-lr * (1 - mu) / (1 - mu_product))
        p.add_(exp_avg / denom, alpha=-lr * mu_next / (1 - mu_product * mu_next))
