"""Tessera: a PyTorch-shaped tensor framework whose backends are plugins loaded at run time.

    >>> import tessera as ts
    >>> x = ts.randn(3, 4)
    >>> y = ts.softmax(x @ x.T, dim=-1)

Importing loads no plugin and not NumPy: the CPU plugin loads on first use of its device.
Operators are reachable as functions (ts.add), Tensor methods (x.add) and, for every
registered operator including those a plugin defines later, ts.ops.<namespace>.<name>.
"""
from tessera import _C

__version__ = "0.1.0"

Tensor = _C.Tensor
dtype = _C.dtype
device = _C.device
PluginError = _C.PluginError
get_default_dtype = _C.get_default_dtype
set_default_dtype = _C.set_default_dtype
manual_seed = _C.manual_seed

from tessera._dtypes import (  # noqa: E402
    bfloat16, bool, cdouble, cfloat, complex64, complex128, double, float, float16, float32, float64, half, int,
    int8, int16, int32, int64, long, short, uint8,
)
from tessera import _generated_ops  # noqa: E402

# Generated op functions (tessera.add, tessera.sum, ...), then the hand-written ones over them.
globals().update({_n: getattr(_generated_ops, _n) for _n in _generated_ops.FUNCTIONS})

from tessera import _tensor  # noqa: E402,F401  (adds the methods and operators to Tensor)
from tessera._memory_format import (  # noqa: E402,F401
    channels_last, channels_last_3d, contiguous_format, memory_format, preserve_format)
from tessera._factories import (  # noqa: E402
    arange, as_tensor, empty, empty_like, eye, from_dlpack, from_numpy, full, full_like, linspace, ones,
    ones_like, rand, rand_like, randint, randn, randn_like, tensor, zeros, zeros_like,
)
from tessera._functions import (  # noqa: E402
    all, allclose, any, atleast_1d, atleast_2d, atleast_3d, block_diag, broadcast_tensors, chunk, clamp_max,
    clamp_min, einsum, equal, is_floating_point, is_tensor, isclose, max, meshgrid, min, nonzero, norm, numel,
    promote_types, result_type, split, std, t, tensor_split, unbind, unique, unique_consecutive, var, where,
)
from tessera._finfo import finfo, iinfo  # noqa: E402
from tessera import fft, linalg, special  # noqa: E402
from tessera._generator import (  # noqa: E402
    Generator, default_generator, get_rng_state, initial_seed, seed, set_rng_state,
)

# PyTorch's constants.
import math as _math  # noqa: E402
pi, e, inf, nan = _math.pi, _math.e, _math.inf, _math.nan
from tessera._ops import ops  # noqa: E402
from tessera._printing import get_printoptions, set_printoptions  # noqa: E402
from tessera._serialization import load, save  # noqa: E402  (safetensors state dicts)
from tessera._streams import (  # noqa: E402
    Event, Stream, current_stream, default_stream, set_stream, stream, synchronize,
)
from tessera import plugins  # noqa: E402
from tessera import backends, cuda  # noqa: E402,F401  (torch.cuda's surface; load no plugin until used)
from tessera import autograd  # noqa: E402  (the plugin itself loads on first use)
from tessera.autograd._tensor_methods import install as _install_autograd_methods  # noqa: E402
from tessera.autograd.grad_mode import (  # noqa: E402
    enable_grad, inference_mode, is_grad_enabled, no_grad, set_grad_enabled,
)

_install_autograd_methods()

from tessera import nn  # noqa: E402  (pure Python over the operators above)
from tessera import optim  # noqa: E402
from tessera import utils  # noqa: E402


class autocast:
    """torch.autocast(device_type, dtype=None, enabled=True, cache_enabled=None): see tessera.amp."""

    def __new__(cls, *args, **kwargs):
        from tessera.amp import autocast as autocast_
        return autocast_(*args, **kwargs)


def is_autocast_enabled(device_type=None):
    from tessera.amp import is_autocast_enabled as is_enabled
    return is_enabled(device_type)


def get_autocast_dtype(device_type):
    from tessera.amp import get_autocast_dtype as get_dtype
    return get_dtype(device_type)


def compile(model=None, *, fullgraph=False, dynamic=None, backend="inductor", mode=None, options=None,
            disable=False):
    """torch.compile: see tessera.compiler.compile (imported on first use: `import tessera` stays light)."""
    from tessera.compiler import compile as compile_
    return compile_(model, fullgraph=fullgraph, dynamic=dynamic, backend=backend, mode=mode, options=options,
                    disable=disable)


def vmap(func, in_dims=0, out_dims=0, randomness="error", *, chunk_size=None):
    """torch.vmap: see tessera.func.vmap (imported on first use)."""
    from tessera._functorch.vmap import vmap as vmap_
    return vmap_(func, in_dims, out_dims, randomness, chunk_size=chunk_size)


def __getattr__(name):
    # These subpackages load on first use, so `import tessera` stays light.
    if name in ("compiler", "fx", "export", "onnx", "profiler", "distributions", "amp", "func", "multiprocessing",
                "_dynamo"):
        import importlib
        return importlib.import_module(f"tessera.{name}")
    raise AttributeError(f"module 'tessera' has no attribute '{name}'")
from tessera import accelerator, testing  # noqa: E402,F401
from tessera._size import Size  # noqa: E402,F401
from tessera._legacy import (  # noqa: E402,F401  (torch.FloatTensor(...) and friends)
    BFloat16Tensor, BoolTensor, ByteTensor, CharTensor, DoubleTensor, FloatTensor, HalfTensor, IntTensor, LongTensor,
    ShortTensor,
)

get_num_threads = _C.get_num_threads
set_num_threads = _C.set_num_threads
from tessera._interop_threads import get_num_interop_threads, set_num_interop_threads  # noqa: E402,F401
from tessera._global_flags import (  # noqa: E402,F401  (process-wide switches torch programs set at start-up)
    are_deterministic_algorithms_enabled, get_default_device, get_deterministic_debug_mode,
    get_float32_matmul_precision, is_anomaly_check_nan_enabled, is_anomaly_enabled,
    is_deterministic_algorithms_warn_only_enabled, is_inference_mode_enabled, is_warn_always_enabled,
    set_anomaly_enabled, set_default_device, set_default_tensor_type, set_deterministic_debug_mode,
    set_float32_matmul_precision, set_flush_denormal, set_warn_always, use_deterministic_algorithms,
)
from tessera import _torch_functions_more  # noqa: E402  (more torch.* functions; after nn, which it uses)
_torch_functions_more._install(globals())
from tessera import _tensor_methods_more  # noqa: E402,F401  (more Tensor methods)
from tessera import _tensor_geometry_methods  # noqa: E402,F401  (set_, resize_, t_, unsqueeze_, ...)
