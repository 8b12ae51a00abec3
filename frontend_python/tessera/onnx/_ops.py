"""One translation per operator: OPS maps a full operator name as the graph IR records it
("add.Tensor") to a function of a Node (_node.py) that appends ONNX nodes and returns the
ONNX name of each output (a list for several outputs, None for an output nothing reads).

Every translation computes exactly the operator's result, casting operands to the dtype the IR
recorded for the result (tessera's type promotion happened at capture); where ONNX cannot
express an argument (a pool's indices, a random op), it raises UnsupportedOperatorError."""
import math

import numpy as np

from tessera.onnx._graph import BOOL, FLOAT64, FLOATING, INT32, INT64, INT64_MAX, NUMPY_TYPES
from tessera.onnx._node import normalize_dim

OPS = {}


def register(*names):
    def add(fn):
        for name in names:
            OPS[name] = fn
        return fn
    return add


def lookup(op_name):
    """The translation of an operator; an in-place overload ("add_.Tensor") translates as its
    functional form, the IR being SSA (an in-place call's result is a new value)."""
    fn = OPS.get(op_name)
    if fn is None:
        base, dot, overload = op_name.partition(".")
        if base.endswith("_") and not base.endswith("__"):
            fn = OPS.get(base[:-1] + dot + overload)
    return fn


# --- helpers -------------------------------------------------------------------------------------
def _input_as_output(n, i=0, k=0):
    """Tensor argument i cast to the dtype of output k."""
    return n.ctx.cast(n.tensor(i), n.dtype(i), n.out_dtype(k))


def _reduce(ctx, op_type, x, axes, keepdims):
    """A Reduce* node; axes=None reduces every dim. ReduceSum takes its axes as an input since
    opset 13, the other reductions since opset 18."""
    if axes is None:
        return ctx.op(op_type, [x], keepdims=int(keepdims))
    if op_type == "ReduceSum" or ctx.opset >= 18:
        return ctx.op(op_type, [x, ctx.ints(axes)], keepdims=int(keepdims))
    return ctx.op(op_type, [x], axes=list(axes), keepdims=int(keepdims))


def _axes(n, i, rank):
    """A dim list argument (None or [] = all dims) as normalised axes, or None."""
    dims = None if n.is_none(i) else n.ints(i)
    if not dims or rank == 0:
        return None
    return sorted(normalize_dim(d, rank) for d in dims)


def _dtype_code(dtype):
    from tessera.fx._from_ir import _DTYPE_NAMES
    return _DTYPE_NAMES.index(str(dtype).split(".")[-1])


def _compare_dtype(n, scalar):
    """The dtype both sides of a comparison are computed in (tessera's result_type: a Python
    scalar or 0-D tensor does not widen a dimensioned tensor of the same kind)."""
    import tessera
    from tessera.fx._from_ir import dtype_of

    def probe(i):
        return tessera.zeros([1] * min(n.rank(i), 1), dtype=dtype_of(n.dtype(i)))
    if scalar:
        other = 0 if n.symbolic(1) is not None else n.number(1)
    else:
        other = probe(1)
    return _dtype_code(tessera.result_type(probe(0), other))


def _batched(n, x, spatial, fn):
    """fn(x) for an ONNX conv/pool, which wants (N, C, *spatial): an unbatched input gets N=1."""
    if n.rank(0) == spatial + 2:
        return fn(x)
    if n.rank(0) != spatial + 1:
        raise n.unsupported(f"expected an input of rank {spatial + 1} or {spatial + 2}, got {n.rank(0)}")
    y = fn(n.ctx.op("Unsqueeze", [x, n.ctx.ints([0])]))
    return n.ctx.op("Squeeze", [y, n.ctx.ints([0])])


def _spread(values, k):
    return list(values) * k if len(values) == 1 else list(values)


# --- element-wise, one input ---------------------------------------------------------------------
def _unary(onnx_op):
    def translate(n):
        return n.ctx.op(onnx_op, [_input_as_output(n)])
    return translate


for _name, _onnx in {"abs": "Abs", "neg": "Neg", "exp": "Exp", "log": "Log", "sqrt": "Sqrt", "sin": "Sin",
                     "cos": "Cos", "tan": "Tan", "asin": "Asin", "acos": "Acos", "atan": "Atan", "sinh": "Sinh",
                     "cosh": "Cosh", "asinh": "Asinh", "acosh": "Acosh", "atanh": "Atanh", "tanh": "Tanh",
                     "sigmoid": "Sigmoid", "relu": "Relu", "erf": "Erf", "reciprocal": "Reciprocal",
                     "sign": "Sign"}.items():
    register(_name)(_unary(_onnx))


def _rounding(onnx_op):
    def translate(n):
        x = _input_as_output(n)
        return n.ctx.op(onnx_op, [x]) if n.out_dtype() in FLOATING else x  # integers are already whole
    return translate


register("floor")(_rounding("Floor"))
register("ceil")(_rounding("Ceil"))
register("round")(_rounding("Round"))  # both round half to even


def _trunc(ctx, x):
    # ONNX has no Trunc: sign(x) * floor(|x|).
    return ctx.op("Mul", [ctx.op("Sign", [x]), ctx.op("Floor", [ctx.op("Abs", [x])])])


@register("trunc")
def _trunc_op(n):
    x = _input_as_output(n)
    return _trunc(n.ctx, x) if n.out_dtype() in FLOATING else x


@register("rsqrt")
def _rsqrt(n):
    return n.ctx.op("Reciprocal", [n.ctx.op("Sqrt", [_input_as_output(n)])])


@register("exp2")
def _exp2(n):
    return n.ctx.op("Pow", [n.ctx.const(2.0, n.out_dtype()), _input_as_output(n)])


def _log_base(base):
    def translate(n):
        return n.ctx.op("Div", [n.ctx.op("Log", [_input_as_output(n)]), n.ctx.const(math.log(base), n.out_dtype())])
    return translate


register("log2")(_log_base(2.0))
register("log10")(_log_base(10.0))


@register("log1p")
def _log1p(n):
    x = _input_as_output(n)
    return n.ctx.op("Log", [n.ctx.op("Add", [x, n.ctx.const(1.0, n.out_dtype())])])


@register("expm1")
def _expm1(n):
    x = _input_as_output(n)
    return n.ctx.op("Sub", [n.ctx.op("Exp", [x]), n.ctx.const(1.0, n.out_dtype())])


@register("logical_not")
def _logical_not(n):
    return n.ctx.op("Not", [n.ctx.cast(n.tensor(0), n.dtype(0), BOOL)])


@register("bitwise_not")
def _bitwise_not(n):
    if n.dtype(0) == BOOL:
        return n.ctx.op("Not", [n.tensor(0)])
    if n.ctx.opset < 18:
        raise n.unsupported("bitwise operations on integers need opset 18")
    return n.ctx.op("BitwiseNot", [n.tensor(0)])


@register("silu")
def _silu(n):
    x = _input_as_output(n)
    return n.ctx.op("Mul", [x, n.ctx.op("Sigmoid", [x])])


@register("gelu")
def _gelu(n):
    ctx, x, dt = n.ctx, _input_as_output(n), n.out_dtype()
    approximate = n.string(1, "none")
    if approximate == "none":    # x/2 * (1 + erf(x / sqrt(2)))
        inner = ctx.op("Erf", [ctx.op("Div", [x, ctx.const(math.sqrt(2.0), dt)])])
    elif approximate == "tanh":  # x/2 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))
        cube = ctx.op("Mul", [ctx.op("Mul", [x, x]), x])
        poly = ctx.op("Add", [x, ctx.op("Mul", [cube, ctx.const(0.044715, dt)])])
        inner = ctx.op("Tanh", [ctx.op("Mul", [poly, ctx.const(math.sqrt(2.0 / math.pi), dt)])])
    else:
        raise n.unsupported(f"approximate='{approximate}'")
    half_x = ctx.op("Mul", [x, ctx.const(0.5, dt)])
    return ctx.op("Mul", [half_x, ctx.op("Add", [inner, ctx.const(1.0, dt)])])


@register("clamp")
def _clamp(n):
    dt = n.out_dtype()
    low = None if n.is_none(1) else n.scalar(1, dt)
    high = None if n.is_none(2) else n.scalar(2, dt)
    return n.ctx.op("Clip", [_input_as_output(n), low, high])


# --- element-wise, two inputs --------------------------------------------------------------------
def _second(n, scalar, dt):
    return n.scalar(1, dt) if scalar else n.ctx.cast(n.tensor(1), n.dtype(1), dt)


def _arith(onnx_op, scalar=False, alpha=False):
    bool_op = {"Add": "Or", "Mul": "And"}.get(onnx_op)

    def translate(n):
        dt = n.out_dtype()
        a, b = _input_as_output(n), _second(n, scalar, dt)
        if alpha and n.number(2) != 1:
            b = n.ctx.op("Mul", [b, n.scalar(2, dt)])
        if dt == BOOL:
            if bool_op is None:
                raise n.unsupported("a boolean result")
            return n.ctx.op(bool_op, [a, b])
        return n.ctx.op(onnx_op, [a, b])
    return translate


register("add.Tensor")(_arith("Add", alpha=True))
register("add.Scalar")(_arith("Add", scalar=True, alpha=True))
register("sub.Tensor")(_arith("Sub", alpha=True))
register("sub.Scalar")(_arith("Sub", scalar=True, alpha=True))
register("mul.Tensor")(_arith("Mul"))
register("mul.Scalar")(_arith("Mul", scalar=True))
register("maximum")(_arith("Max"))
register("minimum")(_arith("Min"))
register("pow.Tensor_Tensor")(_arith("Pow"))
register("pow.Tensor_Scalar")(_arith("Pow", scalar=True))


def _divide(n, a, b, mode):
    """a / b with torch's rounding modes: None (true division), 'floor' or 'trunc'."""
    ctx, dt = n.ctx, n.out_dtype()
    if dt in FLOATING:
        q = ctx.op("Div", [a, b])
        if mode is None:
            return q
        return ctx.op("Floor", [q]) if mode == "floor" else _trunc(ctx, q)
    if mode == "trunc":
        return ctx.op("Div", [a, b])  # integer Div truncates toward zero
    if mode == "floor":  # exact in float64 for integers below 2**53
        q = ctx.op("Div", [ctx.cast(a, dt, FLOAT64), ctx.cast(b, dt, FLOAT64)])
        return ctx.cast(ctx.op("Floor", [q]), FLOAT64, dt)
    raise n.unsupported(f"rounding_mode={mode!r}")


def _div(scalar=False, mode_arg=None, mode=None):
    def translate(n):
        dt = n.out_dtype()
        rounding = n.string(mode_arg) if mode_arg is not None else mode
        if rounding not in (None, "floor", "trunc"):
            raise n.unsupported(f"rounding_mode={rounding!r}")
        return _divide(n, _input_as_output(n), _second(n, scalar, dt), rounding)
    return translate


register("div.Tensor")(_div())
register("div.Scalar")(_div(scalar=True))
register("div.Tensor_mode")(_div(mode_arg=2))
register("floor_divide")(_div(mode="floor"))


@register("remainder.Tensor")
def _remainder(n):
    ctx = n.ctx
    a, b = _input_as_output(n), _input_as_output(n, 1)
    if n.out_dtype() not in FLOATING:
        return ctx.op("Mod", [a, b], fmod=0)  # the sign of the divisor, as Python's %
    return ctx.op("Sub", [a, ctx.op("Mul", [ctx.op("Floor", [ctx.op("Div", [a, b])]), b])])


@register("fmod.Tensor")
def _fmod(n):
    return n.ctx.op("Mod", [_input_as_output(n), _input_as_output(n, 1)], fmod=1)


def _compare(onnx_op, scalar=False, negate=False):
    def translate(n):
        dt = _compare_dtype(n, scalar)
        if dt == BOOL and onnx_op != "Equal":
            dt = INT32  # ONNX orders numbers only
        a, b = n.ctx.cast(n.tensor(0), n.dtype(0), dt), _second(n, scalar, dt)
        y = n.ctx.op(onnx_op, [a, b])
        return n.ctx.op("Not", [y]) if negate else y
    return translate


for _name, (_onnx, _negate) in {"eq": ("Equal", False), "ne": ("Equal", True), "lt": ("Less", False),
                                "le": ("LessOrEqual", False), "gt": ("Greater", False),
                                "ge": ("GreaterOrEqual", False)}.items():
    register(f"{_name}.Tensor")(_compare(_onnx, negate=_negate))
    register(f"{_name}.Scalar")(_compare(_onnx, scalar=True, negate=_negate))


def _logical(onnx_op):
    def translate(n):
        ctx = n.ctx
        return ctx.op(onnx_op, [ctx.cast(n.tensor(0), n.dtype(0), BOOL), ctx.cast(n.tensor(1), n.dtype(1), BOOL)])
    return translate


register("logical_and")(_logical("And"))
register("logical_or")(_logical("Or"))


def _bitwise(onnx_op):
    def translate(n):
        dt = n.out_dtype()
        a, b = _input_as_output(n), _input_as_output(n, 1)
        if dt == BOOL:
            return n.ctx.op(onnx_op, [a, b])
        if n.ctx.opset < 18:
            raise n.unsupported("bitwise operations on integers need opset 18")
        return n.ctx.op("Bitwise" + onnx_op, [a, b])
    return translate


for _name, _onnx in {"bitwise_and": "And", "bitwise_or": "Or", "bitwise_xor": "Xor"}.items():
    register(f"{_name}.Tensor")(_bitwise(_onnx))


@register("where.self")
def _where(n):
    ctx, dt = n.ctx, n.out_dtype()
    cond = ctx.cast(n.tensor(0), n.dtype(0), BOOL)
    return ctx.op("Where", [cond, ctx.cast(n.tensor(1), n.dtype(1), dt), ctx.cast(n.tensor(2), n.dtype(2), dt)])


@register("masked_fill.Scalar")
def _masked_fill(n):
    ctx, dt = n.ctx, n.out_dtype()
    mask = ctx.cast(n.tensor(1), n.dtype(1), BOOL)
    return ctx.op("Where", [mask, n.scalar(2, dt), _input_as_output(n)])


# --- matrix products -----------------------------------------------------------------------------
@register("matmul", "mm", "bmm")
def _matmul(n):
    return n.ctx.op("MatMul", [_input_as_output(n, 0), _input_as_output(n, 1)])


@register("addmm")
def _addmm(n):
    # beta * self + alpha * (mat1 @ mat2); with beta = 0, self is ignored (even NaN), as in tessera.
    ctx, dt = n.ctx, n.out_dtype()
    y = ctx.op("MatMul", [_input_as_output(n, 1), _input_as_output(n, 2)])
    beta, alpha = n.number(3), n.number(4)
    if alpha != 1:
        y = ctx.op("Mul", [y, ctx.const(alpha, dt)])
    if beta == 0:
        return y
    c = _input_as_output(n, 0)
    if beta != 1:
        c = ctx.op("Mul", [c, ctx.const(beta, dt)])
    return ctx.op("Add", [c, y])


@register("_scaled_dot_product_flash_attention_for_cpu")
def _flash_attention(n):
    """The fused attention kernel as ONNX 17 spells attention: softmax(q k^T * scale + mask) v, a
    causal mask from Trilu. Its logsumexp output is not translated (only its backward reads it)."""
    if n.used(1):
        raise n.unsupported("the logsumexp output is read (only the kernel's backward needs it)")
    ctx, dt = n.ctx, n.out_dtype()
    q, k, v = (_input_as_output(n, i) for i in range(3))
    embed = n.shape(0)[-1]
    scale = 1.0 / math.sqrt(embed) if n.is_none(6) and isinstance(embed, int) and embed else None
    if not n.is_none(6):
        scale = float(n.number(6))
    if scale is None:
        raise n.unsupported("the default scale needs a static embedding size")
    scores = ctx.op("Mul", [ctx.op("MatMul", [q, ctx.op("Transpose", [k], perm=[0, 1, 3, 2])]), ctx.const(scale, dt)])
    if n.flag(4):  # top-left aligned: query row i sees keys 0..i
        ones = ctx.op("ConstantOfShape", [ctx.op("Shape", [scores])], value=_value_tensor(True, BOOL))
        scores = ctx.op("Where", [ctx.op("Trilu", [ones], upper=0), scores, ctx.const(-math.inf, dt)])
    if n.is_none(5):
        return [ctx.op("MatMul", [ctx.op("Softmax", [scores], axis=-1), v]), None]
    # An additive mask (broadcast by Add); a row it hides entirely gets zeros, as the kernel's.
    scores = ctx.op("Add", [scores, _input_as_output(n, 5)])
    hidden = ctx.op("Equal", [_reduce(ctx, "ReduceMax", scores, [-1], True), ctx.const(-math.inf, dt)])
    zero = ctx.const(0.0, dt)
    probs = ctx.op("Softmax", [ctx.op("Where", [hidden, zero, scores])], axis=-1)
    return [ctx.op("MatMul", [ctx.op("Where", [hidden, zero, probs]), v]), None]


# --- softmax and reductions ----------------------------------------------------------------------
def _softmax(onnx_op):
    def translate(n):
        return n.ctx.op(onnx_op, [_input_as_output(n)], axis=n.int(1))
    return translate


register("softmax.int")(_softmax("Softmax"))
register("log_softmax.int")(_softmax("LogSoftmax"))


def _reduction(onnx_op):
    def translate(n):  # (self, dim, keepdim, ...)
        return _reduce(n.ctx, onnx_op, _input_as_output(n), _axes(n, 1, n.rank(0)), n.flag(2))
    return translate


register("sum.dim_IntList")(_reduction("ReduceSum"))
register("mean.dim")(_reduction("ReduceMean"))
register("prod.dim_IntList")(_reduction("ReduceProd"))
register("amax")(_reduction("ReduceMax"))
register("amin")(_reduction("ReduceMin"))
register("logsumexp")(_reduction("ReduceLogSumExp"))


def _arg_reduce(arg_op):
    def translate(n):
        ctx, x = n.ctx, n.tensor(0)
        if n.is_none(1) or n.rank(0) == 0:  # over all elements: of the flattened tensor
            y = ctx.op(arg_op, [ctx.op("Reshape", [x, ctx.ints([-1])])], axis=0, keepdims=0)
            return ctx.op("Reshape", [y, ctx.int_list(n.out_shape())])
        return ctx.op(arg_op, [x], axis=normalize_dim(n.int(1), n.rank(0)), keepdims=int(n.flag(2)))
    return translate


register("argmax")(_arg_reduce("ArgMax"))
register("argmin")(_arg_reduce("ArgMin"))


def _variance(n, axes, correction, keepdim):
    ctx, dt = n.ctx, n.out_dtype()
    x = _input_as_output(n)
    mean = _reduce(ctx, "ReduceMean", x, axes, True)
    diff = ctx.op("Sub", [x, mean])
    total = _reduce(ctx, "ReduceSum", ctx.op("Mul", [diff, diff]), axes, keepdim)
    shape = n.shape(0)
    reduced = [shape[d] for d in (axes if axes is not None else range(len(shape)))]
    if all(isinstance(s, int) for s in reduced):
        count = ctx.const(max(int(np.prod(reduced)) - correction, 0), dt)
    else:
        count = _reduce(ctx, "ReduceProd", ctx.int_list(reduced), None, False)
        count = ctx.op("Max", [ctx.op("Sub", [ctx.cast(count, INT64, dt), ctx.const(correction, dt)]),
                               ctx.const(0, dt)])
    return ctx.op("Div", [total, count])


@register("var.correction", "std.correction")
def _var_correction(n):
    correction = 1 if n.is_none(2) else n.number(2)
    y = _variance(n, _axes(n, 1, n.rank(0)), correction, n.flag(3))
    return n.ctx.op("Sqrt", [y]) if n.op.startswith("std") else y


@register("cumsum")
def _cumsum(n):
    axis = n.ctx.const(normalize_dim(n.int(1), max(n.rank(0), 1)), INT64)
    return n.ctx.op("CumSum", [_input_as_output(n), axis])


@register("topk")
def _topk(n):
    ctx = n.ctx
    k = ctx.int_list([n.sym_int(1)])
    values, indices = ctx.op("TopK", [n.tensor(0), k], outputs=2, axis=n.int(2),
                             largest=int(n.flag(3, True)), sorted=int(n.flag(4, True)))
    return [values, indices]


# --- normalisation -------------------------------------------------------------------------------
@register("native_layer_norm")
def _layer_norm(n):
    ctx, dt = n.ctx, n.out_dtype()
    normalized = n.ints(1)
    x = _input_as_output(n)
    scale = ctx.cast(n.tensor(2), n.dtype(2), dt) if not n.is_none(2) else ctx.const(np.ones(normalized), dt)
    bias = None if n.is_none(3) else ctx.cast(n.tensor(3), n.dtype(3), dt)
    stats = n.used(1) or n.used(2)
    outs = ctx.op("LayerNormalization", [x, scale, bias], outputs=3 if stats else 1, axis=-len(normalized),
                  epsilon=float(n.number(4)))
    return outs if stats else [outs, None, None]


def _channel_param(n, i, dt, fill):
    """A per-channel weight or bias, or a constant of `fill` when the argument is None."""
    if not n.is_none(i):
        return n.ctx.cast(n.tensor(i), n.dtype(i), dt)
    channels = n.shape(0)[1]
    if not isinstance(channels, int):
        raise n.unsupported("the channel dim is dynamic and the weight or bias is None")
    return n.ctx.const(np.full([channels], fill), dt)


def _batch_norm_eval(n):
    if n.used(1) or n.used(2):
        raise n.unsupported("the saved mean and inverse std outputs are read")
    ctx, dt = n.ctx, n.out_dtype()
    if n.rank(0) < 2:
        raise n.unsupported(f"an input of rank {n.rank(0)}")
    y = ctx.op("BatchNormalization", [_input_as_output(n), _channel_param(n, 1, dt, 1.0), _channel_param(n, 2, dt, 0.0),
                                      ctx.cast(n.tensor(3), n.dtype(3), dt), ctx.cast(n.tensor(4), n.dtype(4), dt)],
               epsilon=float(n.number(7)))
    return [y, None, None]


def _per_channel(ctx, t, rank):
    """A [C] tensor shaped to broadcast over (N, C, *spatial)."""
    return t if rank <= 2 else ctx.op("Unsqueeze", [t, ctx.ints(list(range(1, rank - 1)))])


def _batch_norm_batch_stats(n):
    """Training-mode batch norm without running statistics: normalise with the batch's own
    mean and biased variance over every dim but the channels."""
    if n.used(1) or n.used(2):
        raise n.unsupported("the saved mean and inverse std outputs are read")
    ctx, dt, rank, eps = n.ctx, n.out_dtype(), n.rank(0), float(n.number(7))
    x = _input_as_output(n)
    axes = [0] + list(range(2, rank))
    diff = ctx.op("Sub", [x, _reduce(ctx, "ReduceMean", x, axes, True)])
    var = _reduce(ctx, "ReduceMean", ctx.op("Mul", [diff, diff]), axes, True)
    y = ctx.op("Div", [diff, ctx.op("Sqrt", [ctx.op("Add", [var, ctx.const(eps, dt)])])])
    if not n.is_none(1):
        y = ctx.op("Mul", [y, _per_channel(ctx, ctx.cast(n.tensor(1), n.dtype(1), dt), rank)])
    if not n.is_none(2):
        y = ctx.op("Add", [y, _per_channel(ctx, ctx.cast(n.tensor(2), n.dtype(2), dt), rank)])
    return [y, None, None]


@register("native_batch_norm")
def _native_batch_norm(n):
    if not n.flag(5):
        return _batch_norm_eval(n)
    if not (n.is_none(3) and n.is_none(4)):
        raise n.unsupported("training-mode batch norm updates its running statistics (call model.eval())")
    return _batch_norm_batch_stats(n)


@register("native_group_norm")
def _group_norm(n):
    # (N, C, *) -> (N, G, rest): normalise each group, then per-channel weight and bias.
    if n.used(1) or n.used(2):
        raise n.unsupported("the mean and inverse std outputs are read")
    ctx, dt, rank = n.ctx, n.out_dtype(), n.rank(0)
    groups, eps = n.int(6), float(n.number(7))
    x = _input_as_output(n)
    grouped = ctx.op("Reshape", [x, ctx.ints([0, groups, -1])])
    diff = ctx.op("Sub", [grouped, _reduce(ctx, "ReduceMean", grouped, [2], True)])
    var = _reduce(ctx, "ReduceMean", ctx.op("Mul", [diff, diff]), [2], True)
    y = ctx.op("Div", [diff, ctx.op("Sqrt", [ctx.op("Add", [var, ctx.const(eps, dt)])])])
    y = ctx.op("Reshape", [y, ctx.op("Shape", [x])])
    if not n.is_none(1):
        y = ctx.op("Mul", [y, _per_channel(ctx, ctx.cast(n.tensor(1), n.dtype(1), dt), rank)])
    if not n.is_none(2):
        y = ctx.op("Add", [y, _per_channel(ctx, ctx.cast(n.tensor(2), n.dtype(2), dt), rank)])
    return [y, None, None]


# --- convolution and pooling ---------------------------------------------------------------------
@register("convolution")
def _convolution(n):
    k = n.rank(1) - 2
    stride, padding, dilation = (_spread(n.ints(i), k) for i in (3, 4, 5))
    weight, bias = n.tensor(1), n.optional_tensor(2)
    return _batched(n, n.tensor(0), k, lambda x: n.ctx.op(
        "Conv", [x, weight, bias], strides=stride, pads=padding + padding, dilations=dilation, group=n.int(6)))


def _pool_geometry(n, kernel_arg):
    kernel = n.ints(kernel_arg)
    k = 2  # the 2-d pools (the 3-d ones are composites, never in the graph)
    kernel = _spread(kernel, k)
    stride = n.ints(kernel_arg + 1)
    stride = _spread(stride, k) if stride else list(kernel)
    padding = _spread(n.ints(kernel_arg + 2), k)
    return k, kernel, stride, padding


def _ceil_mode_needed(n, k, kernel, stride, padding, dilation, ceil_mode):
    """Whether ONNX's ceil_mode must be set to give the recorded output size; refuses sizes
    ONNX's formula cannot give (tessera, as PyTorch, drops a last window that starts in the
    padding)."""
    ins, outs = n.shape(0)[-k:], n.out_shape()[-k:]
    floor_ok = ceil_ok = True
    for i, o, kk, s, p, d in zip(ins, outs, kernel, stride, padding, dilation):
        if not (isinstance(i, int) and isinstance(o, int)):
            if ceil_mode:
                raise n.unsupported("ceil_mode with a dynamic spatial dim")
            continue
        span = i + 2 * p - d * (kk - 1) - 1
        floor_ok &= span // s + 1 == o
        ceil_ok &= -(-span // s) + 1 == o
    if floor_ok:
        return False
    if ceil_mode and ceil_ok:
        return True
    raise n.unsupported("ceil_mode with a last window that starts in the padding")


@register("max_pool2d_with_indices")
def _max_pool(n):
    if n.used(1):
        raise n.unsupported("the indices output is read (ONNX counts them over the whole tensor)")
    k, kernel, stride, padding = _pool_geometry(n, 1)
    dilation = _spread(n.ints(4), k)
    ceil = _ceil_mode_needed(n, k, kernel, stride, padding, dilation, n.flag(5))
    y = _batched(n, n.tensor(0), k, lambda x: n.ctx.op(
        "MaxPool", [x], kernel_shape=kernel, strides=stride, pads=padding + padding, dilations=dilation,
        ceil_mode=int(ceil)))
    return [y, None]


@register("avg_pool2d")
def _avg_pool(n):
    if not n.is_none(6):
        raise n.unsupported("divisor_override")
    k, kernel, stride, padding = _pool_geometry(n, 1)
    if _ceil_mode_needed(n, k, kernel, stride, padding, [1] * k, n.flag(4)):
        # The windows ceil_mode adds overhang the input; tessera and ONNX count them differently.
        raise n.unsupported("ceil_mode that adds a window")
    return _batched(n, n.tensor(0), k, lambda x: n.ctx.op(
        "AveragePool", [x], kernel_shape=kernel, strides=stride, pads=padding + padding,
        count_include_pad=int(n.flag(5, True))))


@register("adaptive_avg_pool2d")
def _adaptive_avg_pool(n):
    out = n.ints(1)
    k = len(out)
    ins = n.shape(0)[-k:]
    if all(o == 1 for o in out):
        return _batched(n, n.tensor(0), k, lambda x: n.ctx.op("GlobalAveragePool", [x]))
    if all(isinstance(i, int) and i % o == 0 for i, o in zip(ins, out)):
        kernel = [i // o for i, o in zip(ins, out)]  # equal windows: an ordinary average pool
        return _batched(n, n.tensor(0), k, lambda x: n.ctx.op("AveragePool", [x], kernel_shape=kernel, strides=kernel))
    raise n.unsupported(f"output size {out} that does not divide the input size {ins}")


# --- indexing and gathering ----------------------------------------------------------------------
@register("embedding")
def _embedding(n):
    return n.ctx.op("Gather", [n.tensor(0), n.tensor(1)], axis=0)


@register("index_select")
def _index_select(n):
    index = n.tensor(2)
    if n.rank(2) == 0:  # a 0-D index keeps the dim, with size 1
        index = n.ctx.op("Unsqueeze", [index, n.ctx.ints([0])])
    return n.ctx.op("Gather", [n.tensor(0), index], axis=normalize_dim(n.int(1), max(n.rank(0), 1)))


@register("gather")
def _gather(n):
    return n.ctx.op("GatherElements", [n.tensor(0), n.tensor(2)], axis=normalize_dim(n.int(1), max(n.rank(0), 1)))


def _scatter(n, reduction):
    ctx, dt = n.ctx, n.out_dtype()
    index = n.tensor(2)
    if n.op == "scatter.value":
        updates = ctx.op("Expand", [n.scalar(3, dt), ctx.op("Shape", [index])])
    else:
        updates = ctx.cast(n.tensor(3), n.dtype(3), dt)
        if n.shape(3) != n.shape(2):  # only src's leading block of index's shape is read
            rank = n.rank(2)
            updates = ctx.op("Slice", [updates, ctx.ints([0] * rank), ctx.op("Shape", [index]),
                                       ctx.ints(list(range(rank)))])
    axis = normalize_dim(n.int(1), max(n.rank(0), 1))
    return ctx.op("ScatterElements", [_input_as_output(n), index, updates], axis=axis, reduction=reduction)


@register("scatter.src", "scatter.value")
def _scatter_op(n):
    return _scatter(n, "none")


@register("scatter_add")
def _scatter_add(n):
    return _scatter(n, "add")


@register("index.Tensor")
def _index(n):
    ids = n.tensor_ids(1)
    given = [(d, i) for d, i in enumerate(ids) if i is not None]
    if len(given) != 1:
        raise n.unsupported("more than one index tensor")
    d, i = given[0]
    if n.ctx.values[i]["dtype"] == BOOL:
        raise n.unsupported("a boolean mask index (the result's size depends on the data)")
    return n.ctx.op("Gather", [n.tensor(0), n.ctx.name_of(i)], axis=d)


@register("select.int")
def _select(n):
    ctx = n.ctx
    d = normalize_dim(n.int(1), n.rank(0))
    index = n.sym_int(2)
    if isinstance(index, int):
        return ctx.op("Gather", [n.tensor(0), ctx.const(index, INT64)], axis=d)
    y = ctx.op("Gather", [n.tensor(0), ctx.int_list([index])], axis=d)
    return ctx.op("Squeeze", [y, ctx.ints([d])])


@register("slice.Tensor")
def _slice(n):
    ctx = n.ctx
    d = normalize_dim(n.int(1), n.rank(0))
    start = 0 if n.is_none(2) else n.sym_int(2)
    end = INT64_MAX if n.is_none(3) else n.sym_int(3)
    step = n.int(4)
    if step < 1:
        raise n.unsupported(f"step {step}")
    return ctx.op("Slice", [n.tensor(0), ctx.int_list([start]), ctx.int_list([end]), ctx.ints([d]), ctx.ints([step])])


@register("narrow")
def _narrow(n):
    ctx = n.ctx
    d = normalize_dim(n.int(1), n.rank(0))
    start, length = n.sym_int(2), n.sym_int(3)
    if isinstance(start, int) and start < 0:
        size = n.shape(0)[d]
        if not isinstance(size, int):
            raise n.unsupported("a negative start along a dynamic dim")
        start += size
    if isinstance(start, int) and isinstance(length, int):
        starts, ends = ctx.ints([start]), ctx.ints([start + length])
    else:
        starts = ctx.int_list([start])
        ends = ctx.op("Add", [starts, ctx.int_list([length])])
    return ctx.op("Slice", [n.tensor(0), starts, ends, ctx.ints([d])])


@register("cat")
def _cat(n):
    ctx, dt, rank = n.ctx, n.out_dtype(), n.out_rank()
    parts = []
    for i in n.tensor_ids(0):
        v = ctx.values[i]
        if rank > 1 and v["shape"] == [0]:
            continue  # a 1-D empty tensor joins any cat, as in tessera
        parts.append(ctx.cast(ctx.name_of(i), v["dtype"], dt))
    return ctx.op("Concat", parts, axis=normalize_dim(n.int(1), rank))


@register("stack")
def _stack(n):
    ctx, dt = n.ctx, n.out_dtype()
    d = normalize_dim(n.int(1), n.out_rank())
    parts = [ctx.op("Unsqueeze", [ctx.cast(ctx.name_of(i), ctx.values[i]["dtype"], dt), ctx.ints([d])])
             for i in n.tensor_ids(0)]
    return ctx.op("Concat", parts, axis=d)


# --- shapes and layouts --------------------------------------------------------------------------
@register("view", "reshape", "flatten.using_ints")
def _reshape(n):
    """Any reshape: to the output's recorded shape (computed for dims that follow dynamic dims)."""
    ctx, shape = n.ctx, n.out_shape()
    if shape == n.shape(0):
        return n.tensor(0)
    zero = any(isinstance(s, int) and s == 0 for s in shape)
    attrs = {"allowzero": 1} if zero else {}
    return ctx.op("Reshape", [n.tensor(0), ctx.int_list(shape)], **attrs)


@register("transpose.int")
def _transpose(n):
    rank = n.rank(0)
    if rank < 2:
        return n.tensor(0)
    a, b = normalize_dim(n.int(1), rank), normalize_dim(n.int(2), rank)
    perm = list(range(rank))
    perm[a], perm[b] = perm[b], perm[a]
    return n.ctx.op("Transpose", [n.tensor(0)], perm=perm)


@register("permute")
def _permute(n):
    rank = n.rank(0)
    return n.ctx.op("Transpose", [n.tensor(0)], perm=[normalize_dim(d, rank) for d in n.ints(1)])


@register("unsqueeze")
def _unsqueeze(n):
    d = normalize_dim(n.int(1), n.rank(0) + 1)
    return n.ctx.op("Unsqueeze", [n.tensor(0), n.ctx.ints([d])])


def _squeeze_dims(n, dims):
    # Only dims of static size 1 go: a dynamic dim is >= 2 by export's rule, and a dim of
    # another size stays (squeeze of such a dim is a no-op).
    shape = n.shape(0)
    axes = sorted({normalize_dim(d, len(shape)) for d in dims if len(shape)})
    axes = [d for d in axes if isinstance(shape[d], int) and shape[d] == 1]
    return n.ctx.op("Squeeze", [n.tensor(0), n.ctx.ints(axes)]) if axes else n.tensor(0)


@register("squeeze")
def _squeeze(n):
    return _squeeze_dims(n, range(n.rank(0)))


@register("squeeze.dim")
def _squeeze_dim(n):
    return _squeeze_dims(n, [n.int(1)])


@register("expand")
def _expand(n):
    return n.ctx.op("Expand", [n.tensor(0), n.ctx.int_list(n.out_shape())])


@register("flip")
def _flip(n):
    rank = n.rank(0)
    axes = [normalize_dim(d, rank) for d in n.ints(1)]
    if not axes:
        return n.tensor(0)
    ctx = n.ctx
    return ctx.op("Slice", [n.tensor(0), ctx.ints([-1] * len(axes)), ctx.ints([-INT64_MAX - 1] * len(axes)),
                            ctx.ints(axes), ctx.ints([-1] * len(axes))])


# --- copies, casts and dropout -------------------------------------------------------------------
@register("contiguous", "clone")
def _identity(n):
    return n.tensor(0)  # values, not storage: a copy or a view is the same ONNX value


@register("to.dtype")
def _to(n):
    return _input_as_output(n)


@register("native_dropout")
def _dropout(n):
    p = float(n.number(1))
    if n.flag(2, True) and p > 0:  # train=None counts as training, as in tessera
        raise n.unsupported("dropout in training mode is random (call model.eval())")
    if len(n.outputs) < 2 or not n.used(1):
        return [n.tensor(0)] + [None] * (len(n.outputs) - 1)
    mask = n.ctx.op("ConstantOfShape", [n.ctx.op("Shape", [n.tensor(0)])], value=_value_tensor(True, BOOL))
    return [n.tensor(0), mask]


# --- tensors made inside the program -------------------------------------------------------------
def _value_tensor(x, dtype):
    from onnx import numpy_helper
    return numpy_helper.from_array(np.array([x], dtype=NUMPY_TYPES[dtype]), "value")


def _filled(n, shape, fill):
    dt = n.out_dtype()
    if isinstance(fill, float) and dt not in FLOATING and not fill.is_integer():
        raise n.unsupported(f"fill value {fill} for an integer tensor")
    return n.ctx.op("ConstantOfShape", [shape], value=_value_tensor(fill, dt))


@register("full")
def _full(n):
    return _filled(n, n.ctx.int_list(n.sym_ints(0)), n.number(1))


@register("zeros", "ones")
def _zeros_ones(n):
    return _filled(n, n.ctx.int_list(n.sym_ints(0)), 0 if n.op == "zeros" else 1)


@register("empty")
def _empty(n):
    # The IR does not record what is written into an uninitialised tensor afterwards (a tensor
    # made from Python data inside forward is recorded this way): its contents are unknown.
    raise n.unsupported("the tensor's contents are not part of the graph (create tensors from data in "
                        "__init__, as buffers, instead of inside forward)")


@register("arange", "arange.start_step")
def _arange(n):
    ctx, dt = n.ctx, n.out_dtype()
    if n.op == "arange":
        return ctx.op("Range", [ctx.const(0, dt), n.scalar(0, dt), ctx.const(1, dt)])
    start, end, step = (n.number(i) if n.symbolic(i) is None else None for i in (0, 1, 2))
    bounds = [n.scalar(i, dt) for i in (0, 1, 2)]
    length = n.out_shape()[0]
    if dt in FLOATING and None not in (start, end, step) and isinstance(length, int):
        # ONNX counts ceil((end - start) / step) in the result's dtype; tessera in double.
        typed = np.asarray([start, end, step], dtype=NUMPY_TYPES[dt]).astype(np.float64)
        if max(int(math.ceil((typed[1] - typed[0]) / typed[2])), 0) != length:
            raise n.unsupported("a float range whose length ONNX computes differently")
    return ctx.op("Range", bounds)


# Operators that must not run at export time (their result changes from call to call).
RANDOM = frozenset({"rand", "randn", "randint", "randint.low", "randperm", "bernoulli", "bernoulli.p",
                    "bernoulli_.float", "multinomial", "normal.Tensor_Tensor", "normal_", "uniform_",
                    "exponential_", "geometric_", "log_normal_", "cauchy_", "random_.from", "random_.to",
                    "native_dropout", "empty"})

del _name, _onnx, _negate
__all__ = ["OPS", "RANDOM", "lookup", "register"]
