"""Functional forms of layer families (padding, interpolation, pixel shuffle), re-exported by
tessera.nn.functional. Helpers of functional.py are imported from it: it imports this file last, so
they exist by then."""
import builtins
import math

from tessera.nn.functional import (_adaptive_bounds, _lp_finish, _ntuple, _op, avg_pool2d, avg_pool3d,
                                   max_pool3d)

__all__ = ["pad", "interpolate", "upsample", "upsample_nearest", "upsample_bilinear", "pixel_shuffle",
           "pixel_unshuffle", "channel_shuffle", "local_response_norm", "adaptive_max_pool3d",
           "adaptive_max_pool3d_with_indices", "max_unpool3d", "lp_pool3d", "fractional_max_pool2d",
           "fractional_max_pool2d_with_indices"]


# ---------------------------------------------------------------------------- padding
def _circular_pad(input, pad):
    out = input
    for i in range(len(pad) // 2):
        dim = input.dim() - 1 - i
        left, right = pad[2 * i], pad[2 * i + 1]
        size = out.shape[dim]
        if left > size or right > size:
            raise ValueError("Padding value causes wrapping around more than once.")
        parts = []
        if left > 0:
            parts.append(_op("narrow", out, dim, size - left, left))
        parts.append(_op("narrow", out, dim, builtins.max(-left, 0), size - builtins.max(-left, 0) - builtins.max(-right, 0)))
        if right > 0:
            parts.append(_op("narrow", out, dim, 0, right))
        out = _op("cat", parts, dim)
    return out


def pad(input, pad, mode="constant", value=None):
    """torch.nn.functional.pad: pad lists (left, right) pairs from the last dim backwards."""
    pad = [int(p) for p in pad]
    if len(pad) % 2:
        raise RuntimeError(f"Padding length must be divisible by 2, got {len(pad)}")
    if len(pad) // 2 > input.dim():
        raise RuntimeError(f"Padding length should be less than or equal to two times the input dimension but got "
                           f"padding length {len(pad)} and input of dimension {input.dim()}")
    if mode == "constant":
        return _op("constant_pad_nd", input, pad, 0.0 if value is None else value)
    if value not in (None, 0, 0.0):
        raise ValueError(f'Padding mode "{mode}" doesn\'t take in value argument')
    if mode == "circular":
        return _circular_pad(input, pad)
    spatial = len(pad) // 2
    if mode not in ("reflect", "replicate"):
        raise NotImplementedError(f"Unsupported padding mode: {mode}; expected constant, reflect, replicate or "
                                  f"circular")
    if spatial not in (1, 2, 3) or input.dim() not in (spatial + 1, spatial + 2):
        raise NotImplementedError(f"Only 2D, 3D, 4D, 5D padding with non-constant padding are supported for now; "
                                  f"got a {input.dim()}-D input with {len(pad)} pad values in {mode} mode")
    if mode == "reflect":
        for i in range(spatial):
            size = input.shape[input.dim() - 1 - i]
            if pad[2 * i] >= size or pad[2 * i + 1] >= size:
                raise RuntimeError(f"pad: reflect padding size should be less than the corresponding input dimension,"
                                   f" but got padding ({pad[2 * i]}, {pad[2 * i + 1]}) at dimension "
                                   f"{input.dim() - 1 - i} of size {size}")
        return _op(f"reflection_pad{spatial}d", input, pad)
    if spatial == 1:  # replication_pad1d as 2-D with no vertical padding
        return _op("squeeze", _op("replication_pad2d", _op("unsqueeze", input, -2), pad + [0, 0]), -2)
    return _op(f"replication_pad{spatial}d", input, pad)


# ---------------------------------------------------------------------------- interpolation
def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None, recompute_scale_factor=None,
                antialias=False):
    """Nearest and bilinear on 4-D input (nearest on 3-D and 5-D through it), as torch."""
    if antialias:
        raise NotImplementedError("interpolate: antialias=True is not supported")
    if (size is None) == (scale_factor is None):
        raise ValueError("only one of size or scale_factor should be defined")
    if mode in ("nearest", "area", "nearest-exact") and align_corners is not None:
        raise ValueError("align_corners option can only be set with the interpolating modes: linear | bilinear | "
                         "bicubic | trilinear")
    spatial = input.dim() - 2
    if spatial < 1:
        raise ValueError(f"interpolate: expected a batched input with at least one spatial dim, got {input.dim()}-D")

    def per_dim(value, name):
        values = list(value) if isinstance(value, (list, tuple)) else [value] * spatial
        if len(values) != spatial:
            raise ValueError(f"Input and {name} must have the same number of spatial dimensions, but got input with "
                             f"spatial dimensions of {list(input.shape[2:])} and {name} of {list(value)}. ")
        return values

    sizes = per_dim(size, "output size") if size is not None else None
    scales = [float(s) for s in per_dim(scale_factor, "scale_factor")] if scale_factor is not None else None
    if scales is not None and recompute_scale_factor:
        sizes = [int(math.floor(n * s)) for n, s in zip(input.shape[2:], scales)]
        scales = None
    if mode == "nearest" and spatial == 2:
        return _op("upsample_nearest2d.vec", input, sizes, scales)
    if mode == "nearest" and spatial == 1:
        out = _op("upsample_nearest2d.vec", _op("unsqueeze", input, 2), None if sizes is None else [1] + sizes,
                  None if scales is None else [1.0] + scales)
        return _op("squeeze", out, 2)
    if mode == "nearest" and spatial == 3:
        # Depth first (as a 2-D upsample over depth x 1), then height and width.
        n, c, d, h, w = input.shape
        out_d = sizes[0] if sizes is not None else int(math.floor(d * scales[0]))
        flat = _op("reshape", input, [n, c, d, h * w])
        deep = _op("upsample_nearest2d.vec", flat, [out_d, h * w], None)
        deep = _op("reshape", deep, [n, c * out_d, h, w])
        hw = _op("upsample_nearest2d.vec", deep, None if sizes is None else sizes[1:],
                 None if scales is None else scales[1:])
        return _op("reshape", hw, [n, c, out_d, hw.shape[2], hw.shape[3]])
    if mode == "bilinear":
        if spatial != 2:
            raise NotImplementedError(f"Got {input.dim()}D input, but bilinear mode needs 4D input")
        return _op("upsample_bilinear2d.vec", input, sizes, bool(align_corners), scales)
    if mode == "linear":
        if spatial != 1:
            raise NotImplementedError(f"Got {input.dim()}D input, but linear mode needs 3D input")
        out = _op("upsample_bilinear2d.vec", _op("unsqueeze", input, 2), None if sizes is None else [1] + sizes,
                  bool(align_corners), None if scales is None else [1.0] + scales)
        return _op("squeeze", out, 2)
    raise NotImplementedError(f"interpolate: mode {mode!r} is not supported on {input.dim()}-D input yet "
                              f"(nearest on 3-D, 4-D and 5-D, linear on 3-D and bilinear on 4-D are)")


def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None):
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input, size=None, scale_factor=None):
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input, size=None, scale_factor=None):
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)


# ---------------------------------------------------------------------------- pixel and channel shuffles
def pixel_shuffle(input, upscale_factor):
    """(*, C r^2, H, W) -> (*, C, H r, W r)."""
    r = int(upscale_factor)
    if input.dim() < 3:
        raise RuntimeError(f"pixel_shuffle expects input to have at least 3 dimensions, but got input with "
                           f"{input.dim()} dimension(s)")
    *batch, c, h, w = input.shape
    if c % (r * r):
        raise RuntimeError(f"pixel_shuffle expects its input's 'channel' dimension to be divisible by the square of "
                           f"upscale_factor, but input.size(-3)={c} is not divisible by {r * r}")
    nb = len(batch)
    x = _op("reshape", input, list(batch) + [c // (r * r), r, r, h, w])
    order = list(range(nb)) + [nb, nb + 3, nb + 1, nb + 4, nb + 2]
    return _op("reshape", _op("permute", x, order), list(batch) + [c // (r * r), h * r, w * r])


def pixel_unshuffle(input, downscale_factor):
    """(*, C, H r, W r) -> (*, C r^2, H, W)."""
    r = int(downscale_factor)
    if input.dim() < 3:
        raise RuntimeError(f"pixel_unshuffle expects input to have at least 3 dimensions, but got input with "
                           f"{input.dim()} dimension(s)")
    *batch, c, h, w = input.shape
    if h % r or w % r:
        raise RuntimeError(f"pixel_unshuffle expects height and width to be divisible by downscale_factor, but got "
                           f"height {h} and width {w} for downscale_factor {r}")
    nb = len(batch)
    x = _op("reshape", input, list(batch) + [c, h // r, r, w // r, r])
    order = list(range(nb)) + [nb, nb + 2, nb + 4, nb + 1, nb + 3]
    return _op("reshape", _op("permute", x, order), list(batch) + [c * r * r, h // r, w // r])


def channel_shuffle(input, groups):
    n, c = input.shape[0], input.shape[1]
    if c % groups:
        raise RuntimeError(f"Number of channels must be divisible by groups. Got {c} channels and {groups} groups.")
    rest = list(input.shape[2:])
    x = _op("reshape", input, [n, groups, c // groups] + rest)
    return _op("reshape", _op("contiguous", _op("transpose", x, 1, 2)), [n, c] + rest)


# ---------------------------------------------------------------------------- local response normalization
def local_response_norm(input, size, alpha=1e-4, beta=0.75, k=1.0):
    """torch.nn.functional.local_response_norm over the channels (dim 1) of an (N, C, *) input:
    out_c = in_c / (k + alpha / size * sum of in_j^2 over j in [c - size // 2, c + (size - 1) // 2])^beta,
    channels past either end counting as zero."""
    dim = input.dim()
    if dim < 3:
        raise ValueError(f"Expected 3D or higher dimensionality input (got {dim} dimensions)")
    if input.numel() == 0:
        return input
    n, c = input.shape[0], input.shape[1]
    # The window sum is a (size, 1) average pool over an (N, 1, C, rest) view, channels as the height:
    # one pooling kernel whatever the rank, and its derivative is already known.
    sq = _op("reshape", _op("mul", input, input), [n, 1, c, -1])
    sq = _op("constant_pad_nd", sq, [0, 0, size // 2, (size - 1) // 2], 0.0)
    div = _op("reshape", avg_pool2d(sq, (size, 1), stride=1), list(input.shape))
    div = _op("pow", _op("add", _op("mul", div, builtins.float(alpha)), builtins.float(k)), builtins.float(beta))
    return _op("div", input, div)


# ---------------------------------------------------------------------------- pooling variants
def _pool3d_input(input, fname, message=None):
    if input.dim() not in (4, 5) or any(n == 0 for n in input.shape[-4:]):
        raise RuntimeError(message or f"{fname}(): Expected a non-empty 4D (C, D, H, W) or 5D (N, C, D, H, W) tensor, "
                                      f"but got: {list(input.shape)}")


def adaptive_max_pool3d_with_indices(input, output_size, return_indices=True):
    """The max over windows chosen so the output is output_size (an int or a triple; None keeps
    that input size), and the int64 argmax of each window, flat over D * H * W. Max is
    separable: the depth windows first, then the rows', then the columns'."""
    import tessera
    _pool3d_input(input, "adaptive_max_pool3d")
    sizes = list(input.shape[-3:])
    if output_size is None or isinstance(output_size, builtins.int):
        output_size = [output_size] * 3
    output_size = list(output_size)
    if len(output_size) != 3:
        raise RuntimeError(f"adaptive_max_pool3d(): expected output_size to be an int or 3 ints (None keeps a size), "
                           f"got {output_size}")
    out_sizes = [sizes[i] if o is None else builtins.int(o) for i, o in enumerate(output_size)]
    if any(o < 0 for o in out_sizes):
        raise RuntimeError(f"adaptive_max_pool3d(): expected output_size >= 0, got {out_sizes}")
    D, H, W = sizes
    lead = list(input.shape[:-3])
    if 0 in out_sizes:
        return (tessera.zeros(lead + out_sizes, dtype=input.dtype, device=input.device),
                tessera.zeros(lead + out_sizes, dtype=tessera.int64, device=input.device))
    od, oh, ow = out_sizes
    # depth: (.., od, H, W) maxima and their d
    parts = [input[..., a:b, :, :].max(-3) for a, b in _adaptive_bounds(D, od)]
    vd = tessera.stack([p[0] for p in parts], -3)
    ad = tessera.stack([p[1] + a for p, (a, _) in zip(parts, _adaptive_bounds(D, od))], -3)
    # rows: (.., od, oh, W) maxima, their d (gathered) and h
    vh, ah, adh = [], [], []
    for a, b in _adaptive_bounds(H, oh):
        v, arg = vd[..., a:b, :].max(-2)
        vh.append(v)
        ah.append(arg + a)
        adh.append(ad[..., a:b, :].gather(-2, arg.unsqueeze(-2)).squeeze(-2))
    vh, ah, adh = tessera.stack(vh, -2), tessera.stack(ah, -2), tessera.stack(adh, -2)
    values, flat = [], []
    for a, b in _adaptive_bounds(W, ow):
        v, arg = vh[..., a:b].max(-1)
        idx = arg.unsqueeze(-1)
        d = adh[..., a:b].gather(-1, idx).squeeze(-1)
        h = ah[..., a:b].gather(-1, idx).squeeze(-1)
        values.append(v)
        flat.append((d * H + h) * W + arg + a)
    return tessera.stack(values, -1), tessera.stack(flat, -1)


def adaptive_max_pool3d(input, output_size, return_indices=False):
    """3-D adaptive max pooling over (N, C, D, H, W) or (C, D, H, W); with return_indices, also
    the int64 argmax of each window, flat over D * H * W."""
    out, indices = adaptive_max_pool3d_with_indices(input, output_size)
    return (out, indices) if return_indices else out


def _unpool_output_size(input, kernel_size, stride, padding, output_size):
    """max_unpool's spatial output size: (in - 1) stride + kernel - 2 padding, or output_size
    (the spatial sizes, or with N and C in front), which must lie within a stride of it."""
    n = len(kernel_size)
    default = [(input.shape[-n + d] - 1) * stride[d] + kernel_size[d] - 2 * padding[d] for d in range(n)]
    if output_size is None:
        return default
    output_size = [builtins.int(v) for v in output_size]
    if len(output_size) == n + 2:
        output_size = output_size[2:]
    if len(output_size) != n:
        raise ValueError(f"output_size should be a sequence containing {n} or {n + 2} elements, but it has a length of "
                         f"'{len(output_size)}'")
    for d in range(n):
        lo, hi = default[d] - stride[d], default[d] + stride[d]
        if not lo < output_size[d] < hi:
            raise ValueError(f'invalid output_size "{tuple(output_size)}" (dim {d} must be between {lo} and {hi})')
    return output_size


def max_unpool3d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """The inverse of max_pool3d: each value put back at its flat index (over D * H * W of the
    output) in a zero tensor."""
    import tessera
    if input.dim() not in (4, 5):
        raise RuntimeError(f"max_unpool3d: input should be a 4d or 5d Tensor, but got a tensor with {input.dim()} "
                           "dimensions.")
    if tuple(indices.shape) != tuple(input.shape):
        raise RuntimeError(f"max_unpool3d: expected shape of indices to be same as that of the input tensor "
                           f"({list(input.shape)}) but got indices tensor with shape: {list(indices.shape)}")
    k = _ntuple(kernel_size, 3, "kernel_size", "max_unpool3d")
    s = k if stride is None else _ntuple(stride, 3, "stride", "max_unpool3d")
    p = _ntuple(padding, 3, "padding", "max_unpool3d")
    size = _unpool_output_size(input, k, s, p, output_size)
    lead = tuple(input.shape[:-3])
    flat_in, flat_idx = input.reshape(*lead, -1), indices.reshape(*lead, -1)
    volume = size[0] * size[1] * size[2]
    if flat_idx.numel():
        lo, hi = builtins.int(flat_idx.min()), builtins.int(flat_idx.max())
        if lo < 0 or hi >= volume:
            bad = hi if hi >= volume else lo
            raise RuntimeError(f"max_unpool3d: found an invalid max index: {bad} (output volumes are of size {size[0]}x{size[1]}x{size[2]})")
    out = tessera.zeros(*lead, volume, dtype=input.dtype, device=input.device).scatter(-1, flat_idx, flat_in)
    return out.reshape(*lead, *size)


def lp_pool3d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """The p-norm of each kD x kH x kW window: (sum x^p)^(1/p); p = inf is max pooling of |x|."""
    _pool3d_input(input, "lp_pool3d")
    kd, kh, kw = _ntuple(kernel_size, 3, "kernel_size", "lp_pool3d")
    if isinstance(norm_type, (builtins.int, builtins.float)):
        if norm_type == 0:
            raise ValueError(f"lp_pool3d: norm_type must be a non-zero value, but got {norm_type}")
        if norm_type == math.inf:
            return max_pool3d(input.abs(), kernel_size, stride, 0, 1, ceil_mode)
        if norm_type == -math.inf:
            return -max_pool3d(-input.abs(), kernel_size, stride, 0, 1, ceil_mode)
    out = avg_pool3d(input.pow(norm_type), [kd, kh, kw], stride, 0, ceil_mode)
    return _lp_finish(out, kd * kh * kw, norm_type)


_NUMPY_FLOAT = {"float16": "float16", "float64": "float64"}  # others compute in float32, as torch's CPU kernel


def _fractional_intervals(samples, in_size, out_size, pool):
    """torch's generate_intervals for every plane at once: the window starts
    int((i + u) alpha) - int(u alpha), alpha = (in - pool) / (out - 1), the last one in - pool,
    computed in the samples' float type (so they round as torch's)."""
    import numpy as np
    seq = np.empty(samples.shape + (out_size,), dtype=np.int64)
    if out_size > 1:
        ft = samples.dtype.type
        alpha = ft(in_size - pool) / ft(out_size - 1)
        i = np.arange(out_size - 1).astype(samples.dtype)
        u = samples[..., None]
        seq[..., :-1] = ((i + u) * alpha).astype(np.int64) - (u * alpha).astype(np.int64)
    if out_size > 0:
        seq[..., -1] = in_size - pool
    return seq


def fractional_max_pool2d_with_indices(input, kernel_size, output_size=None, output_ratio=None, return_indices=False,
                                       _random_samples=None):
    """Fractional max pooling (Graham, 2014): kH x kW windows at pseudo-random steps chosen so
    the output is output_size (or output_ratio times the input); returns the maxima and their
    int64 indices, flat over H * W. _random_samples, (N, C, 2) in [0, 1) (the width's sample
    first), fixes the steps; by default they are drawn with tessera.rand."""
    import numpy as np
    import tessera
    if output_size is None and output_ratio is None:
        raise ValueError("fractional_max_pool2d requires specifying either an output_size or an output_ratio")
    if input.dim() < 3 and _random_samples is None:
        raise IndexError(f"fractional_max_pool2d(): Dimension out of range: expected a 3D (C, H, W) or 4D (N, C, H, W) "
                         f"input, got {input.dim()}D input of shape {list(input.shape)}")
    if input.dim() not in (3, 4) or any(n == 0 for n in input.shape[-3:]):
        raise RuntimeError(f"fractional_max_pool2d(): Expected 3D or 4D tensor, but got: {list(input.shape)}")
    kh, kw = _ntuple(kernel_size, 2, "kernel_size", "fractional_max_pool2d")
    H, W = input.shape[-2], input.shape[-1]
    if output_size is None:
        ratio = [output_ratio] * 2 if isinstance(output_ratio, (builtins.int, builtins.float)) else list(output_ratio)
        if len(ratio) > 2:
            raise ValueError("fractional_max_pool2d requires output_ratio to either be a single Int or tuple of Ints.")
        if len(ratio) == 1:
            ratio = ratio * 2
        output_size = [builtins.int(H * ratio[0]), builtins.int(W * ratio[1])]
    oh, ow = _ntuple(output_size, 2, "output_size", "fractional_max_pool2d")
    if oh + kh - 1 > H:
        raise RuntimeError(f"fractional_max_pool2d(): pool height {kh} too large relative to input height {H}")
    if ow + kw - 1 > W:
        raise RuntimeError(f"fractional_max_pool2d(): pool width {kw} too large relative to input width {W}")
    batched = input.dim() == 4
    x = input if batched else input.unsqueeze(0)
    N, C = x.shape[0], x.shape[1]
    if _random_samples is None:
        _random_samples = tessera.rand(N, C, 2, dtype=input.dtype, device=input.device)
    if _random_samples.dim() != 3:
        raise RuntimeError(f"fractional_max_pool2d(): expected _random_samples to have 3 dimensions, got "
                           f"{_random_samples.dim()}")
    if _random_samples.shape[0] < N:
        raise RuntimeError("fractional_max_pool2d(): expected _random_samples.size(0) no less than the input batch "
                           f"size {N}, got {_random_samples.shape[0]}")
    if _random_samples.shape[1] != C:
        raise RuntimeError(f"fractional_max_pool2d(): expected _random_samples.size(1) to equal the input channel size "
                           f"{C}, got {_random_samples.shape[1]}")
    if _random_samples.shape[2] != 2:
        raise RuntimeError(f"fractional_max_pool2d(): expected _random_samples.size(2) to equal 2, got "
                           f"{_random_samples.shape[2]}")
    np_float = np.dtype(_NUMPY_FLOAT.get(input.dtype.name, "float32"))
    samples = np.array(_random_samples[:N].tolist(), dtype=np.float64).astype(np_float).reshape(N, C, 2)
    seq_w = _fractional_intervals(samples[..., 0], W, ow, kw)  # (N, C, ow)
    seq_h = _fractional_intervals(samples[..., 1], H, oh, kh)  # (N, C, oh)
    # Every window's flat input positions, (N, C, oh, ow, kh, kw), row-major as torch scans them.
    rows = seq_h[:, :, :, None, None, None] + np.arange(kh)[:, None]
    cols = seq_w[:, :, None, :, None, None] + np.arange(kw)
    positions = (rows * W + cols).reshape(N, C, -1)
    index = tessera.tensor(positions, dtype=tessera.int64, device=input.device)
    windows = x.reshape(N, C, H * W).gather(-1, index).reshape(N, C, oh, ow, kh * kw)
    out, arg = windows.max(-1)
    indices = index.reshape(N, C, oh, ow, kh * kw).gather(-1, arg.unsqueeze(-1)).squeeze(-1)
    if not batched:
        out, indices = out.squeeze(0), indices.squeeze(0)
    return out, indices


def fractional_max_pool2d(input, kernel_size, output_size=None, output_ratio=None, return_indices=False,
                          _random_samples=None):
    """2-D fractional max pooling (see fractional_max_pool2d_with_indices); with return_indices,
    also the int64 argmax of each window, flat over H * W."""
    out, indices = fractional_max_pool2d_with_indices(input, kernel_size, output_size, output_ratio, True,
                                                      _random_samples)
    return (out, indices) if return_indices else out
