"""The corner of torch._dynamo that programs touch (`torch._dynamo.config.cache_size_limit = 64`,
`torch._dynamo.reset()`, `torch._dynamo.mark_dynamic(x, 0)`), over ts.compile's own
(tessera/compiler): config is ts.compiler.config, reset and explain are ts.compiler's."""
from tessera.compiler import (allow_in_graph, assume_constant_result, config, disable, explain, is_compiling,
                              list_backends, register_backend, reset, set_stance, substitute_in_graph)
from tessera.compiler._capture import graph_break

__all__ = ["allow_in_graph", "assume_constant_result", "config", "disable", "explain", "graph_break",
           "is_compiling", "is_dynamo_supported", "is_inductor_supported", "list_backends", "mark_dynamic",
           "mark_static", "mark_static_address", "maybe_mark_dynamic", "optimize", "register_backend", "reset", "run",
           "set_stance", "substitute_in_graph"]


def is_dynamo_supported():
    return True


def is_inductor_supported():
    """Whether the inductor can build kernels here: a C++ compiler on PATH (CUDA C needs NVRTC)."""
    import shutil
    return any(shutil.which(c) for c in ("c++", "g++", "clang++"))


def optimize(backend="inductor", *, nopython=False, dynamic=None, disable=False):  # noqa: A002
    """torch._dynamo.optimize(backend): a decorator compiling with that backend (nopython: fullgraph)."""
    from tessera.compiler import compile as ts_compile
    return lambda fn: ts_compile(fn, backend=backend, fullgraph=nopython, dynamic=dynamic, disable=disable)


def run(fn=None):
    """torch._dynamo.run: the function, run as it is (no new captures)."""
    return fn


def mark_static(t, index=None):
    """torch._dynamo.mark_static: the dims stay static; removes a mark_dynamic of them."""
    marked = set(getattr(t, "_dynamo_dynamic_indices", set()))
    if index is None:
        marked.clear()
    else:
        marked.difference_update(i % t.dim() for i in ([index] if isinstance(index, int) else index))
    t._dynamo_dynamic_indices = marked


def mark_static_address(t, guard=True):
    """torch._dynamo.mark_static_address (for CUDA graphs' static inputs): nothing to do here."""
    del t, guard


def mark_dynamic(t, index, *, min=None, max=None):  # noqa: A002 - torch's names
    """Marks dim(s) `index` of `t` dynamic: a compiled function called with it compiles with
    dynamic sizes from its first call (kernels that read their sizes at run time), as
    ts.compile(dynamic=True) does. min/max are accepted as torch's and not checked."""
    del min, max
    indices = [index] if isinstance(index, int) else list(index)
    for i in indices:
        if not -t.dim() <= i < t.dim():
            raise IndexError(f"mark_dynamic: dim {i} is out of range for a tensor of {t.dim()} dims")
    marked = set(getattr(t, "_dynamo_dynamic_indices", set()))
    marked.update(i % t.dim() for i in indices)
    t._dynamo_dynamic_indices = marked


def maybe_mark_dynamic(t, index):
    """As mark_dynamic (torch only hints with it; here it is the same mark)."""
    mark_dynamic(t, index)
