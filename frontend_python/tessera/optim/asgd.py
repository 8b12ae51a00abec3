"""ASGD (averaged SGD), torch's update rule and state (step, eta, mu, ax)."""
import tessera
from tessera.optim.optimizer import _PerParameterOptimizer


class ASGD(_PerParameterOptimizer):
    """p *= 1 - lambd * eta; p -= eta * g; ax tracks the running average of p once t > t0
    (ax += mu (p - ax), a plain copy while mu is 1); then eta = lr / (1 + lambd lr t)^alpha and
    mu = 1 / max(1, t - t0). eta and mu are float32 scalars, as torch keeps them, so the
    rounding of the step size matches."""

    def __init__(self, params, lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0, foreach=None,
                 maximize=False, differentiable=False, capturable=False):
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= lambd:
            raise ValueError(f"Invalid lambd value: {lambd}")
        if not 0.0 <= alpha:
            raise ValueError(f"Invalid alpha value: {alpha}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        super().__init__(params, dict(lr=lr, lambd=lambd, alpha=alpha, t0=t0, weight_decay=weight_decay,
                                      foreach=foreach, maximize=maximize, differentiable=differentiable,
                                      capturable=capturable))

    def _init_state(self, p, state, group):
        state["eta"] = tessera.tensor(float(group["lr"]), dtype=tessera.float32)
        state["mu"] = tessera.tensor(1.0, dtype=tessera.float32)
        state["ax"] = tessera.zeros_like(p)

    def _update(self, p, g, state, group, step):
        lr, lambd = float(group["lr"]), group["lambd"]
        eta = state["eta"].item()
        p.mul_(1 - lambd * eta)
        p.add_(g, alpha=-eta)
        ax, mu = state["ax"], state["mu"].item()
        if mu != 1:
            ax.add_(p.sub(ax).mul_(mu))
        else:
            ax.copy_(p)  # before t0 the "average" is just the latest iterate
        state["eta"].fill_(lr / (1 + lambd * lr * step) ** group["alpha"])
        state["mu"].fill_(1 / max(1, step - group["t0"]))
