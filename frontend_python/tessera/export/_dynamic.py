"""Dynamic dimensions of an exported program (torch.export.Dim).

A capture records concrete sizes. To learn how the graph's integers (view sizes, slice bounds,
value shapes and strides) depend on the dynamic dims, export captures again with each dim moved
to another size in its range, one at a time and in pairs, and solves for the coefficients of
    value = c + sum_i a_i * d_i + sum_i q_i * d_i**2 + sum_{i<j} b_ij * d_i * d_j
with exact integer arithmetic; one more capture with every dim moved checks the fit. A graph
whose operators change with a size (Python branching on a shape), or whose integers follow no
such expression, is an error naming the dim and the place. Sizes 0 and 1 specialise, as in
PyTorch: an example of size 0 or 1 for a dynamic dim is refused."""
import fractions
import inspect
import itertools
import sys

import tessera

INT_MAX = sys.maxsize - 1


class Dim:
    """A dynamic dimension: Dim("batch", min=2, max=64). Dims given the same object are equal."""

    def __init__(self, name, *, min=None, max=None):  # noqa: A002  (torch's keywords)
        if not isinstance(name, str) or not name.isidentifier():
            raise ValueError(f"Dim: the name must be a Python identifier, got {name!r}")
        self.__name__ = name
        self.min = 0 if min is None else int(min)
        self.max = INT_MAX if max is None else int(max)
        if self.min < 0 or self.max < self.min:
            raise ValueError(f"Dim '{name}': expected 0 <= min <= max, got min={self.min}, max={self.max}")

    def __repr__(self):
        bounds = ", ".join(f"{k}={v}" for k, v in (("min", self.min), ("max", self.max))
                           if not (k == "min" and v == 0) and not (k == "max" and v == INT_MAX))
        return f"Dim('{self.__name__}'{', ' + bounds if bounds else ''})"


def dims(*names, min=None, max=None):  # noqa: A002
    """Several Dims with the same range: batch, seq = dims("batch", "seq", max=64)."""
    return tuple(Dim(n, min=min, max=max) for n in names)


class ConstraintViolationError(ValueError):
    """An example input or a traced program that contradicts the dynamic_shapes given."""


def _per_leaf(args, kwargs, dynamic_shapes, forward):
    """The dim spec ({dim: Dim}) of each tensor leaf of (args, kwargs), in flatten order."""
    if dynamic_shapes is None:
        return None
    if isinstance(dynamic_shapes, dict):
        try:
            bound = inspect.signature(forward).bind(*args, **kwargs)
        except TypeError as e:
            raise ValueError(f"ts.export: cannot match dynamic_shapes to the arguments of forward: {e}") from None
        unknown = set(dynamic_shapes) - set(bound.arguments)
        if unknown:
            raise ValueError(f"ts.export: dynamic_shapes names {sorted(unknown)}, which are not arguments of forward "
                             f"(its arguments: {list(bound.arguments)})")
        names = list(bound.arguments)
        arg_specs = tuple(dynamic_shapes.get(n) for n in names[:len(args)])
        kw_specs = {k: dynamic_shapes.get(k) for k in kwargs}
    elif isinstance(dynamic_shapes, (tuple, list)):
        if len(dynamic_shapes) != len(args) + len(kwargs):
            raise ValueError(f"ts.export: dynamic_shapes has {len(dynamic_shapes)} entries, the call has "
                             f"{len(args) + len(kwargs)} arguments")
        arg_specs = tuple(dynamic_shapes[:len(args)])
        kw_specs = dict(zip(kwargs, dynamic_shapes[len(args):]))
    else:
        raise TypeError(f"ts.export: dynamic_shapes must be a dict, tuple or list, got {type(dynamic_shapes).__name__}")
    specs = []

    def walk(value, spec, path):
        if isinstance(value, tessera.Tensor):
            if spec is None:
                specs.append({})
            elif isinstance(spec, dict):
                specs.append(_checked(spec, value, path))
            elif isinstance(spec, (tuple, list)):
                if len(spec) != value.dim():
                    raise ValueError(f"ts.export: dynamic_shapes for {path} has {len(spec)} entries, the tensor has "
                                     f"{value.dim()} dims")
                specs.append(_checked({d: s for d, s in enumerate(spec) if s is not None}, value, path))
            else:
                raise TypeError(f"ts.export: dynamic_shapes for tensor {path} must be a dict {{dim: Dim}}, a "
                                f"tuple or None, got {type(spec).__name__}")
        elif type(value) in (tuple, list):
            for i, v in enumerate(value):
                walk(v, None if spec is None else spec[i], f"{path}[{i}]")
        elif type(value) is dict:
            for k, v in value.items():
                walk(v, None if spec is None else spec.get(k), f"{path}[{k!r}]")

    for i, (a, s) in enumerate(zip(args, arg_specs)):
        walk(a, s, f"args[{i}]")
    for k, a in kwargs.items():
        walk(a, kw_specs.get(k), f"kwargs[{k!r}]")
    return specs


def _checked(spec, tensor, path):
    out = {}
    for d, dim in spec.items():
        if dim is None:
            continue
        if not isinstance(dim, Dim):
            raise TypeError(f"ts.export: dynamic_shapes for {path} dim {d} must be a Dim, got {dim!r}")
        d = int(d)
        if not 0 <= d < tensor.dim():
            raise ValueError(f"ts.export: dynamic_shapes names dim {d} of {path}, which has {tensor.dim()} dims")
        size = tensor.shape[d]
        if size in (0, 1):
            raise ConstraintViolationError(
                f"ts.export: {path}.shape[{d}] is marked dynamic ({dim!r}) but the example has size {size}; sizes 0 "
                f"and 1 specialise: give an example of size >= 2")
        if not dim.min <= size <= dim.max:
            raise ConstraintViolationError(f"ts.export: {path}.shape[{d}] = {size} is outside the range of {dim!r}")
        out[d] = dim
    return out


class Symbols:
    """The dynamic dims of one export: symbol i is dims[i], with its example size."""

    def __init__(self, leaf_specs, leaves, paths):
        self.dims, self.examples, self.where = [], [], []
        for spec, leaf, path in zip(leaf_specs, leaves, paths):
            for d, dim in spec.items():
                if any(dim is known for known in self.dims):
                    i = next(i for i, known in enumerate(self.dims) if known is dim)
                    if self.examples[i] != leaf.shape[d]:
                        raise ConstraintViolationError(
                            f"ts.export: {dim!r} is used for {self.where[i]} (size {self.examples[i]}) and {path}"
                            f".shape[{d}] (size {leaf.shape[d]}); the example sizes must be equal")
                    continue
                self.dims.append(dim)
                self.examples.append(leaf.shape[d])
                self.where.append(f"{path}.shape[{d}]")

    def __len__(self):
        return len(self.dims)

    def alternatives(self, i):
        """Three sizes other than the example, in the dim's range (and >= 2)."""
        dim, e = self.dims[i], self.examples[i]
        lo, hi = max(dim.min, 2), dim.max
        found = [v for v in itertools.chain(range(e + 1, min(e + 3, hi) + 1), range(e - 1, lo - 1, -1),
                                           range(e + 3, min(e + 8, hi) + 1)) if lo <= v <= hi and v != e]
        if len(found) < 3:
            raise ConstraintViolationError(
                f"ts.export: {dim!r} allows fewer than three sizes besides the example {e} in [{lo}, {hi}]; make "
                "the dim static (no Dim) or widen its range")
        return found[0], found[1], found[2]


def resized(tensor, sizes):
    """The example tensor at new sizes along some dims, its data repeated (indices stay valid)."""
    out = tensor
    for d, n in sizes.items():
        index = tessera.arange(n) % tensor.shape[d]
        out = out.index_select(d, index)
    return out.contiguous()


def _sites(ir):
    """(path, value, is_int) for every slot of the IR that may change with a size."""
    yield ("len_values",), len(ir["values"]), False
    yield ("len_nodes",), len(ir["nodes"]), False
    for v in ir["values"]:
        yield ("v", v["id"], "dtype"), v["dtype"], False
        yield ("v", v["id"], "rank"), len(v["shape"]), False
        for d, s in enumerate(v["shape"]):
            yield ("v", v["id"], "shape", d), s, True
        for d, s in enumerate(v["strides"]):
            yield ("v", v["id"], "strides", d), s, True
        yield ("v", v["id"], "storage_offset"), v["storage_offset"], True
    for k, node in enumerate(ir["nodes"]):
        yield ("n", k, "op"), node["op"], False
        yield ("n", k, "nargs"), len(node["args"]), False
        for a, arg in enumerate(node["args"]):
            (kind, val), = arg.items()
            yield ("n", k, a, "kind"), kind, False
            if kind == "int":
                yield ("n", k, a), val, True
            elif kind == "ints":
                yield ("n", k, a, "len"), len(val), False
                for e, x in enumerate(val):
                    yield ("n", k, a, e), x, True
            else:
                yield ("n", k, a, "value"), val, False
    for key in ("inputs", "constants", "outputs", "mutated_inputs"):
        yield (key,), ir[key], False


def _describe(path, ir):
    if path[0] == "n":
        node = ir["nodes"][path[1]]
        where = f"argument {path[2]} of operator {node['op']} (node {path[1]})" if len(path) > 2 and isinstance(
            path[2], int) else f"node {path[1]} ({node['op']})"
        return where
    if path[0] == "v":
        return f"the {path[2]} of value {path[1]}"
    return f"the graph's {path[0]}"


def _monomials(n):
    """1, each d_i, each d_i**2 (an attention matrix's T*T strides), each d_i*d_j."""
    return [()] + [(i,) for i in range(n)] + [(i, i) for i in range(n)] + list(itertools.combinations(range(n), 2))


def _solve(rows, rhs):
    """Exact Gauss-Jordan elimination over the rationals; None when singular."""
    m = len(rows)
    a = [[fractions.Fraction(x) for x in row] + [fractions.Fraction(b)] for row, b in zip(rows, rhs)]
    for c in range(m):
        p = next((r for r in range(c, m) if a[r][c] != 0), None)
        if p is None:
            return None
        a[c], a[p] = a[p], a[c]
        for r in range(m):
            if r != c and a[r][c] != 0:
                f = a[r][c] / a[c][c]
                a[r] = [x - f * y for x, y in zip(a[r], a[c])]
    return [a[r][m] / a[r][r] for r in range(m)]


class FitFailure(Exception):
    """fit_samples could not express the graph through the symbols: `kind` is "structure" (a
    slot other than an integer differs: path, the sizes of the differing sample) or "not_affine"
    (an integer follows no affine expression of the monomials: path, its values, the sizes)."""

    def __init__(self, kind, path, values, sizes):
        super().__init__(kind)
        self.kind, self.path, self.values, self.sizes = kind, path, values, sizes


def fit_samples(n_symbols, samples, checks):
    """[(path, expr)] for every integer of the graph that moves with the symbols, from captures
    at known sizes: samples = [(sizes, ir)], one per monomial (in _monomials order of rank: a
    nonsingular system), checks = more [(sizes, ir)] each prediction must match. Returns None
    when the samples' system is singular; raises FitFailure when no expression fits."""
    monomials = _monomials(n_symbols)
    everything = samples + checks
    site_lists = [list(_sites(ir)) for _, ir in everything]
    reference = site_lists[0]
    for other, (sizes, _) in zip(site_lists[1:], everything[1:]):
        if len(other) != len(reference) or any(a[0] != b[0] for a, b in zip(reference, other)):
            first = next((a[0] for a, b in zip(reference, other) if a[0] != b[0]), reference[-1][0])
            raise FitFailure("structure", first, None, sizes)
    rows = [[_prod(sz, mono) for mono in monomials] for sz, _ in samples]
    fitted = {}  # the values of a moving integer -> its expression (most recur: T, B * T, ...)

    def fit_values(values):
        coef = _solve(rows, values[:len(samples)])
        if coef is None:
            return None
        ok = all(c.denominator == 1 for c in coef) and all(
            sum(c * _prod(sz, mono) for c, mono in zip(coef, monomials)) == v
            for (sz, _), v in zip(checks, values[len(samples):]))
        return [[int(c), list(mono)] for c, mono in zip(coef, monomials) if c != 0] if ok else False

    exprs = []
    for s, (path, value, is_int) in enumerate(reference):
        values = [sites[s][1] for sites in site_lists]
        if all(v == value for v in values):
            continue
        if not is_int:
            moved = next(sz for v, (sz, _) in zip(values[1:], everything[1:]) if v != value)
            raise FitFailure("structure", path, values, moved)
        key = tuple(values)
        if key not in fitted:
            fitted[key] = fit_values(values)
        expr = fitted[key]
        if expr is None:
            return None
        if expr is False:
            raise FitFailure("not_affine", path, values, [sz for sz, _ in everything])
        exprs.append((list(path), expr))
    return exprs


def fit(symbols, capture_at):
    """Captures at the sample sizes (capture_at(sizes) -> IR dict) and returns the base IR and
    [(path, expr)] for every integer that moves, expr = [[coef, [symbol indices]], ...]."""
    n = len(symbols)
    base = list(symbols.examples)
    alt = [symbols.alternatives(i) for i in range(n)]
    # One sample per monomial: the example sizes, each dim moved (to a first and a second
    # other size, for its square), each pair moved; the check moves every dim to a third size.
    samples = []
    for mono in _monomials(n):
        sizes = list(base)
        if len(mono) == 2 and mono[0] == mono[1]:
            sizes[mono[0]] = alt[mono[0]][1]
        else:
            for i in mono:
                sizes[i] = alt[i][0]
        samples.append(sizes)
    check = [alt[i][2] for i in range(n)]
    irs = [capture_at(s) for s in samples + [check]]
    try:
        exprs = fit_samples(n, list(zip(samples, irs[:-1])), [(check, irs[-1])])
    except FitFailure as f:
        if f.kind == "structure":
            raise ConstraintViolationError(_changed_message(symbols, f.sizes, f.path, irs[0])) from None
        names = ", ".join(repr(d) for d in symbols.dims)
        raise ConstraintViolationError(
            f"ts.export: {_describe(f.path, irs[0])} changes with the dynamic dims ({names}) as no affine "
            f"expression does (values {f.values} at sizes {f.sizes}); make those dims static or "
            "restrict their ranges") from None
    if exprs is None:  # the chosen sizes always give a nonsingular system
        raise ConstraintViolationError("ts.export: the sample sizes of the dynamic dims gave a singular system")
    return irs[0], exprs


def _prod(sizes, mono):
    p = 1
    for i in mono:
        p *= sizes[i]
    return p


def _changed_message(symbols, sizes, path, ir):
    moved = [f"{symbols.dims[i]!r} = {s}" for i, s in enumerate(sizes) if s != symbols.examples[i]]
    return (f"ts.export: the program changes with the size of {', '.join(moved)}: {_describe(path, ir)} differs "
            "from the capture at the example sizes (Python code branching on a shape?); make the dim static or "
            "restrict its range so that the program is the same throughout")


def evaluate(expr, sizes):
    return sum(coef * _prod(sizes, mono) for coef, mono in expr)


def set_site(ir, path, value):
    """Writes `value` into the integer slot of `ir` that a _sites path names."""
    if path[0] == "v":
        v = ir["values"][path[1]]
        if path[2] == "storage_offset":
            v["storage_offset"] = value
        else:
            v[path[2]][path[3]] = value
    else:
        arg = ir["nodes"][path[1]]["args"][path[2]]
        if len(path) == 3:
            arg["int"] = value
        else:
            arg["ints"][path[3]] = value


def specialise(ir, exprs, sizes):
    """A copy of `ir` with every symbolic integer evaluated at `sizes` (symbol values)."""
    import copy
    out = copy.deepcopy(ir)
    for path, expr in exprs:
        set_site(out, path, evaluate(expr, sizes))
    return out
