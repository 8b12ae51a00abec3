"""tessera.nn.init: in-place initialisers with torch.nn.init's names, formulas and defaults.

Each fills the tensor under no_grad from Tessera's global generator (ts.manual_seed makes it
reproducible) and returns it."""
import functools
import math
import warnings

import tessera
from tessera.nn import _autograd


def calculate_gain(nonlinearity, param=None):
    """The recommended gain for an activation (torch's table)."""
    linear_fns = ["linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d"]
    if nonlinearity in linear_fns or nonlinearity == "sigmoid":
        return 1
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            negative_slope = 0.01
        elif not isinstance(param, bool) and isinstance(param, (int, float)):
            negative_slope = param
        else:
            raise ValueError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + negative_slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def _fill(tensor, values):
    with _autograd.no_grad():
        tensor.copy_(values)
    return tensor


def _check(tensor, fname):
    if not isinstance(tensor, tessera.Tensor):
        raise TypeError(f"{fname}: expected a Tensor, got {type(tensor).__name__}")
    if not tensor.dtype.is_floating_point:
        raise TypeError(f"{fname}: expected a floating-point tensor, got {tensor.dtype.name}")


def uniform_(tensor, a=0.0, b=1.0, generator=None):
    """Fills with values drawn from U(a, b)."""
    _check(tensor, "uniform_")
    if tensor.numel() == 0:
        return tensor
    r = tessera.rand(tuple(tensor.shape), dtype=tensor.dtype, device=tensor.device, generator=generator)
    return _fill(tensor, r * (b - a) + a)


def normal_(tensor, mean=0.0, std=1.0, generator=None):
    """Fills with values drawn from N(mean, std^2)."""
    _check(tensor, "normal_")
    if tensor.numel() == 0:
        return tensor
    r = tessera.randn(tuple(tensor.shape), dtype=tensor.dtype, device=tensor.device, generator=generator)
    return _fill(tensor, r * std + mean)


def trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """N(mean, std^2) truncated to [a, b], by inverting the normal CDF on U(cdf(a), cdf(b))."""
    _check(tensor, "trunc_normal_")
    if tensor.numel() == 0:
        return tensor

    def norm_cdf(x):
        return (1.0 + math.erf(x / math.sqrt(2.0))) / 2.0

    lo, hi = norm_cdf((a - mean) / std), norm_cdf((b - mean) / std)
    u = tessera.rand(tuple(tensor.shape), dtype=tessera.float64, device=tensor.device, generator=generator)
    u = u * (hi - lo) + lo
    # erfinv by Newton on erf (no erfinv operator): x_{k+1} = x_k - (erf(x_k) - y) / (2/sqrt(pi) e^{-x_k^2})
    y = u * 2 - 1
    y = tessera.clamp(y, -1 + 1e-12, 1 - 1e-12)
    x = tessera.zeros_like(y)
    for _ in range(60):
        x = x - (tessera.erf(x) - y) / (tessera.exp(-(x * x)) * (2.0 / math.sqrt(math.pi)))
    vals = tessera.clamp(x * (std * math.sqrt(2.0)) + mean, a, b)
    return _fill(tensor, vals.to(tensor.dtype))


def constant_(tensor, val):
    _check(tensor, "constant_")
    with _autograd.no_grad():
        tensor.fill_(val)
    return tensor


def zeros_(tensor):
    return constant_(tensor, 0.0)


def ones_(tensor):
    return constant_(tensor, 1.0)


def eye_(tensor):
    if tensor.ndim != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    return _fill(tensor, tessera.eye(tensor.shape[0], tensor.shape[1], dtype=tensor.dtype, device=tensor.device))


def _calculate_fan_in_and_fan_out(tensor):
    dimensions = tensor.ndim
    if dimensions < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than 2 dimensions")
    num_input_fmaps = tensor.shape[1]
    num_output_fmaps = tensor.shape[0]
    receptive_field_size = 1
    for s in tensor.shape[2:]:
        receptive_field_size *= s
    return num_input_fmaps * receptive_field_size, num_output_fmaps * receptive_field_size


def _calculate_correct_fan(tensor, mode):
    mode = mode.lower()
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {mode} not supported, please use one of fan_in, fan_out")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def xavier_uniform_(tensor, gain=1.0, generator=None):
    """U(-a, a) with a = gain * sqrt(6 / (fan_in + fan_out))."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    a = math.sqrt(3.0) * std
    return uniform_(tensor, -a, a, generator)


def xavier_normal_(tensor, gain=1.0, generator=None):
    """N(0, std^2) with std = gain * sqrt(2 / (fan_in + fan_out))."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return normal_(tensor, 0.0, std, generator)


def kaiming_uniform_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    """U(-bound, bound) with bound = gain * sqrt(3 / fan)."""
    if 0 in tuple(tensor.shape):
        warnings.warn("Initializing zero-element tensors is a no-op")
        return tensor
    fan = _calculate_correct_fan(tensor, mode)
    gain = calculate_gain(nonlinearity, a)
    std = gain / math.sqrt(fan)
    bound = math.sqrt(3.0) * std
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    """N(0, std^2) with std = gain / sqrt(fan)."""
    if 0 in tuple(tensor.shape):
        warnings.warn("Initializing zero-element tensors is a no-op")
        return tensor
    fan = _calculate_correct_fan(tensor, mode)
    gain = calculate_gain(nonlinearity, a)
    std = gain / math.sqrt(fan)
    return normal_(tensor, 0.0, std, generator)


def orthogonal_(tensor, gain=1, generator=None):
    """A (semi-)orthogonal matrix from the QR decomposition of a normal matrix, as torch's: the
    tensor is viewed as (size(0), numel // size(0)) and the result scaled by gain."""
    _check(tensor, "orthogonal_")
    if tensor.dim() < 2:
        raise ValueError("Only tensors with 2 or more dimensions are supported")
    if tensor.numel() == 0:
        return tensor
    rows, cols = tensor.shape[0], tensor.numel() // tensor.shape[0]
    flat = tessera.randn((rows, cols), dtype=tensor.dtype, device=tensor.device, generator=generator)
    q, r = tessera.linalg.qr(flat.t() if rows < cols else flat)
    q = q * tessera.diagonal(r, 0).sign()  # unique factorisation: R's diagonal positive
    q = q.t() if rows < cols else q
    return _fill(tensor, q.reshape(tuple(tensor.shape)) * gain)


def dirac_(tensor, groups=1):
    """The identity of a 3-, 4- or 5-D convolution weight: per group, output channel d takes input
    channel d at the kernel's centre (for the first min(out per group, in) channels), zero elsewhere."""
    if tensor.ndim not in (3, 4, 5):
        raise ValueError("Only tensors with 3, 4, or 5 dimensions are supported")
    sizes = tuple(tensor.shape)
    if sizes[0] % groups != 0:
        raise ValueError("dim 0 must be divisible by groups")
    per_group = sizes[0] // groups
    centre = tuple(n // 2 for n in sizes[2:])
    with _autograd.no_grad():
        tensor.zero_()
        for g in range(groups):
            for d in range(min(per_group, sizes[1])):
                tensor[(g * per_group + d, d) + centre] = 1
    return tensor


def sparse_(tensor, sparsity, std=0.01, generator=None):
    """A 2-D tensor drawn from N(0, std^2) with ceil(sparsity * rows) random rows of each column zeroed."""
    if tensor.ndim != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    rows, cols = tensor.shape
    num_zeros = int(math.ceil(sparsity * rows))
    normal_(tensor, 0.0, std, generator)
    with _autograd.no_grad():
        for col in range(cols):
            zero_rows = tessera.randperm(rows, generator=generator)[:num_zeros]
            tensor[zero_rows, col] = 0
    return tensor


def _deprecated(new):
    """torch's old initialiser names (without the trailing _): the same, with a FutureWarning."""
    old = new.__name__[:-1]

    @functools.wraps(new)
    def init(*args, **kwargs):
        warnings.warn(f"`nn.init.{old}` is now deprecated in favor of `nn.init.{new.__name__}`.", FutureWarning,
                      stacklevel=2)
        return new(*args, **kwargs)

    init.__name__ = init.__qualname__ = old
    return init


uniform = _deprecated(uniform_)
normal = _deprecated(normal_)
constant = _deprecated(constant_)
eye = _deprecated(eye_)
dirac = _deprecated(dirac_)
xavier_uniform = _deprecated(xavier_uniform_)
xavier_normal = _deprecated(xavier_normal_)
kaiming_uniform = _deprecated(kaiming_uniform_)
kaiming_normal = _deprecated(kaiming_normal_)
orthogonal = _deprecated(orthogonal_)
sparse = _deprecated(sparse_)
