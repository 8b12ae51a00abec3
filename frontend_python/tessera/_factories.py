"""Tensor factories under PyTorch's signatures: varargs or tuple sizes, the default dtype for
floating results, `*_like` variants, and `tensor()` from Python data, NumPy arrays or tensors."""
import builtins
import functools

from tessera import _C, _memory_format
from tessera._generator import using
from tessera._global_flags import default_device as _default_device

_call = _C.call_op
_E = {}
_Tensor = _C.Tensor
_FLOAT32 = _C.dtypes["float32"]
_INT64 = _C.dtypes["int64"]
_get_default_dtype = _C.get_default_dtype


def _size(fname, args, size):
    """The size from `zeros(2, 3)`, `zeros((2, 3))`, `zeros([2, 3])` or `zeros(size=(2, 3))`."""
    if size is not None:
        if args:
            raise TypeError(f"{fname}() got multiple values for argument 'size'")
        args = (size,)
    if len(args) == 1 and not isinstance(args[0], builtins.int):
        s = args[0]
        if isinstance(s, (tuple, builtins.list)):
            return s
        raise TypeError(f"{fname}(): argument 'size' must be a tuple of ints, got {type(s).__name__}")
    if not args:
        raise TypeError(f"{fname}() missing 1 required positional argument: 'size'")
    return args


def _float_dtype(dtype):
    # The CPU kernels read the default dtype from the host (ABI 1.1); passing it explicitly when it
    # is not float32 also covers device plugins that do not (e.g. built against ABI 1.0).
    if dtype is None:
        d = _get_default_dtype()
        return None if d == _FLOAT32 else d
    return dtype


def _kw(dtype, device):
    if device is None:
        device = _default_device()  # ts.set_default_device; None (the CPU) unless set
    if dtype is None and device is None:
        return _E
    kw = {}
    if dtype is not None:
        kw["dtype"] = dtype
    if device is not None:
        kw["device"] = device
    return kw


def empty(*args, size=None, dtype=None, device=None, requires_grad=False, memory_format=None):
    t = _call("empty", (_size("empty", args, size),), _kw(_float_dtype(dtype), device))
    return t if memory_format is None else _memory_format.to_format(t, memory_format, "empty")


def zeros(*args, size=None, dtype=None, device=None, requires_grad=False):
    return _call("zeros", (_size("zeros", args, size),), _kw(_float_dtype(dtype), device))


def ones(*args, size=None, dtype=None, device=None, requires_grad=False):
    return _call("ones", (_size("ones", args, size),), _kw(_float_dtype(dtype), device))


def rand(*args, size=None, dtype=None, device=None, requires_grad=False, generator=None):
    with using(generator):
        return _call("rand", (_size("rand", args, size),), _kw(_float_dtype(dtype), device))


def randn(*args, size=None, dtype=None, device=None, requires_grad=False, generator=None):
    with using(generator):
        return _call("randn", (_size("randn", args, size),), _kw(_float_dtype(dtype), device))


def full(size, fill_value, *, dtype=None, device=None, requires_grad=False):
    """Like torch.full: without a dtype, a bool fill gives bool, an int int64, a float the default dtype."""
    if dtype is None and isinstance(fill_value, builtins.float):
        dtype = _float_dtype(None)
    if isinstance(size, builtins.int):
        size = (size,)
    return _call("full", (size, fill_value), _kw(dtype, device))


def arange(start, end=None, step=1, *, dtype=None, device=None, requires_grad=False):
    """arange(end) or arange(start, end, step=1): int64 for integer arguments, else the default dtype."""
    if dtype is None and (isinstance(start, builtins.float) or isinstance(end, builtins.float)
                          or isinstance(step, builtins.float)):
        dtype = _float_dtype(None)
    if end is None:
        if step != 1:
            return _call("arange", (0, start, step), _kw(dtype, device))
        return _call("arange", (start,), _kw(dtype, device))
    return _call("arange", (start, end, step), _kw(dtype, device))


def linspace(start, end, steps, *, dtype=None, device=None, requires_grad=False):
    return _call("linspace", (start, end, steps), _kw(_float_dtype(dtype), device))


def eye(n, m=None, *, dtype=None, device=None, requires_grad=False):
    return _call("eye", (n, m), _kw(_float_dtype(dtype), device))


def randint(*args, size=None, dtype=None, device=None, requires_grad=False, generator=None):
    """randint(high, size) or randint(low, high, size) (size may also be a keyword), int64 by default."""
    if size is None:
        if len(args) < 2:
            raise TypeError("randint() expected (high, size) or (low, high, size)")
        *bounds, size = args
    else:
        bounds = builtins.list(args)
    if isinstance(size, builtins.int):
        size = (size,)
    if len(bounds) == 1:
        with using(generator):
            return _call("randint", (bounds[0], size), _kw(dtype, device))
    if len(bounds) == 2:
        with using(generator):
            return _call("randint", (bounds[0], bounds[1], size), _kw(dtype, device))
    raise TypeError(f"randint() expected (high, size) or (low, high, size), got {len(args)} positional arguments")


# ---- *_like: the input's shape, dtype and device unless given, and its layout (memory_format=
# preserve_format keeps a channels-last one, as PyTorch)
def _laid_out_like(factory):
    @functools.wraps(factory)
    def make(input, *args, memory_format=_memory_format.preserve_format, requires_grad=False, **kwargs):
        t = factory(input, *args, **kwargs)  # requires_grad: _with_requires_grad below
        if not isinstance(input, _Tensor) or input._is_batched:
            return t
        return _memory_format.like(t, input, memory_format, factory.__name__)
    return make


def _like(fname, input, dtype, device):
    if not isinstance(input, _Tensor):
        raise TypeError(f"{fname}(): argument 'input' must be Tensor, not {type(input).__name__}")
    return input.shape, (input.dtype if dtype is None else dtype), (input.device if device is None else device)


@_laid_out_like
def empty_like(input, *, dtype=None, device=None, requires_grad=False):
    shape, dtype, device = _like("empty_like", input, dtype, device)
    if input._is_batched:  # inside vmap: like its batch, not like one sample (full_like has a batching rule)
        return _call("full_like", (input, 0), {"dtype": dtype, "device": device})
    return _call("empty", (shape,), {"dtype": dtype, "device": device})


@_laid_out_like
def zeros_like(input, *, dtype=None, device=None, requires_grad=False):
    shape, dtype, device = _like("zeros_like", input, dtype, device)
    if input._is_batched:  # inside vmap: like its batch, not like one sample (full_like has a batching rule)
        return _call("full_like", (input, 0), {"dtype": dtype, "device": device})
    return _call("zeros", (shape,), {"dtype": dtype, "device": device})


@_laid_out_like
def ones_like(input, *, dtype=None, device=None, requires_grad=False):
    shape, dtype, device = _like("ones_like", input, dtype, device)
    if input._is_batched:  # inside vmap: like its batch, not like one sample (full_like has a batching rule)
        return _call("full_like", (input, 1), {"dtype": dtype, "device": device})
    return _call("ones", (shape,), {"dtype": dtype, "device": device})


@_laid_out_like
def full_like(input, fill_value, *, dtype=None, device=None, requires_grad=False):
    shape, dtype, device = _like("full_like", input, dtype, device)
    if input._is_batched:  # inside vmap: like its batch, not like one sample (full_like has a batching rule)
        return _call("full_like", (input, fill_value), {"dtype": dtype, "device": device})
    return _call("full", (shape, fill_value), {"dtype": dtype, "device": device})


@_laid_out_like
def rand_like(input, *, dtype=None, device=None, requires_grad=False):
    shape, dtype, device = _like("rand_like", input, dtype, device)
    return _call("rand", (shape,), {"dtype": dtype, "device": device})


@_laid_out_like
def randn_like(input, *, dtype=None, device=None, requires_grad=False):
    shape, dtype, device = _like("randn_like", input, dtype, device)
    return _call("randn", (shape,), {"dtype": dtype, "device": device})


# ---- from data
def _from_array_like(data, dtype, device):
    import numpy as np  # only when given an array: `import tessera` stays NumPy-free

    arr = np.array(data, copy=True, order="C")  # a private, contiguous copy
    t = _C.from_numpy(arr)
    if dtype is not None and dtype != t.dtype:
        t = _call("to", (t, dtype), _E)
    if device is not None:
        t = t.to(device)
    return t


def tensor(data, *, dtype=None, device=None, requires_grad=False, pin_memory=False):
    """A new tensor holding a copy of `data`: a Python number, nested lists/tuples, a tensor or an
    array (NumPy or anything with __array__). Inference as PyTorch: bools -> bool, ints -> int64,
    any float -> the default dtype; an array keeps its dtype. pin_memory: a CPU tensor in
    page-locked memory (see Tensor.pin_memory)."""
    t = _copy_data(data, dtype, device if device is not None else _default_device())
    return t.pin_memory() if pin_memory else t


def _copy_data(data, dtype, device):
    t = type(data)
    if t is builtins.list or t is builtins.tuple or t is builtins.float or t is builtins.int or t is builtins.bool:
        return _C.tensor(data, dtype=dtype, device=device)
    if isinstance(data, _Tensor):
        t = data.to(dtype if dtype is not None else data.dtype, copy=True)
        return t if device is None else t.to(device)
    if hasattr(data, "__array__"):  # NumPy arrays and scalars keep their dtype, as in PyTorch
        return _from_array_like(data, dtype, device)
    if isinstance(data, builtins.range):
        data = builtins.list(data)
    return _C.tensor(data, dtype=dtype, device=device)


def as_tensor(data, dtype=None, device=None):
    """Like tensor() but without a copy when `data` is already a tensor of that dtype and device,
    and sharing memory with a NumPy array when no conversion is asked for."""
    if isinstance(data, _Tensor):
        return data.to(dtype=dtype, device=device)
    if type(data).__module__ == "numpy" and type(data).__name__ == "ndarray":
        t = _C.from_numpy(data)
        return t.to(dtype=dtype, device=device)
    return tensor(data, dtype=dtype, device=device)


def from_numpy(ndarray):
    """A tensor sharing memory with `ndarray` (which it keeps alive)."""
    return _C.from_numpy(ndarray)


def from_dlpack(ext_tensor):
    """A tensor sharing memory with a DLPack producer (an object with __dlpack__, or a capsule)."""
    return _C.from_dlpack(ext_tensor)


def _with_requires_grad(fn):
    """fn(..., requires_grad=True) marks the new tensor as a leaf that requires grad (autograd)."""
    @functools.wraps(fn)
    def factory(*args, requires_grad=False, **kwargs):
        out = fn(*args, **kwargs)
        if requires_grad:
            out.requires_grad_(True)
        return out

    return factory


for _name, _fn in builtins.list(globals().items()):
    if callable(_fn) and not _name.startswith("_") and getattr(_fn, "__module__", None) == __name__ \
            and "requires_grad" in _fn.__code__.co_varnames[:_fn.__code__.co_argcount + _fn.__code__.co_kwonlyargcount]:
        globals()[_name] = _with_requires_grad(_fn)
del _name, _fn
