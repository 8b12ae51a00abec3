"""tessera.autograd: reverse-mode automatic differentiation, as torch.autograd.

The engine is a plugin (libtessera_autograd.so) that records operators on tensors requiring
grad and runs their derivative formulas backward; it loads on first use.
"""
from tessera import _C
from tessera.autograd import _plugin
from tessera.autograd.function import Function, FunctionCtx
from tessera.autograd.grad_mode import enable_grad, inference_mode, is_grad_enabled, no_grad, set_grad_enabled
from tessera.autograd.gradcheck import gradcheck, gradgradcheck
from tessera.autograd import graph  # noqa: E402  (saved_tensors_hooks)

Tensor = _C.Tensor


def _tensors(x, what):
    if isinstance(x, Tensor):
        return [x]
    x = list(x)
    for i, t in enumerate(x):
        if not isinstance(t, Tensor):
            raise TypeError(f"{what}: element {i} is {type(t).__name__}, expected a Tensor")
    return x


def _grads(g, n, what):
    if g is None:
        return [None] * n
    if isinstance(g, Tensor):
        g = [g]
    g = list(g)
    if len(g) != n:
        raise RuntimeError(f"{what}: got {len(g)} gradients for {n} tensors")
    return g


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, inputs=None):
    """Accumulates d(tensors)/d(leaf) into every leaf's .grad (only `inputs`' when given)."""
    tensors = _tensors(tensors, "backward")
    grads = _grads(grad_tensors, len(tensors), "backward")
    if retain_graph is None:
        retain_graph = create_graph
    inputs = None if inputs is None else _tensors(inputs, "backward(inputs=...)")
    _plugin.call("backward", (tensors, grads, bool(retain_graph), bool(create_graph), inputs))


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False, allow_unused=None,
         materialize_grads=False):
    """The gradients of `outputs` with respect to `inputs` (a tuple), without touching .grad."""
    single = isinstance(inputs, Tensor)
    outputs = _tensors(outputs, "grad(outputs)")
    inputs = _tensors(inputs, "grad(inputs)")
    grads = _grads(grad_outputs, len(outputs), "grad")
    if retain_graph is None:
        retain_graph = create_graph
    if allow_unused is None:
        allow_unused = materialize_grads
    result = _plugin.call("grad", (outputs, inputs, grads, bool(retain_graph), bool(create_graph), bool(allow_unused)))
    if materialize_grads:
        result = [g if g is not None else x.new_zeros(x.shape) for g, x in zip(result, inputs)]
    del single
    return tuple(result)


def set_detect_anomaly(mode):
    """Checks every backward output for NaN and names the forward operator that produced it."""
    return _plugin.call("set_anomaly_enabled", (bool(mode),))


class detect_anomaly:
    def __init__(self, check_nan=True):
        self.check_nan = check_nan

    def __enter__(self):
        self._prev = set_detect_anomaly(self.check_nan)
        return self

    def __exit__(self, *exc):
        set_detect_anomaly(self._prev)
        return False


__all__ = ["Function", "FunctionCtx", "backward", "detect_anomaly", "enable_grad", "grad", "gradcheck",
           "gradgradcheck", "inference_mode", "is_grad_enabled", "no_grad", "set_detect_anomaly",
           "set_grad_enabled"]


def __getattr__(name):
    # tessera.autograd.functional and .forward_ad load on first use (it imports tessera.func's vmap only when vectorizing).
    if name in ("functional", "forward_ad"):
        import importlib
        return importlib.import_module("tessera.autograd." + name)
    raise AttributeError(f"module 'tessera.autograd' has no attribute '{name}'")


class _ExecutionEngine:
    """torch.autograd.Variable._execution_engine: queue_callback(fn) runs fn() once the backward
    pass that is running (the caller is one of its hooks) has finished."""

    def queue_callback(self, callback):
        if not callable(callback):
            raise TypeError("queue_callback expects a callable")
        _plugin.call("queue_callback", (_C.register_callback(lambda: callback()),))


class Variable:
    """torch.autograd.Variable survives in code only for its execution engine; tensors are Variables."""
    _execution_engine = _ExecutionEngine()
