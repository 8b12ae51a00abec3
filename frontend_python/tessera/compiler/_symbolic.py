"""Symbolic graphs for ts.compile's dynamic sizes: once the calls of one structure (guards equal
up to tensor sizes) have been captured at enough sizes, every integer of their graphs that moves
with the sizes is fitted as an exact affine expression of the dims that vary (their squares and
products included: attention's T * T), as ts.export fits its dynamic dims
(tessera/export/_dynamic.py). A later size is then served by evaluating the expressions into the
fitted graphs and compiling them (kernels that read their sizes at run time, already built):
no capture, no Python of the function, no C++ build.

The fit uses only real captures (no calls at made-up sizes, so a function's side effects happen
as often as uncompiled), one per monomial plus two checks that must be predicted exactly. Where
no fit exists (a graph whose operators change with a size, an integer such as T // 2, tensors
lifted from Python whose contents depend on the size, non-tensor results that do), the family
keeps capturing each new size; so does one whose graph writes its inputs or buffers (batch
norm's running statistics in training), since a fitted graph that failed half-way could not be
captured again without writing twice."""
import copy
import fractions
import json
import re

from tessera.export._dynamic import FitFailure, _monomials, evaluate, fit_samples, set_site

_CHECKS = 2          # samples beyond the system's size that the fit must predict
_MAX_SAMPLES = 16    # a family that has not fitted by then stops trying


class SizeFamily:
    """The compiled entries of one structure, and their fit once there is one."""

    def __init__(self):
        self.samples = []     # [(shapes of the call's tensor leaves by leaf index, entry)]
        # The dims that vary across the samples, grouped where their sizes have always been
        # equal (as PyTorch's duck sizing: one symbol, and a guard that they stay equal):
        # [[(leaf index, dim), ...] per symbol].
        self.symbols = []
        self.exprs = None     # per graph, [(path, expr)], once fitted
        self.failed = None    # why the family cannot be symbolic

    def add(self, leaves, entry):
        """Records a captured and compiled entry; fits when there are samples enough."""
        if self.failed or len(self.samples) >= _MAX_SAMPLES:
            return
        run = entry.run
        if getattr(run, "graphs", None) is None or getattr(run, "rebuild", None) is None:
            self.failed = "the backend's compiled graphs cannot be rebuilt"
            return
        if any(g.get("mutated_inputs") for g in run.graphs):
            # a fitted graph that failed half-way could not be run again without writing twice
            self.failed = "the graph writes its inputs or buffers"
            return
        if self.samples and not self._compatible(self.samples[0][1], entry):
            return
        self.samples.append((_shapes(leaves), entry))
        self._refit()

    def instantiate(self, leaves, paths):
        """An entry for a call at new sizes from the fitted graphs, or None (capture it)."""
        if self.exprs is None:
            return None
        shapes = _shapes(leaves)
        base_shapes, base = self.samples[0]
        if shapes.keys() != base_shapes.keys():
            return None
        symbol_dims = {dim for group in self.symbols for dim in group}
        for leaf, shape in shapes.items():
            if len(shape) != len(base_shapes[leaf]):
                return None
            for d, (size, base_size) in enumerate(zip(shape, base_shapes[leaf])):
                if (leaf, d) not in symbol_dims and size != base_size:
                    return None  # another dim varies: a capture widens the symbols
        sizes = []
        for group in self.symbols:
            values = {shapes[leaf][d] for leaf, d in group}
            if len(values) != 1:
                return None  # dims that were always equal differ now: a capture splits them
            sizes.append(values.pop())
        # The fitted inputs must be the call's (a cheap proof the fit holds here).
        inputs = [leaves[i] for i in base.capture.input_positions]
        if any(self._input_shape(k, sizes) != tuple(t.shape) for k, t in enumerate(inputs)):
            return None
        from tessera.compiler._compiled import _Entry
        return _Entry(base.run.rebuild([t.fill(sizes) for t in self.templates]), base.capture, False, paths)

    def _input_shape(self, k, sizes):
        shape, moving = self.input_shapes[k]
        return tuple(evaluate(moving[d], sizes) if d in moving else s for d, s in enumerate(shape))

    # ---- fitting

    @staticmethod
    def _compatible(first, entry):
        a, b = first.capture, entry.capture
        return (a.input_positions == b.input_positions and a.out_leaves == b.out_leaves
                and [_identity(c) for c in a.constants] == [_identity(c) for c in b.constants]
                and getattr(first.run, "layout", None) == getattr(entry.run, "layout", None)
                and len(first.run.graphs) == len(entry.run.graphs))

    def _refit(self):
        base_shapes = self.samples[0][0]
        groups = {}  # the sizes a varying dim had in every sample -> the dims that had them
        for leaf, shape in base_shapes.items():
            for d in range(len(shape)):
                history = tuple(shapes[leaf][d] for shapes, _ in self.samples)
                if len(set(history)) > 1:
                    groups.setdefault(history, []).append((leaf, d))
        symbols = sorted(groups.values())
        if symbols != self.symbols:
            self.symbols, self.exprs = symbols, None
        if self.exprs is not None or not symbols:
            return
        n = len(symbols)
        needed = len(_monomials(n))
        if len(self.samples) < needed + _CHECKS:
            return
        sized = [([shapes[group[0][0]][group[0][1]] for group in symbols], entry) for shapes, entry in self.samples]
        chosen = _independent(sized, n, needed)
        if chosen is None:
            return  # the sizes seen so far do not pin the expressions down: wait for more
        rest = [s for k, s in enumerate(sized) if k not in chosen]
        exprs = []
        for g in range(len(self.samples[0][1].run.graphs)):
            samples = [(sized[k][0], sized[k][1].run.graphs[g]) for k in chosen]
            checks = [(sizes, entry.run.graphs[g]) for sizes, entry in rest]
            try:
                fitted = fit_samples(n, samples, checks)
            except FitFailure as f:
                self.failed = f"{f.kind} at {f.path}"
                return
            if fitted is None:
                return
            if any(path[0] == "v" and path[1] in samples[0][1]["constants"] for path, _ in fitted):
                self.failed = "a lifted tensor's size moves with the sizes"
                return
            exprs.append(fitted)
        # Every moving integer is set from its expression, so any sample is a base.
        graphs = self.samples[0][1].run.graphs
        self.templates = [_Template(g, e) for g, e in zip(graphs, exprs)]
        first = graphs[0]
        moving = {(path[1], path[3]): expr for path, expr in exprs[0] if path[0] == "v" and path[2] == "shape"}
        self.input_shapes = [(tuple(first["values"][vid]["shape"]),
                              {d: moving[(vid, d)] for d in range(len(first["values"][vid]["shape"]))
                               if (vid, d) in moving}) for vid in first["inputs"]]
        self.exprs = exprs


class _Template:
    """A graph's serialised text with holes where its moving integers go: filled at a size set by
    joining strings (a deep copy of the graph per new size cost more than the call)."""

    def __init__(self, ir, exprs):
        marked = copy.deepcopy(ir)
        for k, (path, _) in enumerate(exprs):
            set_site(marked, path, f"@@hole{k}@@")
        pieces = re.split(r'"@@hole(\d+)@@"', json.dumps(marked))
        # Many holes hold the same expression (T, B * T, ...): each distinct one is evaluated once.
        distinct = {}
        self.holes = [distinct.setdefault(json.dumps(exprs[int(k)][1]), len(distinct)) for k in pieces[1::2]]
        self.exprs = [json.loads(e) for e in distinct]
        self.chunks = pieces[0::2]

    def fill(self, sizes):
        values = [str(evaluate(expr, sizes)) for expr in self.exprs]
        out = [self.chunks[0]]
        for hole, chunk in zip(self.holes, self.chunks[1:]):
            out.append(values[hole])
            out.append(chunk)
        return "".join(out)


def _identity(t):
    """A lifted tensor as the same memory (each capture wraps parameters anew; a tensor Python
    filled during the capture is new memory each time, so a family holding one never fits)."""
    return t.data_ptr(), tuple(t.shape), t.stride(), t.dtype


def _shapes(leaves):
    import tessera
    return {i: tuple(leaf.shape) for i, leaf in enumerate(leaves) if isinstance(leaf, tessera.Tensor)}


def _independent(sized, n, needed):
    """Indices of `needed` samples whose monomial rows are linearly independent (taken greedily,
    in order), or None when the samples span less."""
    from tessera.export._dynamic import _prod
    basis, chosen = [], []  # rows reduced against the basis, kept in echelon form
    for k, (sizes, _) in enumerate(sized):
        row = [fractions.Fraction(_prod(sizes, mono)) for mono in _monomials(n)]
        for pivot, b in basis:
            if row[pivot] != 0:
                f = row[pivot] / b[pivot]
                row = [x - f * y for x, y in zip(row, b)]
        pivot = next((c for c, x in enumerate(row) if x != 0), None)
        if pivot is not None:
            basis.append((pivot, row))
            chosen.append(k)
            if len(chosen) == needed:
                return chosen
    return None
