"""Compiler backends, as torch's protocol: backend(gm, example_inputs) -> callable.
Named ones: "eager" and "aot_eager" run the captured graph's generated Python (each operator
through the dispatcher, so autograd records the replay), "inductor" compiles it with the
compiler plugin (libtessera_inductor.so). Custom ones are registered with register_backend
or passed as a callable."""
_BACKENDS = {}


def register_backend(compiler_fn=None, name=None):
    """Registers a backend under `name` (default: the function's name); usable as a decorator."""
    def register(fn):
        key = name or fn.__name__
        if key in _BACKENDS:
            raise ValueError(f"register_backend: a backend named '{key}' is already registered")
        _BACKENDS[key] = fn
        return fn
    return register if compiler_fn is None else register(compiler_fn)


def list_backends(exclude_tags=()):
    """The names of the registered backends."""
    del exclude_tags
    return sorted(_BACKENDS)


def lookup_backend(backend):
    """A registered backend, or a compiler plugin of that name (loaded now)."""
    if callable(backend):
        return backend
    if backend not in _BACKENDS:
        from tessera.compiler import _plugin_backend
        if isinstance(backend, str) and backend.isidentifier() and _plugin_backend.load(backend):
            _BACKENDS[backend] = _plugin_backend.backend_for(backend)
        else:
            raise ValueError(f"ts.compile: unknown backend '{backend}': not registered ({', '.join(list_backends())}) "
                             f"and no compiler plugin libtessera_{backend}.so defines {backend}::compile")
    return _BACKENDS[backend]


@register_backend(name="eager")
def eager(gm, example_inputs):
    del example_inputs
    return gm.forward


@register_backend(name="aot_eager")
def aot_eager(gm, example_inputs):
    """Forward and backward captured together and run operator by operator (one autograd node)."""
    from tessera.compiler import _aot
    from tessera.fx._from_ir import graph_module_from_ir
    capture = _aot.training_capture(gm, example_inputs)
    if capture is None:
        return gm.forward
    return _aot.make_training_callable(capture, example_inputs, lambda ir: graph_module_from_ir(ir, []).forward)


@register_backend(name="inductor")
def inductor(gm, example_inputs):
    from tessera.compiler import _plugin_backend
    return _plugin_backend.compile_graph(gm, example_inputs, "inductor")


def _inductor_capture(capture, example_inputs, runtime_sizes=False):
    from tessera.compiler import _plugin_backend
    return _plugin_backend.compile_capture(capture, example_inputs, "inductor", runtime_sizes)


# ts.compile hands its own captures to the plugin backends here, skipping the GraphModule.
inductor.compile_capture = _inductor_capture
