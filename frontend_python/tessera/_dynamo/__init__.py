"""The corner of torch._dynamo that programs touch (`torch._dynamo.config.cache_size_limit = 64`,
`torch._dynamo.reset()`, `torch._dynamo.mark_dynamic(x, 0)`), over ts.compile's own
(tessera/compiler): config is ts.compiler.config, reset and explain are ts.compiler's."""
from tessera.compiler import config, disable, explain, is_compiling, list_backends, reset

__all__ = ["config", "disable", "explain", "is_compiling", "list_backends", "mark_dynamic", "maybe_mark_dynamic",
           "reset"]


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
