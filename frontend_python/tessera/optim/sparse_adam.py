"""SparseAdam: Adam that updates only the entries a gradient touches (torch's masked rule).

tessera has no sparse tensors: nn.Embedding(sparse=True) is refused and every gradient is
dense. So where torch reads the stored entries of a sparse gradient, this reads the rows of the
dense gradient that hold a non-zero value (rows along dim 0, as Embedding's sparse gradient
stores them; single elements for a 1-D parameter). For an embedding trained with sparse=False
this gives torch's SparseAdam results for the same model with sparse=True. The one difference:
torch also updates a looked-up row whose gradient happens to be exactly zero (its moments
decay), which a dense gradient cannot tell apart from a row that was not looked up. Torch
refuses dense gradients with a RuntimeError; tessera accepts them, since they are all it has.
"""
import math

import tessera
from tessera.nn import _autograd
from tessera.optim.optimizer import Optimizer


def _touched(g):
    """Boolean mask, broadcastable to g, of the rows (entries of a 1-D g) with a non-zero value."""
    if g.ndim <= 1:
        return g != 0
    rows = (g.reshape(g.shape[0], -1) != 0).any(dim=1)
    return rows.reshape((g.shape[0],) + (1,) * (g.ndim - 1))


class SparseAdam(Optimizer):
    """On the touched entries only: m += (1 - b1)(g - m); v += (1 - b2)(g^2 - v);
    p -= lr sqrt(1 - b2^t) / (1 - b1^t) * m / (sqrt(v) + eps). Untouched entries of p, m and v are
    left as they are. t counts the steps in which p had a gradient (a plain int, as in torch)."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, maximize=False):
        if not 0.0 < lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 < eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= betas[0] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
        if not 0.0 <= betas[1] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, maximize=maximize))
        complex_params = [[i, j] for i, group in enumerate(self.param_groups)
                          for j, p in enumerate(group["params"]) if p.dtype.is_complex]
        if complex_params:
            raise ValueError(f"Complex params at indices {complex_params}: SparseAdam does not support complex "
                             "parameters")

    def step(self, closure=None):
        loss = None
        if closure is not None:
            with _autograd.enable_grad():
                loss = closure()
        with _autograd.no_grad():
            for group in self.param_groups:
                beta1, beta2 = group["betas"]
                lr, eps = float(group["lr"]), group["eps"]
                for p in group["params"]:
                    g = getattr(p, "grad", None)
                    if g is None:
                        continue
                    if group.get("maximize", False):
                        g = -g
                    state = self.state[p]
                    if len(state) == 0:
                        state["step"] = 0
                        state["exp_avg"] = tessera.zeros_like(p)
                        state["exp_avg_sq"] = tessera.zeros_like(p)
                    state["step"] += 1  # counted even when nothing is touched, as torch does
                    mask = _touched(g)
                    if not bool(mask.any()):
                        continue
                    exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
                    new_avg = exp_avg + (g - exp_avg) * (1 - beta1)
                    new_sq = exp_avg_sq + (g * g - exp_avg_sq) * (1 - beta2)
                    exp_avg.copy_(tessera.where(mask, new_avg, exp_avg))
                    exp_avg_sq.copy_(tessera.where(mask, new_sq, exp_avg_sq))
                    t = state["step"]
                    step_size = lr * math.sqrt(1 - beta2 ** t) / (1 - beta1 ** t)
                    update = new_avg / (new_sq.sqrt() + eps)
                    p.add_(tessera.where(mask, update, tessera.zeros_like(update)), alpha=-step_size)
        return loss
