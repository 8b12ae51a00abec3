"""The dtype objects under PyTorch's names (tessera.float32, tessera.float, tessera.long, ...).

They are the `_C.dtype` objects themselves, so `t.dtype == tessera.float32` and `is` both hold.
This module only binds names: it shadows the builtins bool/int/float on purpose.
"""
from tessera import _C

_d = _C.dtypes

bool = _d["bool"]
uint8 = _d["uint8"]
int8 = _d["int8"]
int16 = _d["int16"]
short = int16
int32 = _d["int32"]
int = int32
int64 = _d["int64"]
long = int64
float16 = _d["float16"]
half = float16
bfloat16 = _d["bfloat16"]
float32 = _d["float32"]
float = float32
float64 = _d["float64"]
double = float64
complex64 = _d["complex64"]
cfloat = complex64
complex128 = _d["complex128"]
cdouble = complex128

DTYPE_NAMES = ("bool", "uint8", "int8", "int16", "short", "int32", "int", "int64", "long", "float16",
               "half", "bfloat16", "float32", "float", "float64", "double", "complex64", "cfloat", "complex128", "cdouble")
del _d
