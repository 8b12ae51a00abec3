"""Backends that are compiler plugins: "inductor" (libtessera_inductor.so, which fuses
element-wise runs into C++ kernels built by the system compiler and keeps every other operator
a dispatcher call) and any plugin that implements the compiler interface (sdk/README.md,
"Compiler plugins": <name>::compile, run, describe, release), named by ts.compile(backend=name).
The captured graph's serialised IR goes to <name>::compile; a graph that needs gradients is
captured again with its backward (_aot) and both halves are compiled. Where it cannot help, the
graph runs as the eager GraphModule:
  - a graph a custom pass edited (its IR no longer describes it);
  - no working C++ compiler: one warning, then eager."""
import json
import warnings
import weakref

from tessera import _C
from tessera.autograd.grad_mode import is_grad_enabled
from tessera.compiler import _aot

_warned = set()


def _warn_once(key, message):
    if key not in _warned:
        _warned.add(key)
        warnings.warn(message, stacklevel=4)


def load(compiler="inductor"):
    """Loads the compiler plugin `compiler`; False when there is none by that name."""
    if f"{compiler}::compile" in _C.op_names():
        return True
    return bool(_C.plugins_load_named(compiler, f"the compiler plugin '{compiler}' (ts.compile's backend)")) and \
        f"{compiler}::compile" in _C.op_names()


def _load(compiler="inductor"):
    if not load(compiler):
        raise RuntimeError(f"the compiler plugin libtessera_{compiler}.so is not on the plugin search path "
                           f"{_C.plugins_search_path()}, or it does not define {compiler}::compile")


def backend_for(compiler):
    """The ts.compile backend that hands graphs to the compiler plugin `compiler`."""
    def backend(gm, example_inputs):
        return compile_graph(gm, example_inputs, compiler)
    backend.__name__ = compiler
    backend.compile_capture = lambda capture, example_inputs, runtime_sizes=False: compile_capture(
        capture, example_inputs, compiler, runtime_sizes)
    return backend


def compile_graph(gm, example_inputs, compiler="inductor"):
    meta = getattr(gm, "meta", None) or {}
    ir, constants = meta.get("tessera_ir"), meta.get("tessera_constants")
    if ir is None or meta.get("tessera_code") not in (None, gm.code):
        return gm.forward
    capture = meta.get("tessera_capture")
    if capture is not None:
        return compile_capture(capture, example_inputs, compiler, meta.get("tessera_runtime_sizes", False),
                               fallback=gm.forward)
    try:
        if is_grad_enabled() and any(t.requires_grad for t in list(example_inputs) + list(constants)):
            return gm.forward  # a graph without its capture that needs gradients: replay it through autograd
        return _compile_ir(ir, list(constants), compiler)
    except RuntimeError as e:
        _warn_failure(compiler, e)
        return gm.forward


def compile_capture(capture, example_inputs, compiler="inductor", runtime_sizes=False, fallback=None):
    """compile_graph for a capture as ts.compile made it, without building its GraphModule
    unless the graph must run eagerly (that costs about as much as the capture itself, which
    matters when dynamic sizes capture each new size). runtime_sizes: the inductor generates
    kernels that read their sizes at run time, so all sizes share one build."""
    options = "runtime_sizes" if runtime_sizes and compiler == "inductor" else ""
    rebuild_options = "runtime_sizes" if compiler == "inductor" else ""  # other sizes: size-generic kernels
    constants = list(capture.constants)
    try:
        if _aot.needs_grad(capture, example_inputs):
            fwd, bwd, layout = _aot.cached_joint_capture(capture, example_inputs)
            run = _aot.training_callable(fwd, bwd, layout, constants,
                                         lambda g: _compile_ir(json.dumps(g), [], compiler, options))
            # For ts.compile's symbolic sizes (_symbolic.py): the graphs, and the same callable
            # from graphs specialised to other sizes (with kernels that read their sizes).
            run.graphs, run.layout = [fwd, bwd], layout
            run.rebuild = lambda texts: _aot.training_callable(
                texts[0], texts[1], layout, constants, lambda text: _compile_ir(text, [], compiler, rebuild_options))
            return run
        run = _compile_ir(capture.ir_text, constants, compiler, options)
        run.graphs = [capture.ir]
        run.rebuild = lambda texts: _compile_ir(texts[0], constants, compiler, rebuild_options)  # serialised graphs
        return run
    except RuntimeError as e:
        _warn_failure(compiler, e)
        return fallback or capture.graph_module.forward


def _warn_failure(compiler, error):
    _warn_once(str(error).split("\n")[0], f"ts.compile: the {compiler} backend could not compile this graph, so it "
                                           f"runs eagerly: {error}")


def _compile_ir(ir_text, constants, compiler, options=""):
    """A callable of the graph's inputs returning its outputs (a list), compiled by the plugin."""
    _load(compiler)
    handle = _C.call_op(f"{compiler}::compile", (ir_text, options), {})
    call, run = _C.call_op, f"{compiler}::run"

    def compiled(*inputs):
        return call(run, (handle, [*inputs, *constants]), {})

    compiled.handle = handle
    compiled.compiler = compiler
    compiled.fuses = _fuses(compiler, handle)
    weakref.finalize(compiled, _C.call_op, f"{compiler}::release", (handle,), {})
    return compiled


def _fuses(compiler, handle):
    """Whether the compiled graph fuses anything (a kernel of two or more nodes, or work folded
    into a library call's epilogue). A graph that does not runs no faster than eager, and eager
    runs the function with less around it, so the caller runs such a function eagerly. Other
    compilers are taken to gain."""
    if compiler != "inductor":
        return True
    fields = dict(f.split("=", 1) for f in describe(handle, compiler).split() if "=" in f)
    return int(fields["fused_nodes"]) > int(fields["kernels"]) or int(fields.get("epilogues", 0)) > 0


def describe(handle, compiler="inductor"):
    """What the compiler made of a graph (for inductor: kernels, fused nodes, dispatcher calls,
    its library)."""
    return _C.call_op(f"{compiler}::describe", (handle,), {})
