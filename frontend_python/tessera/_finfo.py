"""torch.finfo and torch.iinfo: the numerical limits of a dtype (the default dtype when none)."""
from tessera import _C

# name: (bits, eps, max, smallest normal, resolution)
_FLOAT = {
    "float16": (16, 0.0009765625, 65504.0, 6.103515625e-05, 0.001),
    "bfloat16": (16, 0.0078125, 3.3895313892515355e+38, 1.1754943508222875e-38, 0.01),
    "float32": (32, 1.1920928955078125e-07, 3.4028234663852886e+38, 1.1754943508222875e-38, 1e-06),
    "float64": (64, 2.220446049250313e-16, 1.7976931348623157e+308, 2.2250738585072014e-308, 1e-15),
}
_INT = {"uint8": (8, 0, 255), "int8": (8, -128, 127), "int16": (16, -32768, 32767),
        "int32": (32, -2**31, 2**31 - 1), "int64": (64, -2**63, 2**63 - 1)}


class finfo:
    """Limits of a floating dtype: bits, eps, max, min (= -max), tiny (= smallest_normal), resolution."""

    def __init__(self, type=None):
        type = type or _C.get_default_dtype()
        if type.name not in _FLOAT:
            raise TypeError(f"finfo(): expected a floating point dtype, got {type.name}")
        self.dtype = type.name
        self.bits, self.eps, self.max, self.smallest_normal, self.resolution = _FLOAT[type.name]
        self.min = -self.max
        self.tiny = self.smallest_normal

    def __repr__(self):
        return (f"finfo(resolution={self.resolution}, min={self.min}, max={self.max}, eps={self.eps}, "
                f"smallest_normal={self.smallest_normal}, tiny={self.tiny}, dtype={self.dtype})")


class iinfo:
    """Limits of an integer dtype: bits, min, max."""

    def __init__(self, type):
        if type.name not in _INT:
            raise TypeError(f"iinfo(): expected an integer dtype, got {type.name}")
        self.dtype = type.name
        self.bits, self.min, self.max = _INT[type.name]

    def __repr__(self):
        return f"iinfo(min={self.min}, max={self.max}, dtype={self.dtype})"
