"""ts.compile and ts.compiler: capture a function's operator calls into a graph (the tracer
plugin), compile it with a backend (the inductor plugin by default), and reuse it while the
guards hold. The semantics (guards, recompiles, dynamic sizes, graph breaks) are in the
repository's compiler/README.md."""
import weakref

from tessera.compiler._backends import list_backends, register_backend
from tessera.compiler._capture import GraphBreakError, is_compiling
from tessera.compiler._compiled import CompiledFunction, OptimizedModule, config
from tessera.compiler._explain import ExplainOutput, explain

__all__ = ["CompiledFunction", "ExplainOutput", "GraphBreakError", "OptimizedModule", "compile", "config", "disable",
           "explain", "is_compiling", "list_backends", "register_backend", "reset"]

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
