"""SyncBatchNorm: batch normalization whose batch statistics are those of the whole batch across
the ranks of a process group (torch.nn.SyncBatchNorm). With DistributedDataParallel, training on
each rank's part of a batch then equals one process on the whole batch, batch norm included.

In training, each rank's count, mean and sum of squared deviations per channel are all-gathered and
combined (Chan's parallel formula, in float64); backward all-reduces the per-channel sums of dy and
dy * (x - mean) that the input gradient needs. Weight and bias gradients stay local (DDP averages
them). Outside training, or on one rank, it is BatchNorm."""
import tessera
from tessera.autograd.function import Function
from tessera.nn.modules.normalization import _BatchNorm


def _channel_shape(x):
    return [1, x.shape[1]] + [1] * (x.ndim - 2)


def _reduce_dims(x):
    return [0] + list(range(2, x.ndim))


class _SyncBatchNormFunction(Function):
    @staticmethod
    def forward(ctx, input, weight, bias, running_mean, running_var, eps, momentum, process_group):
        import tessera.distributed as dist
        dims = _reduce_dims(input)
        channels = input.shape[1]
        count = input.numel() // channels
        x64 = input.double()
        mean = x64.mean(dims) if count else tessera.zeros(channels, dtype=tessera.float64)
        m2 = ((x64 - mean.reshape(_channel_shape(input))) ** 2).sum(dims) if count else tessera.zeros_like(mean)
        mine = tessera.cat([tessera.tensor([float(count)], dtype=tessera.float64), mean, m2])
        everyone = tessera.empty(process_group.size() * mine.numel(), dtype=tessera.float64)
        dist.all_gather_into_tensor(everyone, mine, group=process_group)
        stats = everyone.view(process_group.size(), mine.numel())
        counts, means, m2s = stats[:, :1], stats[:, 1:1 + channels], stats[:, 1 + channels:]
        total = float(counts.sum())
        if total <= 1:
            raise ValueError(f"SyncBatchNorm: expected more than 1 value per channel across the group when "
                             f"training, got input size {tuple(input.shape)} and {int(total)} values in all")
        global_mean = (counts * means).sum(0) / total
        global_m2 = (m2s + counts * (means - global_mean) ** 2).sum(0)
        var = global_m2 / total
        if running_mean is not None:
            running_mean.mul_(1 - momentum).add_((global_mean * momentum).to(running_mean.dtype))
        if running_var is not None:
            unbiased = var * (total / (total - 1))
            running_var.mul_(1 - momentum).add_((unbiased * momentum).to(running_var.dtype))
        shape = _channel_shape(input)
        mean_b = global_mean.to(input.dtype).reshape(shape)
        invstd = (1.0 / (var + eps).sqrt()).to(input.dtype)
        out = (input - mean_b) * invstd.reshape(shape)
        if weight is not None:
            out = out * weight.reshape(shape) + bias.reshape(shape)
        ctx.save_for_backward(input, weight, mean_b, invstd)
        ctx.total = total
        ctx.process_group = process_group
        return out

    @staticmethod
    def backward(ctx, grad_output):
        import tessera.distributed as dist
        input, weight, mean_b, invstd = ctx.saved_tensors
        shape, dims = _channel_shape(input), _reduce_dims(input)
        xmu = input - mean_b
        sum_dy = grad_output.sum(dims)
        sum_dy_xmu = (grad_output * xmu).sum(dims)
        grad_weight = sum_dy_xmu * invstd if weight is not None else None
        grad_bias = sum_dy.clone() if weight is not None else None
        both = tessera.cat([sum_dy, sum_dy_xmu])
        dist.all_reduce(both, group=ctx.process_group)
        channels = input.shape[1]
        mean_dy = (both[:channels] / ctx.total).reshape(shape)
        mean_dy_xmu = (both[channels:] / ctx.total).reshape(shape)
        scale = invstd if weight is None else invstd * weight
        grad_input = (grad_output - mean_dy - xmu * (invstd * invstd).reshape(shape) * mean_dy_xmu) * scale.reshape(shape)
        return grad_input, grad_weight, grad_bias, None, None, None, None, None


class SyncBatchNorm(_BatchNorm):
    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True,
                 process_group=None, device=None, dtype=None):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype)
        self.process_group = process_group

    def _check_input_dim(self, input):
        if input.ndim < 2:
            raise ValueError(f"expected at least 2D input (got {input.ndim}D input)")

    def forward(self, input):
        import tessera.distributed as dist
        group = self.process_group
        syncing = self.training and dist.is_available() and dist.is_initialized()
        if syncing:
            from tessera.distributed._c10d import _resolve
            group = _resolve(group, "SyncBatchNorm")
            syncing = group is not None and group.size() > 1
        if not syncing:
            return super().forward(input)
        self._check_input_dim(input)
        if input.shape[1] != self.num_features:
            raise ValueError(f"SyncBatchNorm: expected {self.num_features} channels (dim 1), got input of shape "
                             f"{tuple(input.shape)}")
        factor = 0.0 if self.momentum is None else self.momentum
        if self.track_running_stats and self.num_batches_tracked is not None:
            self.num_batches_tracked.add_(1)
            factor = 1.0 / float(self.num_batches_tracked.item()) if self.momentum is None else self.momentum
        running_mean = self.running_mean if self.track_running_stats else None
        running_var = self.running_var if self.track_running_stats else None
        return _SyncBatchNormFunction.apply(input, self.weight, self.bias, running_mean, running_var, self.eps, factor,
                                            group)

    @classmethod
    def convert_sync_batchnorm(cls, module, process_group=None):
        """Every BatchNorm*d in `module` replaced by a SyncBatchNorm sharing its parameters and
        buffers (the module itself when it is one)."""
        converted = module
        if isinstance(module, _BatchNorm) and not isinstance(module, SyncBatchNorm):
            converted = cls(module.num_features, module.eps, module.momentum, module.affine, module.track_running_stats,
                            process_group)
            if module.affine:
                with tessera.no_grad():
                    converted.weight = module.weight
                    converted.bias = module.bias
            converted.running_mean = module.running_mean
            converted.running_var = module.running_var
            converted.num_batches_tracked = module.num_batches_tracked
            converted.training = module.training
        for name, child in module.named_children():
            new_child = cls.convert_sync_batchnorm(child, process_group)
            if new_child is not child:
                setattr(converted, name, new_child)
        return converted
