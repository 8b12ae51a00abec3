"""BatchNorm1d, BatchNorm2d, BatchNorm3d, LayerNorm, GroupNorm, RMSNorm, LocalResponseNorm."""

__all__ = ["BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "GroupNorm", "LayerNorm"]
import numbers

import tessera
from tessera.nn import functional as F, init
from tessera.nn.modules.module import Module
from tessera.nn.parameter import Parameter


class _BatchNorm(Module):
    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True, device=None,
                 dtype=None):
        super().__init__()
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.track_running_stats = track_running_stats
        if affine:
            self.weight = Parameter(tessera.empty((num_features,), dtype=dtype, device=device))
            self.bias = Parameter(tessera.empty((num_features,), dtype=dtype, device=device))
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if track_running_stats:
            self.register_buffer("running_mean", tessera.zeros((num_features,), dtype=dtype, device=device))
            self.register_buffer("running_var", tessera.ones((num_features,), dtype=dtype, device=device))
            self.register_buffer("num_batches_tracked", tessera.tensor(0, dtype=tessera.int64, device=device))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)
        self.reset_parameters()

    def reset_running_stats(self):
        if self.track_running_stats:
            self.running_mean.zero_()
            self.running_var.fill_(1)
            self.num_batches_tracked.zero_()

    def reset_parameters(self):
        self.reset_running_stats()
        if self.affine:
            init.ones_(self.weight)
            init.zeros_(self.bias)

    def _check_input_dim(self, input):
        raise NotImplementedError

    def forward(self, input):
        self._check_input_dim(input)
        if input.shape[1] != self.num_features:
            raise ValueError(f"{type(self).__name__}: expected {self.num_features} channels (dim 1), got input of "
                             f"shape {tuple(input.shape)}")
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            self.num_batches_tracked.add_(1)
            factor = 1.0 / float(self.num_batches_tracked.item()) if self.momentum is None else self.momentum
        bn_training = self.training or (self.running_mean is None and self.running_var is None)
        use_running = not self.training or self.track_running_stats
        return F.batch_norm(input, self.running_mean if use_running else None,
                            self.running_var if use_running else None, self.weight, self.bias, bn_training, factor,
                            self.eps)

    def extra_repr(self):
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
                f"track_running_stats={self.track_running_stats}")


class BatchNorm1d(_BatchNorm):
    """Batch normalization over (N, C) or (N, C, L) inputs."""

    def _check_input_dim(self, input):
        if input.ndim not in (2, 3):
            raise ValueError(f"expected 2D or 3D input (got {input.ndim}D input)")


class BatchNorm2d(_BatchNorm):
    """Batch normalization over (N, C, H, W) inputs."""

    def _check_input_dim(self, input):
        if input.ndim != 4:
            raise ValueError(f"expected 4D input (got {input.ndim}D input)")


class BatchNorm3d(_BatchNorm):
    """Batch normalization over (N, C, D, H, W) inputs."""

    def _check_input_dim(self, input):
        if input.ndim != 5:
            raise ValueError(f"expected 5D input (got {input.ndim}D input)")


class LayerNorm(Module):
    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True, device=None, dtype=None):
        super().__init__()
        if isinstance(normalized_shape, numbers.Integral):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(tessera.ones(self.normalized_shape, dtype=dtype, device=device))
            if bias:
                self.bias = Parameter(tessera.zeros(self.normalized_shape, dtype=dtype, device=device))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)

    def reset_parameters(self):
        if self.elementwise_affine:
            init.ones_(self.weight)
            if self.bias is not None:
                init.zeros_(self.bias)

    def forward(self, input):
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self):  # torch's, which names bias since LayerNorm took bias=False
        return (f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}, "
                f"bias={self.bias is not None}")


class GroupNorm(Module):
    def __init__(self, num_groups, num_channels, eps=1e-5, affine=True, device=None, dtype=None):
        super().__init__()
        if num_channels % num_groups != 0:
            raise ValueError("num_channels must be divisible by num_groups")
        self.num_groups = num_groups
        self.num_channels = num_channels
        self.eps = eps
        self.affine = affine
        if affine:
            self.weight = Parameter(tessera.ones((num_channels,), dtype=dtype, device=device))
            self.bias = Parameter(tessera.zeros((num_channels,), dtype=dtype, device=device))
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)

    def reset_parameters(self):
        if self.affine:
            init.ones_(self.weight)
            init.zeros_(self.bias)

    def forward(self, input):
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}"


class RMSNorm(Module):
    """Root-mean-square normalization over the last dims (Zhang and Sennrich, 2019), with a learnable
    scale when elementwise_affine."""

    def __init__(self, normalized_shape, eps=None, elementwise_affine=True, device=None, dtype=None):
        super().__init__()
        if isinstance(normalized_shape, numbers.Integral):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(normalized_shape)
        self.eps, self.elementwise_affine = eps, elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(tessera.ones(self.normalized_shape, dtype=dtype, device=device))
        else:
            self.register_parameter("weight", None)

    def forward(self, input):
        return F.rms_norm(input, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self):
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"


__all__ += ["RMSNorm"]


class LocalResponseNorm(Module):
    """Normalizes each channel by the energy of the `size` channels around it (Krizhevsky et al., 2012):
    out_c = in_c / (k + alpha / size * sum in_j^2)^beta. Input (N, C, *) with at least 3 dims."""

    def __init__(self, size, alpha=1e-4, beta=0.75, k=1.0):
        super().__init__()
        self.size, self.alpha, self.beta, self.k = size, alpha, beta, k

    def forward(self, input):
        return F.local_response_norm(input, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self):
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"


__all__ += ["LocalResponseNorm"]


def _cross_map_windows(channels, size):
    """CrossMapLRN2d's windows as a (C, C) matrix: row c counts each channel in channel c's sum.
    They are built by torch's running sum (the first window holds channels [0, pre_pad); each next
    one adds c + pre_pad - 1 and, past c = pre_pad, drops c - pre_pad), whose first channel is
    never dropped: the matrix reproduces that."""
    pre_pad = int((size - 1) / 2 + 1)
    rows = [[0.0] * channels]
    for j in range(min(pre_pad, channels)):
        rows[0][j] += 1.0
    for c in range(1, channels):
        row = list(rows[-1])
        if c < channels - pre_pad + 1:
            row[c + pre_pad - 1] += 1.0
        if c > pre_pad:
            row[c - pre_pad] -= 1.0
        rows.append(row)
    return rows


def _channel_mix(x, matrix):
    """out[:, c] = sum_j matrix[c][j] x[:, j] for an (N, C, H, W) x."""
    m = tessera.tensor(matrix, dtype=x.dtype, device=x.device)
    return (x.permute(0, 2, 3, 1) @ m.t()).permute(0, 3, 1, 2)


_CROSS_MAP_FUNCTION = []


def _cross_map_lrn2d_function():
    """The autograd Function of CrossMapLRN2d (made on first use: tessera.autograd may load after
    this module). Its backward is torch's hand-written one, which differentiates a centred window
    of `size` channels rather than the forward's windows."""
    if not _CROSS_MAP_FUNCTION:
        from tessera.autograd import Function

        class CrossMapLRN2dFunction(Function):
            @staticmethod
            def forward(ctx, input, size, alpha, beta, k):
                ctx.size, ctx.alpha, ctx.beta = size, alpha, beta
                scale = _channel_mix(input * input, _cross_map_windows(input.shape[1], size))
                scale = scale * (alpha / size) + k
                output = scale.pow(-beta) * input
                ctx.scale = scale
                ctx.save_for_backward(input, output)
                return output

            @staticmethod
            def backward(ctx, grad_output):
                input, output = ctx.saved_tensors
                size, channels = ctx.size, input.shape[1]
                inverse_pre_pad = int(size - (size - 1) / 2)
                # accum_c: the sum of grad * output / scale over the channels
                # [c - inverse_pre_pad, c + size - 1 - inverse_pre_pad]
                band = [[1.0 if c - inverse_pre_pad <= i <= c + size - 1 - inverse_pre_pad else 0.0
                         for i in range(channels)] for c in range(channels)]
                accum = _channel_mix(grad_output * output / ctx.scale, band)
                grad_input = ctx.scale.pow(-ctx.beta) * grad_output - (2 * ctx.alpha * ctx.beta / size) * input * accum
                return grad_input, None, None, None, None

        _CROSS_MAP_FUNCTION.append(CrossMapLRN2dFunction)
    return _CROSS_MAP_FUNCTION[0]


class CrossMapLRN2d(Module):
    """Local response normalization across channels of an (N, C, H, W) input, as torch's
    CrossMapLRN2d (the Lua Torch layer): out = in * (k + alpha / size * window sum of in^2)^-beta.
    Its windows and hand-written gradient are torch's, which differ from LocalResponseNorm's."""

    def __init__(self, size, alpha=1e-4, beta=0.75, k=1):
        super().__init__()
        self.size, self.alpha, self.beta, self.k = size, alpha, beta, k

    def forward(self, input):
        if input.dim() != 4:
            raise ValueError(f"CrossMapLRN2d: Expected input to be 4D, got {input.dim()}D instead.")
        return _cross_map_lrn2d_function().apply(input, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self):
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"


__all__ += ["CrossMapLRN2d"]
