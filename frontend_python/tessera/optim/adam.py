"""Adam (with AMSGrad, L2 weight decay, maximize), torch's update rule."""
import math

import tessera
from tessera import _C
from tessera.optim.optimizer import _PerParameterOptimizer

_call, _E = _C.call_op, {}
_FUSED_DTYPES = (tessera.float32, tessera.float64)


# The devices whose plugins have a _fused_adam_ kernel: the CPU's, and the GPU plugin's (CUDA and ROCm builds).
_FUSED_DEVICES = ("cpu", "cuda", "hip")


def _fusable(p, g, state, group):
    """The fused step takes contiguous float32/float64 tensors of one dtype on one device that has
    the kernel (foreach=False and differentiable=True keep the operator-by-operator step)."""
    if group.get("foreach") is False or group.get("differentiable"):
        return False
    if p.device.type not in _FUSED_DEVICES or p.dtype not in _FUSED_DTYPES or g.dtype != p.dtype:
        return False
    tensors = (p, g, state["exp_avg"], state["exp_avg_sq"]) + ((state["max_exp_avg_sq"],) if group["amsgrad"] else ())
    return all(t.is_contiguous() and t.device == p.device for t in tensors)


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


class Adam(_PerParameterOptimizer):
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

    def _init_state(self, p, state, group):
        state["exp_avg"] = tessera.zeros_like(p)
        state["exp_avg_sq"] = tessera.zeros_like(p)
        if group["amsgrad"]:
            state["max_exp_avg_sq"] = tessera.zeros_like(p)

    def _fused_update(self, p, grad, state, group, step):
        if not _fusable(p, grad, state, group):
            return False
        # One pass over the parameter's memory (the CPU plugin's _fused_adam_) instead of ~10; the
        # gradient's sign (maximize) and L2 decay are applied inside, not as passes of their own.
        beta1, beta2 = group["betas"]
        _call("_fused_adam_", (p, state["exp_avg"], state["exp_avg_sq"], grad, state.get("max_exp_avg_sq"),
                               group["lr"], beta1, beta2, group["eps"], group["weight_decay"], 1 - beta1 ** step,
                               math.sqrt(1 - beta2 ** step), group.get("maximize", False),
                               group.get("decoupled_weight_decay", False)), _E)
        return True

    def _update(self, p, g, state, group, step):
        beta1, beta2 = group["betas"]
        lr, eps, wd = group["lr"], group["eps"], group["weight_decay"]
        if wd != 0 and group.get("decoupled_weight_decay", False):
            p.mul_(1 - lr * wd)  # AdamW; L2 decay (coupled) was added to g by the base class
        exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
        exp_avg.mul_(beta1).add_(g, alpha=1 - beta1)
        exp_avg_sq.mul_(beta2).add_(g * g, alpha=1 - beta2)
        step_size = lr / (1 - beta1 ** step)
        bc2_sqrt = math.sqrt(1 - beta2 ** step)
        if group["amsgrad"]:
            max_sq = state["max_exp_avg_sq"]
            max_sq.copy_(tessera.maximum(max_sq, exp_avg_sq))
            denom = (max_sq.sqrt() / bc2_sqrt).add_(eps)
        else:
            denom = (exp_avg_sq.sqrt() / bc2_sqrt).add_(eps)
        p.add_(exp_avg / denom, alpha=-step_size)
