"""Adagrad, torch's update rule: sum += g^2; p -= lr / (1 + (t - 1) lr_decay) * g / (sqrt(sum) + eps)."""
import tessera
from tessera.optim.optimizer import _PerParameterOptimizer, _check_nonnegative


class Adagrad(_PerParameterOptimizer):
    def __init__(self, params, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0, eps=1e-10,
                 foreach=None, *, maximize=False, differentiable=False, fused=None):
        _check_nonnegative(lr=lr, lr_decay=lr_decay, weight_decay=weight_decay, eps=eps)
        if not 0.0 <= initial_accumulator_value:
            raise ValueError(f"Invalid initial_accumulator_value value: {initial_accumulator_value}")
        super().__init__(params, dict(lr=lr, lr_decay=lr_decay, eps=eps, weight_decay=weight_decay,
                                      initial_accumulator_value=initial_accumulator_value, foreach=foreach,
                                      maximize=maximize, differentiable=differentiable, fused=fused))

    def _init_state(self, p, state, group):
        state["sum"] = tessera.full_like(p, group["initial_accumulator_value"])

    def _update(self, p, g, state, group, step):
        clr = group["lr"] / (1 + (step - 1) * group["lr_decay"])
        state["sum"].add_(g * g)
        p.add_(g / (state["sum"].sqrt() + group["eps"]), alpha=-clr)
