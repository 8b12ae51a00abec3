"""torch.utils.checkpoint: activation checkpointing. The checkpointed function runs without
recording a graph (its activations are not kept); the backward pass runs it again, with the
random generator's state as it was (dropout draws the same masks), and backpropagates through
that recomputation. Parameters the function uses get their gradients from it as usual."""
import warnings

import tessera
from tessera.autograd import Function

__all__ = ["checkpoint", "checkpoint_sequential"]


def _detached_like(args):
    """The tensor arguments detached, requiring grad where the originals did (the recomputation's
    leaves); other arguments as they are."""
    out = []
    for a in args:
        if isinstance(a, tessera.Tensor):
            d = a.detach()
            d.requires_grad_(a.requires_grad)
            out.append(d)
        else:
            out.append(a)
    return out


class _CheckpointFunction(Function):
    @staticmethod
    def forward(ctx, run_function, preserve_rng_state, kwargs, *args):
        ctx.run_function, ctx.kwargs, ctx.preserve_rng_state = run_function, kwargs, preserve_rng_state
        ctx.rng_state = tessera.get_rng_state() if preserve_rng_state else None
        ctx.tensor_positions = [i for i, a in enumerate(args) if isinstance(a, tessera.Tensor)]
        ctx.others = [None if isinstance(a, tessera.Tensor) else a for a in args]
        ctx.save_for_backward(*[args[i] for i in ctx.tensor_positions])
        with tessera.no_grad():
            return run_function(*args, **kwargs)

    @staticmethod
    def backward(ctx, *grads):
        args = list(ctx.others)
        for i, t in zip(ctx.tensor_positions, ctx.saved_tensors):
            args[i] = t
        inputs = _detached_like(args)
        saved_rng = tessera.get_rng_state() if ctx.preserve_rng_state else None
        try:
            if ctx.preserve_rng_state:
                tessera.set_rng_state(ctx.rng_state)
            with tessera.enable_grad():
                outputs = ctx.run_function(*inputs, **ctx.kwargs)
        finally:
            if saved_rng is not None:
                tessera.set_rng_state(saved_rng)
        if isinstance(outputs, tessera.Tensor):
            outputs = (outputs,)
        pairs = [(o, g) for o, g in zip(outputs, grads)
                 if isinstance(o, tessera.Tensor) and o.requires_grad and g is not None]
        if not pairs:
            raise RuntimeError("checkpoint: none of the checkpointed function's outputs requires grad, so there is "
                               "nothing to backpropagate (does any input or parameter it uses require grad?)")
        tessera.autograd.backward([o for o, _ in pairs], [g for _, g in pairs])
        input_grads = tuple(a.grad if isinstance(a, tessera.Tensor) and a.requires_grad else None for a in inputs)
        return (None, None, None) + input_grads


def checkpoint(function, *args, use_reentrant=None, context_fn=None, determinism_check="default", debug=False,
               preserve_rng_state=True, **kwargs):
    """function(*args, **kwargs) without keeping its activations: they are recomputed in backward.
    Tensors in args are checkpoint inputs; keyword arguments are passed through."""
    if use_reentrant is None:
        warnings.warn("torch.utils.checkpoint: the use_reentrant parameter should be passed explicitly; both "
                      "values run the same recomputation here", stacklevel=2)
    if context_fn is not None:
        raise ValueError("checkpoint: context_fn is not supported")
    if not tessera.is_grad_enabled():
        return function(*args, **kwargs)
    return _CheckpointFunction.apply(function, preserve_rng_state, kwargs, *args)


def checkpoint_sequential(functions, segments, input, use_reentrant=None, **kwargs):
    """Runs `functions` (a Sequential or a list of modules) in `segments` checkpointed pieces; the last
    piece is not checkpointed (its activations are needed at once), as torch does."""
    if isinstance(functions, tessera.nn.Sequential):
        functions = list(functions.children())
    functions = list(functions)
    if segments <= 0:
        raise ValueError(f"checkpoint_sequential: expected segments > 0, got {segments}")
    size = len(functions) // segments
    end = -1

    def run(start, stop):
        def forward(x):
            for f in functions[start:stop + 1]:
                x = f(x)
            return x
        return forward

    for start in range(0, size * (segments - 1), size):
        end = start + size - 1
        input = checkpoint(run(start, end), input, use_reentrant=True if use_reentrant is None else use_reentrant,
                           **kwargs)
    return run(end + 1, len(functions) - 1)(input)
