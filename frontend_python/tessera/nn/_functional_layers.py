"""Functional forms of layer families (padding, interpolation, pixel shuffle), re-exported by
tessera.nn.functional. Helpers of functional.py are imported from it: it imports this file last, so
they exist by then."""
import builtins
import math

from tessera.nn.functional import _op, avg_pool2d

__all__ = ["pad", "interpolate", "upsample", "upsample_nearest", "upsample_bilinear", "pixel_shuffle",
           "pixel_unshuffle", "channel_shuffle", "local_response_norm"]


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
