"""Rprop (resilient backpropagation), torch's update rule and state (step, prev, step_size)."""
import tessera
from tessera.optim.optimizer import _PerParameterOptimizer


class Rprop(_PerParameterOptimizer):
    """Per element, only the sign of the gradient is used: the step size grows by etas[1] while
    the sign of g * prev stays positive, shrinks by etas[0] when it flips (clamped to step_sizes);
    p -= sign(g) * step_size. After a flip the gradient is taken as 0: no move this step, and the
    next step does not count as another flip."""

    def __init__(self, params, lr=1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50), *, capturable=False, foreach=None,
                 maximize=False, differentiable=False):
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 < etas[0] < 1.0 < etas[1]:
            raise ValueError(f"Invalid eta values: {etas[0]}, {etas[1]}")
        super().__init__(params, dict(lr=lr, etas=etas, step_sizes=step_sizes, foreach=foreach, maximize=maximize,
                                      differentiable=differentiable, capturable=capturable))

    def _init_state(self, p, state, group):
        state["prev"] = tessera.zeros_like(p)
        state["step_size"] = tessera.full_like(p, float(group["lr"]))

    def _update(self, p, g, state, group, step):
        etaminus, etaplus = group["etas"]
        size_min, size_max = group["step_sizes"]
        prev, step_size = state["prev"], state["step_size"]
        agree = g * prev
        flipped = agree < 0
        # built on a tensor of p's dtype so etas keep their precision for float64 parameters
        factor = tessera.where(agree > 0, etaplus, tessera.where(flipped, etaminus, tessera.ones_like(p)))
        step_size.mul_(factor)
        step_size.clamp_(size_min, size_max)
        g = tessera.where(flipped, 0.0, g)
        p.addcmul_(g.sign(), step_size, value=-1)
        prev.copy_(g)
