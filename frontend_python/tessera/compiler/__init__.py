"""ts.compile and ts.compiler: capture a function's operator calls into a graph (the tracer
plugin), compile it with a backend (the inductor plugin by default), and reuse it while the
guards hold. The semantics (guards, recompiles, dynamic sizes, graph breaks) are in the
repository's compiler/README.md."""
import weakref

from tessera.compiler._backends import list_backends, register_backend
from tessera.compiler._capture import GraphBreakError, is_compiling
from tessera.compiler._compiled import CompiledFunction, OptimizedModule, config
from tessera.compiler._explain import ExplainOutput, explain
from tessera.compiler._stance import set_stance

__all__ = ["CompiledFunction", "ExplainOutput", "GraphBreakError", "OptimizedModule", "allow_in_graph",
           "assume_constant_result", "compile", "config", "cudagraph_mark_step_begin", "disable", "explain",
           "is_compiling", "is_dynamo_compiling", "is_exporting", "list_backends", "nested_compile_region",
           "register_backend", "reset", "set_stance", "substitute_in_graph"]

_compiled_functions = weakref.WeakSet()


def compile(model=None, *, fullgraph=False, dynamic=None, backend="inductor", mode=None, options=None,
            disable=False):
    """torch.compile's signature: compiles a function or module; usable as a decorator."""
    if model is None:
        return lambda m: compile(m, fullgraph=fullgraph, dynamic=dynamic, backend=backend, mode=mode,
                                 options=options, disable=disable)
    if mode is not None and options is not None:
        raise RuntimeError("Either mode or options can be specified, but both can't be specified at the same time.")
    if mode not in (None, "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"):
        raise RuntimeError(f"Unrecognized mode={mode}, should be one of: default, reduce-overhead, max-autotune, "
                           "max-autotune-no-cudagraphs")
    if not callable(model):
        raise RuntimeError(f"ts.compile: expected a function or an nn.Module, got {type(model).__name__}")
    if disable or getattr(model, "_tessera_compile_disabled", False):
        return model
    import tessera
    if isinstance(model, tessera.nn.Module):
        compiled = CompiledFunction(model.__call__, backend, mode, dynamic, fullgraph, options, module=model)
        _compiled_functions.add(compiled)
        return OptimizedModule(model, compiled)
    module = getattr(model, "__self__", None)
    compiled = CompiledFunction(model, backend, mode, dynamic, fullgraph, options,
                                module=module if isinstance(module, tessera.nn.Module) else None)
    _compiled_functions.add(compiled)
    return compiled


def disable(fn=None, recursive=True, *, reason=None):
    """torch.compiler.disable: `fn` (or, as a decorator, the decorated function) is never
    compiled: ts.compile returns it as it is. Called inside a compiled function, its operators
    are captured with the caller's (the results are the same; torch would break the graph)."""
    del recursive, reason
    if fn is None:
        return disable
    try:
        fn._tessera_compile_disabled = True
    except AttributeError:  # a builtin or a bound method: wrap it
        import functools
        inner = fn

        @functools.wraps(inner)
        def fn(*args, **kwargs):
            return inner(*args, **kwargs)
        fn._tessera_compile_disabled = True
    return fn


def reset():
    """Forgets every compiled graph (torch.compiler.reset)."""
    for c in _compiled_functions:
        c.reset()


# torch.compiler's decorators that steer dynamo's bytecode tracing. The capture here records
# the operators a call dispatches, whatever Python ran them, so each returns its function as is.
def allow_in_graph(fn):
    """torch.compiler.allow_in_graph: fn's operators are captured (as every function's are)."""
    return fn


def assume_constant_result(fn):
    """torch.compiler.assume_constant_result: a value fn reads from a tensor is guarded on (as
    every read is), so a changed result captures again rather than being used stale."""
    return fn


def substitute_in_graph(original_fn, *, can_constant_fold_through=False, skip_signature_check=False):
    """torch.compiler.substitute_in_graph: the decorated polyfill is returned; the capture
    records what `original_fn` dispatches, so no substitute is needed."""
    del original_fn, can_constant_fold_through, skip_signature_check
    return lambda fn: fn


def nested_compile_region(fn=None, options=None):
    """torch.compiler.nested_compile_region: the region is captured inline with its caller."""
    del options
    return (lambda f: f) if fn is None else fn


def cudagraph_mark_step_begin():
    """torch.compiler.cudagraph_mark_step_begin: nothing to mark. Under mode="reduce-overhead"
    a replayed CUDA graph's outputs are copies, never overwritten by a later replay."""


def is_dynamo_compiling():
    """torch.compiler.is_dynamo_compiling: True while ts.compile captures on this thread."""
    return is_compiling()


def is_exporting():
    """torch.compiler.is_exporting: True while ts.export.export captures on this thread."""
    from tessera.export import _export
    return _export.exporting()
