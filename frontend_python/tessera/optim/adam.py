"""Adam (with AMSGrad, L2 weight decay, maximize), torch's update rule."""
import math

import tessera
from tessera.nn import _autograd
from tessera.optim.optimizer import Optimizer, _grad, _step_tensor


def _check_hparams(lr, betas, eps, weight_decay):
    if not 0.0 <= lr:
        raise ValueError(f"Invalid learning rate: {lr}")
    if not 0.0 <= eps:
        raise ValueError(f"Invalid epsilon value: {eps}")
    if not 0.0 <= betas[0] < 1.0:
        raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
    if not 0.0 <= betas[1] < 1.0:
        raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
    if not 0.0 <= weight_decay:
        raise ValueError(f"Invalid weight_decay value: {weight_decay}")


class Adam(Optimizer):
    """m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2; p -= lr / (1 - b1^t) * m / (sqrt(v̂) / sqrt(1 - b2^t) + eps),
    v̂ = v, or its running max with amsgrad. weight_decay adds wd * p to g (L2), or, with
    decoupled_weight_decay (AdamW), scales p by 1 - lr * wd first."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, amsgrad=False, *,
                 foreach=None, maximize=False, capturable=False, differentiable=False, fused=None,
                 decoupled_weight_decay=False):
        _check_hparams(lr, betas, eps, weight_decay)
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                        maximize=maximize, foreach=foreach, capturable=capturable, differentiable=differentiable,
                        fused=fused, decoupled_weight_decay=decoupled_weight_decay)
        super().__init__(params, defaults)

    def step(self, closure=None):
        loss = None
        if closure is not None:
            with _autograd.enable_grad():
                loss = closure()
        with _autograd.no_grad():
            for group in self.param_groups:
                beta1, beta2 = group["betas"]
                lr, eps, wd = group["lr"], group["eps"], group["weight_decay"]
                amsgrad, maximize = group["amsgrad"], group["maximize"]
                decoupled = group.get("decoupled_weight_decay", False)
                for p in group["params"]:
                    g = _grad(p, maximize)
                    if g is None:
                        continue
                    state = self.state[p]
                    if len(state) == 0:
                        state["step"] = tessera.tensor(0.0, dtype=tessera.float32)
                        state["exp_avg"] = tessera.zeros_like(p)
                        state["exp_avg_sq"] = tessera.zeros_like(p)
                        if amsgrad:
                            state["max_exp_avg_sq"] = tessera.zeros_like(p)
                    step = _step_tensor(state)
                    if wd != 0:
                        if decoupled:
                            p.mul_(1 - lr * wd)
                        else:
                            g = g.add(p, alpha=wd)
                    exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
                    exp_avg.mul_(beta1).add_(g, alpha=1 - beta1)
                    exp_avg_sq.mul_(beta2).add_(g * g, alpha=1 - beta2)
                    bias_correction1 = 1 - beta1 ** step
                    bias_correction2 = 1 - beta2 ** step
                    step_size = lr / bias_correction1
                    bc2_sqrt = math.sqrt(bias_correction2)
                    if amsgrad:
                        max_sq = state["max_exp_avg_sq"]
                        max_sq.copy_(tessera.maximum(max_sq, exp_avg_sq))
                        denom = (max_sq.sqrt() / bc2_sqrt).add_(eps)
                    else:
                        denom = (exp_avg_sq.sqrt() / bc2_sqrt).add_(eps)
                    p.add_(exp_avg / denom, alpha=-step_size)
        return loss
