"""The autograd step between a module's shards and the full parameters its forward uses: forward
all-gathers, backward reduce-scatters the gradients (AVG), so each shard's .grad is the average
over ranks of its rows of the full gradient. The full parameters stay alive as long as the autograd
graph holds them (no re-gather before backward)."""
from tessera.autograd.function import Function


class AllGatherShards(Function):
    @staticmethod
    def forward(ctx, layout, *shards):
        ctx.layout = layout
        ctx.set_materialize_grads(False)
        return tuple(layout.gather(shards))

    @staticmethod
    def backward(ctx, *grads):
        layout = ctx.layout
        if not layout.requires_gradient_sync:
            layout.accumulate_unsynced(grads)
            return (None,) * (len(grads) + 1)
        return (None, *layout.reduce_scatter(grads))
