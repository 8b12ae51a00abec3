"""The ONNX graph under construction: names of the IR's values, nodes, constants, casts, and the
integers that depend on dynamic dims, which are computed at run time from the graph inputs'
shapes (Shape, Mul, Add, Concat) instead of written as constants."""
import ml_dtypes
import numpy as np
from onnx import TensorProto, helper, numpy_helper

# Tessera's dtype codes (the graph IR's "dtype", the order of fx._from_ir._DTYPE_NAMES).
BOOL, UINT8, INT8, INT16, INT32, INT64, FLOAT16, BFLOAT16, FLOAT32, FLOAT64 = range(10)
FLOATING = (FLOAT16, BFLOAT16, FLOAT32, FLOAT64)
ONNX_TYPES = [TensorProto.BOOL, TensorProto.UINT8, TensorProto.INT8, TensorProto.INT16, TensorProto.INT32,
              TensorProto.INT64, TensorProto.FLOAT16, TensorProto.BFLOAT16, TensorProto.FLOAT, TensorProto.DOUBLE,
              TensorProto.COMPLEX64, TensorProto.COMPLEX128]
NUMPY_TYPES = [np.bool_, np.uint8, np.int8, np.int16, np.int32, np.int64, np.float16, ml_dtypes.bfloat16,
               np.float32, np.float64, np.complex64, np.complex128]
INT64_MAX = 2**63 - 1


class SymInt:
    """An integer of the graph that depends on the dynamic dims: sum of coef * prod(dims)."""
    __slots__ = ("expr",)

    def __init__(self, expr):
        self.expr = expr  # [[coef, [symbol index, ...]], ...]

    def __eq__(self, other):
        return isinstance(other, SymInt) and self.expr == other.expr

    def __hash__(self):
        return hash(repr(self.expr))

    def __repr__(self):
        return f"SymInt({self.expr})"


def to_numpy(t):
    """A tessera tensor's contents as a numpy array (bfloat16 through float32: numpy lacks it)."""
    import tessera
    t = t.detach().contiguous()
    if t.dtype == tessera.bfloat16:
        return t.float().numpy().astype(ml_dtypes.bfloat16)
    return np.array(t.numpy(), copy=True)


class GraphContext:
    """Collects nodes, initializers and the IR value -> ONNX name binding of one export."""

    def __init__(self, ir, sym_exprs, opset):
        self.ir = ir
        self.opset = opset
        self.values = ir["values"]
        self.nodes = []
        self.initializers = []
        self.extra_inputs = []          # parameters as graph inputs (export_params=False)
        self.env = {}                   # IR value id -> ONNX name
        self.pending = {}               # value id -> (name, array, as_input): emitted on first use
        self._names = set()
        self._consts = {}
        self._counter = 0
        self._sym_source = {}           # symbol index -> (input name, dim)
        self._sym_dims, self._sym_values = {}, {}  # symbol -> [size]; expression -> [value]
        # The symbolic integers: node arguments by (node, arg, element) and value shapes by (id, dim).
        self.sym_args, self.sym_shapes = {}, {}
        for path, expr in sym_exprs:
            if path[0] == "n":
                self.sym_args[(path[1], path[2], path[3] if len(path) > 3 else None)] = SymInt(expr)
            elif path[0] == "v" and path[2] == "shape":
                self.sym_shapes[(path[1], path[3])] = SymInt(expr)
        self.sym_nodes = {k for k, _, _ in self.sym_args}

    # --- names ------------------------------------------------------------------------------
    def claim(self, name):
        if name in self._names:
            raise ValueError(f"ts.onnx.export: the name '{name}' is used twice in the graph (input, output or "
                             "initializer names must be distinct)")
        self._names.add(name)
        return name

    def fresh(self, hint):
        while True:
            self._counter += 1
            name = f"{hint}_{self._counter}"
            if name not in self._names:
                self._names.add(name)
                return name

    def name_of(self, vid):
        """The ONNX name of an IR value; an initializer is written on its first use."""
        if vid not in self.env:
            if vid not in self.pending:
                raise KeyError(vid)
            name, array, as_input = self.pending.pop(vid)
            if as_input:
                self.extra_inputs.append(helper.make_tensor_value_info(
                    name, ONNX_TYPES[self.values[vid]["dtype"]], list(array.shape)))
            else:
                self.initializers.append(numpy_helper.from_array(array, name))
            self.env[vid] = name
        return self.env[vid]

    def defer(self, vid, name, array, as_input=False, claimed=False):
        """An initializer (or, as_input, a graph input) for value vid, written if it is used;
        `name` is claimed here unless it came from fresh() (claimed=True)."""
        self.pending[vid] = (name if claimed else self.claim(name), array, as_input)

    # --- nodes ------------------------------------------------------------------------------
    def op(self, op_type, inputs, outputs=1, **attrs):
        """Appends a node; returns its output name (or the list of names when outputs > 1)."""
        names = [self.fresh(op_type.lower()) for _ in range(outputs)]
        ins = ["" if x is None else x for x in inputs]
        while ins and ins[-1] == "":  # trailing optional inputs are left off
            ins.pop()
        self.nodes.append(helper.make_node(op_type, ins, names, name=self.fresh(f"n_{op_type}"), **attrs))
        return names[0] if outputs == 1 else names

    def const(self, value, dtype):
        """A Constant of the given dtype code (numpy broadcast of `value`), shared when repeated."""
        array = np.asarray(value, dtype=NUMPY_TYPES[dtype])
        key = (dtype, array.shape, array.tobytes())
        if key not in self._consts:
            name = self.fresh("const")
            self.nodes.append(helper.make_node("Constant", [], [name], name=self.fresh("n_Constant"),
                                               value=numpy_helper.from_array(array, name)))
            self._consts[key] = name
        return self._consts[key]

    def ints(self, values):
        return self.const(list(values), INT64)

    def cast(self, name, from_dtype, to_dtype):
        return name if from_dtype == to_dtype else self.op("Cast", [name], to=ONNX_TYPES[to_dtype])

    # --- dynamic dims -----------------------------------------------------------------------
    def add_symbol_source(self, symbol, input_name, dim):
        self._sym_source.setdefault(symbol, (input_name, dim))

    def symbol(self, i):
        """A 1-D int64 tensor [size] of dynamic dim i, read from the first input that has it."""
        if i not in self._sym_dims:
            name, dim = self._sym_source[i]
            self._sym_dims[i] = self.op("Shape", [name], start=dim, end=dim + 1)
        return self._sym_dims[i]

    def sym_int(self, s):
        """A 1-D int64 tensor [value] of a SymInt (each expression computed once)."""
        key = repr(s.expr)
        if key not in self._sym_values:
            self._sym_values[key] = self._expression(s.expr)
        return self._sym_values[key]

    def _expression(self, expr):
        total = None
        for coef, mono in expr:
            term = self.ints([coef]) if not mono else None
            for i in mono:
                term = self.symbol(i) if term is None else self.op("Mul", [term, self.symbol(i)])
            if mono and coef != 1:
                term = self.op("Mul", [term, self.ints([coef])])
            total = term if total is None else self.op("Add", [total, term])
        return total

    def int_list(self, items):
        """A 1-D int64 tensor of ints and SymInts; a constant when none is symbolic."""
        items = list(items)
        if not any(isinstance(x, SymInt) for x in items):
            return self.ints(items)
        parts, run = [], []
        for x in items:
            if isinstance(x, SymInt):
                if run:
                    parts.append(self.ints(run))
                    run = []
                parts.append(self.sym_int(x))
            else:
                run.append(x)
        if run:
            parts.append(self.ints(run))
        return parts[0] if len(parts) == 1 else self.op("Concat", parts, axis=0)

    def scalar(self, x, dtype):
        """A 0-D tensor of the dtype holding an int, float or SymInt."""
        if isinstance(x, SymInt):
            return self.cast(self.op("Squeeze", [self.sym_int(x), self.ints([0])]), INT64, dtype)
        return self.const(x, dtype)

    def shape(self, vid):
        """The shape of an IR value, an int per static dim and a SymInt per dynamic one."""
        return [self.sym_shapes.get((vid, d), s) for d, s in enumerate(self.values[vid]["shape"])]
