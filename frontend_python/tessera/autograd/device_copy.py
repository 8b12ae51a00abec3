"""Moving a tensor that autograd tracks to another device records the move, as in PyTorch: the
gradient goes back to the source device (and dtype). Tensor.to(device) uses this when the tensor
requires grad and grad mode is on; the move itself is the host's copy between device plugins."""
from tessera._tensor import _move_to_device
from tessera.autograd.function import Function


class ToDevice(Function):
    @staticmethod
    def forward(ctx, x, device, dtype):
        ctx.source_device, ctx.source_dtype = x.device, x.dtype
        return _move_to_device(x, device, dtype)

    @staticmethod
    def backward(ctx, grad):
        return _move_to_device(grad, ctx.source_device, ctx.source_dtype), None, None
