"""One IR node as its translation sees it: the arguments in schema order, read as ONNX names
(tensors), Python values (static ints, scalars, flags) or int64 tensors (ints that depend on a
dynamic dim), with the dtype and shape of every tensor the node reads or writes."""
from tessera.onnx._graph import FLOATING, SymInt
from tessera.onnx.errors import UnsupportedOperatorError


class Node:
    def __init__(self, ctx, index, node, used):
        self.ctx = ctx
        self.index = index
        self.op = node["op"]
        self.args = node["args"]
        self.outputs = node["outputs"]
        self._used = used

    def unsupported(self, reason):
        return UnsupportedOperatorError(self.op, self.ctx.opset, reason)

    def _arg(self, i):
        if i >= len(self.args):
            return "none", None
        (kind, value), = self.args[i].items()
        return kind, value

    def symbolic(self, i, element=None):
        """The SymInt of an int argument (or of element `element` of an int list) that follows a
        dynamic dim, else None."""
        return self.ctx.sym_args.get((self.index, i, element))

    # --- tensors ------------------------------------------------------------------------------
    def is_none(self, i):
        return self._arg(i)[0] == "none"

    def tensor(self, i):
        kind, value = self._arg(i)
        if kind != "tensor":
            raise self.unsupported(f"argument {i} is {kind}, a tensor was expected")
        return self.ctx.name_of(value)

    def optional_tensor(self, i):
        return None if self.is_none(i) else self.tensor(i)

    def tensor_ids(self, i):
        kind, value = self._arg(i)
        if kind != "tensors":
            raise self.unsupported(f"argument {i} is {kind}, a tensor list was expected")
        return value

    def value(self, i):
        """The IR value (dtype, shape) of tensor argument i."""
        return self.ctx.values[self._arg(i)[1]]

    def dtype(self, i):
        return self.value(i)["dtype"]

    def rank(self, i):
        return len(self.value(i)["shape"])

    def shape(self, i):
        """Tensor argument i's shape: ints, and SymInts for dims that follow the dynamic dims."""
        return self.ctx.shape(self._arg(i)[1])

    # --- outputs ------------------------------------------------------------------------------
    def out_id(self, k=0):
        return self.outputs[k]

    def out_dtype(self, k=0):
        return self.ctx.values[self.outputs[k]]["dtype"]

    def out_rank(self, k=0):
        return len(self.ctx.values[self.outputs[k]]["shape"])

    def out_shape(self, k=0):
        return self.ctx.shape(self.outputs[k])

    def used(self, k):
        """Whether output k is read by a later node or returned."""
        ids = self.outputs[k]
        return any(i in self._used for i in (ids if isinstance(ids, list) else [ids]))

    # --- non-tensor arguments -----------------------------------------------------------------
    def _static(self, i, element=None):
        if self.symbolic(i, element) is not None:
            raise self.unsupported(f"argument {i} depends on a dynamic dim, which this translation needs static "
                                   "(make the dim static)")

    def int(self, i):
        kind, value = self._arg(i)
        if kind not in ("int", "bool"):
            raise self.unsupported(f"argument {i} is {kind}, an int was expected")
        self._static(i)
        return int(value)

    def optional_int(self, i):
        return None if self.is_none(i) else self.int(i)

    def ints(self, i):
        kind, value = self._arg(i)
        if kind == "int":  # an int[1] argument may be recorded as one int
            self._static(i)
            return [value]
        if kind != "ints":
            raise self.unsupported(f"argument {i} is {kind}, an int list was expected")
        for e in range(len(value)):
            self._static(i, e)
        return list(value)

    def optional_ints(self, i):
        return None if self.is_none(i) else self.ints(i)

    def sym_int(self, i):
        """Argument i as an int or, when it follows a dynamic dim, a SymInt."""
        kind, value = self._arg(i)
        if kind != "int":
            raise self.unsupported(f"argument {i} is {kind}, an int was expected")
        return self.symbolic(i) or value

    def sym_ints(self, i):
        kind, value = self._arg(i)
        if kind != "ints":
            raise self.unsupported(f"argument {i} is {kind}, an int list was expected")
        return [self.symbolic(i, e) or x for e, x in enumerate(value)]

    def number(self, i):
        """A Scalar argument: a Python bool, int or float (inf and nan included)."""
        kind, value = self._arg(i)
        if kind == "double":
            return float(value)
        if kind in ("int", "bool"):
            self._static(i)
            return value
        raise self.unsupported(f"argument {i} is {kind}, a number was expected")

    def scalar(self, i, dtype):
        """A Scalar argument as a 0-D tensor of `dtype` (computed when it follows a dynamic dim)."""
        kind, value = self._arg(i)
        if kind == "int" and self.symbolic(i) is not None:
            return self.ctx.scalar(self.symbolic(i), dtype)
        value = self.number(i)
        if dtype not in FLOATING and isinstance(value, float) and not value.is_integer():
            raise self.unsupported(f"the value {value} does not fit the integer tensor type of the operation")
        return self.ctx.const(value, dtype)

    def flag(self, i, default=False):
        kind, value = self._arg(i)
        if kind == "none":
            return default
        if kind != "bool":
            raise self.unsupported(f"argument {i} is {kind}, a bool was expected")
        return value

    def string(self, i, default=None):
        kind, value = self._arg(i)
        return default if kind == "none" else value

    def dtype_arg(self, i):
        """A ScalarType argument's dtype code, or None."""
        kind, value = self._arg(i)
        return None if kind == "none" else value


def normalize_dim(d, rank):
    """A dim index in [0, rank) (a negative one counts from the end, as in tessera)."""
    return d + rank if d < 0 else d


__all__ = ["Node", "normalize_dim", "SymInt"]
