"""One capture: run the function once with real tensors while the tracer plugin records
every primitive it dispatches, and turn the recording into a GraphModule.

The function's tensor arguments become the graph's inputs; tensors it reads without receiving
them (parameters, buffers, closures) are lifted as constants and referenced by identity.
Reading tensor data into Python (item, tolist, numpy, bool, printing) is a data-dependent value
one graph cannot hold: a graph break, recorded with the source line that read it, and, for
item/bool/int/tolist, a place where _segments cuts the graph."""
import json
import linecache
import sys
import threading

import tessera
from tessera import _C
from tessera.compiler._pytree import flatten
from tessera.compiler._segments import ReadPoint, read_value
from tessera.fx._from_ir import graph_module_from_ir, parse_ir

_local = threading.local()


class GraphBreakError(RuntimeError):
    """A data-dependent read under ts.compile(fullgraph=True)."""


def is_compiling():
    """True while ts.compile is capturing a graph on this thread (torch.compiler.is_compiling)."""
    return getattr(_local, "capturing", False)


def _load_tracer():
    # Autograd first: the tracer records its detach, which must exist when the tracer loads.
    from tessera.autograd import _plugin as autograd_plugin
    autograd_plugin.ensure()
    if not _C.plugins_load_named("tracer", "graph capture (ts.compile)"):
        raise RuntimeError("ts.compile: the tracer plugin (libtessera_tracer.so) is not on the plugin search path "
                           f"{_C.plugins_search_path()}")


def _user_frame():
    """'file:line in function: code' of the innermost frame outside the tessera package."""
    frame = sys._getframe(1)
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        if module != "tessera" and not module.startswith("tessera."):
            line = linecache.getline(frame.f_code.co_filename, frame.f_lineno).strip()
            return f"{frame.f_code.co_filename}:{frame.f_lineno} in {frame.f_code.co_name}: {line}"
        frame = frame.f_back
    return "<unknown location>"


def note_break(reason):
    """Reports a graph break to the capture open on this thread (with fullgraph, an error)."""
    on_read = getattr(_local, "on_read", None)
    if on_read is not None:
        on_read(reason, verbatim=True)


def graph_break():
    """torch._dynamo.graph_break(): cuts the graph being captured here (both pieces are
    compiled); outside a capture it does nothing."""
    on_read = getattr(_local, "on_read", None)
    if on_read is not None:
        on_read("graph_break")


def _dispatch_read(what, tensor=None):
    """The process's one data-read hook (called only on threads that watch, see capture()):
    tells the capture open on this thread."""
    on_read = getattr(_local, "on_read", None)
    if on_read is not None:
        on_read(what, tensor)


def _printing():
    """Whether the read on this thread comes from formatting a tensor (print, str, f-strings):
    its value goes into text Python keeps, so the call is not replayed (it runs eagerly)."""
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_globals.get("__name__") == "tessera._printing":
            return True
        frame = frame.f_back
    return False


_hook_installed = False


def _install_read_hook():
    global _hook_installed
    if not _hook_installed:
        _C._set_data_read_hook(_dispatch_read)
        _hook_installed = True


class Capture:
    """What one capture produced: the graph (IR text and GraphModule), how the function's
    tensor arguments map to graph inputs, and how graph outputs fold into its result."""

    def __init__(self, ir_text, constants, input_positions, out_spec, out_leaves, reads, read_points=None):
        self.ir_text = ir_text
        self.ir = parse_ir(ir_text)
        self.constants = constants
        self.input_positions = input_positions  # leaf index of each graph input
        self.out_spec = out_spec
        # Per output leaf: ("graph", k) for the k-th graph output, ("const", value) otherwise.
        self.out_leaves = out_leaves
        self.reads = reads                      # [(what, where)] data-dependent reads
        # The reads as places to cut the graph (_segments.ReadPoint), when every read is one
        # a replay can repeat (item, tolist); None otherwise.
        self.read_points = read_points
        self._gm = None

    @property
    def graph_module(self):
        if self._gm is None:
            self._gm = graph_module_from_ir(self.ir, self.constants)
            self._gm.meta = {"tessera_ir": self.ir_text, "tessera_constants": self.constants,
                             "tessera_code": self._gm.code, "tessera_capture": self}
        return self._gm


def capture(fn, args, kwargs, fullgraph=False):
    """Runs fn(*args, **kwargs) under capture; returns (its result, Capture)."""
    _load_tracer()
    leaves, _, _ = flatten((args, kwargs))
    input_positions, seen = [], set()
    for i, leaf in enumerate(leaves):
        if isinstance(leaf, tessera.Tensor) and id(leaf) not in seen:
            seen.add(id(leaf))
            input_positions.append(i)
    reads = []
    # Per read, (what, tensor, nodes recorded so far, where, value), or None for a read a
    # replay cannot repeat.
    points = []

    def on_read(what, tensor=None, verbatim=False):
        where = _user_frame()
        if what == "graph_break":  # an explicit cut: no value to read or guard on
            if fullgraph:
                raise GraphBreakError(f"ts.compile(fullgraph=True): graph_break() at {where} would break the graph")
            reads.append(("graph_break()", where))
            points.append((what, None, call("tracer::mark", (), {}), where, None))
            return
        reason = what if verbatim else f"data-dependent Tensor.{what}()"
        if fullgraph:
            raise GraphBreakError(f"ts.compile(fullgraph=True): {reason} at {where} would break the graph")
        reads.append((reason if verbatim else f"Tensor.{what}()", where))
        replayable = not verbatim and tensor is not None and what in ("item", "tolist") and not _printing()
        if replayable:  # the value as Python gets it now (a later write must not change it)
            _C._set_data_read_watch(False)
            try:
                value = read_value(tensor, what)
            finally:
                _C._set_data_read_watch(True)
            points.append((what, tensor, call("tracer::mark", (), {}), where, value))
        else:
            points.append(None)

    call = _C.call_op
    call("tracer::begin", (), {})
    _local.capturing = True
    _local.on_read = on_read
    _install_read_hook()
    _C._set_data_read_watch(True)
    try:
        for i in input_positions:
            call("tracer::input", (leaves[i],), {})
        result = fn(*args, **kwargs)
        out_leaves, _, out_spec = flatten(result)
        graph_outputs, folded = [], []
        for leaf in out_leaves:
            if isinstance(leaf, tessera.Tensor):
                folded.append(("graph", len(graph_outputs)))
                graph_outputs.append(leaf)
            else:
                folded.append(("const", leaf))
        # The tensors read go out too, so the graph names their values (removed again below).
        cut = bool(points) and None not in points
        read_tensors = [p[1] for p in points if p[1] is not None] if cut else []
        text = call("tracer::end", (graph_outputs + read_tensors,), {})
    except BaseException:
        call("tracer::abort", (), {})
        raise
    finally:
        _C._set_data_read_watch(False)
        _local.on_read = None
        _local.capturing = False
    constants = list(call("tracer::constants", (), {}))
    for op in filter(None, call("tracer::data_dependent_reads", (), {}).split(",")):
        reason = f"{op} called inside the captured function" if op.startswith("autograd::") else op
        if fullgraph:
            raise GraphBreakError(f"ts.compile(fullgraph=True): {reason} would break the graph")
        reads.append((reason, "inside an operator"))
        cut = False
    read_points = None
    if read_tensors:
        ir = parse_ir(text)
        read_ids = iter(ir["outputs"][len(graph_outputs):])
        ir["outputs"] = ir["outputs"][:len(graph_outputs)]
        text = json.dumps(ir)
    if cut:
        read_points = [ReadPoint(what, None if t is None else next(read_ids), mark, where, value)
                       for what, t, mark, where, value in points]
    return result, Capture(text, constants, input_positions, out_spec, folded, reads, read_points)
