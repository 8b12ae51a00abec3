"""The "inductor" backend: hands the captured graph's serialised IR to the compiler plugin
(libtessera_inductor.so), which fuses element-wise runs into C++ kernels built by the system
compiler and keeps every other operator a dispatcher call. A graph that needs gradients is
captured again with its backward (_aot) and both halves are compiled. Where it cannot help, the graph
runs as the eager GraphModule:
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


def _load():
    if not _C.plugins_load_named("inductor", "the compiler (ts.compile's inductor backend)"):
        raise RuntimeError("the compiler plugin libtessera_inductor.so is not on the plugin search path "
                           f"{_C.plugins_search_path()}")


def compile_graph(gm, example_inputs):
    meta = getattr(gm, "meta", None) or {}
    ir, constants = meta.get("tessera_ir"), meta.get("tessera_constants")
    if ir is None or meta.get("tessera_code") not in (None, gm.code):
        return gm.forward
    try:
        capture = _aot.training_capture(gm, example_inputs)
        if capture is not None:
            return _aot.make_training_callable(capture, example_inputs, lambda g: _compile_ir(json.dumps(g), []))
        if is_grad_enabled() and any(t.requires_grad for t in list(example_inputs) + list(constants)):
            return gm.forward  # an edited graph that needs gradients: replay it through autograd
        return _compile_ir(ir, list(constants))
    except RuntimeError as e:
        _warn_once(str(e).split("\n")[0], f"ts.compile: the inductor backend could not compile this graph, so it runs "
                                           f"eagerly: {e}")
        return gm.forward


def _compile_ir(ir_text, constants):
    """A callable of the graph's inputs returning its outputs (a list), compiled by the plugin."""
    _load()
    handle = _C.call_op("inductor::compile", (ir_text, ""), {})
    call = _C.call_op

    def compiled(*inputs):
        return call("inductor::run", (handle, [*inputs, *constants]), {})

    compiled.handle = handle
    weakref.finalize(compiled, _C.call_op, "inductor::release", (handle,), {})
    return compiled


def describe(handle):
    """What the compiler made of a graph: kernels, fused nodes, dispatcher calls, its library."""
    return _C.call_op("inductor::describe", (handle,), {})
