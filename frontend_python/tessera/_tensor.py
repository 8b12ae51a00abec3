"""The Python half of tessera.Tensor: methods and operators added to the C++ class.

The hot paths stay one Python frame deep: `x + y` is __add__ -> _C.call_op. Python numbers go
to the operators' Scalar overloads, so PyTorch's promotion of "wrapped numbers" applies (an int
tensor + 2.5 is float32, a float16 tensor * 2 stays float16); reflected operators whose
operator takes no Scalar first (2 - x, 2 / x, 2 ** x) wrap the number in a 0-dim tensor of
the dtype PyTorch would compute in.
"""
import builtins

from tessera import _C, _functions, _generated_ops, _indexing, _memory_format, _printing

_call = _C.call_op
_E = {}
Tensor = _C.Tensor
_DT = _C.dtypes
_BOOL = _DT["bool"]
_wrap = _functions.wrap_scalar
_NUMBER_OR_TENSOR = (Tensor, builtins.int, builtins.float)


def _operand(x):
    """x as an operand of a Python operator, or None when the operator should return NotImplemented."""
    if isinstance(x, _NUMBER_OR_TENSOR):
        return x
    if isinstance(x, builtins.complex):  # a 0-dim tensor of the default complex dtype (complex64)
        from tessera._factories import tensor

        return tensor(x)
    if hasattr(x, "__array__"):  # NumPy arrays and scalars (they defer to us: __array_priority__)
        from tessera._factories import tensor

        return tensor(x)
    return None


# ---- binary operators
def _binary(op):
    def forward(self, other):
        if type(other) is Tensor or isinstance(other, _NUMBER_OR_TENSOR):
            return _call(op, (self, other), _E)
        other = _operand(other)
        if other is None:
            return NotImplemented
        return _call(op, (self, other), _E)

    def inplace(self, other):
        _call(op + "_", (self, other), _E)
        return self

    return forward, inplace


def _as_tensor_operand(self, other):
    """`other` as a Tensor for an operator without a Scalar overload; None when unsupported."""
    if isinstance(other, Tensor):
        return other
    other = _operand(other)
    if other is None or isinstance(other, Tensor):
        return other
    return _wrap(self, other)


def _reflected(op):
    """other <op> self for a non-tensor `other`."""
    def reflected(self, other):
        other = _as_tensor_operand(self, other)
        if other is None:
            return NotImplemented
        return _call(op, (other, self), _E)

    return reflected


def _commuted(op):
    def reflected(self, other):
        other = _operand(other)
        if other is None:
            return NotImplemented
        return _call(op, (self, other), _E)

    return reflected


def _tensor_rhs(op):
    """self <op> other for an operator that has no Scalar overload."""
    def forward(self, other):
        other = _as_tensor_operand(self, other)
        if other is None:
            return NotImplemented
        return _call(op, (self, other), _E)

    def inplace(self, other):
        if not isinstance(other, Tensor):
            other = _wrap(self, other)
        _call(op + "_", (self, other), _E)
        return self

    return forward, inplace


def _compare(op):
    def cmp(self, other):
        if type(other) is Tensor or isinstance(other, _NUMBER_OR_TENSOR):
            return _call(op, (self, other), _E)
        other = _operand(other)
        if other is None:
            return NotImplemented
        return _call(op, (self, other), _E)

    return cmp


def _bitwise(op):
    """&, |, ^, <<, >> and %: the bitwise_* / remainder operators (a Python number as a 0-d tensor)."""
    def forward(self, other):
        other = _as_tensor_operand(self, other)
        if other is None:
            return NotImplemented
        return _call(op, (self, other), _E)

    def reflected(self, other):
        other = _as_tensor_operand(self, other)
        if other is None:
            return NotImplemented
        return _call(op, (other, self), _E)

    def inplace(self, other):
        other = _as_tensor_operand(self, other)
        if other is None:
            return NotImplemented
        _call(op + "_", (self, other), _E)
        return self

    return forward, reflected, inplace


def __neg__(self):
    return _call("neg", (self,), _E)


def __pos__(self):
    return self


def __abs__(self):
    return _call("abs", (self,), _E)


def __invert__(self):
    dt = self.dtype
    if dt == _BOOL:
        return _call("logical_not", (self,), _E)
    if dt.is_floating_point:
        raise TypeError(f"bitwise_not: expected a bool or integer tensor, got {dt.name}")
    return _call("sub", (_call("neg", (self,), _E), 1), _E)  # ~x == -x - 1 in two's complement


def __matmul__(self, other):
    if not isinstance(other, Tensor):
        other = _operand(other)
        if not isinstance(other, Tensor):
            return NotImplemented
    return _call("matmul", (self, other), _E)


def __rmatmul__(self, other):
    other = _operand(other)
    if not isinstance(other, Tensor):
        return NotImplemented
    return _call("matmul", (other, self), _E)


def __imatmul__(self, other):
    _call("copy_", (self, _call("matmul", (self, other), _E)), _E)
    return self


def __pow__(self, exponent, modulo=None):
    if modulo is not None:
        return NotImplemented
    if type(exponent) is Tensor or isinstance(exponent, _NUMBER_OR_TENSOR):
        return _call("pow", (self, exponent), _E)
    exponent = _operand(exponent)
    if exponent is None:
        return NotImplemented
    return _call("pow", (self, exponent), _E)


# ---- conversions to Python
def __bool__(self):
    n = self.numel()
    if n == 1:
        return builtins.bool(self.item())
    if n == 0:
        raise RuntimeError("Boolean value of Tensor with no values is ambiguous")
    raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")


def __int__(self):
    return builtins.int(self.item())


def __complex__(self):
    return builtins.complex(self.item())


def __float__(self):
    return builtins.float(self.item())


def __index__(self):
    if self.dtype.is_floating_point or self.dtype.is_complex or self.numel() != 1:
        raise TypeError("only integer tensors of a single element can be converted to an index")
    return builtins.int(self.item())


def __len__(self):
    if self.ndim == 0:
        raise TypeError("len() of a 0-d tensor")
    return self.shape[0]


def __iter__(self):
    if self.ndim == 0:
        raise TypeError("iteration over a 0-d tensor")
    return iter([_call("select", (self, 0, i), _E) for i in range(self.shape[0])])


def __contains__(self, element):
    if isinstance(element, _NUMBER_OR_TENSOR):
        return builtins.bool(_functions.any(_call("eq", (self, element), _E)).item())
    raise RuntimeError(f"Tensor.__contains__ only supports Tensor or scalar, but you passed in a {type(element)}.")


def __deepcopy__(self, memo):
    r = _call("clone", (self,), _E)
    memo[id(self)] = r
    return r


def _rebuild(data, dtype_name, shape, device):
    t = _C.tensor(data, dtype=_DT[dtype_name])
    t = _call("reshape", (t, list(shape)), _E)
    return t if device == "cpu" else t.to(device)


def _rebuild_from_bytes(data, dtype_name, shape, device):
    import numpy as np
    t = _C.from_numpy(np.frombuffer(data, dtype=dtype_name).reshape(shape).copy())
    return t if device == "cpu" else t.to(device)


# Dtypes whose bytes NumPy reads as they are (bfloat16 has no NumPy dtype: it goes through tolist).
_RAW_PICKLE = {"bool", "uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64", "complex64",
               "complex128"}


def __reduce_ex__(self, protocol):
    # Raw bytes where NumPy can read them back: a DataLoader worker's batch of images pickles in
    # a memcpy instead of a Python list of every element.
    if self.dtype.name in _RAW_PICKLE:
        cpu = self.detach().to("cpu").contiguous()
        return (_rebuild_from_bytes, (cpu.numpy().tobytes(), self.dtype.name, tuple(self.shape), str(self.device)))
    return (_rebuild, (self.tolist(), self.dtype.name, tuple(self.shape), str(self.device)))


# ---- shape methods with PyTorch's varargs
def _shape_args(args, fname):
    if len(args) == 1 and not isinstance(args[0], builtins.int):
        return args[0]
    return args


def view(self, *shape):
    if len(shape) == 1 and isinstance(shape[0], _C.dtype):
        raise NotImplementedError("view(dtype): reinterpreting the bytes as another dtype is not supported yet")
    return _call("view", (self, _shape_args(shape, "view")), _E)


def reshape(self, *shape):
    return _call("reshape", (self, _shape_args(shape, "reshape")), _E)


def permute(self, *dims):
    return _call("permute", (self, _shape_args(dims, "permute")), _E)


def expand(self, *sizes):
    return _call("expand", (self, _shape_args(sizes, "expand")), _E)


def view_as(self, other):
    return _call("view", (self, other.shape), _E)


def reshape_as(self, other):
    return _call("reshape", (self, other.shape), _E)


def expand_as(self, other):
    return _call("expand", (self, other.shape), _E)


def flatten(self, start_dim=0, end_dim=-1):
    return _call("flatten", (self, start_dim, end_dim), _E)


def ravel(self):
    return _call("reshape", (self, (-1,)), _E)


def squeeze(self, dim=None):
    if dim is None:
        return _call("squeeze", (self,), _E)
    if isinstance(dim, (tuple, list)):
        out = self
        for d in sorted((d % self.ndim if self.ndim else 0) for d in dim)[::-1]:
            out = _call("squeeze", (out, d), _E)
        return out
    return _call("squeeze", (self, dim), _E)


def detach(self):
    """A new tensor sharing storage (there is no autograd history to cut yet)."""
    return _call("permute", (self, list(range(self.ndim))), _E)


def _data(self):
    """tensor.data: the same storage with no autograd history (as detach())."""
    return self.detach()


def _set_data(self, value):
    # torch swaps the tensor's storage; here the values are written in place, which is the same
    # wherever shape and dtype agree (the common use: p.data = new_values).
    if not isinstance(value, Tensor):
        raise TypeError(f"Tensor.data: expected a Tensor, got {type(value).__name__}")
    if tuple(value.shape) != tuple(self.shape) or value.dtype != self.dtype:
        raise RuntimeError(f"Tensor.data: assigning a tensor of shape {tuple(value.shape)} and dtype {value.dtype} "
                           f"to one of shape {tuple(self.shape)} and dtype {self.dtype} is not supported; "
                           f"assign a tensor of the same shape and dtype")
    _call("copy_", (self.detach(), value.detach()), _E)


def detach_(self):
    return self


def _T(self):
    n = self.ndim
    if n == 2:
        return _call("transpose", (self, 0, 1), _E)
    return _call("permute", (self, list(range(n - 1, -1, -1))), _E)


def _mT(self):
    if self.ndim < 2:
        raise RuntimeError(f"tensor.mT is only supported on matrices or batches of matrices. Got {self.ndim}-D tensor.")
    return _call("transpose", (self, -2, -1), _E)


# ---- dtype and device conversions
def _same_device(a, b):
    return a.type == b.type and (a.index is None or b.index is None or a.index == b.index)


def _to_device(self, device, dtype, non_blocking=False):
    """A copy on another device, moved by the two device plugins' copy functions; the dtype
    is converted on whichever side has the kernels (the source first). Recorded by autograd
    when `self` requires grad. non_blocking: a copy between a device and pinned memory is
    queued on the device's current stream (see tessera.Stream)."""
    if self.requires_grad:  # False without a loaded autograd plugin
        from tessera.autograd.device_copy import ToDevice
        from tessera.autograd.grad_mode import is_grad_enabled
        if is_grad_enabled():
            return ToDevice.apply(self, device, dtype)
    return _move_to_device(self, device, dtype, non_blocking)


def _move_to_device(self, device, dtype, non_blocking=False):
    src = self
    if dtype is not None and dtype != self.dtype:
        try:
            src = _call("to", (self, dtype), _E)
        except NotImplementedError:
            return _call("to", (_C._to_device(self, device, non_blocking), dtype), _E)
    return _C._to_device(src, device, non_blocking)


def to(self, *args, **kwargs):
    """to(dtype), to(device), to(device, dtype), to(other), with keywords dtype=, device=,
    copy=False, non_blocking=False. Returns self when nothing changes and copy is False."""
    dtype = kwargs.pop("dtype", None)
    device = kwargs.pop("device", None)
    copy = kwargs.pop("copy", False)
    non_blocking = kwargs.pop("non_blocking", False)
    memory_format = kwargs.pop("memory_format", _memory_format.preserve_format)
    if kwargs:
        raise TypeError(f"to() got an unexpected keyword argument '{next(iter(kwargs))}'")
    flags = []
    for a in args:
        if isinstance(a, _C.dtype):
            dtype = a
        elif isinstance(a, Tensor):
            dtype, device = a.dtype, a.device
        elif isinstance(a, (str, _C.device)):
            device = a
        elif isinstance(a, builtins.bool):
            flags.append(a)  # non_blocking, copy
        else:
            raise TypeError(f"to() received an invalid combination of arguments: got {type(a).__name__}; expected "
                            "(dtype), (device, dtype), (Tensor other) with optional non_blocking and copy")
    if flags:
        non_blocking = flags[0]
    if len(flags) > 1:
        copy = flags[1]
    if memory_format is not _memory_format.preserve_format:
        converted = _memory_format.to_format(self, memory_format, "to")
        if converted is not self:
            self, copy = converted, False  # already a new tensor
    result = self
    if device is not None:
        if not isinstance(device, _C.device):
            device = _C.device(device)
        if not _same_device(device, self.device):
            return _to_device(self, device, self.dtype if dtype is None else dtype, non_blocking)
    if dtype is not None and dtype != result.dtype:
        return _memory_format.like(_call("to", (result, dtype), _E), result, _memory_format.preserve_format, "to")
    if copy:
        return _memory_format.clone(result)
    return result


def _to_dtype(name):
    dt = _DT[name]

    def convert(self, memory_format=_memory_format.preserve_format):
        if self.dtype == dt:
            return self if memory_format is _memory_format.preserve_format else \
                _memory_format.to_format(self, memory_format, name)
        return _memory_format.like(_call("to", (self, dt), _E), self, memory_format, name)

    convert.__name__ = name
    return convert


_TENSOR_TYPE_NAMES = {"float32": "FloatTensor", "float64": "DoubleTensor", "float16": "HalfTensor",
                      "bfloat16": "BFloat16Tensor", "int64": "LongTensor", "int32": "IntTensor",
                      "int16": "ShortTensor", "int8": "CharTensor", "uint8": "ByteTensor", "bool": "BoolTensor",
                      "complex64": "ComplexFloatTensor", "complex128": "ComplexDoubleTensor"}
_TENSOR_TYPE_DTYPES = {v: k for k, v in _TENSOR_TYPE_NAMES.items()}


def type_(self, dtype=None, non_blocking=False, **kwargs):
    """type() -> "tessera.FloatTensor"-style name ("tessera.cuda.FloatTensor" off the CPU).
    type(dtype) converts like to(dtype); type("torch.LongTensor") / type("tessera.cuda.LongTensor")
    or type(tessera.LongTensor) converts the dtype and moves to the device the name says (the
    CPU when it names none), as torch does. Returns self when nothing changes."""
    if dtype is None:
        dev = self.device.type
        name = _TENSOR_TYPE_NAMES.get(self.dtype.name)
        if name is None:
            raise TypeError(f"type(): no legacy tensor type name for dtype {self.dtype}")
        return "tessera." + ("" if dev == "cpu" else dev + ".") + name
    if isinstance(dtype, _C.dtype):
        return to(self, dtype, non_blocking=non_blocking)
    name = getattr(dtype, "__name__", None) if callable(dtype) else dtype  # the legacy constructors: LongTensor
    if not isinstance(name, str):
        raise TypeError(f"type(): expected a dtype or a tensor type name such as 'torch.FloatTensor', got "
                        f"{type(dtype).__name__}")
    parts = name.split(".")
    if parts[-1] not in _TENSOR_TYPE_DTYPES or len(parts) > 3 or (len(parts) > 1 and parts[0] not in
                                                                   ("torch", "tessera")):
        raise ValueError(f"type(): invalid type {name!r}; expected a name such as 'torch.FloatTensor' or "
                         "'torch.cuda.LongTensor'")
    device = parts[1] if len(parts) == 3 else "cpu"
    return to(self, device, _DT[_TENSOR_TYPE_DTYPES[parts[-1]]], non_blocking=non_blocking)


def type_as(self, other):
    """self converted to other's type, dtype and device alike (torch: self.type(other.type()))."""
    if _same_device(self.device, other.device):
        return to(self, other.dtype)
    return to(self, other.device, other.dtype)


def cpu(self):
    return to(self, "cpu")


def cuda(self, device=None, non_blocking=False):
    return to(self, "cuda" if device is None else (f"cuda:{device}" if isinstance(device, builtins.int) else device),
              non_blocking=non_blocking)


def record_stream(self, stream):
    """Marks this tensor's memory as used by the work queued on `stream`: when the tensor is
    freed, its device allocator does not reuse the memory before that work is done."""
    _C._record_stream(self, stream)


def pin_memory(self, device="cuda"):
    """A copy in page-locked host memory of `device`'s plugin (self if pinned already), which
    to(device, non_blocking=True) copies asynchronously."""
    device = device.type if isinstance(device, _C.device) else device.split(":")[0]
    return _C._pin_memory(self, device)


def is_pinned(self, device=None):
    """True when this CPU tensor lives in page-locked memory (see pin_memory)."""
    return _C._is_pinned(self)


def share_memory_(self):
    """Moves this CPU tensor's storage (so every view of it) into shared memory, in place: a
    fork()ed child, or a process it is sent to through tessera.multiprocessing, then reads and
    writes the same memory. A no-op on other devices and when already shared."""
    if self.device.type == "cpu":
        _C._share_memory(self)
    return self


def is_shared(self):
    """True when this CPU tensor's storage is in shared memory (see share_memory_)."""
    return self.device.type == "cpu" and _C._shared_memory_handle(self) is not None


# The new_* factories take self's dtype and device unless given; layout and pin_memory are
# accepted for torch's signatures (tessera tensors are strided; pin a tensor with pin_memory()).
def _new(self, op, size, extra, dtype, device, requires_grad):
    t = _call(op, (list(size),) + extra, {"dtype": dtype or self.dtype, "device": device or self.device})
    return t.requires_grad_() if requires_grad else t


def new_empty(self, *size, dtype=None, device=None, requires_grad=False, layout=None, pin_memory=False):
    return _new(self, "empty", _shape_args(size, "new_empty"), (), dtype, device, requires_grad)


def new_zeros(self, *size, dtype=None, device=None, requires_grad=False, layout=None, pin_memory=False):
    return _new(self, "zeros", _shape_args(size, "new_zeros"), (), dtype, device, requires_grad)


def new_ones(self, *size, dtype=None, device=None, requires_grad=False, layout=None, pin_memory=False):
    return _new(self, "ones", _shape_args(size, "new_ones"), (), dtype, device, requires_grad)


def new_full(self, size, fill_value, *, dtype=None, device=None, requires_grad=False, layout=None,
             pin_memory=False):
    if isinstance(size, builtins.int):
        size = (size,)
    return _new(self, "full", size, (fill_value,), dtype, device, requires_grad)


def new_tensor(self, data, dtype=None, device=None, requires_grad=False, layout=None, pin_memory=False):
    """A new tensor holding a copy of data (a tensor's data is copied, its history left behind)."""
    from tessera._factories import tensor

    if isinstance(data, Tensor):
        t = to(data.detach(), device or self.device, dtype or self.dtype, copy=True)
    else:
        t = tensor(data, dtype=dtype or self.dtype, device=device or self.device)
    return t.requires_grad_() if requires_grad else t


def zero_(self):
    return _call("fill_", (self, 0), _E)


def is_floating_point(self):
    return self.dtype.is_floating_point


def is_signed(self):
    return self.dtype.is_signed


def is_complex(self):
    return self.dtype.is_complex


def nelement(self):
    return self.numel()


def ndimension(self):
    return self.dim()


def _install():
    T = Tensor
    own = set(vars(T))  # what the C++ class defines natively wins over the generated wrappers

    def put(name, fn, override=True):
        if override or name not in own:
            setattr(T, name, fn)

    for name in _generated_ops.METHODS:
        put(name, getattr(_generated_ops, name), override=False)

    arith = {"add": "add", "sub": "sub", "mul": "mul", "truediv": "div"}
    for dunder, op in arith.items():
        fwd, inp = _binary(op)
        put(f"__{dunder}__", fwd)
        put(f"__i{dunder}__", inp)
    put("__radd__", _commuted("add"))
    put("__rmul__", _commuted("mul"))
    put("__rsub__", _reflected("sub"))
    put("__rtruediv__", _reflected("div"))
    put("__rdiv__", _reflected("div"))
    fwd, inp = _tensor_rhs("floor_divide")
    put("__floordiv__", fwd)
    put("__ifloordiv__", inp)
    put("__rfloordiv__", _reflected("floor_divide"))
    put("__pow__", __pow__)
    put("__rpow__", _reflected("pow"))

    def ipow(self, other):
        _call("pow_", (self, other), _E)
        return self

    put("__ipow__", ipow)
    for dunder, op in {"eq": "eq", "ne": "ne", "lt": "lt", "le": "le", "gt": "gt", "ge": "ge"}.items():
        put(f"__{dunder}__", _compare(op))
    for name, op in {"and": "bitwise_and", "or": "bitwise_or", "xor": "bitwise_xor", "lshift": "bitwise_left_shift",
                     "rshift": "bitwise_right_shift", "mod": "remainder"}.items():
        fwd, ref, inp = _bitwise(op)
        put(f"__{name}__", fwd)
        put(f"__r{name}__", ref)
        put(f"__i{name}__", inp)
    for f in (__neg__, __pos__, __abs__, __invert__, __matmul__, __rmatmul__, __imatmul__, __bool__, __int__,
              __complex__, __float__, __index__, __len__, __iter__, __contains__, __deepcopy__, __reduce_ex__):
        put(f.__name__, f)
    T.__hash__ = object.__hash__  # identity, as PyTorch (== is element-wise)
    T.__array_priority__ = 1000  # NumPy defers binary operators to the tensor
    T.__getitem__ = _indexing.getitem
    T.__setitem__ = _indexing.setitem
    T.__repr__ = _printing.tensor_repr
    T.__str__ = _printing.tensor_repr
    T.__format__ = _printing.tensor_format

    for f in (view, reshape, permute, expand, view_as, reshape_as, expand_as, flatten, ravel, squeeze, detach,
              detach_, to, type_as, cpu, cuda, new_empty, new_zeros, new_ones, new_full, new_tensor, zero_,
              record_stream, pin_memory, is_pinned, share_memory_, is_shared):
        put(f.__name__, f)
    for f in (_memory_format.is_contiguous, _memory_format.contiguous, _memory_format.clone):
        put(f.__name__, f)
    for f in (is_floating_point, is_signed, is_complex, nelement, ndimension):  # C++ versions win
        put(f.__name__, f, override=False)
    put("type", type_)
    for name, dt in {"float": "float32", "double": "float64", "half": "float16", "bfloat16": "bfloat16",
                     "long": "int64", "int": "int32", "short": "int16", "char": "int8", "byte": "uint8", "bool": "bool",
                     "cfloat": "complex64", "cdouble": "complex128"}.items():
        put(name, _to_dtype(dt))
    T.T = property(_T)
    T.data = property(_data, _set_data)
    T.mT = property(_mT)
    # torch's real / imag are properties (views); assigning to them writes the parts.
    T.real = property(lambda self: _call("real", (self,), _E),
                      lambda self, value: _call("real", (self,), _E).copy_(value))
    T.imag = property(lambda self: _call("imag", (self,), _E),
                      lambda self, value: _call("imag", (self,), _E).copy_(value))
    put("t", _functions.t)
    put("where", _functions._where_method)
    for name in ("max", "min", "var", "std", "all", "any", "isclose", "allclose",
                 "equal", "nonzero", "unbind", "split", "chunk", "clamp_min", "clamp_max", "norm", "unique",
                 "unique_consecutive", "tensor_split"):
        put(name, getattr(_functions, name))
    if "itemsize" not in own:
        T.itemsize = property(lambda self: self.dtype.itemsize)
    if "nbytes" not in own:
        T.nbytes = property(lambda self: self.numel() * self.dtype.itemsize)
    if "is_cpu" not in own:
        T.is_cpu = property(lambda self: self.device.type == "cpu")
    T.__module__ = "tessera"


_install()
