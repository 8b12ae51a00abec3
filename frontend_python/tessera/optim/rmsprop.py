"""RMSprop (with momentum, centered, weight decay, maximize), torch's update rule."""
import tessera
from tessera.optim.optimizer import _PerParameterOptimizer


class RMSprop(_PerParameterOptimizer):
    """v = alpha v + (1 - alpha) g^2; avg = sqrt(v - ḡ^2) (centered, ḡ the running mean of g) or
    sqrt(v), plus eps; then p -= lr * g / avg, or through a momentum buffer b = momentum b + g / avg."""

    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0, centered=False,
                 capturable=False, foreach=None, maximize=False, differentiable=False):
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= momentum:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if not 0.0 <= alpha:
            raise ValueError(f"Invalid alpha value: {alpha}")
        defaults = dict(lr=lr, momentum=momentum, alpha=alpha, eps=eps, centered=centered, weight_decay=weight_decay,
                        capturable=capturable, foreach=foreach, maximize=maximize, differentiable=differentiable)
        super().__init__(params, defaults)

    def _init_state(self, p, state, group):
        state["square_avg"] = tessera.zeros_like(p)
        if group["momentum"] > 0:
            state["momentum_buffer"] = tessera.zeros_like(p)
        if group["centered"]:
            state["grad_avg"] = tessera.zeros_like(p)

    def _update(self, p, g, state, group, step):
        lr, alpha, eps, momentum = group["lr"], group["alpha"], group["eps"], group["momentum"]
        square_avg = state["square_avg"]
        square_avg.mul_(alpha).add_(g * g, alpha=1 - alpha)
        if group["centered"]:
            grad_avg = state["grad_avg"]
            grad_avg.mul_(alpha).add_(g, alpha=1 - alpha)
            avg = square_avg.sub(grad_avg * grad_avg).sqrt_()
        else:
            avg = square_avg.sqrt()
        avg = avg.add_(eps)
        if momentum > 0:
            buf = state["momentum_buffer"]
            buf.mul_(momentum).add_(g / avg)
            p.add_(buf, alpha=-lr)
        else:
            p.add_(g / avg, alpha=-lr)
