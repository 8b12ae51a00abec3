"""Sample inputs for every operator overload, for tests that run each operator on two devices
and compare the results (test_every_operator_on_device.py).

SAMPLES is keyed by the overload's full name as the dispatcher knows it ("add.Tensor",
"sum.dim_IntList", "convolution", "copy_"). It lists the functional overloads; `entry_for`
derives the in-place ("add_.Tensor") and out= ("add.out", "sum.dim_IntList_out") variants from
their functional overload by reading the schemas, so ops.yaml's `variants:` need no entries here.

A sample is built from CPU tensors with fixed NumPy seeds, fresh at every call (in-place variants
write into them). Values lie on a 1/8 grid, exact in every floating dtype, so the device and the
CPU start from the same numbers whatever the dtype. A non-contiguous argument is a `View`: the
test applies the same view to the base tensor moved to the device, so both sides see the same
strides.
"""
import numpy as np

import tessera as ts

aten = ts.ops.aten
F16, BF16, F32, F64 = ts.float16, ts.bfloat16, ts.float32, ts.float64
I32, I64, BOOL = ts.int32, ts.int64, ts.bool


# ---------------------------------------------------------------------------- samples and entries
class View:
    """A non-contiguous argument: `make(base)` for a contiguous CPU tensor `base`."""
    __slots__ = ("base", "make", "label")

    def __init__(self, base, make, label):
        self.base, self.make, self.label = base, make, label

    def materialize(self):
        return self.make(self.base)


class Sample:
    """One call: positional and keyword arguments, and the exception type the CPU raises when
    the sample is an error case (the device must raise the same type)."""
    __slots__ = ("args", "kwargs", "error")

    def __init__(self, *args, **kwargs):
        self.args, self.kwargs, self.error = args, kwargs, None

    def raises(self, error):
        self.error = error
        return self

    def with_args(self, args=None, **kwargs):
        s = Sample(*(self.args if args is None else args), **{**self.kwargs, **kwargs})
        s.error = self.error
        return s

    def __repr__(self):
        parts = [describe(a) for a in self.args] + [f"{k}={describe(v)}" for k, v in self.kwargs.items()]
        return f"({', '.join(parts)})" + (f" raises {self.error.__name__}" if self.error else "")


def describe(v):
    """A short text for an argument: "float32[3, 4]", "float32[4, 3].mT"."""
    if isinstance(v, ts.Tensor):
        return f"{v.dtype.name}{list(v.shape)}"
    if isinstance(v, View):
        return f"{describe(v.base)}{v.label}"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(describe(x) for x in v) + "]"
    return repr(v)


class Entry:
    """How to test one overload: `make()` returns its samples. `check(args, result)` replaces the
    value comparison for random results; `uninitialised` results are compared by shape and dtype
    only; `tol` maps a dtype name to (rtol, atol) where the default tolerance is too tight."""
    __slots__ = ("make", "check", "uninitialised", "tol")

    def __init__(self, make, check=None, uninitialised=False, tol=None):
        self.make, self.check, self.uninitialised, self.tol = make, check, uninitialised, tol or {}

    @property
    def random(self):
        return self.check is not None


SAMPLES = {}


def samples(*names, **flags):
    """Registers the decorated sample maker for every overload in `names`."""
    def register(make):
        for name in names:
            assert name not in SAMPLES, name
            SAMPLES[name] = Entry(make, **flags)
        return make
    return register


# ---------------------------------------------------------------------------- tensor makers
def t(*shape, dtype=F32, seed=0, low=-2, high=2, nonzero=False):
    """Values in [low, high]: floats on a 1/8 grid (so comparisons meet equal values), integers,
    or random bools. `nonzero` replaces zeros by ones (divisors)."""
    rng = np.random.default_rng(seed)
    if dtype == BOOL:
        a = rng.random(shape) < 0.5
    elif dtype.is_floating_point:
        a = np.round(rng.uniform(low, high, shape) * 8) / 8
    else:
        a = rng.integers(int(low), int(high) + 1, shape)
    if nonzero:
        a = np.where(a == 0, 1, a)
    return ts.tensor(a).to(dtype)


def pos(*shape, **kw):
    """Positive values (log, sqrt, pow bases)."""
    return t(*shape, low=0.25, high=4, **kw)


def distinct(*shape, dtype=F32, seed=0):
    """Values without ties (argmax, max pooling: a tie may pick either index)."""
    n = int(np.prod(shape))
    a = np.random.default_rng(seed).permutation(n).reshape(shape) / 8 - n / 16
    return ts.tensor(a).to(dtype)


def idx(*values):
    return ts.tensor(list(values), dtype=I64)


def transposed(*shape, **kw):
    """A `shape` tensor whose last two dims are swapped in memory (strides (1, rows))."""
    return View(t(*shape[:-2], shape[-1], shape[-2], **kw), lambda b: b.mT, ".mT")


def strided(*shape, **kw):
    """A `shape` tensor taking every other element of its base's last dim."""
    return View(t(*shape[:-1], 2 * shape[-1], **kw), lambda b: aten.slice(b, -1, 0, None, 2), "[..., ::2]")


def expanded(*shape, **kw):
    """A `shape` tensor broadcast from size 1 in its last dim (stride 0)."""
    return View(t(*shape[:-1], 1, **kw), lambda b: aten.expand(b, list(shape)), f".expand({list(shape)})")


# ---------------------------------------------------------------------------- shared sample sets
def unary(dtypes=(F16, BF16, I64), **kw):
    """2-D, transposed, strided, 0-d and zero-size float32, then one sample per extra dtype."""
    return [Sample(t(3, 4, **kw)), Sample(transposed(3, 4, **kw)), Sample(strided(2, 3, **kw)), Sample(t(**kw)),
            Sample(t(0, 3, **kw))] + [Sample(t(2, 3, dtype=d, **kw)) for d in dtypes]


def binary(dtypes=(F16, BF16, I64), promote=True, **kw):
    """Same shapes, broadcasting, non-contiguous and stride-0 operands, 0-d, zero-size, int64 with
    float32 (promotion), shapes that do not broadcast, then one pair per extra dtype. `kw` shapes
    the second operand's values (nonzero=True for divisors)."""
    out = [Sample(t(3, 4), t(3, 4, seed=1, **kw)),
           Sample(t(2, 3, 4), t(3, 1, seed=1, **kw)),
           Sample(transposed(3, 4), strided(3, 4, seed=1, **kw)),
           Sample(t(3, 4), expanded(3, 4, seed=1, **kw)),
           Sample(t(), t(3, seed=1, **kw)),
           Sample(t(0, 3), t(3, seed=1, **kw)),
           Sample(t(2, 3), t(3, 2, seed=1, **kw)).raises(ValueError)]
    if promote:
        out.append(Sample(t(3, dtype=I64), t(3, seed=1, **kw)))
    return out + [Sample(t(2, 3, dtype=d), t(2, 3, dtype=d, seed=1, **kw)) for d in dtypes]


def with_scalar(*scalars, dtypes=(F16, I64)):
    """A tensor with each Scalar (an int and a float mix promotions), over several layouts."""
    out = [Sample(t(3, 4), s) for s in scalars]
    out += [Sample(transposed(3, 4), scalars[0]), Sample(t(), scalars[0]), Sample(t(0, 2), scalars[0])]
    return out + [Sample(t(2, 3, dtype=d), s) for d in dtypes for s in scalars]


# ---------------------------------------------------------------------------- factories
# A schema with a `Device? device` argument is run with device="cpu" on one side and the target
# device on the other (the test adds it), so these samples leave it out.
@samples("empty", uninitialised=True)
@samples("zeros", "ones")
def _sizes():
    return [Sample([2, 3]), Sample([0, 4]), Sample([]), Sample([3], dtype=I64), Sample([2, 2], dtype=BOOL),
            Sample([2], dtype=BF16), Sample([-1]).raises(ValueError)]


@samples("full")
def _full():
    return [Sample([2, 3], 1.5), Sample([3], 7, dtype=I64), Sample([2], True, dtype=BOOL), Sample([0], 2.0),
            Sample([2, 2], -0.5, dtype=F16)]


@samples("arange")
def _arange():
    return [Sample(5), Sample(2.5), Sample(0), Sample(4, dtype=F64), Sample(-1).raises(ValueError)]


@samples("arange.start_step")
def _arange_start_step():
    return [Sample(1, 10, 3), Sample(0.5, 2.0, 0.25), Sample(10, 0, -3), Sample(0, 1, 0.1, dtype=F64),
            Sample(0, 5, 0).raises(ValueError)]


@samples("linspace")
def _linspace():
    return [Sample(0, 1, 5), Sample(-1, 1, 1), Sample(2, 3, 0), Sample(-3, 7, 11, dtype=F64),
            Sample(0, 10, 6, dtype=I64)]


@samples("eye")
def _eye():
    return [Sample(3), Sample(2, 4), Sample(0), Sample(3, dtype=I64), Sample(2, 2, dtype=BOOL)]


def _check_uniform(args, result):
    v = np.asarray(result.to(F64).tolist(), dtype=np.float64).ravel()
    assert ((v >= 0) & (v < 1)).all(), v
    if v.size >= 500:  # a mean far from 1/2 is a broken generator (6 standard deviations)
        assert abs(v.mean() - 0.5) < 0.08 and v.std() > 0.2, (v.mean(), v.std())


def _check_normal(args, result):
    v = np.asarray(result.to(F64).tolist(), dtype=np.float64).ravel()
    assert np.isfinite(v).all(), v
    if v.size >= 500:
        assert abs(v.mean()) < 0.25 and 0.8 < v.std() < 1.2, (v.mean(), v.std())


def _check_randint(args, result):
    low, high = (0, args[0]) if len(args) == 2 else args[:2]
    v = np.asarray(result.tolist()).ravel()
    assert ((v >= low) & (v < high)).all(), v
    if v.size >= 100:  # every value of a small range shows up
        assert set(v.tolist()) == set(range(low, high)), sorted(set(v.tolist()))


@samples("rand", check=_check_uniform)
def _rand():
    return [Sample([1000]), Sample([2, 3]), Sample([0]), Sample([]), Sample([500], dtype=F16),
            Sample([500], dtype=F64)]


@samples("randn", check=_check_normal)
def _randn():
    return [Sample([1000]), Sample([2, 3]), Sample([0]), Sample([500], dtype=F64)]


@samples("randint", check=_check_randint)
def _randint():
    return [Sample(10, [1000]), Sample(3, [2, 2]), Sample(5, [0]), Sample(7, [200], dtype=I32),
            Sample(0, [3]).raises(ValueError)]


@samples("randint.low", check=_check_randint)
def _randint_low():
    return [Sample(-5, 5, [1000]), Sample(2, 3, [4]), Sample(4, 2, [3]).raises(ValueError)]


# ---------------------------------------------------------------------------- element-wise
@samples("add.Tensor", "sub.Tensor")
def _add_like():
    return binary() + [Sample(t(3, 4), t(4, seed=1), alpha=2),
                       Sample(t(3, dtype=I64), t(3, dtype=I64, seed=1), alpha=-3)]


samples("mul.Tensor", "maximum", "minimum", "eq.Tensor", "ne.Tensor", "lt.Tensor", "le.Tensor", "gt.Tensor",
        "ge.Tensor")(binary)


@samples("div.Tensor")
def _div():
    return binary(nonzero=True) + [Sample(t(3, 4), t(3, 4, seed=1, low=0, high=0))]  # x / 0: inf and nan


@samples("div.Tensor_mode")
def _div_mode():
    return [s.with_args(rounding_mode=m) for m in ("trunc", "floor") for s in binary(nonzero=True)] + [
        Sample(t(3, 4), t(4, seed=1, nonzero=True), rounding_mode=None),
        Sample(t(3), t(3, seed=1), rounding_mode="round").raises(ValueError)]


@samples("floor_divide")
def _floor_divide():
    return binary(nonzero=True) + [Sample(t(3, dtype=I64), t(3, dtype=I64, low=0, high=0)).raises(ValueError)]


@samples("pow.Tensor_Tensor")
def _pow():
    return [Sample(pos(3, 4), t(3, 4, seed=1)), Sample(transposed(3, 4, low=0.25), t(4, seed=1)),
            Sample(pos(2, 3, dtype=F16), t(2, 3, dtype=F16, seed=1)),
            Sample(t(3, 4, dtype=I64, low=0, high=3), t(3, 4, dtype=I64, seed=1, low=0, high=3)),
            Sample(t(0, 2), t(2, seed=1)), Sample(t(3, 4), t(3, 4, seed=1, low=0, high=2))]  # negative bases


@samples("pow.Tensor_Scalar")
def _pow_scalar():
    return [Sample(t(3, 4), 2), Sample(pos(3, 4), 0.5), Sample(pos(3, 4), -1.5), Sample(transposed(3, 4), 3),
            Sample(t(2, 3, dtype=I64, low=0, high=4), 3), Sample(t(2, dtype=BF16), 2.0), Sample(t(), 2),
            Sample(t(3, dtype=I64), -1).raises(ValueError)]


@samples("add.Scalar", "sub.Scalar")
def _add_scalar():
    return with_scalar(2.5, -1) + [Sample(t(3, dtype=I64), 2, 3), Sample(t(2, 3), 0.5, -2.0)]  # alpha


samples("mul.Scalar", "eq.Scalar", "ne.Scalar", "lt.Scalar", "le.Scalar", "gt.Scalar",
        "ge.Scalar")(lambda: with_scalar(0.5, 1))
samples("div.Scalar")(lambda: with_scalar(0.5, -2) + [Sample(t(3), 0)])


@samples("logical_and", "logical_or")
def _logical():
    return binary(dtypes=(BOOL, I64)) + [Sample(t(3, 4, dtype=BOOL), t(4, seed=1))]


samples("logical_not")(lambda: unary(dtypes=(BOOL, I64, F16)))


@samples("where.self")
def _where():
    return [Sample(t(3, 4, dtype=BOOL), t(3, 4, seed=1), t(3, 4, seed=2)),
            Sample(t(3, 1, dtype=BOOL), transposed(3, 4, seed=1), t(4, seed=2)),
            Sample(t(3, dtype=BOOL), t(3, dtype=I64, seed=1), t(3, seed=2)),
            Sample(t(0, 2, dtype=BOOL), t(2, seed=1), t(seed=2)),
            Sample(t(2, dtype=BOOL), t(2, dtype=BF16, seed=1), t(2, dtype=BF16, seed=2)),
            Sample(t(3, dtype=BOOL), t(2, seed=1), t(3, seed=2)).raises(ValueError)]


@samples("clamp")
def _clamp():
    return [Sample(t(3, 4), -0.5, 0.5), Sample(t(3, 4), None, 0.0), Sample(transposed(3, 4), min=1.0),
            Sample(t(3, dtype=I64), 0, 1), Sample(t(2, 3, dtype=F16), 0.25, 1), Sample(t(), -1, 1),
            Sample(t(0, 3), 0, 1), Sample(t(3), 1.0, -1.0)]


@samples("masked_fill.Scalar")
def _masked_fill():
    return [Sample(t(3, 4), t(3, 4, dtype=BOOL, seed=1), 0.5), Sample(transposed(3, 4), t(4, dtype=BOOL, seed=1), -2),
            Sample(t(3, dtype=I64), t(3, dtype=BOOL, seed=1), 9), Sample(t(2, 2, dtype=BF16), t(dtype=BOOL), 1.5),
            Sample(t(0, 2), t(2, dtype=BOOL), 1.0), Sample(t(3), t(2, dtype=BOOL), 1.0).raises(ValueError)]


samples("neg")(lambda: unary() + [Sample(t(3, dtype=BOOL)).raises(TypeError)])
samples("abs", "sign", "relu")(unary)
samples("exp", "sin", "cos", "tanh", "sigmoid", "erf")(unary)
samples("log", "sqrt", "rsqrt")(lambda: unary(low=0.25, high=4) + [Sample(t(4, low=-2, high=0))])  # nan, -inf
samples("log1p")(lambda: unary(low=-0.5, high=4) + [Sample(t(3, low=-2, high=-1))])


# ---------------------------------------------------------------------------- reductions
def reductions(dtypes=(F16, BF16, I64, BOOL)):
    """Over every dim, one dim, several dims with keepdim, negative dims; non-contiguous, 0-d,
    zero-size (an empty sum), an out-of-range dim, then every dim of each extra dtype."""
    return [Sample(t(3, 4)), Sample(t(3, 4), [1]), Sample(t(2, 3, 4), [0, 2], True), Sample(t(3, 4), [-1]),
            Sample(transposed(3, 4), [0]), Sample(strided(2, 3), None, True), Sample(t()), Sample(t(0, 3), [0]),
            Sample(t(3, 4), [2]).raises(IndexError)] + [Sample(t(2, 3, dtype=d), [1]) for d in dtypes]


@samples("sum.dim_IntList")
def _sum():
    return reductions() + [Sample(t(3, 4), [1], dtype=F64), Sample(t(3, dtype=I64), dtype=F32)]


# prod(x) with no dim resolves to the Core ATen overload `prod`: these samples all name a dim.
samples("prod.dim_IntList")(lambda: [s for s in _sum() if len(s.args) > 1])


samples("mean.dim")(lambda: reductions(dtypes=(F16, BF16)) + [Sample(t(3, dtype=I64)).raises(TypeError),
                                                                 Sample(t(3, dtype=I64), dtype=F64)])


@samples("amax", "amin")
def _amax():
    return [Sample(t(3, 4)), Sample(t(3, 4), [1]), Sample(t(2, 3, 4), [0, 2], True), Sample(transposed(3, 4), [0]),
            Sample(t()), Sample(t(0, 3), [1]), Sample(t(2, 3, dtype=I64), [0]), Sample(t(2, 3, dtype=BF16), [1]),
            Sample(t(2, 3, dtype=BOOL), [1]), Sample(t(0, 3), [0]).raises(ValueError)]


@samples("argmax", "argmin")
def _argmax():
    return [Sample(distinct(3, 4)), Sample(distinct(3, 4), 1), Sample(distinct(3, 4), 0, True),
            Sample(View(distinct(4, 3), lambda b: b.mT, ".mT"), 1), Sample(distinct(2, 3, dtype=I64), -1),
            Sample(distinct(2, 3, dtype=F16), 0), Sample(t()), Sample(t(0, 3), 1), Sample(t(0, 3)).raises(ValueError)]


@samples("var.correction", "std.correction")
def _var():
    return [Sample(t(3, 4)), Sample(t(3, 4), [1]), Sample(t(3, 4), [1], correction=0),
            Sample(t(2, 3, 4), [0, 2], keepdim=True), Sample(transposed(3, 4), [0], correction=2),
            Sample(t(2, 5, dtype=F64), [1]), Sample(t(2, 5, dtype=BF16), [1]), Sample(t(1, 3), [0]),  # n - 1 = 0
            Sample(t(3, dtype=I64)).raises(TypeError)]


@samples("logsumexp")
def _logsumexp():
    return [Sample(t(3, 4), [1]), Sample(t(2, 3, 4), [0, 2], True), Sample(transposed(3, 4), [0]),
            Sample(t(2, 3, dtype=F16), [1]), Sample(t(0, 3), [0]), Sample(t(3, 4, high=80), [1]),  # large: no overflow
            Sample(t(3), [1]).raises(IndexError)]


@samples("softmax.int", "log_softmax.int")
def _softmax():
    return [Sample(t(3, 4), 1), Sample(t(3, 4), 0), Sample(transposed(3, 4), -1), Sample(t(2, 3, 4), 1),
            Sample(t(2, 3, dtype=F16), 1), Sample(t(2, 3, dtype=BF16), 1), Sample(t(3, 4), 1, F64),
            Sample(t(0, 3), 1), Sample(t(), 0), Sample(t(3, 4, high=100), 1),
            Sample(t(3, dtype=I64), 0).raises(TypeError)]


# ---------------------------------------------------------------------------- views and shape
@samples("view")
def _view():
    return [Sample(t(3, 4), [4, 3]), Sample(t(3, 4), [-1]), Sample(t(2, 3, 4), [6, -1]), Sample(t(), [1]),
            Sample(t(0, 3), [3, 0]), Sample(t(3, 4), [5]).raises(ValueError)]


@samples("reshape")
def _reshape():
    return [Sample(t(3, 4), [4, 3]), Sample(transposed(3, 4), [-1]), Sample(t(2, 3, 4), [6, -1]),
            Sample(t(3, dtype=I64), [3, 1]), Sample(t(3, 4), [5]).raises(ValueError)]


@samples("permute")
def _permute():
    return [Sample(t(2, 3, 4), [2, 0, 1]), Sample(t(3, 4), [-1, 0]), Sample(t(), []),
            Sample(t(2, 3), [0, 0]).raises(ValueError)]


@samples("transpose.int")
def _transpose():
    return [Sample(t(3, 4), 0, 1), Sample(t(2, 3, 4), -1, 0), Sample(t(3, 4, dtype=I64), 1, 1),
            Sample(t(3, 4), 0, 2).raises(IndexError)]


@samples("expand")
def _expand():
    return [Sample(t(3, 1), [3, 4]), Sample(t(4), [2, 4]), Sample(t(3, 1), [-1, 4]), Sample(t(), [2]),
            Sample(t(3), [2]).raises(ValueError)]


samples("squeeze")(lambda: [Sample(t(3, 1, 4)), Sample(t(1, 1)), Sample(t(3, dtype=BOOL)), Sample(t(0, 1))])


@samples("squeeze.dim")
def _squeeze_dim():
    return [Sample(t(3, 1, 4), 1), Sample(t(3, 1, 4), 0), Sample(t(1, 1), -1), Sample(t(3), 1).raises(IndexError)]


samples("unsqueeze")(lambda: [Sample(t(3, 4), 0), Sample(t(3, 4), -1), Sample(t(), 0),
                              Sample(t(3), 3).raises(IndexError)])


@samples("slice.Tensor")
def _slice():
    return [Sample(t(5, 4), 0, 1, 3), Sample(t(5, 4), 1, None, None, 2), Sample(t(5, 4), 0, -3),
            Sample(t(5, 4), 1, 3, 1), Sample(t(5, 4), 0, 0, 100, 3), Sample(t(5, 4), 0, 0, 2, 0).raises(ValueError)]


@samples("select.int")
def _select():
    return [Sample(t(3, 4), 0, 1), Sample(t(3, 4), 1, -1), Sample(t(3), 0, 2), Sample(t(3, 4), 0, 5).raises(IndexError)]


@samples("narrow")
def _narrow():
    return [Sample(t(3, 4), 1, 1, 2), Sample(t(3, 4), 0, 0, 0), Sample(t(3, 4), -1, 2, 2),
            Sample(t(3, 4), 0, 2, 5).raises(ValueError)]


@samples("flatten.using_ints")
def _flatten():
    return [Sample(t(2, 3, 4)), Sample(t(2, 3, 4), 1), Sample(transposed(2, 3, 4), 0, 1), Sample(t()),
            Sample(t(2, 3), 1, 0).raises(ValueError)]


samples("contiguous")(lambda: [Sample(t(3, 4)), Sample(transposed(3, 4)), Sample(strided(2, 3, dtype=I64))])


@samples("cat")
def _cat():
    return [Sample([t(2, 3), t(1, 3, seed=1)]), Sample([t(2, 3), transposed(2, 4, seed=1)], 1),
            Sample([t(2, 3), t(0, 3, seed=1), t(2, 3, seed=2)], -2), Sample([t(2, dtype=I64), t(2, seed=1)]),
            Sample([t(0), t(2, 3, seed=1)]), Sample([t(2, 3), t(2, 4, seed=1)]).raises(ValueError)]


@samples("stack")
def _stack():
    return [Sample([t(2, 3), t(2, 3, seed=1)]), Sample([t(2, 3), transposed(2, 3, seed=1)], 2),
            Sample([t(), t(seed=1), t(seed=2)]), Sample([t(2, dtype=BF16), t(2, dtype=BF16, seed=1)], -1),
            Sample([t(2, 3), t(3, 2, seed=1)]).raises(ValueError)]


# ---------------------------------------------------------------------------- copies and conversions
samples("clone")(lambda: unary(dtypes=(F16, BF16, I64, BOOL)))


@samples("copy_")
def _copy():
    return [Sample(t(3, 4), t(3, 4, seed=1)), Sample(t(3, 4), t(4, seed=1)), Sample(transposed(3, 4), t(3, 4, seed=1)),
            Sample(t(3, 4), strided(3, 4, seed=1)), Sample(t(3, dtype=F16), t(3, dtype=F16, seed=1)),
            Sample(t(3), t(3, dtype=I64, seed=1)), Sample(t(3, dtype=BOOL), t(3, seed=1)),
            Sample(t(0, 2), t(2, seed=1)), Sample(t(3), t(2, seed=1)).raises(ValueError)]


@samples("to.dtype")
def _to():
    return [Sample(t(3, 4), F16), Sample(t(3, 4), I64), Sample(transposed(3, 4), BF16), Sample(t(3, dtype=I64), F32),
            Sample(t(3), BOOL), Sample(t(3, dtype=BOOL), F64), Sample(t(3), F32, copy=True), Sample(t(0), I32)]


@samples("fill_.Scalar")
def _fill():
    return [Sample(t(3, 4), 2.5), Sample(transposed(3, 4), -1), Sample(t(3, dtype=I64), 7),
            Sample(t(2, dtype=BOOL), True), Sample(t(), 0.5), Sample(t(0, 3), 1)]


# ---------------------------------------------------------------------------- indexing
# Scatter-like samples avoid duplicate indices where the result would depend on the write order.
@samples("index_select")
def _index_select():
    return [Sample(t(3, 4), 0, idx(2, 0)), Sample(t(3, 4), 1, idx(3, 3, 0)), Sample(transposed(3, 4), 1, idx(1)),
            Sample(t(3, 4), 0, idx()), Sample(t(3, dtype=I64), 0, ts.tensor([2, 1], dtype=I32)),
            Sample(t(), 0, idx(0)), Sample(t(3, 4), 0, idx(3)).raises(IndexError),
            Sample(t(3, 4), 0, idx(-4)).raises(IndexError)]


@samples("gather")
def _gather():
    return [Sample(t(3, 4), 1, idx(0, 3, 3, 1, 2, 0).reshape(3, 2)), Sample(t(3, 4), 0, idx(2, 0, 1, 1).reshape(1, 4)),
            Sample(transposed(3, 4), 0, idx(1, 2).reshape(2, 1)), Sample(t(3, 4, dtype=BF16), 1, idx().reshape(3, 0)),
            Sample(t(3, 4), 1, idx(4).reshape(1, 1)).raises(IndexError)]


@samples("scatter.src")
def _scatter():
    return [Sample(t(3, 4), 0, idx(2, 0, 1, 2).reshape(1, 4), t(2, 4, seed=1)),
            Sample(transposed(3, 4), 1, idx(3, 0, 1, 2).reshape(2, 2), t(2, 2, seed=1)),
            Sample(t(3, dtype=I64), 0, idx(), t(0, dtype=I64, seed=1)),
            Sample(t(3, 4), 1, idx(4).reshape(1, 1), t(1, 1, seed=1)).raises(IndexError)]


@samples("scatter.value")
def _scatter_value():
    return [Sample(t(3, 4), 0, idx(2, 0, 1, 2).reshape(1, 4), 9.5), Sample(t(3, dtype=I64), 0, idx(0, 2), -1),
            Sample(t(3, 4), 1, idx(-5).reshape(1, 1), 0.0).raises(IndexError)]


@samples("scatter_add")
def _scatter_add():
    return [Sample(t(3, 4), 0, idx(2, 0, 2, 2, 1, 0, 2, 2).reshape(2, 4), t(2, 4, seed=1)),  # repeats accumulate
            Sample(transposed(3, 4), 1, idx(3, 3, 0).reshape(1, 3), t(2, 3, seed=1)),
            Sample(t(3, dtype=I64), 0, idx(0, 0, 2), t(3, dtype=I64, seed=1)),
            Sample(cx(3, dtype=F64), 0, idx(0, 0, 2), cx(3, dtype=F64, seed=1)),
            Sample(t(3, 4), 0, idx(3).reshape(1, 1), t(1, 1, seed=1)).raises(IndexError)]


@samples("index_add")
def _index_add():
    return [Sample(t(3, 4), 0, idx(2, 0, 2), t(3, 4, seed=1)), Sample(t(3, 4), 1, idx(1, 1), t(3, 2, seed=1), alpha=-2),
            Sample(t(3, dtype=I64), 0, idx(), t(0, dtype=I64, seed=1)),
            Sample(t(3, 4), 0, idx(5), t(1, 4, seed=1)).raises(IndexError)]


@samples("index.Tensor")
def _index():
    return [Sample(t(3, 4), [idx(2, 0, 2)]), Sample(t(3, 4), [None, idx(-1, 0)]),
            Sample(t(3, 4), [t(3, 4, dtype=BOOL, seed=1)]),
            Sample(t(3, 4), [idx(0, 2).reshape(2, 1), idx(1, 3)]), Sample(transposed(3, 4), [t(3, dtype=BOOL, seed=1)]),
            Sample(t(2, 3, 4), [None, None, ts.tensor([1, 0], dtype=I32)]), Sample(t(3, 4), [idx()]),
            Sample(t(3, 4), [idx(3)]).raises(IndexError)]


@samples("index_put")
def _index_put():
    return [Sample(t(3, 4), [idx(2, 0)], t(2, 4, seed=1)), Sample(t(3, 4), [idx(2, 2, 0)], t(4, seed=1), True),
            Sample(t(3, 4), [t(3, 4, dtype=BOOL, seed=1)], t(seed=1)),
            Sample(transposed(3, 4), [None, idx(3, 1)], t(3, 1, seed=1)),
            Sample(t(3, dtype=I64), [idx(0, 0)], idx(1, 2), True),
            Sample(cx(3, 2), [idx(2, 2, 0)], cx(2, seed=1), True),
            Sample(t(3, 4), [idx(3)], t(4, seed=1)).raises(IndexError)]


samples("nonzero")(lambda: [Sample(t(3, 4, low=-1, high=1)), Sample(t(5, dtype=BOOL)),
                            Sample(t(2, 3, dtype=I64, low=0, high=1)),
                            Sample(transposed(3, 4, low=-1, high=1)), Sample(t(0, 3)), Sample(t(low=1))])


@samples("masked_select")
def _masked_select():
    return [Sample(t(3, 4), t(3, 4, dtype=BOOL, seed=1)), Sample(transposed(3, 4), t(4, dtype=BOOL, seed=1)),
            Sample(t(3, dtype=I64), t(3, dtype=BOOL, seed=1)), Sample(t(0, 2), t(2, dtype=BOOL)),
            Sample(t(3), t(2, dtype=BOOL)).raises(ValueError)]


# ---------------------------------------------------------------------------- linear algebra
# Accumulation order differs between a CPU loop and a device's blocked kernels: a little slack.
GEMM_TOL = {"float32": (1e-4, 1e-4), "float16": (1e-2, 1e-2), "bfloat16": (2e-2, 5e-2), "complex64": (1e-4, 1e-4)}


@samples("mm", tol=GEMM_TOL)
def _mm():
    return [Sample(t(3, 4), t(4, 5, seed=1)), Sample(transposed(3, 4), transposed(4, 5, seed=1)),
            Sample(t(2, 0), t(0, 3, seed=1)), Sample(t(3, 4, dtype=F16), t(4, 2, dtype=F16, seed=1)),
            Sample(t(3, 4, dtype=BF16), t(4, 2, dtype=BF16, seed=1)),
            Sample(t(3, 4, dtype=I64), t(4, 2, dtype=I64, seed=1)),
            Sample(t(33, 65), t(65, 17, seed=1)), Sample(cx(3, 4), cx(4, 2, seed=1)),
            Sample(View(cx(3, 4, dtype=F64), lambda b: b.mT, ".mT"), cx(3, 2, dtype=F64, seed=1)),
            Sample(t(2, 3), t(2, 3, seed=1)).raises(ValueError),
            Sample(t(2, 3), t(3, 2, dtype=I64, seed=1)).raises(TypeError)]


@samples("bmm", tol=GEMM_TOL)
def _bmm():
    return [Sample(t(2, 3, 4), t(2, 4, 5, seed=1)), Sample(transposed(2, 3, 4), t(2, 4, 1, seed=1)),
            Sample(t(0, 3, 4), t(0, 4, 2, seed=1)), Sample(t(2, 3, 4, dtype=F16), t(2, 4, 2, dtype=F16, seed=1)),
            Sample(cx(2, 3, 4), cx(2, 4, 2, seed=1)), Sample(t(2, 3, 4), t(3, 4, 2, seed=1)).raises(ValueError)]


@samples("matmul", tol=GEMM_TOL)
def _matmul():
    return [Sample(t(4), t(4, seed=1)), Sample(t(3, 4), t(4, seed=1)), Sample(t(4), t(4, 5, seed=1)),
            Sample(t(3, 4), t(4, 5, seed=1)), Sample(t(2, 3, 4), t(4, 5, seed=1)),
            Sample(t(2, 1, 3, 4), t(3, 4, 2, seed=1)),
            Sample(transposed(2, 3, 4), transposed(4, 5, seed=1)),
            Sample(t(3, 4, dtype=BF16), t(4, dtype=BF16, seed=1)),
            Sample(t(3, 4), t(3, seed=1)).raises(ValueError)]


@samples("addmm", tol=GEMM_TOL)
def _addmm():
    return [Sample(t(3, 5), t(3, 4, seed=1), t(4, 5, seed=2)), Sample(t(5), transposed(3, 4, seed=1), t(4, 5, seed=2)),
            Sample(t(3, 5), t(3, 4, seed=1), t(4, 5, seed=2), beta=0.5, alpha=2),
            Sample(t(3, 2, dtype=F16), t(3, 4, dtype=F16, seed=1), t(4, 2, dtype=F16, seed=2)),
            Sample(t(3, 5), t(3, 4, seed=1), t(5, 4, seed=2)).raises(ValueError)]


# ---------------------------------------------------------------------------- nn: convolution and pooling
CONV_TOL = {"float32": (1e-4, 1e-4)}


def _conv_cases():
    """(input, weight, bias, stride, padding, dilation, groups): 2-D with bias, strided without,
    grouped and dilated, 1-D, unbatched 2-D."""
    return [(t(2, 3, 5, 5), t(4, 3, 3, 3, seed=1), t(4, seed=2), [1, 1], [1, 1], [1, 1], 1),
            (t(1, 2, 6, 5), t(3, 2, 2, 3, seed=1), None, [2, 1], [0, 1], [1, 1], 1),
            (t(1, 4, 7, 7), t(4, 2, 3, 3, seed=1), t(4, seed=2), [1, 1], [2, 2], [2, 2], 2),
            (t(2, 2, 9), t(3, 2, 3, seed=1), t(3, seed=2), [2], [1], [1], 1),
            (t(3, 4, 4), t(2, 3, 3, 3, seed=1), None, [1, 1], [0, 0], [1, 1], 1)]


@samples("convolution", tol=CONV_TOL)
def _convolution():
    return [Sample(*c) for c in _conv_cases()] + [
        Sample(t(1, 3, 4, 4, dtype=BF16), t(2, 3, 3, 3, dtype=BF16, seed=1), None, [1, 1], [0, 0], [1, 1], 1),
        Sample(t(1, 3, 4, 4), t(2, 2, 3, 3, seed=1), None, [1, 1], [0, 0], [1, 1], 1).raises(ValueError)]


@samples("convolution_backward", tol=CONV_TOL)
def _convolution_backward():
    out = []
    for i, (x, w, b, *geometry) in enumerate(_conv_cases()):
        y = aten.convolution(x, w, b, *geometry)
        out.append(Sample(t(*y.shape, seed=10 + i), x, w, *geometry))
    return out


# ---------------------------------------------------------------------------- nn: recurrent layers
RNN_TOL = {"float32": (1e-4, 1e-4)}


def _rnn_cases():
    """(input [T, N, I], w_ih, w_hh, b_ih, b_hh, hx, cx, mode, reverse) with I = 3, H = 4: an LSTM,
    a reversed GRU, a tanh RNN without biases, a relu RNN over one step."""
    def case(mode, gates, T, N, reverse, bias=True, seed=0):
        ws = [t(gates * 4, 3, seed=seed + 1, low=-0.5, high=0.5), t(gates * 4, 4, seed=seed + 2, low=-0.5, high=0.5)]
        bs = [t(gates * 4, seed=seed + 3), t(gates * 4, seed=seed + 4)] if bias else [None, None]
        cx = t(N, 4, seed=seed + 6) if mode == 2 else None
        return (t(T, N, 3, seed=seed), *ws, *bs, t(N, 4, seed=seed + 5), cx, mode, reverse)
    return [case(2, 4, 5, 2, False), case(3, 3, 4, 3, True, seed=10), case(0, 1, 3, 2, False, bias=False, seed=20),
            case(1, 1, 1, 1, True, seed=30)]


@samples("_rnn_layer", tol=RNN_TOL)
def _rnn_layer():
    x, w_ih, w_hh, b_ih, b_hh, hx, cx, mode, reverse = _rnn_cases()[0]
    return [Sample(*c, False) for c in _rnn_cases()] + [
        Sample(x.double(), w_ih.double(), w_hh.double(), None, None, hx.double(), cx.double(), 2, False,
               False).raises(TypeError),
        Sample(x, w_ih, w_hh, b_ih, b_hh, t(3, 4), cx, 2, False, False).raises(ValueError)]


_RNN_FORWARDS = []


@samples("_rnn_layer_backward", tol=RNN_TOL)
def _rnn_layer_backward():
    # The forward leaves parts of its workspace unwritten: every sample set gets copies of the
    # same forward results, so that two calls see the same bytes.
    if not _RNN_FORWARDS:
        _RNN_FORWARDS.extend(aten._rnn_layer(*c, True) for c in _rnn_cases())
    out = []
    for i, c in enumerate(_rnn_cases()):
        y, hy, cy, workspace = (r.clone() for r in _RNN_FORWARDS[i])
        grad_cy = t(*cy.shape, seed=50 + i) if c[7] == 2 else None
        out.append(Sample(*c[:7], y, hy, cy, workspace, t(*y.shape, seed=40 + i), t(*hy.shape, seed=45 + i), grad_cy,
                          *c[7:]))
    return out


@samples("convolution_backward_input", tol=CONV_TOL)
def _convolution_backward_input():
    out = []
    for i, (x, w, b, *geometry) in enumerate(_conv_cases()):
        y = aten.convolution(x, w, b, *geometry)
        out.append(Sample(t(*y.shape, seed=20 + i), w, list(x.shape), *geometry))
    x, w, b, *geometry = _conv_cases()[0]
    out.append(Sample(t(2, 4, 9, 9), w, list(x.shape), *geometry).raises(ValueError))  # not that conv's output
    return out


@samples("_fused_adam_")
def _fused_adam_():
    def state(dtype=F32):
        return [t(3, 4, seed=s, dtype=dtype) for s in (1, 2)] + [pos(3, 4, seed=3, dtype=dtype)]
    p, m, v = state()
    return [Sample(p, m, t(3, 4, seed=4), v, None, 0.1, 0.9, 0.999, 1e-8, 0.0, 0.1, 0.0316, False, False),
            Sample(*state()[:2], pos(3, 4, seed=3), t(3, 4, seed=4), pos(3, 4, seed=5), 0.01, 0.8, 0.9, 1e-6, 0.1,
                   0.36, 0.44, True, True),
            Sample(*state(F64)[:3], t(3, 4, seed=4, dtype=F64), None, 0.1, 0.9, 0.999, 1e-8, 0.0, 0.1, 0.0316, False,
                   False),
            Sample(*state(F16)[:3], t(3, 4, seed=4, dtype=F16), None, 0.1, 0.9, 0.999, 1e-8, 0.0, 0.1, 0.0316, False,
                   False).raises(TypeError)]


def _pool_cases():
    """(input, kernel_size, stride, padding, ceil_mode): batched, strided with padding, ceil
    mode, unbatched; distinct values so that the maximum of a window is unique."""
    return [(distinct(2, 3, 6, 6), [2, 2], [], [0, 0], False), (distinct(1, 2, 7, 5), [3, 3], [2, 2], [1, 1], False),
            (distinct(1, 1, 5, 5), [2, 2], [2, 2], [0, 0], True), (distinct(2, 5, 4), [3, 2], [1, 2], [1, 0], False)]


@samples("max_pool2d_with_indices")
def _max_pool():
    return [Sample(x, k, s, p, [1, 1], c) for x, k, s, p, c in _pool_cases()] + [
        Sample(distinct(1, 1, 6, 6), [2, 2], [1, 1], [0, 0], [2, 2]), Sample(distinct(1, 2, 4, 4, dtype=F16), [2, 2]),
        Sample(t(1, 1, 4, 4), [2, 2], [], [2, 2]).raises(ValueError)]  # padding over half the kernel


@samples("max_pool2d_with_indices_backward")
def _max_pool_backward():
    out = []
    for i, (x, k, s, p, c) in enumerate(_pool_cases()):
        y, indices = aten.max_pool2d_with_indices(x, k, s, p, [1, 1], c)
        out.append(Sample(t(*y.shape, seed=10 + i), x, k, s, p, [1, 1], c, indices))
    return out


@samples("avg_pool2d")
def _avg_pool():
    return [Sample(x, k, s, p, c) for x, k, s, p, c in _pool_cases()] + [
        Sample(t(1, 2, 5, 5), [3, 3], [2, 2], [1, 1], False, False),
        Sample(t(1, 2, 4, 4), [2, 2], [], [0, 0], False, True, 3),
        Sample(t(1, 2, 4, 4, dtype=BF16), [2, 2]), Sample(t(1, 1, 4, 4), [2, 2], [], [2, 2]).raises(ValueError)]


@samples("avg_pool2d_backward")
def _avg_pool_backward():
    out = []
    for i, (x, k, s, p, c) in enumerate(_pool_cases() + [(t(1, 2, 5, 5), [3, 3], [2, 2], [1, 1], False)]):
        for count_include_pad, divisor in ((True, None), (False, 2)):
            y = aten.avg_pool2d(x, k, s, p, c, count_include_pad, divisor)
            out.append(Sample(t(*y.shape, seed=10 + i), x, k, s or k, p, c, count_include_pad, divisor))
    return out


@samples("adaptive_avg_pool2d")
def _adaptive_avg_pool():
    return [Sample(t(2, 3, 6, 6), [2, 3]), Sample(t(1, 2, 5, 7), [3, 2]), Sample(t(2, 5, 4), [1, 1]),
            Sample(t(1, 1, 3, 3), [5, 4]), Sample(transposed(1, 2, 4, 6), [2, 2]),
            Sample(t(1, 2, 4, 4), [0, 2]), Sample(t(1, 2, 4, 4), [-1, 2]).raises(ValueError)]


@samples("adaptive_avg_pool2d_backward")
def _adaptive_avg_pool_backward():
    cases = [(t(2, 3, 6, 6), [2, 3]), (t(1, 2, 5, 7), [3, 2]), (t(2, 5, 4), [1, 1])]
    return [Sample(t(*aten.adaptive_avg_pool2d(x, size).shape, seed=10 + i), x) for i, (x, size) in enumerate(cases)]


# ---------------------------------------------------------------------------- nn: normalization
NORM_TOL = {"float32": (1e-4, 1e-4)}


@samples("native_batch_norm", tol=NORM_TOL)
def _batch_norm():
    # running_mean / running_var are updated in place in training mode: the test compares them too.
    return [Sample(t(4, 3, 2, 2), t(3, seed=1), t(3, seed=2), t(3, seed=3), pos(3, seed=4), True, 0.1, 1e-5),
            Sample(t(4, 3), None, None, t(3, seed=3), pos(3, seed=4), True, 0.3, 1e-3),
            Sample(t(4, 3, 5), t(3, seed=1), t(3, seed=2), t(3, seed=3), pos(3, seed=4), False, 0.1, 1e-5),
            Sample(t(4, 3), None, None, None, None, True, 0.1, 1e-5),
            Sample(t(2, 3, 2, 2), t(3, seed=1), None, t(3, seed=3), pos(3, seed=4), False, 0.1, 1e-5),
            Sample(t(4, 3), None, None, None, None, False, 0.1, 1e-5).raises(ValueError)]  # eval needs running stats


@samples("native_batch_norm_backward", tol=NORM_TOL)
def _batch_norm_backward():
    x, w, rm, rv = t(4, 3, 2, 2), t(3, seed=1), t(3, seed=3), pos(3, seed=4)
    _, mean, invstd = aten.native_batch_norm(x, w, None, None, None, True, 0.1, 1e-5)
    g = t(4, 3, 2, 2, seed=5)
    return [Sample(g, x, w, None, None, mean, invstd, True, 1e-5),
            Sample(g, x, None, None, None, mean, invstd, True, 1e-5),
            Sample(g, x, w, rm, rv, None, None, False, 1e-5)]


@samples("native_layer_norm", tol=NORM_TOL)
def _layer_norm():
    return [Sample(t(2, 3, 4), [4], t(4, seed=1), t(4, seed=2), 1e-5), Sample(t(2, 3, 4), [3, 4], None, None, 1e-5),
            Sample(transposed(3, 5), [5], t(5, seed=1), None, 1e-3), Sample(t(2, 3, dtype=BF16), [3], None, None, 1e-5),
            Sample(t(0, 4), [4], None, None, 1e-5), Sample(t(2, 3), [4], None, None, 1e-5).raises(ValueError)]


@samples("native_layer_norm_backward", tol=NORM_TOL)
def _layer_norm_backward():
    out = []
    for i, (x, shape, w, b) in enumerate([(t(2, 3, 4), [4], t(4, seed=1), t(4, seed=2)),
                                          (t(2, 3, 4), [3, 4], None, None),
                                          (t(3, 5), [5], t(5, seed=1), None)]):
        _, mean, rstd = aten.native_layer_norm(x, shape, w, b, 1e-5)
        out.append(Sample(t(*x.shape, seed=10 + i), x, shape, mean, rstd, w, b))
    return out


@samples("native_group_norm", tol=NORM_TOL)
def _group_norm():
    return [Sample(t(2, 4, 3), t(4, seed=1), t(4, seed=2), 2, 4, 3, 2, 1e-5),
            Sample(t(2, 6, 2, 2), None, None, 2, 6, 4, 3, 1e-5),
            Sample(t(1, 4, 5), t(4, seed=1), None, 1, 4, 5, 1, 1e-3),
            Sample(t(2, 4, 3), None, None, 2, 4, 3, 3, 1e-5).raises(ValueError)]


@samples("native_group_norm_backward", tol=NORM_TOL)
def _group_norm_backward():
    out = []
    for i, (x, w, n, c, hw, g) in enumerate([(t(2, 4, 3), t(4, seed=1), 2, 4, 3, 2),
                                             (t(2, 6, 2, 2), None, 2, 6, 4, 3)]):
        _, mean, rstd = aten.native_group_norm(x, w, None, n, c, hw, g, 1e-5)
        out.append(Sample(t(*x.shape, seed=10 + i), x, mean, rstd, w, n, c, hw, g))
    return out


# ---------------------------------------------------------------------------- nn: dropout, embedding, view backward
def _check_dropout(args, result):
    """Dropped elements are zero and the kept ones scaled by 1 / (1 - p); in eval, the identity."""
    x, p, train = args[0], args[1], args[2]
    out, mask = result
    assert mask.dtype == BOOL and tuple(mask.shape) == tuple(x.shape)
    xs, kept = np.asarray(x.to(F64).tolist()), np.asarray(mask.tolist(), dtype=bool)
    if train is False:
        assert kept.all()
        expected = xs
    else:
        expected = np.where(kept, xs / (1 - p), 0.0) if p < 1 else np.zeros_like(xs)
        if kept.size >= 500 and 0 < p < 1:  # the kept fraction is near 1 - p
            assert abs(kept.mean() - (1 - p)) < 0.1, kept.mean()
    np.testing.assert_allclose(np.asarray(out.to(F64).tolist()), expected, rtol=1e-6, atol=1e-6)


@samples("_scaled_dot_product_flash_attention_for_cpu", tol=NORM_TOL)
def _flash_attention():
    q, k, v = t(2, 3, 5, 4, low=-1, high=1), t(2, 3, 7, 4, seed=1, low=-1, high=1), t(2, 3, 7, 6, seed=2, low=-1, high=1)
    return [Sample(q, k, v), Sample(q, k, v, 0.0, True, scale=0.5),
            Sample(transposed(2, 3, 4, 5), t(2, 3, 5, 5, seed=1), t(2, 3, 5, 5, seed=2), 0.0, True),
            Sample(q, k, v, 0.1).raises(ValueError), Sample(q, k, t(2, 3, 6, 6)).raises(ValueError),
            Sample(t(3, 5, 4), t(3, 7, 4), t(3, 7, 4)).raises(ValueError),
            Sample(q.to(F64), k.to(F64), v.to(F64)).raises(TypeError)]


@samples("_scaled_dot_product_flash_attention_for_cpu_backward", tol=NORM_TOL)
def _flash_attention_backward():
    out = []
    for causal in (False, True):
        q, k, v = t(2, 3, 5, 4, low=-1, high=1), t(2, 3, 7, 4, seed=1, low=-1, high=1), t(2, 3, 7, 6, seed=2, low=-1, high=1)
        o, lse = aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, causal)
        out.append(Sample(t(2, 3, 5, 6, seed=3), q, k, v, o, lse, 0.0, causal))
    out.append(Sample(t(2, 3, 4, 6), q, k, v, o, lse, 0.0, True).raises(ValueError))  # grad_out of another shape
    return out


@samples("native_dropout", check=_check_dropout)
def _dropout():
    return [Sample(t(1000), 0.5, True), Sample(t(3, 4), 0.2, None), Sample(t(3, 4), 0.5, False),
            Sample(t(3, 4), 0.0, True), Sample(t(3, 4), 1.0, True), Sample(transposed(20, 30), 0.3, True),
            Sample(t(0, 2), 0.5, True),
            Sample(t(3), 1.5, True).raises(ValueError)]


@samples("native_dropout_backward")
def _dropout_backward():
    return [Sample(t(3, 4), t(3, 4, dtype=BOOL, seed=1), 2.0),
            Sample(transposed(3, 4), t(3, 4, dtype=BOOL, seed=1), 1.25),
            Sample(t(2, 3, dtype=BF16), t(2, 3, dtype=BOOL, seed=1), 2.0), Sample(t(0), t(0, dtype=BOOL), 2.0)]


@samples("embedding")
def _embedding():
    return [Sample(t(10, 3), idx(1, 9, 1, 0).reshape(2, 2)), Sample(t(10, 3), idx(0, 2, 2), 2),
            Sample(transposed(5, 4), idx(4, 0)),
            Sample(t(5, 2, dtype=BF16), idx()), Sample(t(10, 3), idx(10)).raises(IndexError)]


@samples("embedding_dense_backward")
def _embedding_backward():
    return [Sample(t(2, 2, 3), idx(1, 9, 1, 0).reshape(2, 2), 10, -1, False),
            Sample(t(3, 3), idx(0, 2, 2), 5, 2, False),
            Sample(t(4, 3), idx(1, 1, 1, 3), 5, -1, True), Sample(t(0, 3), idx(), 4, -1, False)]


@samples("slice_backward")
def _slice_backward():
    return [Sample(t(2, 4), [5, 4], 0, 1, 3, 1), Sample(t(5, 2), [5, 4], 1, 0, 4, 2),
            Sample(t(0, 4), [5, 4], 0, 2, 2, 1)]


@samples("select_backward")
def _select_backward():
    return [Sample(t(4), [3, 4], 0, 1), Sample(t(3), [3, 4], 1, -1), Sample(t(), [3], 0, 2),
            Sample(t(4), [3, 4], 0, 3).raises(IndexError)]


# ---------------------------------------------------------------------------- nn: activations and losses
samples("silu")(lambda: unary(dtypes=(F16, BF16)))
samples("gelu")(lambda: unary(dtypes=(F16, BF16)) + [Sample(t(3, 4), approximate="tanh"),
                                                     Sample(t(3), approximate="erf").raises(ValueError)])


def _grad_pairs(second=t):
    """(grad_output, input) pairs: 2-D, transposed, bfloat16, zero-size, shapes that differ."""
    return [Sample(t(3, 4, seed=1), second(3, 4)), Sample(transposed(3, 4, seed=1), second(3, 4)),
            Sample(t(2, 3, dtype=BF16, seed=1), second(2, 3, dtype=BF16)), Sample(t(0, 3, seed=1), second(0, 3)),
            Sample(t(3, seed=1), second(4)).raises(ValueError)]


samples("silu_backward", "tanh_backward")(_grad_pairs)
samples("sigmoid_backward")(lambda: _grad_pairs(lambda *s, **kw: t(*s, low=0, high=1, **kw)))


@samples("gelu_backward")
def _gelu_backward():
    return _grad_pairs() + [s.with_args(approximate="tanh") for s in _grad_pairs()[:2]]


@samples("threshold_backward")
def _threshold_backward():
    return [s.with_args(s.args + (0.5,)) for s in _grad_pairs()] + [Sample(t(3, seed=1), t(3, dtype=I64), 0)]


@samples("_softmax_backward_data", "_log_softmax_backward_data")
def _softmax_backward():
    out = []
    for i, (x, dim) in enumerate([(t(3, 4), 1), (t(2, 3, 4), 0), (t(2, 5), -1)]):
        out.append(Sample(t(*x.shape, seed=10 + i), aten.softmax(x, dim), dim, F32))
    return out + [Sample(t(2, 3), t(2, 3, seed=1), 2, F32).raises(IndexError)]


def _nll_cases():
    """(log-probabilities, target, weight, reduction, ignore_index)."""
    logp = aten.log_softmax(t(4, 5), 1)
    target = idx(0, 4, 2, 2)
    return [(logp, target, None, 1, -100), (logp, target, t(5, low=0.5, high=2, seed=1), 1, -100),
            (logp, target, None, 0, 2), (logp, target, t(5, low=0.5, high=2, seed=1), 2, 4),
            (aten.log_softmax(t(5), 0), ts.tensor(3), None, 1, -100),  # unbatched: a 0-d target
            (aten.log_softmax(t(2, 3, 2, 2), 1), idx(0, 2, 1, 1, 2, 0, 0, 1).reshape(2, 2, 2), None, 1, -100)]


@samples("nll_loss_forward")
def _nll_loss():
    out = [Sample(*c) for c in _nll_cases()]
    return out + [Sample(t(2, 3), idx(0, 3), None, 1, -100).raises(IndexError)]


@samples("nll_loss_backward")
def _nll_loss_backward():
    out = []
    for i, (x, target, w, reduction, ignore) in enumerate(_nll_cases()):
        loss, total_weight = aten.nll_loss_forward(x, target, w, reduction, ignore)
        out.append(Sample(t(*loss.shape, seed=10 + i), x, target, w, reduction, ignore, total_weight))
    return out


@samples("mse_loss", "l1_loss")
def _pointwise_loss():
    return [Sample(t(3, 4), t(3, 4, seed=1)), Sample(transposed(3, 4), t(3, 4, seed=1), 0),
            Sample(t(3, 4), t(3, 4, seed=1), 2),
            Sample(t(2, 3, dtype=BF16), t(2, 3, dtype=BF16, seed=1)), Sample(t(0, 2), t(0, 2, seed=1), 1),
            Sample(t(3), t(4, seed=1)).raises(ValueError)]


@samples("mse_loss_backward")
def _mse_loss_backward():
    return [Sample(t(seed=2), t(3, 4), t(3, 4, seed=1), 1),
            Sample(t(3, 4, seed=2), transposed(3, 4), t(3, 4, seed=1), 0),
            Sample(t(seed=2), t(3, 4), t(3, 4, seed=1), 2)]


@samples("binary_cross_entropy_with_logits")
def _bce_logits():
    target = t(3, 4, low=0, high=1, seed=1)
    return [Sample(t(3, 4), target), Sample(transposed(3, 4), target, t(4, seed=2), None, 0),
            Sample(t(3, 4), target, None, t(4, low=0.5, high=3, seed=3), 2),
            Sample(t(3, 4, high=40), target),  # large logits
            Sample(t(3), t(4, seed=1)).raises(ValueError)]


# ---------------------------------------------------------------------------- operator breadth (issue 15)
samples("exp2", "expm1", "atan", "sinh", "cosh", "asinh", "erfc", "tan", "floor", "ceil", "trunc", "round",
        "frac", "square", "rad2deg", "deg2rad", "sgn")(unary)
samples("log2", "log10", "lgamma", "digamma", "reciprocal")(lambda: unary(low=0.25, high=4))
samples("asin", "acos", "atanh", "erfinv")(lambda: unary(low=-0.875, high=0.875))
samples("acosh")(lambda: unary(low=1.25, high=4))
samples("round.decimals")(lambda: [Sample(t(3, 4), decimals=1), Sample(transposed(3, 4), decimals=-1),
                                   Sample(t(0, 2), decimals=2)])
samples("bitwise_not")(lambda: [Sample(t(3, 4, dtype=I64)), Sample(t(3, dtype=BOOL)), Sample(t(2, 2, dtype=I32)),
                                Sample(t(3)).raises(TypeError)])
samples("atan2", "copysign.Tensor", "hypot", "logaddexp", "logaddexp2")(lambda: binary(dtypes=(F16, F64)))
samples("fmod.Tensor", "remainder.Tensor")(lambda: binary(dtypes=(F64, I64), nonzero=True))
samples("xlogy.Tensor")(lambda: [Sample(t(3, 4), pos(3, 4, seed=1)), Sample(t(2, 3, 4), pos(3, 1, seed=1)),
                                 Sample(t(0, 3), pos(3, seed=1))])
samples("bitwise_and.Tensor", "bitwise_or.Tensor", "bitwise_xor.Tensor")(lambda: [
    Sample(t(3, 4, dtype=I64), t(3, 4, dtype=I64, seed=1)), Sample(t(2, 3, dtype=BOOL), t(3, dtype=BOOL, seed=1)),
    Sample(t(2, 3, dtype=I32), t(2, 1, dtype=I64, seed=1)), Sample(t(3), t(3, seed=1)).raises(TypeError)])
samples("fmod.Scalar", "remainder.Scalar")(lambda: with_scalar(3, 1.5))
samples("copysign.Scalar")(lambda: with_scalar(-1.0, 2))
samples("bitwise_and.Scalar", "bitwise_or.Scalar", "bitwise_xor.Scalar")(lambda: [
    Sample(t(3, 4, dtype=I64), 6), Sample(t(2, dtype=I32), 3)])
samples("lerp.Scalar")(lambda: [Sample(t(3, 4), t(3, 4, seed=1), 0.25), Sample(t(3, 4), t(4, seed=1), 0.75),
                                Sample(transposed(3, 4), t(3, 4, seed=1), 1.0)])
samples("lerp.Tensor")(lambda: [Sample(t(3, 4), t(3, 4, seed=1), t(3, 4, seed=2, low=0, high=1)),
                                Sample(t(2, 3), t(3, seed=1), t(2, 1, seed=2, low=0, high=1))])
samples("addcmul", "addcdiv")(lambda: [Sample(t(3, 4), t(3, 4, seed=1), pos(3, 4, seed=2)),
                                       Sample(t(3, 4), t(4, seed=1), pos(3, 1, seed=2), value=0.5)])
samples("clamp.Tensor")(lambda: [Sample(t(3, 4), t(3, 4, seed=1), None), Sample(t(3, 4), None, t(4, seed=1)),
                                 Sample(t(3, 4), t(3, 1, seed=1, low=-1, high=0), t(4, seed=2, low=0, high=1)),
                                 Sample(t(3)).raises(ValueError)])  # clamp(x): the Tensor overload resolves
samples("isnan", "isinf", "isposinf", "isneginf", "isfinite")(lambda: [
    Sample(ts.tensor([1.0, float("nan"), float("inf"), -float("inf"), 0.0])), Sample(t(3, dtype=I64)),
    Sample(transposed(2, 3))])
samples("nan_to_num")(lambda: [Sample(ts.tensor([1.0, float("nan"), float("inf"), -float("inf")])),
                               Sample(ts.tensor([float("nan"), float("inf")]), 1.0, 2.0, -2.0), Sample(t(3, dtype=I64))])
samples("linalg_vector_norm")(lambda: [Sample(t(3, 4)), Sample(t(3, 4), 1, [1]), Sample(t(3, 4), float("inf"), [0], True),
                                       Sample(transposed(3, 4), 3), Sample(t(3, dtype=I64)).raises(TypeError)])
samples("count_nonzero.dim_IntList")(lambda: [Sample(t(3, 4, dtype=I64), [0]), Sample(t(2, 3, 4), [0, 2])])
samples("count_nonzero")(lambda: [Sample(t(3, 4, dtype=I64)), Sample(t(3, 4), 1)])
samples("var_mean.correction", "std_mean.correction", tol={"float32": (1e-5, 1e-5)})(lambda: [
    Sample(t(3, 4)), Sample(t(3, 4), [1]), Sample(t(3, 4), [0], correction=0, keepdim=True)])
samples("aminmax")(lambda: [Sample(t(3, 4)), Sample(t(3, 4), dim=1), Sample(t(3, 4, dtype=I64), dim=0, keepdim=True)])
samples("nansum", "nanmean")(lambda: [Sample(ts.tensor([[1.0, float("nan")], [2.0, 3.0]])),
                                      Sample(ts.tensor([[1.0, float("nan")], [2.0, 3.0]]), [1])])
samples("logcumsumexp")(lambda: [Sample(t(3, 4), 1), Sample(t(3, 4), 0), Sample(t(0, 2), 1)])
samples("cumsum", "cumprod")(lambda: [Sample(t(3, 4), 1), Sample(transposed(3, 4), 0), Sample(t(2, 3, 4), -2),
                                      Sample(t(3, dtype=I64), 0), Sample(t(3, 4), 0, dtype=F64), Sample(t(0, 3), 1),
                                      Sample(cx(3, 4), 1), Sample(View(cx(2, 3, dtype=F64), lambda b: b.mT, ".mT"), 0),
                                      Sample(t(3), 1).raises(IndexError)])
samples("sort.stable")(lambda: [Sample(distinct(3, 5), stable=True), Sample(t(4, 6), stable=True, dim=0),
                                Sample(t(3, 4), stable=True, descending=True), Sample(transposed(3, 4), stable=True),
                                Sample(t(3, dtype=I64), stable=True)])
samples("sort")(lambda: [Sample(distinct(3, 5)), Sample(distinct(4, 3), 0, True)])
samples("argsort")(lambda: [Sample(distinct(3, 5)), Sample(distinct(4, 3), 0, True)])
samples("argsort.stable")(lambda: [Sample(t(3, 5), stable=True), Sample(t(4, 3), stable=True, dim=0)])
samples("msort")(lambda: [Sample(t(4, 3))])
samples("topk")(lambda: [Sample(distinct(3, 6), 2), Sample(distinct(5, 4), 3, 0, False), Sample(distinct(3, 6), 6),
                         Sample(distinct(3, 6), 0), Sample(t(3, 6), 7).raises(IndexError)])
samples("flip")(lambda: [Sample(t(2, 3, 4), [0, 2]), Sample(transposed(3, 4), [1]), Sample(t(3), [0]),
                         Sample(t(3, 4), [0, 0]).raises(ValueError)])
samples("searchsorted.Tensor")(lambda: [Sample(ts.tensor([1.0, 2.0, 3.0]), t(2, 3)),
                                        Sample(ts.tensor([[1.0, 2.0], [0.0, 5.0]]), t(2, 3), right=True),
                                        Sample(ts.tensor([1, 3, 5]), t(4, dtype=I64), out_int32=True)])
samples("bucketize.Tensor")(lambda: [Sample(t(2, 3), ts.tensor([-1.0, 0.0, 1.0])),
                                     Sample(t(4), ts.tensor([-1.0, 0.0, 1.0]), right=True)])
samples("bincount")(lambda: [Sample(idx(0, 2, 2, 5)), Sample(idx(1, 1), None, 4), Sample(idx(0, 1, 1), t(3)),
                             Sample(idx(1, -1)).raises(ValueError)])
samples("tril", "triu")(lambda: [Sample(t(3, 4)), Sample(t(2, 3, 4), 1), Sample(transposed(4, 3), -1),
                                 Sample(t(3)).raises(ValueError)])
samples("tril_indices", "triu_indices")(lambda: [Sample(3, 3), Sample(4, 3, 1), Sample(3, 5, -1)])
samples("roll")(lambda: [Sample(t(3, 4), [1], [1]), Sample(t(3, 4), [2]), Sample(t(2, 3, 4), [1, -1], [0, 2])])
samples("rot90")(lambda: [Sample(t(3, 4)), Sample(t(2, 3, 4), 2, [1, 2]), Sample(t(3, 4), -1)])
samples("repeat")(lambda: [Sample(t(2, 3), [2, 1]), Sample(t(3), [2, 2]), Sample(transposed(2, 3), [1, 2, 1]),
                           Sample(t(2, 3), [2]).raises(ValueError)])
samples("tile")(lambda: [Sample(t(2, 3), [2]), Sample(t(3), [2, 2])])
samples("repeat_interleave.self_int")(lambda: [Sample(t(2, 3), 2), Sample(t(2, 3), 3, 1)])
samples("movedim.intlist")(lambda: [Sample(t(2, 3, 4), [0, 2], [2, 0])])
samples("movedim.int")(lambda: [Sample(t(2, 3, 4), 0, -1)])
samples("broadcast_to")(lambda: [Sample(t(3, 1), [2, 3, 4])])
samples("unflatten.int")(lambda: [Sample(t(2, 12), 1, [3, -1])])
samples("take")(lambda: [Sample(t(3, 4), idx(0, 5, -1)), Sample(transposed(3, 4), ts.tensor([[1, 2], [3, 11]]))])
samples("take_along_dim")(lambda: [Sample(t(3, 4), ts.tensor([[0], [3], [1]]), 1), Sample(t(3, 4), idx(0, 11))])
samples("meshgrid")(lambda: [Sample([t(3), t(2, seed=1)])])
samples("meshgrid.indexing")(lambda: [Sample([t(3), t(2, seed=1)], indexing="xy")])
samples("outer")(lambda: [Sample(t(3), t(4, seed=1))])
samples("dot", "vdot")(lambda: [Sample(t(5), t(5, seed=1)), Sample(t(5), t(5, dtype=F64)).raises(TypeError)])
samples("mv", tol=GEMM_TOL)(lambda: [Sample(t(3, 4), t(4, seed=1)), Sample(transposed(3, 4), t(4, seed=1))])
samples("addmv", tol=GEMM_TOL)(lambda: [Sample(t(3), t(3, 4, seed=1), t(4, seed=2), beta=0.5, alpha=2)])
samples("addr")(lambda: [Sample(t(3, 4), t(3, seed=1), t(4, seed=2), alpha=2)])
samples("baddbmm", "addbmm", tol=GEMM_TOL)(lambda: [Sample(t(2, 3, 5), t(2, 3, 4, seed=1), t(2, 4, 5, seed=2)),
                                                   Sample(t(3, 5), t(2, 3, 4, seed=1), t(2, 4, 5, seed=2), beta=0)])
samples("einsum", tol=GEMM_TOL)(lambda: [Sample("bij,bjk->bik", [t(2, 3, 4), t(2, 4, 5, seed=1)]),
                                         Sample("ii->i", [t(3, 3)]), Sample("i,j->ij", [t(3), t(2, seed=1)]),
                                         Sample("ij->k", [t(2, 3)]).raises(ValueError)])
samples("tensordot", tol=GEMM_TOL)(lambda: [Sample(t(2, 3, 4), t(4, 3, 2, seed=1), [1, 2], [1, 0])])
samples("kron")(lambda: [Sample(t(2, 3), t(2, 2, seed=1))])
samples("linalg_cross")(lambda: [Sample(t(4, 3), t(4, 3, seed=1)), Sample(t(3, 2), t(3, 2, seed=1), dim=0)])


def _check_binary_values(args, result):
    v = np.asarray(result.to(F64).tolist()).ravel()
    assert set(v.tolist()) <= {0.0, 1.0}, v


def _check_normal_around_mean(args, result):
    v = np.asarray(result.to(F64).tolist()).ravel()
    assert np.isfinite(v).all() and (v.size < 500 or abs(v.mean() - 2.0) < 0.2), v.mean()


def _check_categories(args, result):
    probs = np.asarray(args[0].to(F64).tolist())
    v = np.asarray(result.tolist())
    assert v.shape[-1] == args[1] and (probs.reshape(-1, probs.shape[-1])[0][v.reshape(-1, v.shape[-1])[0]] > 0).all()


def _check_permutation(args, result):
    assert sorted(result.tolist()) == list(range(args[0]))


samples("bernoulli", check=_check_binary_values)(lambda: [Sample(t(3, 4, low=0, high=1)), Sample(t(600, low=0, high=1))])
samples("bernoulli.p", check=_check_binary_values)(lambda: [Sample(t(3, 4), 0.3)])
samples("normal.Tensor_Tensor", check=_check_normal_around_mean)(lambda: [Sample(ts.full((600,), 2.0), ts.full((600,), 0.5))])
samples("multinomial", check=_check_categories)(lambda: [Sample(ts.tensor([0.2, 0.0, 0.8]), 2),
                                                         Sample(ts.tensor([[0.5, 0.5, 0.0]]), 5, True)])
samples("randperm", check=_check_permutation)(lambda: [Sample(7), Sample(0)])


samples("cummax", "cummin")(lambda: [Sample(t(3, 4), 1), Sample(transposed(3, 4), 0), Sample(t(2, 3, dtype=I64), -1),
                                     Sample(ts.tensor([1.0, float("nan"), 3.0, 0.0]), 0), Sample(t(0, 2), 1)])
samples("diagonal")(lambda: [Sample(t(3, 4)), Sample(t(3, 4), 1), Sample(t(2, 3, 4), -1, 1, 2), Sample(t(3)).raises(ValueError)])
# ---- complex numbers and torch.fft
C64, C128 = ts.complex64, ts.complex128


def cx(*shape, dtype=F32, seed=0):
    """A complex tensor (parts on the 1/8 grid, as t()) with float `dtype` parts."""
    return ts.complex(t(*shape, dtype=dtype, seed=seed), t(*shape, dtype=dtype, seed=seed + 7))


samples("view_as_real")(lambda: [Sample(cx(3, 4)), Sample(cx(2, 3, dtype=F64)), Sample(t(3)).raises(TypeError)])
samples("view_as_complex")(lambda: [Sample(t(3, 2)), Sample(t(2, 3, 2, dtype=F64)), Sample(t(3, 3)).raises(ValueError),
                                    Sample(t(3, 2, dtype=I64)).raises(TypeError)])
samples("real", "conj", "resolve_conj", "resolve_neg", "conj_physical", "angle")(
    lambda: [Sample(cx(3, 4)), Sample(cx(2, 3, dtype=F64)), Sample(t(3, 4)), Sample(cx(0, 2))])
samples("imag")(lambda: [Sample(cx(3, 4)), Sample(cx(2, 3, dtype=F64)), Sample(t(3)).raises(TypeError)])
samples("complex", "polar")(lambda: [Sample(t(3, 4), t(3, 4, seed=1)), Sample(t(2, 1, dtype=F64), t(3, dtype=F64, seed=1)),
                                     Sample(t(3), t(3, dtype=F64)).raises(TypeError)])
FFT_TOL = {"float32": (1e-4, 1e-4), "float64": (1e-9, 1e-9), "complex64": (1e-4, 1e-4), "complex128": (1e-9, 1e-9)}
samples("_fft_c2c", tol=FFT_TOL)(lambda: [Sample(cx(4, 6), [1], 0, True), Sample(cx(3, 5, dtype=F64), [0, 1], 2, False),
                                          Sample(cx(4, 7), [-1], 1, True), Sample(t(4), [0], 0, True).raises(TypeError)])
samples("_fft_r2c", tol=FFT_TOL)(lambda: [Sample(t(4, 6), [1], 0, True), Sample(t(3, 5, dtype=F64), [0, 1], 2, False),
                                          Sample(t(5, 7), [0, 1], 1, True)])
samples("_fft_c2r", tol=FFT_TOL)(lambda: [Sample(cx(4, 4), [1], 0, 6), Sample(cx(3, 4, dtype=F64), [0, 1], 2, 7),
                                          Sample(cx(4, 2), [1], 0, 8).raises(ValueError)])
samples("fft_fft", "fft_ifft", "fft_hfft", tol=FFT_TOL)(lambda: [
    Sample(cx(3, 8)), Sample(t(3, 8), 5, 0, "ortho"), Sample(cx(4, 6, dtype=F64), 9, -1, "forward"),
    Sample(t(5, dtype=I64)), Sample(cx(4), norm="bad").raises(ValueError)])
samples("fft_rfft", "fft_ihfft", tol=FFT_TOL)(lambda: [Sample(t(3, 8)), Sample(t(4, 7, dtype=F64), 10, 0, "ortho"),
                                                       Sample(cx(4)).raises(TypeError)])
samples("fft_irfft", tol=FFT_TOL)(lambda: [Sample(cx(3, 5)), Sample(cx(4, 6, dtype=F64), 7, 0, "forward")])
samples("fft_fft2", "fft_ifft2", "fft_fftn", "fft_ifftn", tol=FFT_TOL)(lambda: [
    Sample(cx(3, 4, 5)), Sample(t(4, 6), [3, 8]), Sample(cx(2, 3, 4, dtype=F64), None, [0, 2], "ortho")])
samples("fft_rfft2", "fft_rfftn", tol=FFT_TOL)(lambda: [Sample(t(3, 4, 6)), Sample(t(4, 6, dtype=F64), [3, 8], [0, 1], "ortho")])
samples("fft_irfft2", "fft_irfftn", "fft_hfft2", "fft_hfftn", tol=FFT_TOL)(lambda: [
    Sample(cx(3, 4, 4)), Sample(cx(4, 5, dtype=F64), [3, 8]), Sample(cx(3, 4, 5), None, [0, 2], "ortho"),
    Sample(cx(2, 3), norm="forward")])
samples("fft_ihfft2", "fft_ihfftn", tol=FFT_TOL)(lambda: [
    Sample(t(3, 4, 6)), Sample(t(4, 6, dtype=F64), [3, 8], [0, 1], "ortho"), Sample(t(2, 5), norm="forward"),
    Sample(cx(3, 4)).raises(TypeError)])
samples("fft_fftshift", "fft_ifftshift")(lambda: [Sample(t(4, 5)), Sample(cx(3, 6), [1]), Sample(t(0, 3))])
samples("fft_fftfreq", "fft_rfftfreq")(lambda: [Sample(8), Sample(7, 0.5, dtype=F64), Sample(0).raises(ValueError)])
samples("kthvalue")(lambda: [Sample(distinct(3, 5), 2), Sample(distinct(4, 3), 1, 0, True), Sample(t(3), 4).raises(IndexError)])
samples("median", "nanmedian")(lambda: [Sample(distinct(3, 5)), Sample(ts.tensor([1.0, float("nan"), 3.0]))])
samples("median.dim", "nanmedian.dim")(lambda: [Sample(distinct(3, 5), 1), Sample(distinct(4, 3), 0, True),
                                                Sample(ts.tensor([[1.0, float("nan"), 3.0], [2.0, 0.0, 5.0]]), 1)])
samples("_unique2")(lambda: [Sample(t(3, 4, dtype=I64), True, True, True), Sample(t(5), True, False, True), Sample(t(0))])
samples("mode")(lambda: [Sample(t(4, 9, dtype=I64, low=0, high=3)), Sample(t(5, 3, low=0, high=1), 0, True),
                         Sample(t(3, 0), 1).raises(IndexError)])
samples("unique_consecutive")(lambda: [Sample(idx(1, 1, 2, 2, 3, 1), True, True), Sample(t(4))])
samples("histc")(lambda: [Sample(t(50), 5), Sample(t(20), 4, -1, 1), Sample(t(5), 0).raises(ValueError)])
samples("trace")(lambda: [Sample(t(3, 3)), Sample(t(2, 4, dtype=I64)), Sample(t(3)).raises(ValueError)])
samples("diag")(lambda: [Sample(t(3)), Sample(t(3), 1), Sample(t(3, 4), -1)])
samples("diag_embed")(lambda: [Sample(t(2, 3)), Sample(t(2, 3), 1, 0, 2)])
samples("block_diag")(lambda: [Sample([t(2, 2), t(3, seed=1), t(seed=2)])])
samples("index_fill.int_Scalar")(lambda: [Sample(t(3, 4), 1, idx(0, 2), 5.0), Sample(t(3, 4, dtype=I64), 0, idx(1), -1)])
samples("index_copy")(lambda: [Sample(t(3, 4), 0, idx(2, 0), t(2, 4, seed=1))])
samples("cdist", tol=GEMM_TOL)(lambda: [Sample(t(3, 4), t(5, 4, seed=1)), Sample(t(2, 3, 4), t(2, 2, 4, seed=1), 1.0)])


def _check_in_place_draw(low, high):
    def check(args, result):
        v = np.asarray(result.to(F64).tolist()).ravel()
        assert result.shape == args[0].shape and ((v >= low) & (v <= high)).all(), v
    return check


samples("uniform_", check=_check_in_place_draw(-1, 3))(lambda: [Sample(t(4, 5), -1.0, 3.0)])
samples("normal_", check=_check_in_place_draw(-np.inf, np.inf))(lambda: [Sample(t(4, 5), 1.0, 2.0)])
samples("exponential_", check=_check_in_place_draw(0, np.inf))(lambda: [Sample(t(4, 5), 2.0)])
samples("geometric_", check=_check_in_place_draw(1, np.inf))(lambda: [Sample(t(4, 5), 0.3)])
samples("log_normal_", check=_check_in_place_draw(0, np.inf))(lambda: [Sample(t(4, 5))])
samples("cauchy_", check=_check_in_place_draw(-np.inf, np.inf))(lambda: [Sample(t(4, 5))])
samples("bernoulli_.float", check=_check_in_place_draw(0, 1))(lambda: [Sample(t(4, 5), 0.5)])
samples("random_.from", check=_check_in_place_draw(2, 6))(lambda: [Sample(t(4, 5), 2, 7)])
samples("random_.to", check=_check_in_place_draw(0, 4))(lambda: [Sample(t(4, 5, dtype=I64), 5)])


# torch.linalg: float64 matrices (LAPACK's results differ between float32 runs only by rounding)
def _mat(*shape, seed=0, shift=3.0):
    a = np.random.default_rng(seed).standard_normal(shape)
    if len(shape) >= 2 and shape[-1] == shape[-2]:
        a = a + shift * np.eye(shape[-1])
    return ts.tensor(a)


def _spd(*batch, n=3):
    m = np.random.default_rng(1).standard_normal(batch + (n, n))
    return ts.tensor(m @ np.swapaxes(m, -1, -2) + n * np.eye(n))


LINALG_TOL = {"float64": (1e-8, 1e-8), "float32": (1e-4, 1e-4)}
samples("linalg_lu_factor_ex", tol=LINALG_TOL)(lambda: [Sample(_mat(3, 3)), Sample(_mat(2, 3, 3)), Sample(_mat(3, 4)),
                                                       Sample(ts.ones(3)).raises(ValueError)])
samples("linalg_lu_solve", tol=LINALG_TOL)(lambda: [Sample(*[v for v in ts.linalg.lu_factor(_mat(3, 3))], _mat(3, 2, seed=1))])
samples("linalg_cholesky_ex", "linalg_cholesky", tol=LINALG_TOL)(lambda: [Sample(_spd()), Sample(_spd(2), upper=True),
                                                                          Sample(ts.ones(2, 3, dtype=F64)).raises(ValueError)])
def _sym(*batch, n=4, seed=2):
    m = np.random.default_rng(seed).standard_normal(batch + (n, n))
    return ts.tensor(m + np.swapaxes(m, -1, -2))  # indefinite: LDL^T pivots


samples("linalg_ldl_factor_ex", tol=LINALG_TOL)(lambda: [
    Sample(_sym()), Sample(_sym(2, 3)), Sample(ts.zeros(3, 3, dtype=F64)), Sample(_sym(2, n=3), hermitian=True),
    Sample(ts.zeros(3, 3, dtype=F64), check_errors=True).raises(ValueError),
    Sample(ts.ones(2, 3, dtype=F64)).raises(ValueError)])
samples("linalg_ldl_solve", tol=LINALG_TOL)(lambda: [
    Sample(*ts.linalg.ldl_factor(_sym()), _mat(4, 2, seed=1)),
    Sample(*ts.linalg.ldl_factor(_sym(2, 3)), _mat(2, 3, 4, 2, seed=1)),
    Sample(*ts.linalg.ldl_factor(_sym()), _mat(3, 2, seed=1)).raises(ValueError)])
samples("linalg_qr", tol=LINALG_TOL)(lambda: [Sample(_mat(4, 3)), Sample(_mat(2, 3, 4), "complete"), Sample(_mat(3, 3), "r")])
samples("linalg_eigvalsh", tol=LINALG_TOL)(lambda: [Sample(_spd()), Sample(_spd(2), "U")])
samples("linalg_svdvals", tol=LINALG_TOL)(lambda: [Sample(_mat(4, 3)), Sample(_mat(2, 3, 5))])
samples("linalg_inv", "linalg_det", "linalg_slogdet", tol=LINALG_TOL)(lambda: [
    Sample(_mat(3, 3)), Sample(_mat(2, 4, 4)), Sample(ts.ones(2, 3, dtype=F64)).raises(ValueError)])
samples("linalg_solve", tol=LINALG_TOL)(lambda: [Sample(_mat(3, 3), _mat(3, 2, seed=1)), Sample(_mat(2, 3, 3), _mat(2, 3, seed=1)),
                                               Sample(_mat(3, 3), _mat(2, 3, seed=1), left=False)])
samples("linalg_pinv", "linalg_matrix_rank", tol=LINALG_TOL)(lambda: [Sample(_mat(4, 3)), Sample(_mat(2, 3, 3))])
samples("linalg_matrix_norm", tol=LINALG_TOL)(lambda: [Sample(_mat(3, 4), 1), Sample(_mat(2, 3, 3), float("inf")),
                                                     Sample(_mat(3, 4), -1, [0, 1], True)])
samples("linalg_matrix_norm.str_ord", tol=LINALG_TOL)(lambda: [Sample(_mat(3, 4)), Sample(_mat(2, 3, 4), "nuc")])
samples("linalg_lstsq", tol=LINALG_TOL)(lambda: [Sample(_mat(5, 3), _mat(5, 2, seed=1))])


def _check_eigh(args, result):
    w, v = (np.asarray(t.tolist()) for t in result)
    a = np.asarray(args[0].tolist())
    np.testing.assert_allclose(v @ (w[..., None] * np.swapaxes(v, -1, -2)), a, rtol=1e-8, atol=1e-8)


def _check_svd(args, result):
    u, s, vh = (np.asarray(t.tolist()) for t in result)
    a = np.asarray(args[0].tolist())
    k = s.shape[-1]
    np.testing.assert_allclose(u[..., :k] @ (s[..., None] * vh[..., :k, :]), a, rtol=1e-8, atol=1e-8)


def _check_eig(args, result):
    w, v = (np.asarray(t.tolist()) for t in result)
    a = np.asarray(args[0].tolist())
    np.testing.assert_allclose(a @ v, v * w[..., None, :], rtol=1e-8, atol=1e-8)


# eigenvectors and singular vectors are unique only up to sign (eig's up to phase): checked by reconstruction
samples("linalg_eigh", check=_check_eigh)(lambda: [Sample(_spd()), Sample(_spd(2), "U")])
samples("linalg_eig", check=_check_eig)(lambda: [Sample(_mat(3, 3)), Sample(_mat(2, 4, 4)),
                                                 Sample(_mat(3, 3).to(ts.complex128)),
                                                 Sample(_mat(3, 4)).raises(ValueError)])
samples("linalg_eigvals", tol=LINALG_TOL)(lambda: [Sample(_mat(4, 4)), Sample(_mat(2, 3, 3))])
samples("linalg_svd", check=_check_svd)(lambda: [Sample(_mat(4, 3)), Sample(_mat(2, 3, 4), False)])


# the rest of the Core ATen IR
samples("as_strided")(lambda: [Sample(t(4, 6), [3, 2], [6, 2]), Sample(t(4, 6), [2, 2], [1, 6], 3),
                               Sample(t(6), [2, 3], [3, 1])])
samples("alias")(lambda: [Sample(t(3, 4)), Sample(transposed(3, 4))])
samples("_adaptive_avg_pool2d")(lambda: [Sample(t(1, 2, 6, 6), [3, 2])])
samples("_adaptive_avg_pool2d_backward")(lambda: [Sample(t(1, 2, 3, 2), t(1, 2, 6, 6, seed=1))])
samples("_softmax", "_log_softmax")(lambda: [Sample(t(3, 4), 1, False), Sample(t(2, 3, dtype=F16), 0, True)])
samples("_to_copy")(lambda: [Sample(t(3, 4)), Sample(t(3, 4), dtype=F64), Sample(transposed(3, 4), dtype=I64)])
samples("_native_batch_norm_legit", tol=NORM_TOL)(lambda: [Sample(t(4, 3, 5), t(3, seed=1), t(3, seed=2), t(3, seed=3),
                                                                 pos(3, seed=4), True, 0.1, 1e-5)])
samples("_native_batch_norm_legit.no_stats", tol=NORM_TOL)(lambda: [Sample(t(4, 3, 5), t(3, seed=1), t(3, seed=2), True, 0.1, 1e-5)])
samples("_native_batch_norm_legit_no_training", tol=NORM_TOL)(lambda: [Sample(t(4, 3, 5), t(3, seed=1), t(3, seed=2), t(3, seed=3),
                                                                             pos(3, seed=4), 0.1, 1e-5)])
samples("_cdist_forward", tol=GEMM_TOL)(lambda: [Sample(t(3, 4), t(5, 4, seed=1), 2.0, None)])
samples("_pdist_forward", tol=GEMM_TOL)(lambda: [Sample(t(4, 3)), Sample(t(5, 2), 1.0)])
samples("_local_scalar_dense")(lambda: [Sample(t(1)), Sample(t(dtype=I64)), Sample(t(3)).raises(ValueError)])
samples("any")(lambda: [Sample(t(3, 4, dtype=BOOL)), Sample(t(3, dtype=I64)), Sample(t(0))])
samples("any.dim")(lambda: [Sample(t(3, 4, dtype=BOOL), 1), Sample(t(3, 4), 0, True)])
samples("any.dims")(lambda: [Sample(t(2, 3, 4, dtype=BOOL), [0, 2]), Sample(t(3, 4), None, True)])
samples("constant_pad_nd")(lambda: [Sample(t(2, 3), [1, 2]), Sample(t(2, 3, 4), [1, 0, 2, 1], 1.5), Sample(t(3, 4), [-1, 1]),
                                    Sample(t(3), [1]).raises(ValueError)])
samples("copy")(lambda: [Sample(t(3, 4), t(4, seed=1)), Sample(t(3, 4, dtype=I64), t(3, 4, seed=1))])
samples("div.Scalar_mode")(lambda: [Sample(t(3, 4), 1.5, rounding_mode="floor"), Sample(t(3, 4, dtype=I64), 2, rounding_mode="trunc"),
                                    Sample(t(3, 4), 2.0, rounding_mode=None)])
samples("elu")(lambda: [Sample(t(3, 4)), Sample(t(3, 4), 0.5, 2.0, 1.5)])
samples("empty_strided", uninitialised=True)(lambda: [Sample([2, 3], [1, 2]), Sample([2, 2], [4, 1])])
samples("fill.Scalar")(lambda: [Sample(t(3, 4), 2.5), Sample(t(3, dtype=I64), 7)])
samples("full_like")(lambda: [Sample(t(3, 4), 2.5), Sample(t(3), 1, dtype=I64)])
samples("scalar_tensor")(lambda: [Sample(2.5), Sample(3, dtype=I64)])
samples("hardtanh")(lambda: [Sample(t(3, 4)), Sample(t(3, 4), -0.5, 0.5)])
samples("leaky_relu")(lambda: [Sample(t(3, 4)), Sample(t(3, 4), 0.2)])
samples("logical_xor")(lambda: [Sample(t(3, 4, dtype=BOOL), t(3, 4, dtype=BOOL, seed=1)), Sample(t(3, 4), t(4, seed=1))])
samples("masked_scatter")(lambda: [Sample(t(3, 4), t(3, 4, dtype=BOOL, seed=1), t(12, seed=2)),
                                   Sample(t(3, 4), t(4, dtype=BOOL, seed=1), t(20, seed=2))])
samples("max.dim", "min.dim")(lambda: [Sample(distinct(3, 4), 1), Sample(distinct(3, 4), 0, True), Sample(t(3, 0), 1).raises(IndexError)])
samples("prod")(lambda: [Sample(t(3, 4)), Sample(t(3, dtype=I64))])
samples("prod.dim_int")(lambda: [Sample(t(3, 4), 1), Sample(t(3, 4), 0, True)])
samples("pow.Scalar")(lambda: [Sample(2.0, t(3, 4)), Sample(3, t(3, dtype=I64, low=0, high=3))])
samples("var.dim")(lambda: [Sample(t(3, 4), [1], True), Sample(t(3, 4), [0], False, True)])
samples("reflection_pad1d")(lambda: [Sample(t(2, 5), [2, 1]), Sample(t(1, 2, 5), [0, 3])])
samples("reflection_pad2d", "replication_pad2d")(lambda: [Sample(t(1, 2, 4, 5), [1, 2, 2, 1]), Sample(t(2, 4, 5), [0, 1, 1, 0])])
samples("reflection_pad3d", "replication_pad3d")(lambda: [Sample(t(1, 3, 3, 4), [1, 1, 0, 2, 1, 0])])
samples("scatter_reduce.two")(lambda: [Sample(t(3, 4), 1, ts.tensor([[0, 1, 0, 3]] * 3), t(3, 4, seed=1), "sum"),
                                       Sample(t(3, 4), 0, ts.tensor([[0, 1, 2, 0], [1, 1, 0, 2]]), t(2, 4, seed=1), "mean",
                                              include_self=False),
                                       Sample(t(3, 4), 1, ts.tensor([[0, 1, 0, 3]] * 3), t(3, 5, seed=1), "prod"),
                                       Sample(t(3, 4), 0, ts.tensor([[0, 1, 2, 0], [1, 1, 0, 2]]), t(2, 4, seed=1), "amax",
                                              include_self=False),
                                       Sample(t(4, dtype=I64), 0, ts.tensor([3, 3, 0]), t(3, dtype=I64, seed=1), "amin"),
                                       Sample(t(3), 0, ts.tensor([0]), t(1, seed=1), "max").raises(ValueError)])
samples("select_scatter")(lambda: [Sample(t(3, 4), t(4, seed=1), 0, 1), Sample(t(3, 4), t(3, seed=1), 1, -1)])
samples("slice_scatter")(lambda: [Sample(t(6, 4), t(3, 4, seed=1), 0, 0, 6, 2), Sample(t(3, 5), t(3, 2, seed=1), 1, 1, 3)])
samples("split_with_sizes")(lambda: [Sample(t(5, 3), [2, 3]), Sample(t(2, 6), [1, 2, 3], 1),
                                     Sample(t(5, 3), [2, 2]).raises(ValueError)])
samples("squeeze.dims")(lambda: [Sample(t(1, 3, 1), [0, 2]), Sample(t(2, 1), [0, 1])])
samples("sym_numel")(lambda: [Sample(t(3, 4))])
samples("sym_size.int", "sym_stride.int")(lambda: [Sample(t(3, 4), 1), Sample(t(3, 4), -2)])
samples("sym_storage_offset")(lambda: [Sample(t(3, 4))])
samples("upsample_nearest2d.vec")(lambda: [Sample(t(1, 2, 3, 4), [6, 8], None), Sample(t(1, 1, 4, 4), None, [0.5, 1.5])])
samples("upsample_bilinear2d.vec")(lambda: [Sample(t(1, 2, 3, 4), [6, 8], False, None), Sample(t(1, 1, 4, 4), [7, 5], True, None)])
samples("max_pool3d_with_indices")(lambda: [
    Sample(distinct(1, 2, 4, 5, 6), [2, 2, 2]), Sample(distinct(2, 5, 4, 6), [3, 2, 3], [2, 1, 2], [1, 0, 1], [1, 1, 1], True),
    Sample(distinct(1, 1, 6, 5, 5), [2, 2, 2], [1, 2, 1], [0, 1, 0], [2, 1, 2]), Sample(distinct(0, 1, 4, 4, 4), [2, 2, 2]),
    Sample(t(4, 4, 4), [2, 2, 2]).raises(ValueError)])
samples("avg_pool3d")(lambda: [
    Sample(t(1, 2, 4, 5, 6), [2, 2, 2]), Sample(t(2, 5, 4, 6), [3, 2, 3], [2, 1, 2], [1, 0, 1], True, False),
    Sample(transposed(1, 2, 4, 5, 6), [2, 3, 2], [1, 2, 2], [1, 1, 0], False, True, 3),
    Sample(t(1, 1, 4, 4, 4), [2, 2, 2], [], [2, 0, 0]).raises(ValueError)])
samples("_adaptive_avg_pool3d")(lambda: [Sample(t(1, 2, 6, 5, 4), [3, 2, 3]), Sample(transposed(2, 4, 5, 3), [2, 5, 1]),
                                         Sample(t(1, 2, 0, 4, 4), [2, 2, 2]).raises(ValueError)])
samples("im2col")(lambda: [Sample(t(2, 3, 5, 6), [2, 3], [1, 1], [0, 1], [1, 2]), Sample(transposed(2, 4, 5), [2, 2], [2, 1], [1, 0], [1, 1]),
                           Sample(t(1, 1, 2, 2), [3, 3], [1, 1], [0, 0], [1, 1]).raises(ValueError)])
samples("col2im")(lambda: [Sample(t(2, 12, 12), [5, 6], [2, 2], [1, 1], [0, 0], [1, 2]),
                           Sample(transposed(8, 9), [4, 4], [2, 2], [1, 1], [1, 1], [2, 2]),
                           Sample(t(1, 5, 9), [4, 4], [2, 2], [1, 1], [0, 0], [1, 1]).raises(ValueError)])
samples("grid_sampler_2d", tol={"float32": (1e-5, 1e-5)})(lambda: [
    Sample(t(2, 3, 4, 5), t(2, 3, 6, 2, low=-1.25, high=1.25, seed=1), 0, 0, False),
    Sample(t(1, 2, 5, 4), t(1, 4, 3, 2, low=-1.25, high=1.25, seed=1), 0, 2, True),
    Sample(t(1, 2, 5, 4), t(1, 4, 3, 2, low=-1.25, high=1.25, seed=1), 1, 1, False),
    Sample(transposed(1, 2, 4, 6), t(1, 3, 3, 2, low=-1.25, high=1.25, seed=1), 2, 2, False),
    Sample(t(1, 2, 4, 4), t(1, 3, 3, 2, seed=1), 3, 0, False).raises(ValueError)])
samples("_embedding_bag")(lambda: [
    Sample(t(10, 3), idx(1, 2, 4, 5, 4, 3, 2, 9), idx(0, 4, 4, 6)),
    Sample(distinct(10, 3), idx(1, 2, 4, 5, 4, 3, 2, 9), idx(0, 3, 8), False, 2, False, None, True),
    Sample(t(10, 3, dtype=F64), idx(1, 2, 4, 5, 4, 3, 2, 9), idx(0, 4, 4, 6), False, 1, False, None, False, 2),
    Sample(t(10, 3), idx(1, 2, 4, 5), idx(0, 2), False, 0, False, t(4, seed=1)),
    Sample(t(10, 3), idx(1, 2), idx(0, 1), False, 3).raises(ValueError)])


# torch.special
samples("logit")(lambda: unary(low=0.125, high=0.875, dtypes=(F64,)) + [Sample(t(3, 4, low=-1, high=2), 0.25)])
samples("sinc", "special_entr", "special_ndtr", "special_log_ndtr")(lambda: unary(dtypes=(F64, I64)))
samples("special_ndtri")(lambda: unary(low=0.125, high=0.875, dtypes=(F64,)))
samples("special_xlog1py")(lambda: [Sample(t(3, 4), pos(3, 4, seed=1)), Sample(t(2, 3, 4), pos(3, 1, seed=1))])


# the everyday surface
samples("bitwise_left_shift.Tensor", "bitwise_right_shift.Tensor")(lambda: [
    Sample(t(3, 4, dtype=I64, low=-8, high=8), t(3, 4, dtype=I64, seed=1, low=0, high=5)),
    Sample(t(3, dtype=I32, low=-8, high=8), idx(1, 40, -1).to(I32)), Sample(t(3), t(3, seed=1)).raises(TypeError)])
samples("bitwise_left_shift.Tensor_Scalar", "bitwise_right_shift.Tensor_Scalar")(lambda: [
    Sample(t(3, 4, dtype=I64, low=-8, high=8), 2), Sample(t(3, dtype=I32), 1)])
samples("unfold")(lambda: [Sample(t(2, 7), 1, 3, 2), Sample(transposed(4, 3), 0, 2, 1), Sample(t(3), 0, 4, 1).raises(ValueError)])
samples("tensor_split.sections")(lambda: [Sample(t(7, 2), 3), Sample(t(2, 5), 2, 1)])
samples("tensor_split.indices")(lambda: [Sample(t(7, 2), [1, 4]), Sample(t(2, 5), [2, 9], 1)])
samples("broadcast_tensors")(lambda: [Sample([t(3, 1), t(4, seed=1)]), Sample([t(2, 3), t(3, seed=1), t(seed=2)]),
                                      Sample([t(2, 3), t(2, seed=1)]).raises(ValueError)])
samples("cross")(lambda: [Sample(t(4, 3), t(4, 3, seed=1)), Sample(t(3, 2), t(3, 2, seed=1), 0)])
samples("unique_dim")(lambda: [Sample(ts.tensor([[1, 2], [1, 2], [0, 5]]), 0, True, True, True),
                               Sample(ts.tensor([[1.0, 1.0], [2.0, 2.0]]), 1, True, False, True)])
samples("hstack", "vstack", "dstack", "column_stack")(lambda: [Sample([t(2, 3), t(2, 3, seed=1)]), Sample([t(3), t(3, seed=1)])])
samples("diff")(lambda: [Sample(t(3, 5)), Sample(t(3, 5), 2, 0), Sample(t(4), 1, -1, t(2, seed=1), t(1, seed=2)),
                         Sample(t(4, dtype=BOOL))])
samples("flipud", "fliplr")(lambda: [Sample(t(3, 4)), Sample(transposed(3, 4))])
samples("signbit")(lambda: [Sample(ts.tensor([-0.0, 0.0, -1.5, 2.0, float("-inf")])), Sample(t(3, dtype=I64))])
samples("isin.Tensor_Tensor")(lambda: [Sample(t(3, 4, dtype=I64), idx(0, 1, 7)), Sample(t(5), t(3, seed=1), invert=True)])
samples("heaviside")(lambda: [Sample(ts.tensor([-1.0, 0.0, 2.0]), ts.tensor([0.5])), Sample(t(3, 4), t(4, seed=1))])


# ---------------------------------------------------------------------------- derived variants
def schema_of(name):
    """The schema text of one overload ("add.out(...) -> ..."), or None when it does not exist."""
    base = name.split(".")[0]
    for s in ts._C.op_schemas(base):
        if s[: s.index("(")] == name:
            return s
    return None


def all_overloads(namespace="aten"):
    """The full names of every registered overload in a namespace."""
    names = [n for n in ts._C.op_names() if ("::" not in n) == (namespace == "aten")]
    return sorted(s[: s.index("(")] for n in names for s in ts._C.op_schemas(n))


def _arguments(schema):
    return schema[schema.index("(") + 1: schema.rindex(") ->")]


def variant_of(name):
    """("inplace" | "out", functional overload) for a variant ops.yaml derives, else None: the
    functional overload is the one whose arguments are the variant's without its mutable
    self annotation (in-place) or its `out` argument."""
    schema = schema_of(name)
    base, _, overload = name.partition(".")
    args = _arguments(schema)
    if base.endswith("_") and args.startswith("Tensor(a!) self"):
        kind, args = "inplace", args.replace("Tensor(a!) self", "Tensor self", 1)
        candidates = [base[:-1] + (f".{overload}" if overload else "")]
    elif args.endswith("Tensor(a!) out"):
        stem = overload[: -len("_out")] if overload.endswith("_out") else None
        candidates = [f"{base}.{stem}"] if stem else [base, f"{base}.Tensor"]
        kind, args = "out", args[: -len("Tensor(a!) out")].rstrip(", ").removesuffix(", *").removesuffix("*")
    else:
        return None
    for c in candidates:
        s = schema_of(c)
        if s is not None and _arguments(s) == args:
            return kind, c
    return None


def _cpu_call(name, sample):
    args = [materialize(a) for a in sample.args]
    kwargs = {k: materialize(v) for k, v in sample.kwargs.items()}
    return ts._C.call_op(name, tuple(args), kwargs)


def materialize(v):
    """An argument with its Views made (the CPU side of a sample)."""
    if isinstance(v, View):
        return v.materialize()
    if isinstance(v, (list, tuple)):
        return type(v)(materialize(x) for x in v)
    return v


def _inplace_samples(functional, make):
    """The functional samples whose result has self's shape: in place, a floating result into an
    integer self is an error (PyTorch's casting rule); other dtype changes are left out."""
    out = []
    for s, probe in zip(make(), make()):  # two fresh copies: probing must not touch the sample
        if s.error is not None:
            out.append(s)
            continue
        self = materialize(probe.args[0])
        r = _cpu_call(functional, probe)
        if not isinstance(r, ts.Tensor) or tuple(r.shape) != tuple(self.shape):
            continue
        if r.dtype == self.dtype:
            out.append(s)
        elif r.dtype.is_floating_point and not self.dtype.is_floating_point:
            out.append(s.raises(TypeError))
    return out


def _out_samples(functional, make):
    """Each functional sample with out=: in turn a tensor of the result's shape (written in place),
    a zero-size one (resized), and a transposed one (written through its strides)."""
    out = []
    for i, (s, probe) in enumerate(zip(make(), make())):
        if s.error is not None:
            out.append(s.with_args(out=ts.empty(0)))
            continue
        r = _cpu_call(functional, probe)
        shape, dtype = list(r.shape), r.dtype
        if i % 3 == 1:
            target = ts.empty(0, dtype=dtype)
        elif i % 3 == 2 and len(shape) >= 2:
            target = View(ts.full(shape[:-2] + shape[:-3:-1], 7, dtype=dtype), lambda b: b.mT, ".mT")
        else:
            target = ts.full(shape, 7, dtype=dtype)
        out.append(s.with_args(out=target))
    return out


def entry_for(name):
    """The Entry testing an overload: its own, else one derived from its functional overload's,
    else None."""
    if name in SAMPLES:
        return SAMPLES[name]
    variant = variant_of(name) if schema_of(name) else None
    if variant is None or variant[1] not in SAMPLES:
        return None
    kind, functional = variant
    entry = SAMPLES[functional]
    derive = _inplace_samples if kind == "inplace" else _out_samples
    return Entry(lambda: derive(functional, entry.make), entry.check, entry.uninitialised, entry.tol)
