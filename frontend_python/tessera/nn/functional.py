"""tessera.nn.functional: PyTorch's functional NN API over Tessera's operators.

Each function validates its arguments the way torch does and calls one operator of core/ops.yaml
(convolution, native_batch_norm, nll_loss_forward, ...), whose autograd formula lives with the
operator. Composites (linear, cross_entropy with label smoothing or probability targets,
scaled_dot_product_attention) are written only from differentiable operators, so autograd
covers them too.
"""
import builtins
import math
import warnings

from tessera import _C

_call = _C.call_op
_E = {}
_Tensor = _C.Tensor
_DT = _C.dtypes
_BOOL = _DT["bool"]
_INT64 = _DT["int64"]
_FLOAT32 = _DT["float32"]
_FLASH_DTYPES = (_FLOAT32, _DT["bfloat16"], _DT["float16"])  # the dtypes of the fused attention kernels


_REDUCTIONS = {"none": 0, "mean": 1, "sum": 2}


def _op(name, *args, **kwargs):
    return _call(name, args, kwargs)


def _reduction_enum(reduction, fname):
    try:
        return _REDUCTIONS[reduction]
    except (KeyError, TypeError):
        raise ValueError(f"{fname}: {reduction!r} is not a valid value for reduction (expected 'none', 'mean' or "
                         "'sum')") from None


def _legacy_reduction(size_average, reduce, reduction):
    """The reduction string implied by the deprecated size_average / reduce arguments."""
    if size_average is None and reduce is None:
        return reduction
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    if not reduce:
        return "none"
    return "mean" if size_average else "sum"


def _ntuple(value, n, name, fname):
    if isinstance(value, builtins.int):
        return [value] * n
    try:
        out = [builtins.int(v) for v in value]
    except TypeError:
        raise TypeError(f"{fname}: {name} must be an int or a sequence of {n} ints, got "
                        f"{type(value).__name__}") from None
    if len(out) == 1:
        return out * n
    if len(out) != n:
        raise ValueError(f"{fname}: expected {name} to have {n} elements, got {len(out)}")
    return out


def _check_tensor(x, name, fname):
    if not isinstance(x, _Tensor):
        raise TypeError(f"{fname}: argument '{name}' must be a Tensor, not {type(x).__name__}")


def _apply_reduction(loss, reduction):
    if reduction == "mean":
        return _op("mean", loss)
    if reduction == "sum":
        return _op("sum", loss)
    return loss


# ---------------------------------------------------------------------------- linear and convolution
def linear(input, weight, bias=None):
    """y = input @ weight.T + bias; input (*, in_features), weight (out_features, in_features)."""
    _check_tensor(input, "input", "linear")
    _check_tensor(weight, "weight", "linear")
    if weight.ndim not in (1, 2):
        raise ValueError(f"linear: expected weight to be 1-D or 2-D, got {weight.ndim}-D")
    in_features = weight.shape[-1]
    if input.ndim == 0 or input.shape[-1] != in_features:
        raise ValueError(f"linear: input's last dimension must be in_features={in_features}, got input of shape "
                         f"{tuple(input.shape)}")
    wt = _op("transpose", weight, 0, 1) if weight.ndim == 2 else weight
    out = _op("matmul", input, wt)
    if bias is not None:
        if bias.dtype != out.dtype and _autocast_on(out):
            bias = _op("to", bias, out.dtype)  # linear is one autocast operator in torch: its bias is cast too
        out = _op("add", out, bias)
    return out


def _autocast_on(t):
    from tessera.amp import autocast_mode
    return autocast_mode.is_autocast_enabled(t.device.type)


def bilinear(input1, input2, weight, bias=None):
    """y[..., o] = sum_ij x1[..., i] W[o, i, j] x2[..., j] + b[o]."""
    t = _op("matmul", _op("unsqueeze", _op("unsqueeze", input1, -2), -3), weight)  # (..., O, 1, J)
    out = _op("squeeze", _op("matmul", t, _op("unsqueeze", _op("unsqueeze", input2, -2), -1)), -1)
    out = _op("squeeze", out, -1)
    return out if bias is None else _op("add", out, bias)


def _pad_right(input, dim, amount):
    """input with `amount` zeros appended along dim (for padding='same' with an even kernel)."""
    shape = list(input.shape)
    shape[dim] = amount
    z = _op("zeros", shape, dtype=input.dtype, device=input.device)
    return _op("cat", [input, z], dim)


def _conv(input, weight, bias, stride, padding, dilation, groups, n, fname):
    _check_tensor(input, "input", fname)
    _check_tensor(weight, "weight", fname)
    if input.ndim not in (n + 1, n + 2):
        raise ValueError(f"{fname}: expected a {n + 1}-D (unbatched) or {n + 2}-D (batched) input, got "
                         f"{input.ndim}-D input of shape {tuple(input.shape)}")
    if weight.ndim != n + 2:
        raise ValueError(f"{fname}: expected a {n + 2}-D weight, got {weight.ndim}-D weight of shape "
                         f"{tuple(weight.shape)}")
    stride = _ntuple(stride, n, "stride", fname)
    dilation = _ntuple(dilation, n, "dilation", fname)
    if isinstance(padding, str):
        if padding == "valid":
            padding = [0] * n
        elif padding == "same":
            if builtins.any(s != 1 for s in stride):
                raise ValueError(f"{fname}: padding='same' is not supported for strided convolutions")
            total = [d * (k - 1) for d, k in zip(dilation, weight.shape[2:])]
            for i, t in enumerate(total):
                if t % 2:  # torch pads the odd extra element on the right
                    input = _pad_right(input, input.ndim - n + i, 1)
            padding = [t // 2 for t in total]
        else:
            raise ValueError(f"{fname}: invalid padding string {padding!r}, should be one of {{'valid', 'same'}}")
    else:
        padding = _ntuple(padding, n, "padding", fname)
    return _op("convolution", input, weight, bias, stride, padding, dilation, groups)


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """1-D convolution over (N, C_in, L) or (C_in, L); weight (C_out, C_in / groups, k)."""
    return _conv(input, weight, bias, stride, padding, dilation, groups, 1, "conv1d")


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """2-D convolution over (N, C_in, H, W) or (C_in, H, W); weight (C_out, C_in / groups, kH, kW)."""
    return _conv(input, weight, bias, stride, padding, dilation, groups, 2, "conv2d")


def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """3-D convolution over (N, C_in, D, H, W) or (C_in, D, H, W); weight (C_out, C_in / groups, kD, kH, kW)."""
    return _conv(input, weight, bias, stride, padding, dilation, groups, 3, "conv3d")


def _conv_transpose(input, weight, bias, stride, padding, output_padding, groups, dilation, n, fname):
    """The adjoint of a convolution: weight (C_in, C_out / groups, k...), output size
    (in - 1) * stride - 2 * padding + dilation * (k - 1) + output_padding + 1 per spatial dim."""
    _check_tensor(input, "input", fname)
    _check_tensor(weight, "weight", fname)
    if input.ndim not in (n + 1, n + 2):
        raise ValueError(f"{fname}: expected a {n + 1}-D (unbatched) or {n + 2}-D (batched) input, got "
                         f"{input.ndim}-D input of shape {tuple(input.shape)}")
    if weight.ndim != n + 2:
        raise ValueError(f"{fname}: expected a {n + 2}-D weight, got {weight.ndim}-D weight of shape "
                         f"{tuple(weight.shape)}")
    if isinstance(padding, str):
        raise ValueError(f"{fname}: padding must be an int or a tuple of ints for transposed convolutions, got "
                         f"{padding!r}")
    stride = _ntuple(stride, n, "stride", fname)
    padding = _ntuple(padding, n, "padding", fname)
    dilation = _ntuple(dilation, n, "dilation", fname)
    output_padding = _ntuple(output_padding, n, "output_padding", fname)
    for op_, s, d in zip(output_padding, stride, dilation):
        if op_ >= s and op_ >= d:
            raise RuntimeError(f"{fname}: output padding must be smaller than either stride or dilation, but got "
                               f"output_padding={tuple(output_padding)}, stride={tuple(stride)}, "
                               f"dilation={tuple(dilation)}")
    channel = input.ndim - n - 1
    if input.shape[channel] != weight.shape[0]:
        raise RuntimeError(f"{fname}: given transposed weight of shape {tuple(weight.shape)}, expected input of shape "
                           f"{tuple(input.shape)} to have {weight.shape[0]} channels, but got "
                           f"{input.shape[channel]} channels instead")
    spatial = [(i - 1) * s - 2 * p + d * (k - 1) + o + 1 for i, s, p, d, k, o in
               zip(input.shape[channel + 1:], stride, padding, dilation, weight.shape[2:], output_padding)]
    if builtins.any(x <= 0 for x in spatial):
        raise RuntimeError(f"{fname}: the output size {tuple(spatial)} is too small (input of shape "
                           f"{tuple(input.shape)}, weight {tuple(weight.shape)}, stride {tuple(stride)}, padding "
                           f"{tuple(padding)})")
    size = list(input.shape[:channel]) + [weight.shape[1] * groups] + spatial
    out = _op("convolution_backward_input", input, weight, size, stride, padding, dilation, groups)
    if bias is not None:
        out = out + bias.reshape([-1] + [1] * n)
    return out


def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """Transposed 1-D convolution over (N, C_in, L) or (C_in, L); weight (C_in, C_out / groups, k)."""
    return _conv_transpose(input, weight, bias, stride, padding, output_padding, groups, dilation, 1,
                           "conv_transpose1d")


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """Transposed 2-D convolution over (N, C_in, H, W) or (C_in, H, W); weight (C_in, C_out / groups, kH, kW)."""
    return _conv_transpose(input, weight, bias, stride, padding, output_padding, groups, dilation, 2,
                           "conv_transpose2d")


def conv_transpose3d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """Transposed 3-D convolution over (N, C_in, D, H, W) or (C_in, D, H, W); weight
    (C_in, C_out / groups, kD, kH, kW)."""
    return _conv_transpose(input, weight, bias, stride, padding, output_padding, groups, dilation, 3,
                           "conv_transpose3d")


# ---------------------------------------------------------------------------- pooling
def _check_pool_input(input, fname):
    _check_tensor(input, "input", fname)
    if input.ndim not in (3, 4):
        raise ValueError(f"{fname}: expected a 3-D (C, H, W) or 4-D (N, C, H, W) input, got {input.ndim}-D input "
                         f"of shape {tuple(input.shape)}")


def max_pool2d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                            return_indices=True):
    _check_pool_input(input, "max_pool2d")
    kernel_size = _ntuple(kernel_size, 2, "kernel_size", "max_pool2d")
    stride = [] if stride is None or (not isinstance(stride, builtins.int) and len(stride) == 0) else \
        _ntuple(stride, 2, "stride", "max_pool2d")
    return _op("max_pool2d_with_indices", input, kernel_size, stride, _ntuple(padding, 2, "padding", "max_pool2d"),
               _ntuple(dilation, 2, "dilation", "max_pool2d"), ceil_mode)


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """Max over kH x kW windows (stride defaults to kernel_size); with return_indices, also the
    int64 argmax of each window, flat over H * W."""
    out, indices = max_pool2d_with_indices(input, kernel_size, stride, padding, dilation, ceil_mode)
    return (out, indices) if return_indices else out


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    _check_pool_input(input, "avg_pool2d")
    kernel_size = _ntuple(kernel_size, 2, "kernel_size", "avg_pool2d")
    stride = [] if stride is None or (not isinstance(stride, builtins.int) and len(stride) == 0) else \
        _ntuple(stride, 2, "stride", "avg_pool2d")
    return _op("avg_pool2d", input, kernel_size, stride, _ntuple(padding, 2, "padding", "avg_pool2d"), ceil_mode,
               count_include_pad, divisor_override)


def _as_2d_pool(input, fname):
    """A 1-D pooling's (N, C, L) or (C, L) input as the 2-D pooling's, with a size-1 height."""
    _check_tensor(input, "input", fname)
    if input.ndim not in (2, 3):
        raise ValueError(f"{fname}: expected a 2-D (C, L) or 3-D (N, C, L) input, got {input.ndim}-D input of "
                         f"shape {tuple(input.shape)}")
    return input.unsqueeze(-2)


def _pool1d_arg(value, name, fname):
    return [1] + _ntuple(value, 1, name, fname)


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """Max over windows of kernel_size along the last dim (stride defaults to kernel_size); with
    return_indices, also the int64 argmax of each window."""
    x = _as_2d_pool(input, "max_pool1d")
    stride = None if stride is None or (not isinstance(stride, builtins.int) and len(stride) == 0) else \
        _pool1d_arg(stride, "stride", "max_pool1d")
    out, indices = max_pool2d_with_indices(x, _pool1d_arg(kernel_size, "kernel_size", "max_pool1d"), stride,
                                           [0] + _ntuple(padding, 1, "padding", "max_pool1d"),
                                           _pool1d_arg(dilation, "dilation", "max_pool1d"), ceil_mode)
    out, indices = out.squeeze(-2), indices.squeeze(-2)
    return (out, indices) if return_indices else out


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
    x = _as_2d_pool(input, "avg_pool1d")
    stride = None if stride is None or (not isinstance(stride, builtins.int) and len(stride) == 0) else \
        _pool1d_arg(stride, "stride", "avg_pool1d")
    return avg_pool2d(x, _pool1d_arg(kernel_size, "kernel_size", "avg_pool1d"), stride,
                      [0] + _ntuple(padding, 1, "padding", "avg_pool1d"), ceil_mode, count_include_pad).squeeze(-2)


def _lp_finish(out, window, norm_type):
    # The windows' sums of |x|^p (the average times the window), to the power 1 / p; the sign and
    # relu keep a negative rounding residue out of the root, as torch does.
    import tessera
    return (tessera.sign(out) * relu(out.abs())).mul(window).pow(1.0 / norm_type)


def lp_pool1d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """The p-norm of each window: (sum x^p)^(1/p) over kernel_size elements along the last dim."""
    k = _ntuple(kernel_size, 1, "kernel_size", "lp_pool1d")[0]
    return _lp_finish(avg_pool1d(input.pow(norm_type), k, stride, 0, ceil_mode), k, norm_type)


def lp_pool2d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """The p-norm of each kH x kW window: (sum x^p)^(1/p)."""
    kh, kw = _ntuple(kernel_size, 2, "kernel_size", "lp_pool2d")
    return _lp_finish(avg_pool2d(input.pow(norm_type), [kh, kw], stride, 0, ceil_mode), kh * kw, norm_type)


def _adaptive_bounds(size, out):
    """The windows of adaptive pooling: [floor(i size / out), ceil((i + 1) size / out))."""
    return [((i * size) // out, -((-(i + 1) * size) // out)) for i in range(out)]


def adaptive_max_pool2d(input, output_size, return_indices=False):
    """The max over windows chosen so the output is output_size (an int or a pair; None keeps that
    input size); with return_indices, the int64 argmax of each window, flat over H * W. Max is
    separable: the rows' windows first, then the columns'."""
    import tessera
    _check_pool_input(input, "adaptive_max_pool2d")
    H, W = input.shape[-2], input.shape[-1]
    if output_size is None or isinstance(output_size, builtins.int):
        oh = ow = output_size
    else:
        if len(output_size) != 2:
            raise TypeError(f"adaptive_max_pool2d: output_size must be an int or a pair (None keeps a size), got "
                            f"{output_size}")
        oh, ow = output_size
    oh, ow = H if oh is None else oh, W if ow is None else ow
    if oh <= 0 or ow <= 0 or H == 0 or W == 0:
        raise ValueError(f"adaptive_max_pool2d: expected a non-empty input and output_size > 0, got input of shape "
                         f"{tuple(input.shape)} and output_size {(oh, ow)}")
    rows = [input[..., a:b, :].max(-2) for a, b in _adaptive_bounds(H, oh)]
    row_max = tessera.stack([r[0] for r in rows], -2)
    row_arg = tessera.stack([r[1] + a for r, (a, _) in zip(rows, _adaptive_bounds(H, oh))], -2)
    values, flat = [], []
    for a, b in _adaptive_bounds(W, ow):
        v, arg = row_max[..., a:b].max(-1)
        col = arg + a
        values.append(v)
        flat.append(row_arg.gather(-1, col.unsqueeze(-1)).squeeze(-1) * W + col)
    out = tessera.stack(values, -1)
    return (out, tessera.stack(flat, -1)) if return_indices else out


def adaptive_max_pool1d(input, output_size, return_indices=False):
    x = _as_2d_pool(input, "adaptive_max_pool1d")
    out = adaptive_max_pool2d(x, [1, _ntuple(output_size, 1, "output_size", "adaptive_max_pool1d")[0]], True)
    out, indices = out[0].squeeze(-2), out[1].squeeze(-2)
    return (out, indices) if return_indices else out


def adaptive_max_pool2d_with_indices(input, output_size, return_indices=False):
    """adaptive_max_pool2d's (values, indices) pair, whatever return_indices says (torch's signature)."""
    return adaptive_max_pool2d(input, output_size, True)


def adaptive_max_pool1d_with_indices(input, output_size, return_indices=False):
    return adaptive_max_pool1d(input, output_size, True)


def max_pool1d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                            return_indices=False):
    return max_pool1d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def max_unpool2d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """The inverse of max_pool2d: each value put back at its flat index (over H_out * W_out) in a
    zero tensor; the output size is (in - 1) * stride - 2 padding + kernel unless given."""
    import tessera
    _check_pool_input(input, "max_unpool2d")
    k = _ntuple(kernel_size, 2, "kernel_size", "max_unpool2d")
    s = k if stride is None else _ntuple(stride, 2, "stride", "max_unpool2d")
    p = _ntuple(padding, 2, "padding", "max_unpool2d")
    if output_size is not None:
        size = list(output_size)[-2:]
    else:
        size = [(input.shape[-2 + d] - 1) * s[d] - 2 * p[d] + k[d] for d in range(2)]
    if tuple(indices.shape) != tuple(input.shape):
        raise ValueError(f"max_unpool2d: expected indices of the input's shape {tuple(input.shape)}, got "
                         f"{tuple(indices.shape)}")
    lead = tuple(input.shape[:-2])
    flat_in, flat_idx = input.reshape(*lead, -1), indices.reshape(*lead, -1)
    if flat_idx.numel() and (int(flat_idx.min()) < 0 or int(flat_idx.max()) >= size[0] * size[1]):
        raise ValueError(f"max_unpool2d: found an index outside the output of size {tuple(size)}")
    out = tessera.zeros(*lead, size[0] * size[1], dtype=input.dtype).scatter(-1, flat_idx, flat_in)
    return out.reshape(*lead, size[0], size[1])


def max_unpool1d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    k = _ntuple(kernel_size, 1, "kernel_size", "max_unpool1d")[0]
    s = k if stride is None else _ntuple(stride, 1, "stride", "max_unpool1d")[0]
    size = None if output_size is None else [1, list(output_size)[-1]]
    return max_unpool2d(_as_2d_pool(input, "max_unpool1d"), indices.unsqueeze(-2), [1, k], [1, s],
                        [0, _ntuple(padding, 1, "padding", "max_unpool1d")[0]], size).squeeze(-2)


def adaptive_avg_pool2d(input, output_size):
    """Averages over windows chosen so the output is output_size (an int, a pair; None keeps
    that input size)."""
    _check_pool_input(input, "adaptive_avg_pool2d")
    if isinstance(output_size, builtins.int) or output_size is None:
        output_size = (output_size, output_size)
    if len(output_size) != 2:
        raise ValueError(f"adaptive_avg_pool2d: output_size must be an int or a pair, got {output_size!r}")
    sizes = [input.shape[-2 + i] if s is None else builtins.int(s) for i, s in enumerate(output_size)]
    return _op("adaptive_avg_pool2d", input, sizes)


def adaptive_avg_pool1d(input, output_size):
    """Averages over windows of the last dim chosen so its size becomes output_size (an int or a
    1-tuple): adaptive_avg_pool2d over a size-1 height."""
    _check_tensor(input, "input", "adaptive_avg_pool1d")
    if input.ndim not in (2, 3):
        raise RuntimeError(f"adaptive_avg_pool1d(): Expected 2 to 3 dimensions, but got {input.ndim}-dimensional "
                           "tensor for argument #1 'self'")
    if output_size is None or isinstance(output_size, builtins.bool):
        raise TypeError(f"adaptive_avg_pool1d(): argument 'output_size' must be tuple of ints, not "
                        f"{type(output_size).__name__}")
    sizes = [output_size] if isinstance(output_size, builtins.int) else list(output_size)
    if len(sizes) != 1:
        raise RuntimeError(f"adaptive_avg_pool1d() argument 'output_size' should contain one int (got {len(sizes)})")
    if sizes[0] < 0:
        raise RuntimeError(f"adaptive_avg_pool1d(): elements of output_size must be greater than or equal to 0, "
                           f"got {sizes[0]}")
    if any(n == 0 for n in input.shape[1:]):
        raise RuntimeError(f"adaptive_avg_pool1d(): Expected input to have non-zero size for non-batch dimensions, "
                           f"but input has sizes {list(input.shape)}")
    return _op("adaptive_avg_pool2d", input.unsqueeze(-2), [1, builtins.int(sizes[0])]).squeeze(-2)


def _check_pool3d_input(input, fname):
    _check_tensor(input, "input", fname)
    if input.ndim not in (4, 5):
        raise ValueError(f"{fname}: expected a 4-D (C, D, H, W) or 5-D (N, C, D, H, W) input, got {input.ndim}-D "
                         f"input of shape {tuple(input.shape)}")


def _pool_stride(stride, n, fname):
    if stride is None or (not isinstance(stride, builtins.int) and len(stride) == 0):
        return []
    return _ntuple(stride, n, "stride", fname)


def max_pool3d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                            return_indices=True):
    _check_pool3d_input(input, "max_pool3d")
    return _op("max_pool3d_with_indices", input, _ntuple(kernel_size, 3, "kernel_size", "max_pool3d"),
               _pool_stride(stride, 3, "max_pool3d"), _ntuple(padding, 3, "padding", "max_pool3d"),
               _ntuple(dilation, 3, "dilation", "max_pool3d"), ceil_mode)


def max_pool3d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """Max over kD x kH x kW windows (stride defaults to kernel_size); with return_indices, also
    the int64 argmax of each window, flat over D * H * W."""
    out, indices = max_pool3d_with_indices(input, kernel_size, stride, padding, dilation, ceil_mode)
    return (out, indices) if return_indices else out


def avg_pool3d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    _check_pool3d_input(input, "avg_pool3d")
    return _op("avg_pool3d", input, _ntuple(kernel_size, 3, "kernel_size", "avg_pool3d"),
               _pool_stride(stride, 3, "avg_pool3d"), _ntuple(padding, 3, "padding", "avg_pool3d"), ceil_mode,
               count_include_pad, divisor_override)


def adaptive_avg_pool3d(input, output_size):
    """Averages over windows chosen so the output is output_size (an int, a triple; None keeps
    that input size)."""
    _check_pool3d_input(input, "adaptive_avg_pool3d")
    if isinstance(output_size, builtins.int) or output_size is None:
        output_size = (output_size,) * 3
    if len(output_size) != 3:
        raise ValueError(f"adaptive_avg_pool3d: output_size must be an int or a triple, got {output_size!r}")
    sizes = [input.shape[-3 + i] if s is None else builtins.int(s) for i, s in enumerate(output_size)]
    return _op("_adaptive_avg_pool3d", input, sizes)


# ---------------------------------------------------------------------------- fold, unfold, sampling
def unfold(input, kernel_size, dilation=1, padding=0, stride=1):
    """The sliding blocks of an (N, C, H, W) or (C, H, W) input as columns: (N, C * kh * kw, L)."""
    _check_tensor(input, "input", "unfold")
    return _op("im2col", input, _ntuple(kernel_size, 2, "kernel_size", "unfold"),
               _ntuple(dilation, 2, "dilation", "unfold"), _ntuple(padding, 2, "padding", "unfold"),
               _ntuple(stride, 2, "stride", "unfold"))


def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    """The inverse of unfold: (N, C * kh * kw, L) columns summed back into (N, C, *output_size)."""
    _check_tensor(input, "input", "fold")
    return _op("col2im", input, _ntuple(output_size, 2, "output_size", "fold"),
               _ntuple(kernel_size, 2, "kernel_size", "fold"), _ntuple(dilation, 2, "dilation", "fold"),
               _ntuple(padding, 2, "padding", "fold"), _ntuple(stride, 2, "stride", "fold"))


_GRID_MODES = {"bilinear": 0, "nearest": 1, "bicubic": 2}
_GRID_PADDING = {"zeros": 0, "border": 1, "reflection": 2}


def grid_sample(input, grid, mode="bilinear", padding_mode="zeros", align_corners=None):
    """input (N, C, H, W) sampled at grid (N, H_out, W_out, 2) of (x, y) in [-1, 1]."""
    _check_tensor(input, "input", "grid_sample")
    _check_tensor(grid, "grid", "grid_sample")
    if mode not in _GRID_MODES:
        raise ValueError(f"nn.functional.grid_sample(): expected mode to be 'bilinear', 'nearest' or 'bicubic', "
                         f"but got: '{mode}'")
    if padding_mode not in _GRID_PADDING:
        raise ValueError(f"nn.functional.grid_sample(): expected padding_mode to be 'zeros', 'border', or "
                         f"'reflection', but got: '{padding_mode}'")
    if input.ndim != 4:
        raise NotImplementedError(f"grid_sample: only 4-D inputs (N, C, H, W) are supported, got {input.ndim}-D")
    return _op("grid_sampler_2d", input, grid, _GRID_MODES[mode], _GRID_PADDING[padding_mode],
               builtins.bool(align_corners))


def _affine_base(n, align_corners, like):
    """linspace(-1, 1, n), scaled to the pixel centres unless align_corners (a single pixel: 0)."""
    if n <= 1:
        return _op("zeros", [n], dtype=like.dtype, device=like.device)
    base = _op("linspace", -1.0, 1.0, n, dtype=like.dtype, device=like.device)
    return base if align_corners else _op("mul", base, (n - 1) / n)


def affine_grid(theta, size, align_corners=None):
    """The sampling grid of the affine maps theta (N, 2, 3) for an output of size (N, C, H, W),
    or theta (N, 3, 4) for (N, C, D, H, W): each output pixel's (x, y[, z]) in [-1, 1] mapped by
    theta."""
    _check_tensor(theta, "theta", "affine_grid")
    size = [builtins.int(s) for s in size]
    align_corners = builtins.bool(align_corners)
    if len(size) not in (4, 5):
        raise NotImplementedError("affine_grid only supports 4D and 5D sizes, for 2D and 3D affine transforms, "
                                  f"respectively. Got size {size}.")
    k = len(size) - 2  # spatial dims
    if not theta.is_floating_point():
        raise ValueError(f"Expected theta to have floating point type, but got {theta.dtype}")
    if theta.ndim != 3 or list(theta.shape[1:]) != [k, k + 1] or theta.shape[0] != size[0]:
        raise ValueError(f"Expected a batch of {k}D affine matrices of shape Nx{k}x{k + 1} for size {size}. "
                         f"Got {list(theta.shape)}.")
    if builtins.min(size) <= 0:
        raise ValueError(f"Expected non-zero, positive output size. Got {size}")
    spatial = size[2:][::-1]  # (W, H[, D]): the coordinates' order
    coords = []
    for i, n in enumerate(spatial):
        shape = [1] * k
        shape[k - 1 - i] = n
        coords.append(_op("expand", _op("reshape", _affine_base(n, align_corners, theta), shape), size[2:]))
    coords.append(_op("ones", size[2:], dtype=theta.dtype, device=theta.device))
    base = _op("reshape", _op("stack", coords, -1), [1, -1, k + 1])  # (1, prod(spatial), k + 1)
    grid = _op("matmul", base, _op("transpose", theta, 1, 2))  # (N, prod(spatial), k)
    return _op("reshape", grid, [size[0]] + size[2:] + [k])


# ---------------------------------------------------------------------------- normalization
def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1, eps=1e-05):
    """Normalizes over every dim but the channel (dim 1) of an (N, C) or (N, C, *) input: with the
    batch statistics when training (then updating running_mean / running_var in place), else with
    the running statistics."""
    _check_tensor(input, "input", "batch_norm")
    if input.ndim < 2:
        raise ValueError(f"batch_norm: expected a 2-D or higher input (N, C, *), got {input.ndim}-D input")
    if training:
        size = input.numel() // input.shape[1] if input.shape[1] else 0
        if size == 1:
            raise ValueError(f"Expected more than 1 value per channel when training, got input size "
                             f"{list(input.shape)}")
    elif running_mean is None or running_var is None:
        raise ValueError("batch_norm: running_mean and running_var must be given when training=False")
    return _op("native_batch_norm", input, weight, bias, running_mean, running_var, training,
               0.0 if momentum is None else momentum, eps)[0]


def _normalized_shape(input, normalized_shape, fname, error):
    """normalized_shape as a list of ints, checked to be the input's trailing dims (torch raises
    ValueError from layer_norm's Python side and RuntimeError from rms_norm's kernel)."""
    if isinstance(normalized_shape, builtins.int):
        normalized_shape = [normalized_shape]
    normalized_shape = [builtins.int(s) for s in normalized_shape]
    k = len(normalized_shape)
    if k == 0 or input.ndim < k or list(input.shape[input.ndim - k:]) != normalized_shape:
        raise error(f"{fname}: given normalized_shape={normalized_shape}, expected input with shape "
                    f"[*, {', '.join(map(str, normalized_shape))}], but got input of size {list(input.shape)}")
    return normalized_shape


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-05):
    """Normalizes over the last len(normalized_shape) dims."""
    _check_tensor(input, "input", "layer_norm")
    normalized_shape = _normalized_shape(input, normalized_shape, "layer_norm", ValueError)
    return _op("native_layer_norm", input, normalized_shape, weight, bias, eps)[0]


def rms_norm(input, normalized_shape, weight=None, eps=None):
    """x / sqrt(mean(x^2 over the last dims) + eps) * weight; eps defaults to the dtype's machine epsilon."""
    normalized_shape = _normalized_shape(input, normalized_shape, "rms_norm", RuntimeError)
    k = len(normalized_shape)
    if eps is None:
        from tessera._finfo import finfo
        eps = finfo(input.dtype).eps
    dims = list(range(input.ndim - k, input.ndim))
    out = _op("mul", input, _op("rsqrt", _op("add", _op("mean", _op("mul", input, input), dims, True), eps)))
    return out if weight is None else _op("mul", out, weight)


def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None, use_input_stats=True,
                  momentum=0.1, eps=1e-05):
    """Normalizes each (sample, channel) plane by its own statistics (a group norm with one channel
    per group); with running stats, their update averages the instances' statistics over the batch."""
    if input.ndim < 3:
        raise ValueError(f"instance_norm: expected an input of at least 3 dimensions (N, C, *), got {input.ndim}")
    if not use_input_stats:
        if running_mean is None or running_var is None:
            raise ValueError("Expected running_mean and running_var to be defined when use_input_stats is false")
        return batch_norm(input, running_mean, running_var, weight, bias, False, 0.0, eps)
    c = input.shape[1]
    if running_mean is not None and running_var is not None:
        from tessera.nn import _autograd
        with _autograd.no_grad():
            dims = list(range(2, input.ndim))
            plane = input.detach()
            mean = _op("mean", plane, dims)
            var = _op("var", plane, dims, correction=1)
            running_mean.mul_(1 - momentum).add_(_op("mean", mean, [0]), alpha=momentum)
            running_var.mul_(1 - momentum).add_(_op("mean", var, [0]), alpha=momentum)
    return group_norm(input, c, weight, bias, eps)


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-05):
    """Normalizes each of num_groups channel groups of an (N, C, *) input."""
    _check_tensor(input, "input", "group_norm")
    if input.ndim < 2:
        raise ValueError(f"group_norm: expected at least 2 dimensions for input tensor but received {input.ndim}")
    n, c = input.shape[0], input.shape[1]
    if num_groups <= 0 or c % num_groups:
        raise ValueError(f"Expected number of channels in input to be divisible by num_groups, but got input of "
                         f"shape {list(input.shape)} and num_groups={num_groups}")
    hxw = 1
    for s in input.shape[2:]:
        hxw *= s
    return _op("native_group_norm", input, weight, bias, n, c, hxw, num_groups, eps)[0]


# ---------------------------------------------------------------------------- dropout, embedding
def dropout(input, p=0.5, training=True, inplace=False):
    """Zeroes elements with probability p and scales the rest by 1 / (1 - p) when training."""
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0 or input.numel() == 0:
        return input
    out = _op("native_dropout", input, builtins.float(p), True)[0]
    if inplace:
        return _op("copy_", input, out)
    return out


def _feature_dropout(input, p, training, inplace, fname, batched_dims):
    """Zeroes whole channels (every element of an (n, c) plane) with probability p, scaling the rest."""
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if input.ndim not in (batched_dims - 1, batched_dims):
        raise RuntimeError(f"{fname}: Expected {batched_dims - 1}D or {batched_dims}D input, but received a "
                           f"{input.ndim}D input")
    if not training or p == 0.0 or input.numel() == 0:
        return input
    channel_dims = 1 if input.ndim == batched_dims - 1 else 2  # (C, *) unbatched, (N, C, *) batched
    mask_shape = list(input.shape[:channel_dims]) + [1] * (input.ndim - channel_dims)
    keep = _op("bernoulli.p", _op("full", mask_shape, 0.0, dtype=input.dtype, device=input.device), 1.0 - p)
    out = _op("mul", input, _op("div", keep, 1.0 - p)) if p < 1.0 else _op("mul", input, keep)
    return _op("copy_", input, out) if inplace else out


def dropout1d(input, p=0.5, training=True, inplace=False):
    return _feature_dropout(input, p, training, inplace, "dropout1d", 3)


def dropout2d(input, p=0.5, training=True, inplace=False):
    return _feature_dropout(input, p, training, inplace, "dropout2d", 4)


def dropout3d(input, p=0.5, training=True, inplace=False):
    return _feature_dropout(input, p, training, inplace, "dropout3d", 5)


def _alpha_dropout(input, p, training, inplace, feature, fname):
    """Dropout for SELU networks: dropped values go to SELU's negative saturation, then an affine map
    (a, b) restores zero mean and unit variance (Klambauer et al., 2017)."""
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0 or input.numel() == 0:
        return input
    if p == 1.0:
        out = _op("mul", input, 0.0)
        return _op("copy_", input, out) if inplace else out
    if feature and input.ndim < 2:
        raise RuntimeError(f"{fname}: expected an input with a channel dim (at least 2-D), got {input.ndim}-D")
    alpha = 1.7580993408473766  # -SELU's saturation value, scale * alpha
    a = 1.0 / math.sqrt((alpha * alpha * p + 1) * (1 - p))
    mask_shape = (list(input.shape[:2]) + [1] * (input.ndim - 2)) if feature else list(input.shape)
    keep = _op("bernoulli.p", _op("full", mask_shape, 0.0, dtype=input.dtype, device=input.device), 1.0 - p)
    b = _op("add", _op("mul", _op("sub", keep, 1.0), alpha * a), alpha * a * p)
    out = _op("add", _op("mul", input, _op("mul", keep, a)), b)
    return _op("copy_", input, out) if inplace else out


def alpha_dropout(input, p=0.5, training=False, inplace=False):
    return _alpha_dropout(input, p, training, inplace, False, "alpha_dropout")


def feature_alpha_dropout(input, p=0.5, training=False, inplace=False):
    return _alpha_dropout(input, p, training, inplace, True, "feature_alpha_dropout")


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False, sparse=False):
    """Rows of weight at the int64 indices in input."""
    _check_tensor(input, "input", "embedding")
    _check_tensor(weight, "weight", "embedding")
    if padding_idx is not None:
        n = weight.shape[0]
        if padding_idx > 0:
            if padding_idx >= n:
                raise ValueError(f"embedding: padding_idx must be within num_embeddings ({n}), got {padding_idx}")
        elif padding_idx < 0:
            if padding_idx < -n:
                raise ValueError(f"embedding: padding_idx must be within num_embeddings ({n}), got {padding_idx}")
            padding_idx = n + padding_idx
    else:
        padding_idx = -1
    if max_norm is not None:
        raise NotImplementedError("embedding(max_norm=...): renormalizing rows is not supported yet")
    if sparse:
        raise NotImplementedError("embedding(sparse=True): sparse gradients are not supported; use sparse=False")
    return _op("embedding", weight, input, padding_idx, scale_grad_by_freq, False)


_BAG_MODES = {"sum": 0, "mean": 1, "max": 2}


def embedding_bag(input, weight, offsets=None, max_norm=None, norm_type=2, scale_grad_by_freq=False, mode="mean",
                  sparse=False, per_sample_weights=None, include_last_offset=False, padding_idx=None):
    """Sums, means or maxima of bags of embedding rows: a 2-D input is one bag per row; a 1-D
    input is cut into bags at offsets."""
    _check_tensor(input, "input", "embedding_bag")
    _check_tensor(weight, "weight", "embedding_bag")
    if weight.ndim != 2:
        raise ValueError(f"embedding_bag: weight has to be a 2D Tensor, but got Tensor of dimension {weight.ndim}")
    if mode not in _BAG_MODES:
        raise ValueError(f"embedding_bag: mode has to be one of sum, mean or max, got {mode!r}")
    if per_sample_weights is not None and list(per_sample_weights.shape) != list(input.shape):
        raise ValueError(f"embedding_bag: If per_sample_weights ({tuple(per_sample_weights.shape)}) is not None, "
                         f"then it must have the same shape as the input ({tuple(input.shape)})")
    if input.ndim == 2:
        if offsets is not None:
            raise ValueError("if input is 2D, then offsets has to be None, as input is treated is a mini-batch of "
                             "fixed length sequences.")
        bags, length = input.shape
        offsets = _op("arange", 0, bags * length, length, dtype=input.dtype, device=input.device)
        input = _op("reshape", input, [-1])
        if per_sample_weights is not None:
            per_sample_weights = _op("reshape", per_sample_weights, [-1])
    elif input.ndim == 1:
        if offsets is None:
            raise ValueError("offsets has to be a 1D Tensor but got None")
        if offsets.ndim != 1:
            raise ValueError("offsets has to be a 1D Tensor")
    else:
        raise ValueError(f"input has to be 1D or 2D Tensor, but got Tensor of dimension {input.ndim}")
    n = weight.shape[0]
    if padding_idx is None:
        padding_idx = -1
    elif padding_idx >= n or padding_idx < -n:
        raise ValueError(f"embedding_bag: padding_idx must be within num_embeddings ({n}), got {padding_idx}")
    elif padding_idx < 0:
        padding_idx = n + padding_idx
    if max_norm is not None:
        raise NotImplementedError("embedding_bag(max_norm=...): renormalizing rows is not supported yet")
    if per_sample_weights is not None and mode != "sum":
        raise NotImplementedError(f"embedding_bag: per_sample_weights was not None. per_sample_weights is only "
                                  f"supported for mode='sum' (got mode='{mode}')")
    return _op("_embedding_bag", weight, input, offsets, scale_grad_by_freq, _BAG_MODES[mode], sparse,
               per_sample_weights, include_last_offset, padding_idx)[0]


# ---------------------------------------------------------------------------- activations
def relu(input, inplace=False):
    return _op("relu_", input) if inplace else _op("relu", input)


def relu_(input):
    return _op("relu_", input)


def gelu(input, approximate="none"):
    return _op("gelu", input, approximate=approximate)


def silu(input, inplace=False):
    return _op("silu_", input) if inplace else _op("silu", input)


def tanh(input):
    return _op("tanh", input)


def sigmoid(input):
    return _op("sigmoid", input)


def _inplace(input, result, inplace):
    """The in-place form of an activation: its result written back into the input."""
    return _op("copy_", input, result) if inplace else result


def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, inplace=False):
    """Randomized leaky ReLU: negative inputs times a slope drawn from U(lower, upper) per element in
    training, times (lower + upper) / 2 otherwise."""
    import tessera
    _check_tensor(input, "input", "rrelu")
    if training:
        slope = tessera.empty_like(input).uniform_(lower, upper)
    else:
        slope = (lower + upper) / 2
    out = tessera.where(input >= 0, input, input * slope)
    if inplace:
        return input.copy_(out)
    return out


def leaky_relu(input, negative_slope=0.01, inplace=False):
    return _inplace(input, _op("leaky_relu", input, negative_slope), inplace)


def elu(input, alpha=1.0, inplace=False):
    return _inplace(input, _op("elu", input, alpha), inplace)


def selu(input, inplace=False):
    # The constants of Klambauer et al. (2017), as torch uses them.
    return _inplace(input, _op("elu", input, 1.6732632423543772, 1.0507009873554805), inplace)


def celu(input, alpha=1.0, inplace=False):
    if alpha == 0:
        raise ValueError("celu: alpha must not be zero")
    return _inplace(input, _op("elu", input, alpha, 1.0, 1.0 / alpha), inplace)


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    if min_val > max_val:
        raise ValueError(f"hardtanh: min_val ({min_val}) cannot be greater than max_val ({max_val})")
    return _inplace(input, _op("hardtanh", input, min_val, max_val), inplace)


def relu6(input, inplace=False):
    return hardtanh(input, 0.0, 6.0, inplace)


def hardsigmoid(input, inplace=False):
    return _inplace(input, _op("div", _op("hardtanh", _op("add", input, 3.0), 0.0, 6.0), 6.0), inplace)


def hardswish(input, inplace=False):
    gate = _op("div", _op("hardtanh", _op("add", input, 3.0), 0.0, 6.0), 6.0)
    return _inplace(input, _op("mul", input, gate), inplace)


def softplus(input, beta=1.0, threshold=20.0):
    # Linear above threshold (in units of beta), as torch, so large inputs do not overflow exp.
    scaled = _op("mul", input, beta)
    soft = _op("div", _op("log1p", _op("exp", _op("minimum", scaled, _op("full_like", scaled, threshold)))), beta)
    return _op("where", _op("gt", scaled, threshold), input, soft)


def mish(input, inplace=False):
    return _inplace(input, _op("mul", input, _op("tanh", softplus(input))), inplace)


def softsign(input):
    return _op("div", input, _op("add", _op("abs", input), 1.0))


def logsigmoid(input):
    # -softplus(-x), computed as min(x, 0) - log1p(exp(-|x|)) so neither side overflows.
    return _op("sub", _op("minimum", input, _op("full_like", input, 0.0)),
               _op("log1p", _op("exp", _op("neg", _op("abs", input)))))


def tanhshrink(input):
    return _op("sub", input, _op("tanh", input))


def softshrink(input, lambd=0.5):
    if lambd < 0:
        raise ValueError(f"softshrink: lambda must be non-negative, got {lambd}")
    shrunk = _op("sub", input, _op("mul", _op("sign", input), lambd))
    return _op("where", _op("gt", _op("abs", input), lambd), shrunk, _op("full_like", input, 0.0))


def hardshrink(input, lambd=0.5):
    return _op("where", _op("gt", _op("abs", input), lambd), input, _op("full_like", input, 0.0))


def threshold(input, threshold, value, inplace=False):
    return _inplace(input, _op("where", _op("gt", input, threshold), input, _op("full_like", input, value)), inplace)


# The in-place functional forms: torch's elu_ and friends modify the input and return it.
def elu_(input, alpha=1.0):
    return elu(input, alpha, inplace=True)


def celu_(input, alpha=1.0):
    return celu(input, alpha, inplace=True)


def selu_(input):
    return selu(input, inplace=True)


def hardtanh_(input, min_val=-1.0, max_val=1.0):
    return hardtanh(input, min_val, max_val, inplace=True)


def leaky_relu_(input, negative_slope=0.01):
    return leaky_relu(input, negative_slope, inplace=True)


def rrelu_(input, lower=1.0 / 8, upper=1.0 / 3, training=False):
    return rrelu(input, lower, upper, training, inplace=True)


def threshold_(input, threshold, value):
    # `threshold` the argument shadows the function here, as in torch's signature.
    return globals()["threshold"](input, threshold, value, inplace=True)


def glu(input, dim=-1):
    if input.dim() == 0:
        raise RuntimeError("glu does not support scalars because halving size must be even")
    size = input.shape[dim]
    if size % 2:
        raise RuntimeError(f"Halving dimension must be even, but dimension {dim % input.dim()} is size {size}")
    a, b = _op("narrow", input, dim, 0, size // 2), _op("narrow", input, dim, size // 2, size // 2)
    return _op("mul", a, _op("sigmoid", b))


def prelu(input, weight):
    if weight.numel() != 1:
        channels = input.shape[1] if input.dim() >= 2 else 1
        if weight.numel() != channels:
            raise RuntimeError(f"prelu: mismatch of parameter numbers and input channel size. Found parameter "
                               f"numbers = {weight.numel()} and channel size = {channels}.")
        if input.dim() >= 2:
            weight = _op("reshape", weight, [channels] + [1] * (input.dim() - 2))
    return _op("where", _op("gt", input, 0.0), input, _op("mul", input, weight))


def gumbel_softmax(logits, tau=1.0, hard=False, eps=1e-10, dim=-1):
    """Samples of the Gumbel-softmax distribution: softmax((logits + g) / tau) with g Gumbel(0, 1)
    noise; hard=True returns one-hot samples whose gradient is the soft sample's (straight through)."""
    import tessera
    _check_tensor(logits, "logits", "gumbel_softmax")
    gumbels = -tessera.empty_like(logits).exponential_().log()
    y_soft = ((logits + gumbels) / tau).softmax(dim)
    if not hard:
        return y_soft
    index = y_soft.max(dim, keepdim=True)[1]
    y_hard = tessera.zeros_like(logits).scatter_(dim, index, 1.0)
    return y_hard - y_soft.detach() + y_soft


def bilinear(input1, input2, weight, bias=None):
    """y = x1^T A x2 + b for each output feature: weight (out, in1, in2), inputs (*, in1) and (*, in2)."""
    _check_tensor(input1, "input1", "bilinear")
    _check_tensor(input2, "input2", "bilinear")
    _check_tensor(weight, "weight", "bilinear")
    if weight.ndim != 3 or input1.shape[-1] != weight.shape[1] or input2.shape[-1] != weight.shape[2] \
            or tuple(input1.shape[:-1]) != tuple(input2.shape[:-1]):
        raise RuntimeError(f"bilinear: expected input1 (*, {weight.shape[1] if weight.ndim == 3 else 'in1'}), input2 "
                           f"(*, {weight.shape[2] if weight.ndim == 3 else 'in2'}) with the same leading dims and a "
                           f"3-D weight, got {tuple(input1.shape)}, {tuple(input2.shape)} and weight "
                           f"{tuple(weight.shape)}")
    out_f, in1, in2 = weight.shape
    lead = tuple(input1.shape[:-1])
    x1, x2 = input1.reshape(-1, in1), input2.reshape(-1, in2)
    # x1 against every output's matrix at once: [rows, out * in2], then the dot with x2.
    t = (x1 @ weight.permute(1, 0, 2).reshape(in1, out_f * in2)).reshape(-1, out_f, in2)
    y = (t * x2.unsqueeze(1)).sum(-1)
    if bias is not None:
        y = y + bias
    return y.reshape(*lead, out_f)


def pdist(input, p=2.0):
    """The p-norm distance between each pair of rows i < j of an (N, M) input, in row-major order of
    the pairs: N (N - 1) / 2 values."""
    import tessera
    _check_tensor(input, "input", "pdist")
    if input.ndim != 2:
        raise RuntimeError(f"pdist only supports 2D tensors, got: {input.ndim}D")
    if p < 0:
        raise RuntimeError("pdist only supports non-negative p values")
    i, j = tessera.triu_indices(input.shape[0], input.shape[0], 1)
    return tessera.linalg.vector_norm(input[i] - input[j], ord=p, dim=1)


def softmin(input, dim=None, dtype=None):
    return softmax(_op("neg", input), dim=dim, dtype=dtype)


def _softmax_dim(ndim, fname):
    warnings.warn(f"Implicit dimension choice for {fname} has been deprecated. Change the call to include dim=X "
                  "as an argument.", stacklevel=3)
    return 0 if ndim in (0, 1, 3) else 1


def softmax(input, dim=None, _stacklevel=3, dtype=None):
    if dim is None:
        dim = _softmax_dim(input.ndim, "softmax")
    return _op("softmax", input, dim, dtype)


def log_softmax(input, dim=None, _stacklevel=3, dtype=None):
    if dim is None:
        dim = _softmax_dim(input.ndim, "log_softmax")
    return _op("log_softmax", input, dim, dtype)


# ---------------------------------------------------------------------------- losses
def _log_add(*terms):
    """log(sum(exp(terms))) element-wise, -inf where every term is -inf, with gradients that stay
    finite there (unreachable CTC states get a zero gradient, not 0 * inf)."""
    import tessera
    m = terms[0]
    for t in terms[1:]:
        m = tessera.maximum(m, t)
    dead = tessera.isinf(m) & (m < 0)
    m_safe = tessera.where(dead, 0.0, m)
    total = sum((t - m_safe).exp() for t in terms)
    return tessera.where(dead, float("-inf"), m_safe + tessera.where(dead, 1.0, total).log())


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction="mean", zero_infinity=False):
    """Connectionist Temporal Classification loss: -log of the total probability of every alignment
    of each target to its input (the forward recursion over the target with blanks between and
    around its labels, in log space; autograd differentiates it). log_probs (T, N, C) or (T, C),
    targets (N, S) padded or the N targets concatenated, lengths as tensors or sequences."""
    import tessera
    _check_tensor(log_probs, "log_probs", "ctc_loss")
    _reduction_enum(reduction, "ctc_loss")
    unbatched = log_probs.ndim == 2
    if unbatched:  # one sequence: its target as a padded row
        log_probs, targets = log_probs.unsqueeze(1), targets.reshape(1, -1)
    if log_probs.ndim != 3:
        raise RuntimeError(f"ctc_loss: expected log_probs of shape (T, N, C) or (T, C), got {tuple(log_probs.shape)}")
    T, N, C = log_probs.shape

    def as_list(v):
        if isinstance(v, tessera.Tensor):
            return [int(x) for x in v.reshape(-1).tolist()]
        return [int(v)] if isinstance(v, builtins.int) else [int(x) for x in v]
    in_len, tg_len = as_list(input_lengths), as_list(target_lengths)
    if len(in_len) != N or len(tg_len) != N:
        raise RuntimeError(f"ctc_loss: expected {N} input and target lengths, got {len(in_len)} and {len(tg_len)}")
    if any(n > T or n < 0 for n in in_len):
        raise RuntimeError(f"ctc_loss: input lengths must be in [0, {T}], got {in_len}")
    S = max(tg_len + [0])
    if targets.ndim == 2 and S > targets.shape[-1]:
        raise RuntimeError(f"ctc_loss: target lengths {tg_len} exceed the targets' length {targets.shape[-1]}")
    if targets.ndim == 1:  # concatenated: split and pad
        flat, rows, at = targets.tolist(), [], 0
        for n in tg_len:
            rows.append(flat[at:at + n] + [blank] * (S - n))
            at += n
        labels = tessera.tensor(rows, dtype=tessera.int64).reshape(N, S)
    else:
        labels = targets[:, :S].to(tessera.int64)
    L = 2 * S + 1  # blank, l1, blank, l2, ..., blank
    ext = tessera.full((N, L), blank, dtype=tessera.int64)
    if S:
        ext[:, 1::2] = labels
    # A label may be reached from two back (skipping the blank between) unless it repeats that label.
    skip = tessera.zeros(N, L, dtype=tessera.bool)
    if S > 1:
        skip[:, 3::2] = labels[:, 1:] != labels[:, :-1]
    lp = log_probs.gather(2, ext.unsqueeze(0).expand(T, N, L))  # [T, N, L]
    neg_inf = float("-inf")
    start = tessera.full((N, L), neg_inf, dtype=log_probs.dtype)
    alpha = tessera.where(tessera.arange(L).unsqueeze(0) < tessera.tensor([min(2, 2 * n + 1) for n in tg_len]).unsqueeze(1),
                          lp[0], start)
    steps = tessera.tensor(in_len).unsqueeze(1)
    pad1 = tessera.full((N, 1), neg_inf, dtype=log_probs.dtype)
    pad2 = tessera.full((N, 2), neg_inf, dtype=log_probs.dtype)
    for t in range(1, T):
        prev1 = tessera.cat([pad1, alpha[:, :-1]], 1)
        prev2 = tessera.where(skip, tessera.cat([pad2, alpha[:, :-2]], 1), neg_inf)
        new = _log_add(alpha, prev1, prev2) + lp[t]
        alpha = tessera.where(steps > t, new, alpha)  # a sequence stops at its own length
    last = tessera.tensor([2 * n for n in tg_len]).unsqueeze(1)
    end_blank = alpha.gather(1, last).squeeze(1)
    end_label = alpha.gather(1, (last - 1).clamp(min=0)).squeeze(1)
    has_label = tessera.tensor([n > 0 for n in tg_len])
    loss = -_log_add(end_blank, tessera.where(has_label, end_label, neg_inf))
    # No input steps: only the empty target has an alignment (probability 1).
    loss = tessera.where(tessera.tensor([n == 0 for n in in_len]), tessera.where(has_label, float("inf"), 0.0), loss)
    if zero_infinity:
        loss = tessera.where(tessera.isinf(loss), 0.0, loss)
    if reduction == "mean":
        return (loss / tessera.tensor(tg_len, dtype=loss.dtype).clamp(min=1)).mean()
    if reduction == "sum":
        return loss.sum()
    return loss.squeeze(0) if unbatched else loss


def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"):
    """Negative log likelihood of log-probabilities input (N, C[, d...]) or (C,) at the class
    indices target (N[, d...]) or ()."""
    _check_tensor(input, "input", "nll_loss")
    _check_tensor(target, "target", "nll_loss")
    reduction = _legacy_reduction(size_average, reduce, reduction)
    red = _reduction_enum(reduction, "nll_loss")
    if input.ndim < 1:
        raise ValueError(f"nll_loss: expected input with at least 1 dimension, got {input.ndim}")
    if input.ndim >= 2 and target.ndim >= 1 and input.shape[0] != target.shape[0]:
        raise ValueError(f"Expected input batch_size ({input.shape[0]}) to match target batch_size "
                         f"({target.shape[0]}).")
    return _op("nll_loss_forward", input, target, weight, red, ignore_index)[0]


def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean",
                  label_smoothing=0.0):
    """log_softmax over the class dim (1, or 0 for an unbatched input) followed by nll_loss; target
    is class indices (int64) or class probabilities (float, input's shape)."""
    _check_tensor(input, "input", "cross_entropy")
    _check_tensor(target, "target", "cross_entropy")
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _reduction_enum(reduction, "cross_entropy")
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"cross_entropy: label_smoothing must be between 0.0 and 1.0, got {label_smoothing}")
    class_dim = 0 if input.ndim == 1 else 1
    n_classes = input.shape[class_dim]
    logp = _op("log_softmax", input, class_dim, None)
    wshape = [1] * input.ndim
    wshape[class_dim] = n_classes
    if target.dtype.is_floating_point:  # class probabilities
        if tuple(target.shape) != tuple(input.shape):
            raise ValueError(f"cross_entropy: expected probability targets of the input's shape "
                             f"{tuple(input.shape)}, got {tuple(target.shape)}")
        if label_smoothing > 0.0:
            target = _op("add", _op("mul", target, 1.0 - label_smoothing), label_smoothing / n_classes)
        prod = _op("mul", logp, target)
        if weight is not None:
            prod = _op("mul", prod, _op("reshape", weight, wshape))
        loss = _op("neg", _op("sum", prod, [class_dim]))
        if reduction == "mean":
            count = input.numel() // n_classes if n_classes else 0
            return _op("div", _op("sum", loss), builtins.float(count))
        return _apply_reduction(loss, reduction)
    nll = nll_loss(logp, target, weight, None, ignore_index, None, reduction)
    if label_smoothing <= 0.0:
        return nll
    # torch's formula: (1 - eps) * nll + eps / C * smooth, smooth = -sum_c w_c * logp_c over
    # the targets that are not ignored (normalised as nll_loss normalises under 'mean').
    prod = logp if weight is None else _op("mul", logp, _op("reshape", weight, wshape))
    smooth = _op("neg", _op("sum", prod, [class_dim]))
    ignore = _op("eq", target, ignore_index)
    smooth = _op("masked_fill", smooth, ignore, 0.0)
    if reduction == "mean":
        keep = _op("logical_not", ignore)
        if weight is not None:
            kept = _op("masked_select", target, keep)
            denom = _op("sum", _op("index_select", weight, 0, kept))
        else:
            denom = _op("sum", keep)
        ret = _op("div", _op("sum", smooth), denom)
    elif reduction == "sum":
        ret = _op("sum", smooth)
    else:
        ret = smooth
    return _op("add", _op("mul", nll, 1.0 - label_smoothing), _op("mul", ret, label_smoothing / n_classes))


def _same_shape_or_broadcast(input, target, fname):
    if tuple(input.shape) != tuple(target.shape):
        warnings.warn(f"{fname}: using a target size ({tuple(target.shape)}) that is different to the input size "
                      f"({tuple(input.shape)}). This will likely lead to incorrect results due to broadcasting. "
                      "Please ensure they have the same size.", stacklevel=3)
        return False
    return True


def mse_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    """Mean (or sum, or elementwise) squared error."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    red = _reduction_enum(reduction, "mse_loss")
    if weight is None and _same_shape_or_broadcast(input, target, "mse_loss"):
        return _op("mse_loss", input, target, red)
    d = _op("sub", input, target)
    loss = _op("mul", d, d)
    if weight is not None:
        loss = _op("mul", loss, weight)
    return _apply_reduction(loss, reduction)


def l1_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    """Mean (or sum, or elementwise) absolute error."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    red = _reduction_enum(reduction, "l1_loss")
    if weight is None and _same_shape_or_broadcast(input, target, "l1_loss"):
        return _op("l1_loss", input, target, red)
    loss = _op("abs", _op("sub", input, target))
    if weight is not None:
        loss = _op("mul", loss, weight)
    return _apply_reduction(loss, reduction)


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None, reduction="mean",
                                     pos_weight=None):
    """Sigmoid + binary cross-entropy in the numerically stable form."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    red = _reduction_enum(reduction, "binary_cross_entropy_with_logits")
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(f"Target size ({list(target.shape)}) must be the same as input size ({list(input.shape)})")
    return _op("binary_cross_entropy_with_logits", input, target, weight, pos_weight, red)


def _loss_setup(input, target, size_average, reduce, reduction, fname):
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _reduction_enum(reduction, fname)
    _same_shape_or_broadcast(input, target, fname)
    return reduction


def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    """-(t log p + (1 - t) log(1 - p)) on probabilities; the logs are clamped at -100 as torch's."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _reduction_enum(reduction, "binary_cross_entropy")
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(f"Using a target size ({list(target.shape)}) that is different to the input size "
                         f"({list(input.shape)}) is deprecated. Please ensure they have the same size.")
    log_p = _op("clamp", _op("log", input), -100.0)
    log_q = _op("clamp", _op("log", _op("sub", _op("full_like", input, 1.0), input)),
                -100.0)
    loss = _op("neg", _op("add", _op("mul", target, log_p),
                          _op("mul", _op("sub", _op("full_like", target, 1.0), target), log_q)))
    if weight is not None:
        loss = _op("mul", loss, weight)
    return _apply_reduction(loss, reduction)


def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    reduction = _loss_setup(input, target, size_average, reduce, reduction, "smooth_l1_loss")
    if beta < 0:
        raise RuntimeError("smooth_l1_loss does not support negative values for beta.")
    d = _op("abs", _op("sub", input, target))
    if beta == 0:
        return _apply_reduction(d, reduction)
    loss = _op("where", _op("lt", d, beta), _op("div", _op("mul", _op("mul", d, d), 0.5), beta), _op("sub", d, 0.5 * beta))
    return _apply_reduction(loss, reduction)


def huber_loss(input, target, reduction="mean", delta=1.0, weight=None):
    _reduction_enum(reduction, "huber_loss")
    _same_shape_or_broadcast(input, target, "huber_loss")
    if delta <= 0:
        raise RuntimeError("huber_loss does not support non-positive values for delta.")
    d = _op("abs", _op("sub", input, target))
    loss = _op("where", _op("lt", d, delta), _op("mul", _op("mul", d, d), 0.5), _op("mul", _op("sub", d, 0.5 * delta), delta))
    if weight is not None:
        loss = _op("mul", loss, weight)
    return _apply_reduction(loss, reduction)


def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    """Pointwise KL divergence target * (log target - input), input being log-probabilities."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if reduction not in ("none", "mean", "sum", "batchmean"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    if log_target:
        loss = _op("mul", _op("exp", target), _op("sub", target, input))
    else:
        loss = _op("sub", _op("xlogy", target, target), _op("mul", target, input))
    if reduction == "batchmean":
        total = _op("sum", loss)
        return _op("div", total, input.shape[0]) if input.dim() else total
    return _apply_reduction(loss, reduction)


def soft_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    reduction = _loss_setup(input, target, size_average, reduce, reduction, "soft_margin_loss")
    return _apply_reduction(_op("log1p", _op("exp", _op("neg", _op("mul", target, input)))), reduction)


def margin_ranking_loss(input1, input2, target, margin=0.0, size_average=None, reduce=None, reduction="mean"):
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _reduction_enum(reduction, "margin_ranking_loss")
    if not (input1.dim() == input2.dim() == target.dim()):
        raise RuntimeError(f"margin_ranking_loss : All input tensors should have same dimension but got sizes: "
                           f"input1: {tuple(input1.shape)}, input2: {tuple(input2.shape)}, target: {tuple(target.shape)} ")
    loss = _op("relu", _op("add", _op("mul", _op("neg", target), _op("sub", input1, input2)), margin))
    return _apply_reduction(loss, reduction)


def hinge_embedding_loss(input, target, margin=1.0, size_average=None, reduce=None, reduction="mean"):
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _reduction_enum(reduction, "hinge_embedding_loss")
    zeros = _op("full_like", input, 0.0)
    positive = _op("where", _op("eq", target, 1), input, zeros)
    negative = _op("where", _op("eq", target, -1), _op("relu", _op("sub", _op("full_like", input, margin), input)), zeros)
    return _apply_reduction(_op("add", positive, negative), reduction)


def poisson_nll_loss(input, target, log_input=True, full=False, size_average=None, eps=1e-8, reduce=None,
                     reduction="mean"):
    reduction = _loss_setup(input, target, size_average, reduce, reduction, "poisson_nll_loss")
    if log_input:
        loss = _op("sub", _op("exp", input), _op("mul", target, input))
    else:
        loss = _op("sub", input, _op("mul", target, _op("log", _op("add", input, eps))))
    if full:
        # Stirling's term for target > 1: t log t - t + 0.5 log(2 pi t).
        stirling = _op("add", _op("sub", _op("xlogy", target, target), target),
                       _op("mul", _op("log", _op("mul", target, 2 * math.pi)), 0.5))
        loss = _op("add", loss, _op("where", _op("gt", target, 1), stirling, _op("full_like", target, 0.0)))
    return _apply_reduction(loss, reduction)


def gaussian_nll_loss(input, target, var, full=False, eps=1e-6, reduction="mean"):
    _reduction_enum(reduction, "gaussian_nll_loss")
    if var.dim() == input.dim() - 1 and tuple(var.shape) == tuple(input.shape[:-1]):
        var = _op("unsqueeze", var, -1)
    elif tuple(var.shape) != tuple(input.shape) and not (var.dim() == input.dim() and var.shape[-1] == 1):
        raise ValueError("var is of incorrect size")
    if bool(_op("any", _op("lt", var, 0)).item()):
        raise ValueError("var has negative entry/entries")
    var = _op("clamp", var, eps)
    d = _op("sub", input, target)
    loss = _op("mul", _op("add", _op("log", var), _op("div", _op("mul", d, d), var)), 0.5)
    if full:
        loss = _op("add", loss, 0.5 * math.log(2 * math.pi))
    return _apply_reduction(loss, reduction)


def _margin_rows(input, target, fname):
    """(N, C) rows and their (N,) or (N, C) targets, a 1-D input taken as one row."""
    _check_tensor(input, "input", fname)
    if input.ndim not in (1, 2) or input.shape[-1] == 0:
        raise RuntimeError(f"{fname}: expected a non-empty 1-D (C) or 2-D (N, C) input, got shape {tuple(input.shape)}")
    return (input.unsqueeze(0), target.unsqueeze(0)) if input.ndim == 1 else (input, target)


def multi_margin_loss(input, target, p=1, margin=1.0, weight=None, size_average=None, reduce=None, reduction="mean"):
    """Multi-class hinge loss: sum over i != y of max(0, margin - x[y] + x[i])^p (times weight[y]) / C."""
    import tessera
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _reduction_enum(reduction, "multi_margin_loss")
    if p not in (1, 2):
        raise ValueError(f"multi_margin_loss: only p == 1 and p == 2 supported, got {p}")
    x, y = _margin_rows(input, target, "multi_margin_loss")
    if tuple(y.shape) != (x.shape[0],):
        raise RuntimeError(f"multi_margin_loss: expected a target of shape {(x.shape[0],)}, got {tuple(target.shape)}")
    z = (margin - x.gather(1, y.unsqueeze(1)) + x).clamp(min=0)
    if p == 2:
        z = z * z
    if weight is not None:
        z = z * weight[y].unsqueeze(1)
    z = z.masked_fill(tessera.zeros_like(x, dtype=tessera.bool).scatter(1, y.unsqueeze(1), True), 0.0)
    loss = z.sum(1) / x.shape[1]
    return _apply_reduction(loss if input.ndim == 2 else loss.squeeze(0), reduction)


def multilabel_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """Multi-label hinge loss: target rows list class indices up to the first -1; the loss sums
    max(0, 1 - (x[j] - x[i])) over those classes j and every other class i, divided by C."""
    import tessera
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _reduction_enum(reduction, "multilabel_margin_loss")
    x, y = _margin_rows(input, target, "multilabel_margin_loss")
    if tuple(y.shape) != tuple(x.shape):
        raise RuntimeError(f"multilabel_margin_loss: expected a target of the input's shape {tuple(input.shape)}, got "
                           f"{tuple(target.shape)}")
    valid = (y != -1).to(tessera.int64).cumprod(1).to(tessera.bool)  # the indices before the first -1
    safe = y.clamp(min=0)
    classes = tessera.arange(x.shape[1])
    is_target = ((safe.unsqueeze(2) == classes) & valid.unsqueeze(2)).any(1)  # [n, i]: i is one of the row's targets
    hinge = (1 - x.gather(1, safe).unsqueeze(2) + x.unsqueeze(1)).clamp(min=0)  # [n, j, i]
    hinge = hinge * (valid.unsqueeze(2) & ~is_target.unsqueeze(1)).to(x.dtype)
    loss = hinge.sum((1, 2)) / x.shape[1]
    return _apply_reduction(loss if input.ndim == 2 else loss.squeeze(0), reduction)


def multilabel_soft_margin_loss(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _reduction_enum(reduction, "multilabel_soft_margin_loss")
    loss = _op("neg", _op("add", _op("mul", target, logsigmoid(input)),
                          _op("mul", _op("sub", _op("full_like", target, 1.0), target), logsigmoid(_op("neg", input)))))
    if weight is not None:
        loss = _op("mul", loss, weight)
    loss = _op("mean", loss, [input.dim() - 1])
    return _apply_reduction(loss, reduction)


def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    """x1 . x2 / max(|x1| |x2|, eps) along dim, broadcasting x1 against x2."""
    dot = _op("sum", _op("mul", x1, x2), [dim])
    n1 = _op("linalg_vector_norm", x1, 2.0, [dim])
    n2 = _op("linalg_vector_norm", x2, 2.0, [dim])
    return _op("div", dot, _op("clamp", _op("mul", n1, n2), eps))


def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    return _op("linalg_vector_norm", _op("add", _op("sub", x1, x2), eps), p, [-1], keepdim)


def normalize(input, p=2.0, dim=1, eps=1e-12, out=None):
    norm = _op("clamp", _op("linalg_vector_norm", input, p, [dim], True), eps)
    return _op("div", input, norm)


def cosine_embedding_loss(input1, input2, target, margin=0.0, size_average=None, reduce=None, reduction="mean"):
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _reduction_enum(reduction, "cosine_embedding_loss")
    cos = cosine_similarity(input1, input2, dim=-1, eps=1e-12)
    zeros = _op("full_like", cos, 0.0)
    loss = _op("where", _op("eq", target, 1), _op("sub", _op("full_like", cos, 1.0), cos),
               _op("where", _op("eq", target, -1), _op("relu", _op("sub", cos, margin)), zeros))
    return _apply_reduction(loss, reduction)


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2.0, eps=1e-6, swap=False, size_average=None,
                        reduce=None, reduction="mean"):
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _reduction_enum(reduction, "triplet_margin_loss")
    d_pos = pairwise_distance(anchor, positive, p, eps)
    d_neg = pairwise_distance(anchor, negative, p, eps)
    if swap:
        d_neg = _op("minimum", d_neg, pairwise_distance(positive, negative, p, eps))
    return _apply_reduction(_op("relu", _op("add", _op("sub", d_pos, d_neg), margin)), reduction)


def triplet_margin_with_distance_loss(anchor, positive, negative, *, distance_function=None, margin=1.0, swap=False,
                                      reduction="mean"):
    """max(d(a, p) - d(a, n) + margin, 0) with any distance d (default: pairwise_distance); swap
    takes min(d(a, n), d(p, n)) as the negative's distance."""
    _reduction_enum(reduction, "triplet_margin_with_distance_loss")
    if margin <= 0:
        raise ValueError(f"TripletMarginWithDistanceLoss: expected margin to be greater than 0, got {margin} instead")
    dims = (anchor.ndim, positive.ndim, negative.ndim)
    if dims[0] != dims[1] or dims[0] != dims[2]:
        raise RuntimeError(f"The anchor, positive, and negative tensors are expected to have the same number of "
                           f"dimensions, but got: anchor {dims[0]}D, positive {dims[1]}D, and negative {dims[2]}D "
                           f"inputs")
    distance = distance_function if distance_function is not None else pairwise_distance
    d_pos = distance(anchor, positive)
    d_neg = distance(anchor, negative)
    if swap:
        d_neg = _op("minimum", d_neg, distance(positive, negative))
    return _apply_reduction(_op("relu", _op("add", _op("sub", d_pos, d_neg), margin)), reduction)


# ---------------------------------------------------------------------------- attention
def _causal_mask(L, S, device):
    rows = _op("unsqueeze", _op("arange", L, dtype=_INT64, device=device), 1)
    cols = _op("unsqueeze", _op("arange", S, dtype=_INT64, device=device), 0)
    return _op("ge", rows, cols)  # (L, S), True where attending is allowed


_GPU_ATTENTION_MAX_HEAD = 128  # the GPU plugin's fused kernel, CUDA and ROCm (backends/cuda/src/nn_launch.h)


def _flash_attention_applies(query, key, value, attn_mask):
    """Whether a fused attention kernel computes this attention: 4-D float32, bfloat16 or
    float16 on the CPU (the latter two in float32) or on cuda / hip (head sizes up to 128), the same
    batch and heads in query, key and value, and an attn_mask that is bool or of query's dtype,
    on the same device, needs no gradient and broadcasts to [B, H, L, S]. Its derivatives are in
    autograd; vmap has no rule for it, so batched tensors take the operators below."""
    dtype, device = query.dtype, query.device
    if dtype not in _FLASH_DTYPES:
        return False
    if any(t.ndim != 4 or t.dtype != dtype or t.device != device or t._is_batched for t in (query, key, value)):
        return False
    if query.shape[:2] != key.shape[:2] or key.shape[:2] != value.shape[:2]:  # broadcast heads
        return False
    B, H, L, E = query.shape
    S, Ev = key.shape[2], value.shape[3]
    if not (query.is_cpu or (device.type in ("cuda", "hip") and max(E, Ev) <= _GPU_ATTENTION_MAX_HEAD)):
        return False
    if attn_mask is not None:
        if (attn_mask.dtype not in (dtype, _BOOL) or attn_mask.device != device or attn_mask._is_batched
                or attn_mask.requires_grad or attn_mask.ndim > 4):
            return False
        target = (B, H, L, S)[4 - attn_mask.ndim:]
        if any(n != 1 and n != t for n, t in zip(attn_mask.shape, target)):
            return False
    return L > 0 and S > 0 and E > 0


def _flash_attention(query, key, value, attn_mask, is_causal, scale):
    """The fused kernel's output. A bool mask goes in as 0 where allowed and -inf elsewhere (the
    kernels add a float mask, as PyTorch's); on the CPU, bfloat16 / float16 in float32 and back
    (the CUDA kernel reads and writes them itself, computing in float32)."""
    dtype = query.dtype
    compute = _FLOAT32 if query.is_cpu else dtype
    if attn_mask is not None and attn_mask.dtype == _BOOL:
        attn_mask = _op("masked_fill", _op("full_like", attn_mask, 0.0, dtype=compute), _op("logical_not", attn_mask),
                        -math.inf)
    if dtype != compute:
        query, key, value = (t.to(compute) for t in (query, key, value))
    if attn_mask is not None and attn_mask.dtype != compute:
        attn_mask = attn_mask.to(compute)
    out = _op("_scaled_dot_product_flash_attention_for_cpu", query, key, value, 0.0, is_causal, attn_mask=attn_mask,
              scale=None if scale is None else builtins.float(scale))[0]
    return out if out.dtype == dtype else out.to(dtype)


def _repeat_kv_heads(query, key, value):
    """enable_gqa: key and value heads repeated to query's number (each serving a group of
    query heads in turn, as PyTorch's grouped-query attention)."""
    hq, hk, hv = query.shape[-3], key.shape[-3], value.shape[-3]
    if hk == 0 or hv == 0 or hq % hk or hq % hv:
        raise RuntimeError(f"scaled_dot_product_attention: Number of heads in key and value must divide the number "
                           f"of heads in query (query has {hq}, key {hk}, value {hv})")
    if hk != hq:
        key = _op("repeat_interleave", key, hq // hk, dim=-3)
    if hv != hq:
        value = _op("repeat_interleave", value, hq // hv, dim=-3)
    return key, value


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False):
    """softmax(query @ key^T * scale + mask) @ value over (..., L, E) queries, (..., S, E) keys and
    (..., S, Ev) values. A bool attn_mask marks the allowed positions (True = attend); a float mask
    is added to the scores; a query that may attend to no key gets zeros. is_causal masks out the
    upper triangle (no attn_mask then). enable_gqa lets key and value have fewer heads (dim -3)
    than query, each shared by a group of query heads."""
    for name, t in (("query", query), ("key", key), ("value", value)):
        _check_tensor(t, name, "scaled_dot_product_attention")
        if t.ndim < 2:
            raise ValueError(f"scaled_dot_product_attention: expected {name} with at least 2 dims, got {t.ndim}-D")
    if query.shape[-1] != key.shape[-1]:
        raise ValueError(f"scaled_dot_product_attention: query's embedding size {query.shape[-1]} does not match "
                         f"key's {key.shape[-1]}")
    if key.shape[-2] != value.shape[-2]:
        raise ValueError(f"scaled_dot_product_attention: key has {key.shape[-2]} positions but value has "
                         f"{value.shape[-2]}")
    if is_causal and attn_mask is not None:
        raise ValueError("scaled_dot_product_attention: pass either attn_mask or is_causal=True, not both")
    if enable_gqa and query.ndim >= 3 and key.ndim >= 3 and value.ndim >= 3:
        key, value = _repeat_kv_heads(query, key, value)
    if dropout_p == 0.0 and _flash_attention_applies(query, key, value, attn_mask):
        return _flash_attention(query, key, value, attn_mask, is_causal, scale)
    L, S = query.shape[-2], key.shape[-2]
    if scale is None:
        scale = 1.0 / math.sqrt(query.shape[-1]) if query.shape[-1] else 1.0
    scores = _op("mul", _op("matmul", query, _op("transpose", key, -2, -1)), builtins.float(scale))
    masked = attn_mask is not None
    if is_causal:
        attn_mask = _causal_mask(L, S, query.device)
    if attn_mask is not None:
        if attn_mask.dtype == _BOOL:
            scores = _op("masked_fill", scores, _op("logical_not", attn_mask), -math.inf)
        else:
            scores = _op("add", scores, attn_mask)
    if masked:  # a row that sees no key: zeros (PyTorch's safe softmax), not 0/0, nor NaN gradients
        hidden_rows = _op("logical_not", _op("any", _op("ne", scores, -math.inf), -1, True))
        attn = _op("masked_fill", _op("softmax", _op("masked_fill", scores, hidden_rows, 0.0), -1, None),
                   hidden_rows, 0.0)
    else:
        attn = _op("softmax", scores, -1, None)
    if dropout_p > 0.0:
        attn = dropout(attn, dropout_p, True)
    return _op("matmul", attn, value)


def _mha_check_shapes(query, key, value, key_padding_mask, attn_mask, num_heads):
    """torch's shape rules for multi-head attention inputs; returns whether the input is batched."""
    qd, kd, vd = query.ndim, key.ndim, value.ndim
    if qd == 3:
        if kd != 3 or vd != 3:
            raise AssertionError(f"For batched (3-D) `query`, expected `key` and `value` to be 3-D but found {kd}-D "
                                 f"and {vd}-D tensors respectively")
        if key_padding_mask is not None and key_padding_mask.ndim != 2:
            raise AssertionError(f"For batched (3-D) `query`, expected `key_padding_mask` to be `None` or 2-D but "
                                 f"found {key_padding_mask.ndim}-D tensor instead")
        if attn_mask is not None and attn_mask.ndim not in (2, 3):
            raise AssertionError(f"For batched (3-D) `query`, expected `attn_mask` to be `None`, 2-D or 3-D but found "
                                 f"{attn_mask.ndim}-D tensor instead")
        return True
    if qd == 2:
        if kd != 2 or vd != 2:
            raise AssertionError(f"For unbatched (2-D) `query`, expected `key` and `value` to be 2-D but found {kd}-D "
                                 f"and {vd}-D tensors respectively")
        if key_padding_mask is not None and key_padding_mask.ndim != 1:
            raise AssertionError(f"For unbatched (2-D) `query`, expected `key_padding_mask` to be `None` or 1-D but "
                                 f"found {key_padding_mask.ndim}-D tensor instead")
        if attn_mask is not None:
            if attn_mask.ndim not in (2, 3):
                raise AssertionError(f"For unbatched (2-D) `query`, expected `attn_mask` to be `None`, 2-D or 3-D but "
                                     f"found {attn_mask.ndim}-D tensor instead")
            want = (num_heads, query.shape[0], key.shape[0])
            if attn_mask.ndim == 3 and tuple(attn_mask.shape) != want:
                raise AssertionError(f"Expected `attn_mask` shape to be {want} but got {tuple(attn_mask.shape)}")
        return False
    raise AssertionError(f"query should be unbatched 2D or batched 3D tensor but received {qd}-D query tensor")


def _mha_float_mask(mask, name, dtype, other=None, other_name=""):
    """A bool mask (True = masked out) as an additive float mask of `dtype`; float masks pass through.
    Like torch, masks of other dtypes are refused and a mask whose dtype differs from `other`'s warns."""
    if mask is None:
        return None
    if mask.dtype != _BOOL and not mask.dtype.is_floating_point:
        raise AssertionError(f"only bool and floating types of {name} are supported, got {mask.dtype.name}")
    if other is not None and other.dtype != mask.dtype:
        warnings.warn(f"Support for mismatched {name} and {other_name} is deprecated. Use same type for both instead.",
                      stacklevel=3)
    if mask.dtype == _BOOL:
        return _op("masked_fill", _op("zeros", list(mask.shape), dtype=dtype, device=mask.device), mask, -math.inf)
    return mask


def _mha_in_projection(query, key, value, e, packed, wq, wk, wv, bias):
    """q, k, v projections of batch-first inputs. With the packed (3E, E) weight, self-attention (query
    is key is value) takes one matrix product and key is value takes two; the slices are views."""
    for name, x, w in (("query", query, wq), ("key", key, wk), ("value", value, wv)):
        if packed is None and tuple(w.shape) != (e, x.shape[-1]):  # separate weights: torch asserts their shapes
            raise AssertionError(f"expecting {name} weights shape of {(e, x.shape[-1])}, but got {tuple(w.shape)}")
        if packed is not None and x.shape[-1] != e:  # torch reports this as a failed matrix product
            raise RuntimeError(f"multi_head_attention_forward: {name}'s embedding size must be {e} (in_proj_weight's "
                               f"in_features), got {name} of shape {tuple(x.shape)}")
    bq = bk = bv = None
    if bias is not None:
        bq, bk, bv = (_op("narrow", bias, 0, i * e, e) for i in range(3))
    if packed is not None:
        if query is key and key is value:
            qkv = linear(query, packed, bias)
            return tuple(_op("narrow", qkv, -1, i * e, e) for i in range(3))
        if key is value:
            kv = linear(key, _op("narrow", packed, 0, e, 2 * e), None if bias is None else _op("narrow", bias, 0, e,
                                                                                                2 * e))
            return linear(query, wq, bq), _op("narrow", kv, -1, 0, e), _op("narrow", kv, -1, e, e)
    return linear(query, wq, bq), linear(key, wk, bk), linear(value, wv, bv)


def _mha_static(t, name, n, num_heads, hd):
    """A caller's precomputed (N * num_heads, S, head_dim) key or value as (N, num_heads, S, head_dim)."""
    if t.ndim != 3 or t.shape[0] != n * num_heads:
        raise AssertionError(f"expecting {name}.size(0) of {n * num_heads}, but got {t.shape[0]}")
    if t.shape[2] != hd:
        raise AssertionError(f"expecting {name}.size(2) of {hd}, but got {t.shape[2]}")
    return _op("reshape", t, [n, num_heads, t.shape[1], hd])


def multi_head_attention_forward(query, key, value, embed_dim_to_check, num_heads, in_proj_weight, in_proj_bias,
                                 bias_k, bias_v, add_zero_attn, dropout_p, out_proj_weight, out_proj_bias,
                                 training=True, key_padding_mask=None, need_weights=True, attn_mask=None,
                                 use_separate_proj_weight=False, q_proj_weight=None, k_proj_weight=None,
                                 v_proj_weight=None, static_k=None, static_v=None, average_attn_weights=True,
                                 is_causal=False, *, batch_first=False):
    """torch.nn.functional.multi_head_attention_forward. Inputs are (L, N, E) query and (S, N, Ek / Ev)
    key / value, or unbatched (L, E) and (S, Ek / Ev); batch_first=True (a Tessera extension, used by
    nn.MultiheadAttention) takes (N, L, E) instead. Masks: bool True = not allowed, float = added to
    the scores. is_causal with no attn_mask applies the causal mask (torch asks for the mask too).
    Returns (output, attention weights averaged over heads, or per head, or None)."""
    for name, t in (("query", query), ("key", key), ("value", value)):
        _check_tensor(t, name, "multi_head_attention_forward")
    batched = _mha_check_shapes(query, key, value, key_padding_mask, attn_mask, num_heads)
    self_attention, kv_same = query is key and key is value, key is value
    # Work batch-first: (N, L, E) queries, (N, S, E) keys and values; transposes are views.
    if not batched:
        query, key, value = (_op("unsqueeze", t, 0) for t in (query, key, value))
        if key_padding_mask is not None:
            key_padding_mask = _op("unsqueeze", key_padding_mask, 0)
    elif not batch_first:
        query, key, value = (_op("transpose", t, 0, 1) for t in (query, key, value))
    n, L, e = query.shape
    S = key.shape[1]
    if self_attention:
        key = value = query
    elif kv_same:
        value = key
    key_padding_mask = _mha_float_mask(key_padding_mask, "key_padding_mask", query.dtype, attn_mask, "attn_mask")
    causal_only = is_causal and attn_mask is None and key_padding_mask is None  # (until bias_k / add_zero_attn)
    if is_causal and attn_mask is None:
        attn_mask = _op("logical_not", _causal_mask(L, S, query.device))
    attn_mask = _mha_float_mask(attn_mask, "attn_mask", query.dtype)
    if e != embed_dim_to_check:
        raise AssertionError(f"was expecting embedding dimension of {embed_dim_to_check}, but got {e}")
    hd = e // num_heads
    if hd * num_heads != e:
        raise AssertionError(f"embed_dim {e} not divisible by num_heads {num_heads}")
    if use_separate_proj_weight:  # key and value may then have their own embedding sizes
        if tuple(key.shape[:2]) != tuple(value.shape[:2]):
            raise AssertionError(f"key's sequence and batch dims {tuple(key.shape[:2])} do not match value's "
                                 f"{tuple(value.shape[:2])}")
        for name, w in (("q", q_proj_weight), ("k", k_proj_weight), ("v", v_proj_weight)):
            if w is None:
                raise AssertionError(f"use_separate_proj_weight is True but {name}_proj_weight is None")
        q, k, v = _mha_in_projection(query, key, value, e, None, q_proj_weight, k_proj_weight, v_proj_weight,
                                     in_proj_bias)
    else:
        if tuple(key.shape) != tuple(value.shape):
            raise AssertionError(f"key shape {tuple(key.shape)} does not match value shape {tuple(value.shape)}")
        if in_proj_weight is None:
            raise AssertionError("use_separate_proj_weight is False but in_proj_weight is None")
        wq, wk, wv = (_op("narrow", in_proj_weight, 0, i * e, e) for i in range(3))
        q, k, v = _mha_in_projection(query, key, value, e, in_proj_weight, wq, wk, wv, in_proj_bias)

    if attn_mask is not None:  # to (1, 1, L, S) or (N, H, L, S), broadcasting over the scores
        if attn_mask.ndim == 2:
            if tuple(attn_mask.shape) != (L, S):
                raise RuntimeError(f"The shape of the 2D attn_mask is {tuple(attn_mask.shape)}, but should be "
                                   f"{(L, S)}.")
            attn_mask = _op("reshape", attn_mask, [1, 1, L, S])
        elif attn_mask.ndim == 3:
            if tuple(attn_mask.shape) != (n * num_heads, L, S):
                raise RuntimeError(f"The shape of the 3D attn_mask is {tuple(attn_mask.shape)}, but should be "
                                   f"{(n * num_heads, L, S)}.")
            attn_mask = _op("reshape", attn_mask, [n, num_heads, L, S])
        else:
            raise RuntimeError(f"attn_mask's dimension {attn_mask.ndim} is not supported")

    def extend_masks(am, kpm):  # one more key position, open to every query
        return (None if am is None else _op("constant_pad_nd", am, [0, 1], 0.0),
                None if kpm is None else _op("constant_pad_nd", kpm, [0, 1], 0.0))

    if bias_k is not None and bias_v is not None:  # a learned extra key / value appended to each sequence
        if static_k is not None:
            raise AssertionError("bias cannot be added to static key.")
        if static_v is not None:
            raise AssertionError("bias cannot be added to static value.")
        k = _op("cat", [k, _op("expand", _op("reshape", bias_k, [1, 1, e]), [n, 1, e])], 1)
        v = _op("cat", [v, _op("expand", _op("reshape", bias_v, [1, 1, e]), [n, 1, e])], 1)
        attn_mask, key_padding_mask = extend_masks(attn_mask, key_padding_mask)
        causal_only = False
    elif bias_k is not None or bias_v is not None:
        raise AssertionError("bias_k is set but bias_v is None" if bias_k is not None else
                             "bias_v is set but bias_k is None")

    # (N, len, E) -> (N, H, len, head_dim)
    q = _op("transpose", _op("reshape", q, [n, L, num_heads, hd]), 1, 2)
    k = _mha_static(static_k, "static_k", n, num_heads, hd) if static_k is not None else \
        _op("transpose", _op("reshape", k, [n, k.shape[1], num_heads, hd]), 1, 2)
    v = _mha_static(static_v, "static_v", n, num_heads, hd) if static_v is not None else \
        _op("transpose", _op("reshape", v, [n, v.shape[1], num_heads, hd]), 1, 2)
    if add_zero_attn:  # a zero key / value: its score is 0, so it soaks up some weight and adds nothing
        zeros = _op("zeros", [n, num_heads, 1, hd], dtype=k.dtype, device=k.device)
        k = _op("cat", [k, zeros], 2)
        v = _op("cat", [v, zeros], 2)
        attn_mask, key_padding_mask = extend_masks(attn_mask, key_padding_mask)
        causal_only = False
    S = k.shape[2]

    mask = attn_mask
    if key_padding_mask is not None:
        if key_padding_mask.shape[0] != n:
            raise AssertionError(f"Expected key_padded_mask.shape[0] to be {n}, but got {key_padding_mask.shape[0]}")
        if key_padding_mask.shape[1] != S:
            raise AssertionError(f"Expected key_padded_mask.shape[1] to be {S}, but got {key_padding_mask.shape[1]}")
        kpm = _op("reshape", key_padding_mask, [n, 1, 1, S])
        mask = kpm if mask is None else _op("add", mask, kpm)

    if not need_weights:  # as torch: scaled_dot_product_attention (a fused kernel where one applies)
        out = scaled_dot_product_attention(q, k, v, attn_mask=None if causal_only else mask,
                                           dropout_p=dropout_p if training else 0.0, is_causal=causal_only)
        out = linear(_op("reshape", _op("transpose", out, 1, 2), [n, L, e]), out_proj_weight, out_proj_bias)
        if not batched:
            out = _op("squeeze", out, 0)
        elif not batch_first:
            out = _op("transpose", out, 0, 1)
        return out, None
    # Scale q before the product, as torch does: L x hd multiplies instead of L x S.
    q = _op("mul", q, 1.0 / math.sqrt(hd) if hd else 1.0)
    scores = _op("matmul", q, _op("transpose", k, -2, -1))
    if mask is not None:
        scores = _op("add", scores, mask)
    attn = _op("softmax", scores, -1, None)
    if training and dropout_p > 0.0:
        attn = dropout(attn, dropout_p, True)
    out = _op("matmul", attn, v)  # (N, H, L, hd)
    out = linear(_op("reshape", _op("transpose", out, 1, 2), [n, L, e]), out_proj_weight, out_proj_bias)
    weights = None
    if need_weights:
        weights = _op("mean", attn, [1]) if average_attn_weights else attn
        if not batched:
            weights = _op("squeeze", weights, 0)
    if not batched:
        out = _op("squeeze", out, 0)
    elif not batch_first:
        out = _op("transpose", out, 0, 1)
    return out, weights


# ---------------------------------------------------------------------------- __torch_function__ stubs
# Tessera tensors have no __torch_function__ overrides, so code that asks whether to dispatch
# (copied torch.nn.functional helpers, third-party layers) is always told no.
def has_torch_function(relevant_args):
    return False


def has_torch_function_unary(input):
    return False


def has_torch_function_variadic(*args):
    return False


def handle_torch_function(public_api, relevant_args, *args, **kwargs):
    """Never reached when has_torch_function is False; calls the function plainly if it is."""
    return public_api(*args, **kwargs)


# ---------------------------------------------------------------------------- shape helpers
def flatten(input, start_dim=0, end_dim=-1):
    return _op("flatten", input, start_dim, end_dim)


def one_hot(tensor, num_classes=-1):
    """int64 one-hot encoding with a trailing dim of num_classes (max + 1 when -1)."""
    if tensor.dtype != _INT64:
        raise TypeError(f"one_hot is only applicable to index tensor of type int64, got {tensor.dtype.name}")
    if num_classes == -1:
        num_classes = builtins.int(_op("amax", tensor).item()) + 1 if tensor.numel() else 0
    classes = _op("arange", num_classes, dtype=_INT64, device=tensor.device)
    return _op("to", _op("eq", _op("unsqueeze", tensor, -1), classes), _INT64)


# The functional forms of the layer families added after this file (padding, interpolation, pixel
# shuffle, pooling variants, ...) live in their own file and are re-exported here under torch's names.
from tessera.nn._functional_layers import *  # noqa: E402,F401,F403
from tessera.nn._linear_cross_entropy import linear_cross_entropy  # noqa: E402,F401
from tessera.nn._grouped_mm import grouped_mm  # noqa: E402,F401
