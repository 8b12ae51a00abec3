"""A compiled function: captures on the first call, compiles with the backend, and reuses
the compiled graph for every later call whose guards hold. A call that misses recompiles,
up to `config.recompile_limit` graphs; past it, calls that miss run eagerly, and one line says
which guard failed. A function whose capture read tensor data into Python (a graph break: item, bool,
int, tolist) is cut there; the pieces are compiled and the values read are guarded on
(_segments.py). Captures that print, convert to NumPy, run autograd inside or write their
inputs before a read run eagerly for those guards.

Dynamic shapes: after a recompile that only a change of tensor sizes caused (or from the start
with dynamic=True; never with dynamic=False), sizes are dynamic. The inductor then generates
kernels that read their sizes at run time, so every size runs the same compiled kernels (one C++
build for all sizes). A new size is captured (one traced call) until the captures of its
structure let every size-dependent integer of the graphs be fitted exactly (_symbolic.py); from
then on a new size is the fitted graph evaluated at it: no capture at all. Those size entries
count once against the recompile limit (by their structure: dtypes, ranks, which dims are 0 or
1, layouts), and at most `config.dynamic_entries_limit` of them are kept (the oldest dropped)."""
import functools
import warnings

import tessera
from tessera.compiler import _capture, _cudagraphs, _guards, _segments, _stance, _symbolic
from tessera.compiler._backends import lookup_backend
from tessera.compiler._pytree import LEAF, unflatten
from tessera.compiler._segments import SegmentedGraph, ValueGuardMiss


class config:
    """Compiler settings (torch._dynamo.config's names)."""
    recompile_limit = 8
    cache_size_limit = 8  # torch's older name of recompile_limit
    # Sizes become dynamic after a recompile caused by a size change (torch's name).
    automatic_dynamic_shapes = True
    # Entries kept per compiled function once sizes are dynamic (one per size seen).
    dynamic_entries_limit = 64
    # A compiled graph that fuses nothing runs as the original function (tests turn this off
    # to exercise the compiled path on one-operator graphs).
    eager_when_nothing_fuses = True


class _Entry:
    __slots__ = ("run", "capture", "eager", "paths", "segmented", "positional", "single_output", "all_outputs")

    def __init__(self, run, capture, eager, paths):
        self.run = run
        self.capture = capture
        self.eager = eager
        self.paths = paths
        # Cut at data reads (_segments): run returns the folded result and may miss a value.
        self.segmented = isinstance(run, SegmentedGraph)
        # The common shapes of a call, served without the general pytree code: every
        # argument is a distinct tensor and a graph input, and the result is one tensor or a
        # tuple of graph outputs in order.
        n = len(capture.input_positions)
        self.positional = capture.input_positions == list(range(n)) and not self.segmented
        folded = capture.out_leaves
        self.single_output = capture.out_spec is LEAF and folded == [("graph", 0)]
        self.all_outputs = (capture.out_spec.kind == "tuple" and all(c is LEAF for c in capture.out_spec.children)
                            and folded == [("graph", k) for k in range(len(folded))])


class CompiledFunction:
    """What ts.compile returns for a function (or a module's __call__)."""

    def __init__(self, fn, backend="inductor", mode=None, dynamic=None, fullgraph=False, options=None, module=None):
        self._fn = fn
        self._backend_name = backend if isinstance(backend, str) else getattr(backend, "__name__", repr(backend))
        self._backend = lookup_backend(backend)
        self._mode = mode
        self._dynamic = dynamic
        self._fullgraph = fullgraph
        self._options = options or {}
        self._module = module
        self.dynamic_sizes = dynamic is True  # kernels that read their sizes at run time
        self._families = {}  # guard key without sizes -> _symbolic.SizeFamily
        self._entries = {}
        self._fast_entries = {}  # the same entries, by _guards.fast_key
        self._last_key = None
        self._warned_limit = False
        self._called_eagerly = False  # set_stance("eager_then_compile") ran the first call eagerly
        self.graph_breaks = []     # [(reason, where)] of every capture
        self.recompile_reasons = []
        functools.update_wrapper(self, fn)

    def __call__(self, *args, **kwargs):
        if _capture.is_compiling() or _stance.current == "force_eager":  # inside another capture: trace through
            return self._fn(*args, **kwargs)
        fast = None if kwargs else _guards.fast_key(args, self._module)
        if fast is not None:
            entry = self._fast_entries.get(fast)
            if entry is not None and entry.eager:
                return self._fn(*args)
            if entry is not None and entry.positional:
                outs = entry.run(*args)
                if entry.single_output:
                    return outs[0]
                if entry.all_outputs:
                    return tuple(outs)
                return self._fold(entry, outs)
        key, leaves, paths = _guards.guard_key(args, kwargs, self._module)
        entry = self._entries.get(key)
        if entry is not None:
            if fast is not None:
                self._fast_entries[fast] = entry
            if entry.eager:
                return self._fn(*args, **kwargs)
            if entry.segmented:
                return self._run_segmented(entry, leaves, args, kwargs)
            return self._run(entry, leaves)
        structure = _guards.size_free(key)
        if self.dynamic_sizes and structure in self._families:  # a fitted graph at new sizes: no capture
            family = self._families[structure]
            entry = family.instantiate(leaves, paths)
            if entry is not None:
                try:
                    result = self._run(entry, leaves)
                except (RuntimeError, ValueError, IndexError, TypeError) as e:
                    # The fit does not hold at these sizes (an integer affine only over the sizes
                    # sampled, a min/max of a size): stop serving fitted graphs for this structure.
                    family.failed = f"a fitted graph failed at new sizes: {type(e).__name__}: {e}"
                    family.exprs = None
                else:
                    self._entries[key] = entry
                    self._evict_sizes()
                    return result
        if self._last_key is not None:
            reason = _guards.explain_miss(self._last_key, key, paths)
            same_structure = _guards.size_free(self._last_key) == structure
            if (same_structure and not self.dynamic_sizes and self._dynamic is None
                    and config.automatic_dynamic_shapes):
                self.dynamic_sizes = True
                reason += "; sizes are dynamic from now on"
            if self.dynamic_sizes and same_structure:
                self.recompile_reasons.append(reason)
                return self._compile_and_run(key, args, kwargs, leaves, paths)
            if self._structures() >= max(config.recompile_limit, 1):
                self._warn_limit(reason, stacklevel=3)
                return self._fn(*args, **kwargs)
            self.recompile_reasons.append(reason)
        return self._compile_and_run(key, args, kwargs, leaves, paths)

    def _warn_limit(self, reason, stacklevel):
        """The one line a function past the recompile limit gets, naming the last guard failure."""
        if not self._warned_limit:
            self._warned_limit = True
            warnings.warn(f"ts.compile: {getattr(self._fn, '__qualname__', self._fn)} reached the recompile "
                          f"limit ({config.recompile_limit}); running eagerly. Last guard failure: {reason}",
                          stacklevel=stacklevel)

    def _structures(self):
        """The entries as the recompile limit counts them: under dynamic sizes, entries that
        differ only in sizes are one."""
        if not self.dynamic_sizes:
            return len(self._entries)
        return len({_guards.size_free(key) for key in self._entries})

    def _evict_sizes(self):
        """Keeps at most config.dynamic_entries_limit entries (dicts keep insertion order)."""
        while len(self._entries) > max(config.dynamic_entries_limit, 1):
            oldest = next(iter(self._entries))
            entry = self._entries.pop(oldest)
            for fast in [f for f, e in self._fast_entries.items() if e is entry]:
                del self._fast_entries[fast]

    def _run(self, entry, leaves):
        return self._fold(entry, entry.run(*[leaves[i] for i in entry.capture.input_positions]))

    def _run_segmented(self, entry, leaves, args, kwargs):
        """A graph cut at data reads: its pieces run while the values read are ones a
        continuation was captured for; another value captures the function again from the
        start (safe: the pieces write nothing they did not make) and keeps that continuation."""
        try:
            return entry.run(*[leaves[i] for i in entry.capture.input_positions])
        except ValueGuardMiss as miss:
            graph, step = entry.run, miss.step
            known = " or ".join(repr(v) for v in step.values_seen)
            reason = f"Tensor.{step.what}() at {step.where} read {miss.value!r}, compiled for {known}"
            if graph.variants >= max(config.recompile_limit, 1):
                self._warn_limit(reason, stacklevel=4)
                return self._fn(*args, **kwargs)
            if not self._capture_allowed():
                return self._fn(*args, **kwargs)
            self.recompile_reasons.append(reason)
            result, cap = _capture.capture(self._fn, args, kwargs, fullgraph=self._fullgraph)
            graph.add_variant(cap, miss)
            return result

    def _compile_piece(self, step, example_inputs):
        """Compiles one piece of a segmented graph with this function's backend."""
        import json
        cap = _capture.Capture(json.dumps(step.ir), step.constants, list(range(len(example_inputs))), LEAF,
                               [("graph", k) for k in range(len(step.ir["outputs"]))], [])
        compile_capture = getattr(self._backend, "compile_capture", None)
        if compile_capture is not None:
            return compile_capture(cap, example_inputs, runtime_sizes=self.dynamic_sizes)
        gm = cap.graph_module
        gm.meta["tessera_runtime_sizes"] = self.dynamic_sizes
        return self._backend(gm, example_inputs)

    @staticmethod
    def _fold(entry, outs):
        cap = entry.capture
        folded = [outs[x] if kind == "graph" else x for kind, x in cap.out_leaves]
        return unflatten(folded, cap.out_spec)

    def _capture_allowed(self):
        """Whether the stance (set_stance) lets this call capture; raises under fail_on_recompile."""
        stance = _stance.current
        if stance == "fail_on_recompile":
            code = getattr(self._fn, "__code__", None)
            where = (f"filename: '{code.co_filename}', function name: '{code.co_name}', line number: "
                     f"{code.co_firstlineno}") if code else f"function: {self._fn!r}"
            raise RuntimeError(f"Detected recompile when torch.compile stance is 'fail_on_recompile'. {where}")
        if stance == "eager_on_recompile":
            return False
        if stance in ("eager_then_compile", "aot_eager_then_compile") and not self._called_eagerly:
            self._called_eagerly = True
            return False
        return True

    def _compile_and_run(self, key, args, kwargs, leaves, paths):
        if not self._capture_allowed():
            return self._fn(*args, **kwargs)
        if self._dynamic is None and not self.dynamic_sizes and any(
                getattr(leaf, "_dynamo_dynamic_indices", None) for leaf in leaves if isinstance(leaf, tessera.Tensor)):
            self.dynamic_sizes = True  # torch._dynamo.mark_dynamic on an argument
        result, cap = _capture.capture(self._fn, args, kwargs, fullgraph=self._fullgraph)
        self._last_key = key
        if cap.reads:
            self.graph_breaks.extend(cap.reads)
            pieces = _segments.cut(cap)
            if isinstance(pieces, list):  # compiled around the reads
                self._entries[key] = _Entry(SegmentedGraph(cap, pieces, self._compile_piece), cap, False, paths)
            else:
                self._entries[key] = _Entry(None, cap, True, paths)
            return result
        example_inputs = [leaves[i] for i in cap.input_positions]
        compile_capture = getattr(self._backend, "compile_capture", None)
        if compile_capture is not None:  # a plugin backend: no GraphModule needed
            run = compile_capture(cap, example_inputs, runtime_sizes=self.dynamic_sizes)
        else:
            gm = cap.graph_module
            gm.meta["tessera_runtime_sizes"] = self.dynamic_sizes
            run = self._backend(gm, example_inputs)
        if not callable(run):
            raise TypeError(f"ts.compile: backend '{self._backend_name}' returned {type(run).__name__}, expected a "
                            "callable")
        if _cudagraphs.wants_cuda_graphs(self._mode, self._options):
            run = _cudagraphs.wrap(run, cap, example_inputs)
        # A compiled graph that fuses nothing is no faster than the function itself: run that.
        eager = config.eager_when_nothing_fuses and getattr(run, "fuses", True) is False
        entry = self._entries[key] = _Entry(run, cap, eager, paths)
        if not eager:  # a sample of its structure's sizes, for a symbolic fit once sizes are dynamic
            self._families.setdefault(_guards.size_free(key), _symbolic.SizeFamily()).add(leaves, entry)
        if self.dynamic_sizes:
            self._evict_sizes()
        return result

    @property
    def entries(self):
        return list(self._entries.items())

    def reset(self):
        self._entries.clear()
        self._families.clear()
        self._fast_entries.clear()
        self._last_key = None
        self._warned_limit = False
        self.dynamic_sizes = self._dynamic is True
        self.graph_breaks.clear()
        self.recompile_reasons.clear()


class OptimizedModule(tessera.nn.Module):
    """What ts.compile(module) returns: calls go through the compiled module call; the
    original is `_orig_mod` (its parameters are shared, so state_dict keys get that prefix)."""

    def __init__(self, mod, compiled):
        super().__init__()
        self._orig_mod = mod
        self.__dict__["_compiled_call"] = compiled

    def __call__(self, *args, **kwargs):
        return self._compiled_call(*args, **kwargs)

    def forward(self, *args, **kwargs):
        return self._compiled_call(*args, **kwargs)

    def __getattr__(self, name):
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(self._modules["_orig_mod"], name)
