"""Functional forms of layer families (padding, interpolation, pixel shuffle), re-exported by
tessera.nn.functional. Helpers of functional.py are imported from it: it imports this file last, so
they exist by then."""
import builtins
import math

from tessera.nn.functional import (_DT, _INT64, _adaptive_bounds, _lp_finish, _ntuple, _op, adaptive_avg_pool2d,
                                   adaptive_avg_pool3d, avg_pool2d, avg_pool3d, max_pool3d)

__all__ = ["pad", "interpolate", "upsample", "upsample_nearest", "upsample_bilinear", "pixel_shuffle",
           "pixel_unshuffle", "channel_shuffle", "local_response_norm", "adaptive_max_pool3d",
           "adaptive_max_pool3d_with_indices", "max_unpool3d", "lp_pool3d", "fractional_max_pool2d",
           "fractional_max_pool2d_with_indices", "fractional_max_pool3d",
           "fractional_max_pool3d_with_indices", "native_channel_shuffle", "conv_tbc"]


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
# The separable modes (linear along each dim for trilinear, bicubic, nearest-exact) build one
# index and weight table per spatial dim on the host in float64, as torch's
# area_pixel_compute_scale / area_pixel_compute_source_index do (ATen's UpSample.h), and apply
# them with index_select, mul and add, so that autograd gives the backward.
_CUBIC_A = -0.75  # torch's (and OpenCV's) cubic convolution coefficient


def _input_per_output(in_size, out_size, align_corners, scale):
    """torch's area_pixel_compute_scale: input pixels per output pixel; with align_corners the
    corner pixels' centres map onto each other ((in - 1) / (out - 1)), otherwise 1 / the given
    scale factor (when > 0) or in / out."""
    if align_corners:
        return (in_size - 1) / (out_size - 1) if out_size > 1 else 0.0
    return 1.0 / scale if scale is not None and scale > 0 else in_size / out_size


def _source_index(in_size, out_size, align_corners, scale, cubic):
    """The real source coordinate of each output index (float64): src = dst r with align_corners,
    otherwise src = (dst + 0.5) r - 0.5, clamped at 0 for the non-cubic modes (r:
    _input_per_output)."""
    import tessera
    pos = tessera.arange(out_size, dtype=tessera.float64)
    ratio = _input_per_output(in_size, out_size, align_corners, scale)
    if align_corners:
        return pos * ratio
    real = (pos + 0.5) * ratio - 0.5
    return real if cubic else real.clamp(min=0.0)


def _lower_tap(real, in_size):
    """torch's guard_index_and_lambda: the tap at or below each coordinate (at most in_size - 1)
    and the coordinate's distance past it, clamped into [0, 1]."""
    low = real.floor().clamp(max=float(in_size - 1))
    return low, (real - low).clamp(0.0, 1.0)


def _linear_taps(in_size, out_size, align_corners, scale):
    """[(index, weight)] x 2 along one dim; None when out == in (torch copies that dim)."""
    if out_size == in_size:
        return None
    low, lam = _lower_tap(_source_index(in_size, out_size, align_corners, scale, cubic=False), in_size)
    return [(low, 1.0 - lam), ((low + 1.0).clamp(max=float(in_size - 1)), lam)]


def _cubic_taps(in_size, out_size, align_corners, scale):
    """[(index, weight)] x 4 along one dim: the indices low - 1 .. low + 2 clamped into the
    input, weighted by the cubic convolution kernel (A = -0.75) at distances 1 + t, t, 1 - t and
    (1 - t) + 1, t being the coordinate's distance past low."""
    low, t = _lower_tap(_source_index(in_size, out_size, align_corners, scale, cubic=True), in_size)
    a = _CUBIC_A

    def near(x):  # the kernel on |x| <= 1
        return ((a + 2) * x - (a + 3)) * x * x + 1.0

    def far(x):  # the kernel on 1 < |x| < 2
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a

    rest = 1.0 - t
    weights = [far(t + 1.0), near(t), near(rest), far(rest + 1.0)]
    return [((low + float(k - 1)).clamp(0.0, float(in_size - 1)), w) for k, w in enumerate(weights)]


def _nearest_exact_taps(in_size, out_size, scale, double):
    """[(index, None)] along one dim: torch's nearest-exact source, floor((dst + 0.5) / scale)
    capped at in_size - 1, with torch's roundings, as an index is discontinuous in its
    coordinate: the scale and coordinate in the kernel's opmath type (float32 unless the input is
    float64; the coordinate's multiply-subtract rounded once, as the compiled kernel's fused
    multiply-add does), and the floor taken in float32 (floorf)."""
    import struct

    import tessera
    f32 = tessera.float32
    ratio = 1.0 / scale if scale is not None and scale > 0 else in_size / out_size
    if not double:  # the float64 quotient rounded to float32 is the correctly rounded float32 quotient
        ratio = struct.unpack("f", struct.pack("f", ratio))[0]
    real = (tessera.arange(out_size, dtype=tessera.float64) + 0.5) * ratio - 0.5  # exact: float32 ratio, small dst
    if not double:
        real = real.to(f32).to(tessera.float64)
    index = (real.clamp(min=0.0) + 0.5).to(f32).floor()
    return [(index.clamp(max=float(in_size - 1)), None)]


def _resample_dim(input, dim, taps):
    """sum over the taps of weight * input.index_select(dim, index), the (out,) host tables
    moved to the input's device and the weights cast to its dtype; None taps leave it as is."""
    if taps is None:
        return input
    view = [-1] + [1] * (input.dim() - 1 - dim)
    out = None
    for index, weight in taps:
        term = _op("index_select", input, dim, index.to(dtype=_INT64, device=input.device))
        if weight is not None:
            term = _op("mul", term, _op("reshape", weight.to(dtype=input.dtype, device=input.device), view))
        out = term if out is None else _op("add", out, term)
    return out


_SIDES = ("D", "H", "W")


def _check_sizes(in_sizes, out_sizes):
    """torch's upsample check: every input and output size > 0 (RuntimeError)."""
    if all(n > 0 for n in in_sizes) and all(o > 0 for o in out_sizes):
        return
    names = _SIDES[len(_SIDES) - len(in_sizes):]
    show = lambda sizes: ", ".join(f"{k}: {v}" for k, v in zip(names, sizes))  # noqa: E731
    joint = " and" if len(in_sizes) == 1 else ""
    raise RuntimeError(f"Input and output sizes should be greater than 0, but got input ({show(in_sizes)}){joint} "
                       f"output ({show(out_sizes)})")


# Antialiasing (bilinear, bicubic and lanczos on 4-D input), as torch's _upsample_*_aa: each
# output pixel is a normalised average of the input under the mode's filter, stretched by the
# downscale factor when shrinking (support = the filter's half-width times the scale), so that
# every input pixel counts, where plain interpolation reads two or four and aliases.
def _aa_triangle(x):
    return (1.0 - x.abs()).clamp(min=0.0)


def _aa_cubic(x):  # Keys' kernel with a = -0.5 (PIL's and torch's choice for antialiasing)
    import tessera
    a, x = -0.5, x.abs()
    near = ((a + 2) * x - (a + 3)) * x * x + 1.0
    far = ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
    return tessera.where(x < 1.0, near, tessera.where(x < 2.0, far, 0.0))


def _aa_lanczos(x):  # sinc(x) sinc(x / 3) on |x| < 3
    import tessera
    return tessera.where(x.abs() < 3.0, tessera.sinc(x) * tessera.sinc(x / 3.0), 0.0)


_AA_FILTERS = {"bilinear": (1.0, _aa_triangle), "bicubic": (2.0, _aa_cubic), "lanczos": (3.0, _aa_lanczos)}


def _antialias_taps(in_size, out_size, align_corners, scale, mode):
    """[(index, weight)] x (2 ceil(support) + 1) along one dim (float64 host tables; None when the
    dim does not change), torch's _compute_indices_min_size_weights_aa: output i centred at s (i + 0.5) in the input, the
    input pixels within the support weighted by the filter at their distance / max(s, 1) and
    normalised to sum 1; shorter windows are padded with weight 0."""
    import tessera
    if out_size == in_size and scale in (None, 1.0):
        return None  # an unchanged dim: every filter's weights are 1 at distance 0, 0 at the others
    f64 = tessera.float64
    half, filt = _AA_FILTERS[mode]
    s = _input_per_output(in_size, out_size, align_corners, scale)
    support = half * s if s >= 1.0 else half
    invscale = 1.0 / s if s >= 1.0 else 1.0
    taps = int(math.ceil(support)) * 2 + 1
    center = (tessera.arange(out_size, dtype=f64) + 0.5) * s
    first = (center - support + 0.5).trunc().clamp(min=0.0)  # C++'s truncating int conversion
    count = ((center + support + 0.5).trunc().clamp(max=float(in_size)) - first).clamp(0.0, float(taps))
    j = tessera.arange(taps, dtype=f64).unsqueeze(1)
    weight = tessera.where(j < count, filt((j + first - center + 0.5) * invscale), 0.0)
    total = weight.sum(0)
    weight = tessera.where(total != 0, weight / tessera.where(total != 0, total, 1.0), weight)
    index = (first + j).clamp(max=float(in_size - 1))
    return [(index[k], weight[k]) for k in range(taps)]


def _antialiased(input, sizes, scales, mode, align_corners):
    """Width first, then height, as torch's separable antialiased kernels."""
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f"interpolate: antialias=True needs a floating input, got {input.dtype} (uint8 "
                                  "images: convert with .float() first)")
    return _separable(input, sizes, scales, lambda n, o, s: _antialias_taps(n, o, align_corners, s, mode),
                      last_dim_first=True)


def _separable(input, sizes, scales, make_taps, last_dim_first=False):
    """Resamples each spatial dim in turn (the first spatial dim first, or the last) with
    make_taps(in, out, scale)."""
    spatial = input.dim() - 2
    in_sizes = list(input.shape[2:])
    if sizes is None:
        sizes = [int(n * s) for n, s in zip(in_sizes, scales)]  # torch: the size truncated, the scale kept
    _check_sizes(in_sizes, sizes)
    out = input
    for d in (reversed(range(spatial)) if last_dim_first else range(spatial)):
        out = _resample_dim(out, 2 + d, make_taps(in_sizes[d], sizes[d], None if scales is None else scales[d]))
    return out


_MODES = "nearest | linear | bilinear | bicubic | trilinear | lanczos | area | nearest-exact"
_NEEDS = {"linear": 3, "bilinear": 4, "trilinear": 5}


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None, recompute_scale_factor=None,
                antialias=False):
    """torch.nn.functional.interpolate: nearest, nearest-exact and area (adaptive average pooling)
    on 3-D to 5-D input, linear on 3-D, bilinear and bicubic on 4-D, trilinear on 5-D; with
    antialias=True, bilinear, bicubic and lanczos on 4-D floating input."""
    if mode in ("nearest", "area", "nearest-exact"):
        if align_corners is not None:
            raise ValueError("align_corners option can only be set with the interpolating modes: linear | bilinear | "
                             "bicubic | trilinear")
    elif align_corners is None:
        align_corners = False
    align_corners = bool(align_corners) if align_corners is not None else None
    spatial = input.dim() - 2
    if size is not None and scale_factor is not None:
        raise ValueError("only one of size or scale_factor should be defined")
    if size is None and scale_factor is None:
        raise ValueError("either size or scale_factor should be defined")
    shape = list(input.shape[2:])
    sizes = scales = None
    if size is not None:
        if isinstance(size, (list, tuple)):
            if len(size) != spatial:
                raise ValueError(f"Input and output must have the same number of spatial dimensions, but got input "
                                 f"with spatial dimensions of {shape} and output size of {size}. Please provide input "
                                 f"tensor in (N, C, d1, d2, ...,dK) format and output size in (o1, o2, ...,oK) format.")
            if not all(hasattr(s, "__index__") for s in size):
                raise TypeError(f"expected size to be one of int or Tuple[int] or Tuple[int, int] or "
                                f"Tuple[int, int, int], but got size with types {[type(s) for s in size]}")
            sizes = [int(s) for s in size]
        else:
            sizes = [int(size)] * builtins.max(spatial, 0)
        if recompute_scale_factor:
            raise ValueError("recompute_scale_factor is not meaningful with an explicit size.")
    else:
        if isinstance(scale_factor, (list, tuple)):
            if len(scale_factor) != spatial:
                raise ValueError(f"Input and scale_factor must have the same number of spatial dimensions, but got "
                                 f"input with spatial dimensions of {shape} and scale_factor of shape {scale_factor}. "
                                 f"Please provide input tensor in (N, C, d1, d2, ...,dK) format and scale_factor in "
                                 f"(s1, s2, ...,sK) format.")
            scales = [float(s) for s in scale_factor]
        else:
            scales = [float(scale_factor)] * builtins.max(spatial, 0)
        if recompute_scale_factor or mode == "area":  # area always takes an output size
            sizes, scales = [int(n * s) for n, s in zip(shape, scales)], None
    if antialias and not (mode in ("bilinear", "bicubic", "lanczos") and input.dim() == 4):
        raise ValueError("Anti-alias option is restricted to bilinear, bicubic, and lanczos modes and requires a 4-D "
                         "tensor as input")
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
    if mode == "nearest-exact" and 1 <= spatial <= 3:
        double = input.dtype == _DT["float64"]
        return _separable(input, sizes, scales, lambda n, o, s: _nearest_exact_taps(n, o, s, double))
    if mode == "area" and 1 <= spatial <= 3:
        if spatial == 1:
            return _op("squeeze", adaptive_avg_pool2d(_op("unsqueeze", input, 2), [1] + sizes), 2)
        return (adaptive_avg_pool2d if spatial == 2 else adaptive_avg_pool3d)(input, sizes)
    if mode in _NEEDS and input.dim() in (3, 4, 5) and input.dim() != _NEEDS[mode]:
        raise NotImplementedError(f"Got {input.dim()}D input, but {mode} mode needs {_NEEDS[mode]}D input")
    if mode == "linear" and spatial == 1:
        out = _op("upsample_bilinear2d.vec", _op("unsqueeze", input, 2), None if sizes is None else [1] + sizes,
                  align_corners, None if scales is None else [1.0] + scales)
        return _op("squeeze", out, 2)
    if mode == "lanczos" and spatial == 2 and align_corners:
        raise ValueError("Lanczos mode does not support align_corners=True")
    if antialias and spatial == 2:
        return _antialiased(input, sizes, scales, mode, align_corners)
    if mode == "bilinear" and spatial == 2:
        return _op("upsample_bilinear2d.vec", input, sizes, align_corners, scales)
    if mode == "trilinear" and spatial == 3:
        return _separable(input, sizes, scales, lambda n, o, s: _linear_taps(n, o, align_corners, s))
    if mode == "bicubic" and spatial == 2:
        return _separable(input, sizes, scales, lambda n, o, s: _cubic_taps(n, o, align_corners, s))
    if mode == "lanczos" and spatial == 2:
        raise ValueError("Lanczos mode requires antialias=True")
    raise NotImplementedError(f"Input Error: Only 3D, 4D and 5D input Tensors supported (got {input.dim()}D) for the "
                              f"modes: {_MODES} (got {mode})")


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


native_channel_shuffle = channel_shuffle  # torch's name for the same shuffle


# ---------------------------------------------------------------------------- time-batch-channel convolution
def conv_tbc(input, weight, bias, pad=0):
    """torch.conv_tbc (fairseq's layout): input (time, batch, in_channels), weight (kernel width,
    in_channels, out_channels), bias (out_channels), `pad` zero steps on both ends of time; the
    output is (time + 2 pad - width + 1, batch, out_channels). A conv1d on the permuted views."""
    from tessera.nn.functional import conv1d
    if input.dim() != 3 or weight.dim() != 3 or bias.dim() != 1:
        raise RuntimeError(f"conv_tbc: expected a 3-D input, a 3-D weight and a 1-D bias, got {input.dim()}-D, "
                           f"{weight.dim()}-D and {bias.dim()}-D")
    if input.shape[2] != weight.shape[1]:
        raise RuntimeError("Input dim 2 (input channels) is not == dim 1 in the weight tensor")
    if weight.shape[2] != bias.shape[0]:
        raise RuntimeError("Bias size must equal dim 2 in the weight tensor (output channels).")
    out = conv1d(_op("permute", input, [1, 2, 0]), _op("permute", weight, [2, 1, 0]), bias, padding=pad)
    return _op("permute", out, [2, 0, 1])


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


def fractional_max_pool3d_with_indices(input, kernel_size, output_size=None, output_ratio=None, return_indices=False,
                                       _random_samples=None):
    """3-D fractional max pooling: kT x kH x kW windows at pseudo-random steps chosen so the
    output is output_size (or output_ratio times the input); returns the maxima and their int64
    indices, flat over T * H * W. _random_samples, (N, C, 3) in [0, 1) (T's sample first, then
    H's, then W's, as torch's kernel reads them), fixes the steps; by default tessera.rand draws them."""
    import numpy as np
    import tessera
    if output_size is None and output_ratio is None:
        raise ValueError("fractional_max_pool3d requires specifying either an output_size or an output_ratio")
    if input.dim() not in (4, 5) or any(n == 0 for n in input.shape[-4:]):
        raise RuntimeError(f"fractional_max_pool3d_out(): Expected 4D or 5D tensor, but got: {list(input.shape)}")
    kt, kh, kw = _ntuple(kernel_size, 3, "kernel_size", "fractional_max_pool3d")
    T, H, W = input.shape[-3:]
    if output_size is None:
        ratio = [output_ratio] * 3 if isinstance(output_ratio, (builtins.int, builtins.float)) else list(output_ratio)
        if len(ratio) == 1:
            ratio = ratio * 3
        if len(ratio) != 3:
            raise ValueError("fractional_max_pool3d requires output_ratio to either be a single Int or tuple of Ints.")
        output_size = [builtins.int(T * ratio[0]), builtins.int(H * ratio[1]), builtins.int(W * ratio[2])]
    ot, oh, ow = _ntuple(output_size, 3, "output_size", "fractional_max_pool3d")
    for name, out, k, size in (("time", ot, kt, T), ("height", oh, kh, H), ("width", ow, kw, W)):
        if out + k - 1 > size:
            raise RuntimeError(f"fractional_max_pool3d_out(): pool {name} {k} too large relative to input {name} "
                               f"{size}")
    batched = input.dim() == 5
    x = input if batched else input.unsqueeze(0)
    N, C = x.shape[0], x.shape[1]
    if _random_samples is None:
        _random_samples = tessera.rand(N, C, 3, dtype=input.dtype, device=input.device)
    if _random_samples.dim() != 3 or _random_samples.shape[0] < N or _random_samples.shape[1] != C \
            or _random_samples.shape[2] != 3:
        raise RuntimeError(f"fractional_max_pool3d(): expected _random_samples of shape ({N}, {C}, 3), got "
                           f"{list(_random_samples.shape)}")
    np_float = np.dtype(_NUMPY_FLOAT.get(input.dtype.name, "float32"))
    samples = np.array(_random_samples[:N].tolist(), dtype=np.float64).astype(np_float).reshape(N, C, 3)
    seq_t = _fractional_intervals(samples[..., 0], T, ot, kt)  # (N, C, ot)
    seq_h = _fractional_intervals(samples[..., 1], H, oh, kh)
    seq_w = _fractional_intervals(samples[..., 2], W, ow, kw)
    # Every window's flat input positions, (N, C, ot, oh, ow, kt, kh, kw), scanned t, h, w as torch's kernel.
    ts_ = seq_t[:, :, :, None, None, None, None, None] + np.arange(kt)[:, None, None]
    hs = seq_h[:, :, None, :, None, None, None, None] + np.arange(kh)[:, None]
    ws = seq_w[:, :, None, None, :, None, None, None] + np.arange(kw)
    positions = ((ts_ * H + hs) * W + ws).reshape(N, C, -1)
    index = tessera.tensor(positions, dtype=tessera.int64, device=input.device)
    windows = x.reshape(N, C, T * H * W).gather(-1, index).reshape(N, C, ot, oh, ow, kt * kh * kw)
    out, arg = windows.max(-1)
    indices = index.reshape(N, C, ot, oh, ow, kt * kh * kw).gather(-1, arg.unsqueeze(-1)).squeeze(-1)
    if not batched:
        out, indices = out.squeeze(0), indices.squeeze(0)
    return out, indices


def fractional_max_pool3d(input, kernel_size, output_size=None, output_ratio=None, return_indices=False,
                          _random_samples=None):
    """3-D fractional max pooling (see fractional_max_pool3d_with_indices); with return_indices,
    also the int64 argmax of each window, flat over T * H * W."""
    out, indices = fractional_max_pool3d_with_indices(input, kernel_size, output_size, output_ratio, True,
                                                      _random_samples)
    return (out, indices) if return_indices else out
