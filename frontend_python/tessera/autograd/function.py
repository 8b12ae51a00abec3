"""Custom differentiable functions, as torch.autograd.Function:

    class Exp(Function):
        @staticmethod
        def forward(ctx, x):
            y = x.exp()
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, grad):
            (y,) = ctx.saved_tensors
            return grad * y

    y = Exp.apply(x)

forward runs without recording; backward is registered with the host as a callback that the
autograd plugin's node calls during backward.
"""
import sys

from tessera import _C
from tessera._factories import zeros
from tessera.autograd import _plugin
from tessera.autograd.grad_mode import is_grad_enabled, no_grad

Tensor = _C.Tensor


class FunctionCtx:
    def __init__(self):
        self.saved_tensors = ()
        self.needs_input_grad = ()
        self.materialize_grads = True

    def save_for_backward(self, *tensors):
        self.saved_tensors = tensors

    def mark_non_differentiable(self, *tensors):
        self.non_differentiable = tensors

    def set_materialize_grads(self, value):
        self.materialize_grads = bool(value)


class Function:
    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError("a Function subclass must define forward(ctx, ...)")

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError("a Function subclass must define backward(ctx, *grad_outputs)")

    @classmethod
    def apply(cls, *args, **kwargs):
        ctx = FunctionCtx()
        ctx.needs_input_grad = tuple(isinstance(a, Tensor) and a.requires_grad for a in args)
        with no_grad():
            out = cls.forward(ctx, *args, **kwargs)
        if not (any(ctx.needs_input_grad) and is_grad_enabled()):
            return out
        outs = out if isinstance(out, tuple) else (out,)
        tensor_positions = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        inputs = [args[i] for i in tensor_positions]
        # An input returned as is gets a fresh view, so the input keeps its own history.
        outs = tuple(o.view_as(o) if isinstance(o, Tensor) and any(o is a for a in inputs) else o for o in outs)
        all_out_tensors = [o for o in outs if isinstance(o, Tensor)]
        # Outputs marked non-differentiable (and integer ones) get no history; backward still
        # receives a gradient (zeros, or None without materialize_grads) in their place.
        marked = getattr(ctx, "non_differentiable", ())
        differentiable = [not any(o is m for m in marked) and (o.is_floating_point() or o.is_complex())
                          for o in all_out_tensors]
        out_tensors = [o for o, d in zip(all_out_tensors, differentiable) if d]
        # Saved outputs are held without history (the node would otherwise keep itself alive).
        ctx.saved_tensors = tuple(s.detach() if any(s is o for o in all_out_tensors) else s for s in ctx.saved_tensors)

        # The closure must not hold the outputs: they hold the node, which holds this callback.
        out_specs = [(o.shape, o.dtype, o.device) for o in all_out_tensors]

        def backward(attached_grads):
            it = iter(attached_grads)
            grads = [next(it) if d else None for d in differentiable]
            if ctx.materialize_grads:
                grads = [g if g is not None else zeros(shape, dtype=dtype, device=device)
                         for g, (shape, dtype, device) in zip(grads, out_specs)]
            result = cls.backward(ctx, *grads)
            if not isinstance(result, tuple):
                result = (result,)
            if len(result) < len(args):
                raise RuntimeError(f"{cls.__name__}.backward returned {len(result)} gradients, expected {len(args)}"
                                   " (one per argument of forward)")
            return [result[i] for i in tensor_positions]

        # Under ts.compile's capture, a custom backward cannot be recorded as primitives: the
        # capture breaks there (the function runs eagerly), rather than differentiating the forward.
        capture = sys.modules.get("tessera.compiler._capture")
        if capture is not None and capture.is_compiling():
            capture.note_break(f"a custom autograd.Function ({cls.__name__}) with a backward of its own")
        callback = _C.register_callback(backward)
        _plugin.call("attach_function", (inputs, out_tensors, callback, cls.__name__ + "Backward"))
        return outs if isinstance(out, tuple) else outs[0]
