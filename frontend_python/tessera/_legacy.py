"""torch's legacy typed constructors: FloatTensor(2, 3) is an uninitialised 2x3 float32 tensor,
FloatTensor([1, 2]) a tensor of that data, FloatTensor() an empty one."""
from tessera import _C


def _legacy_constructor(name, dtype):
    def construct(*args):
        dt = _C.dtypes[dtype]
        if not args:
            return _C.call_op("empty", ([0],), {"dtype": dt})
        if all(isinstance(a, int) and not isinstance(a, bool) for a in args):
            if any(a < 0 for a in args):
                raise RuntimeError(f"{name}: sizes must be non-negative, got {list(args)}")
            return _C.call_op("empty", (list(args),), {"dtype": dt})
        if len(args) == 1:
            import tessera
            return tessera.tensor(args[0], dtype=dt)
        raise TypeError(f"{name}() takes sizes (ints) or one sequence of data, got {tuple(type(a).__name__ for a in args)}")

    construct.__name__ = construct.__qualname__ = name
    construct.__doc__ = f"Legacy constructor: a {dtype} tensor of the given sizes (uninitialised) or data."
    return construct


FloatTensor = _legacy_constructor("FloatTensor", "float32")
DoubleTensor = _legacy_constructor("DoubleTensor", "float64")
HalfTensor = _legacy_constructor("HalfTensor", "float16")
BFloat16Tensor = _legacy_constructor("BFloat16Tensor", "bfloat16")
LongTensor = _legacy_constructor("LongTensor", "int64")
IntTensor = _legacy_constructor("IntTensor", "int32")
ShortTensor = _legacy_constructor("ShortTensor", "int16")
CharTensor = _legacy_constructor("CharTensor", "int8")
ByteTensor = _legacy_constructor("ByteTensor", "uint8")
BoolTensor = _legacy_constructor("BoolTensor", "bool")
