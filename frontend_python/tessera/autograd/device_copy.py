"""Moving a tensor that autograd tracks to another device records the move, as in PyTorch: the
gradient goes back to the source device (and dtype). Tensor.to(device) uses this when the tensor
requires grad and grad mode is on; the move itself is the host's copy between device plugins."""
from tessera.autograd.function import Function


class ToDevice(Function):
    @staticmethod
    def forward(ctx, x, move, device, dtype):
        ctx.move, ctx.source_device, ctx.source_dtype = move, x.device, x.dtype
        return move(x, device, dtype)

    @staticmethod
    def backward(ctx, grad):
        return ctx.move(grad, ctx.source_device, ctx.source_dtype), None, None, None
