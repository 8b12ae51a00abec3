"""Symbolic tracing, as torch.fx.symbolic_trace: forward runs once on Proxies, and every call it
makes on them is recorded in a Graph.

Tessera's functions are plain Python callables (no __torch_function__), so while a trace runs the
public callables of tessera, tessera.nn.functional, .special, .linalg, .fft and math are
replaced with wrappers that record a call_function node when an argument holds a Proxy (and
call the original otherwise); names that forward's globals bind to those callables, and names
given to ts.fx.wrap, are patched the same way. Module.__call__ and Module.__getattr__ are
patched too, so leaf modules become call_module nodes and parameters get_attr nodes. Every patch
is undone when the trace ends, also when it raises."""
import builtins
import dis
import functools
import inspect
import math
import operator
import sys
import types

from tessera import _C
from tessera.fx.graph import Graph, Node, _NO_DEFAULT
from tessera.fx.graph_module import GraphModule
from tessera.nn.modules.module import Module

_Tensor = _C.Tensor


class TraceError(ValueError):
    """A traced program used a Proxy where a concrete value is needed (control flow, iteration)."""


class Proxy:
    """Stands for a value while tracing: operations on it record nodes in the tracer's graph."""

    def __init__(self, node, tracer=None):
        self.node = node
        self.tracer = tracer if tracer is not None else GraphAppendingTracer(node.graph)

    def __repr__(self):
        return f"Proxy({self.node.name})"

    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):  # copy, pickle and hasattr probes must not record
            raise AttributeError(name)
        return Attribute(self, name)

    def __call__(self, *args, **kwargs):
        return self.tracer.create_proxy("call_method", "__call__", (self,) + args, kwargs)

    def __getitem__(self, idx):
        return self.tracer.create_proxy("call_function", operator.getitem, (self, idx), {})

    def __iter__(self):
        # `a, b = proxy` unpacks a known number of items; any other iteration needs a length the trace lacks.
        frame = sys._getframe(1)
        for inst in dis.get_instructions(frame.f_code):
            if inst.offset == frame.f_lasti:
                if inst.opname == "UNPACK_SEQUENCE":
                    return iter([self[k] for k in range(inst.argval)])
                break
        raise TraceError("Proxy object cannot be iterated. This can be attempted when the Proxy is used in a "
                         "loop or as a *args or **kwargs function argument.")

    def __bool__(self):
        raise TraceError("symbolically traced variables cannot be used as inputs to control flow")

    def __len__(self):
        raise RuntimeError("'len' is not supported in symbolic tracing by default. If you want this call to be "
                           "recorded, please call tessera.fx.wrap('len') at module scope")

    def keys(self):
        raise TraceError("Proxy object cannot be used as a mapping (** unpacking) during symbolic tracing")

    __hash__ = object.__hash__


def _binary(op):
    def forward(self, other):
        return self.tracer.create_proxy("call_function", op, (self, other), {})

    def reflected(self, other):
        return self.tracer.create_proxy("call_function", op, (other, self), {})
    return forward, reflected


for _name, _op in [("add", operator.add), ("sub", operator.sub), ("mul", operator.mul), ("truediv", operator.truediv),
                   ("floordiv", operator.floordiv), ("mod", operator.mod), ("pow", operator.pow),
                   ("matmul", operator.matmul), ("lshift", operator.lshift), ("rshift", operator.rshift),
                   ("and", operator.and_), ("or", operator.or_), ("xor", operator.xor)]:
    _f, _r = _binary(_op)
    setattr(Proxy, f"__{_name}__", _f)
    setattr(Proxy, f"__r{_name}__", _r)
for _name, _op in [("eq", operator.eq), ("ne", operator.ne), ("lt", operator.lt), ("le", operator.le),
                   ("gt", operator.gt), ("ge", operator.ge)]:
    setattr(Proxy, f"__{_name}__", _binary(_op)[0])
for _name, _op in [("neg", operator.neg), ("pos", operator.pos), ("invert", operator.invert), ("abs", operator.abs)]:
    setattr(Proxy, f"__{_name}__", (lambda op: lambda self: self.tracer.create_proxy("call_function", op, (self,),
                                                                                    {}))(_op))


class Attribute(Proxy):
    """proxy.name: a call_method node when called, else (on first use) a getattr call_function node."""

    def __init__(self, root, attr):
        self.root, self.attr, self.tracer = root, attr, root.tracer
        self._node = None

    @property
    def node(self):
        if self._node is None:  # made lazily: x.view(...) must not leave an unused getattr node behind
            self._node = self.tracer.create_proxy("call_function", builtins.getattr, (self.root, self.attr), {}).node
        return self._node

    def __call__(self, *args, **kwargs):
        return self.tracer.create_proxy("call_method", self.attr, (self.root,) + args, kwargs)


def _holds_proxy(a):
    if isinstance(a, Proxy):
        return True
    if isinstance(a, (list, tuple)):
        return builtins.any(_holds_proxy(x) for x in a)
    if isinstance(a, dict):
        return builtins.any(_holds_proxy(x) for x in a.values())
    if isinstance(a, slice):
        return _holds_proxy((a.start, a.stop, a.step))
    return False


def _find_tracer(a):
    if isinstance(a, Proxy):
        return a.tracer
    items = a.values() if isinstance(a, dict) else a if isinstance(a, (list, tuple)) else ()
    for x in items:
        t = _find_tracer(x)
        if t is not None:
            return t
    return None


def _recording(fn):
    """fn, recording a call_function node when an argument holds a Proxy."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if _holds_proxy(args) or _holds_proxy(kwargs):
            return _find_tracer((args, kwargs)).create_proxy("call_function", fn, args, kwargs)
        return fn(*args, **kwargs)
    wrapper._fx_original = fn
    return wrapper


# (globals dict, name) pairs that ts.fx.wrap registered.
_wrapped_names = []


def wrap(fn_or_name):
    """At module scope: calls of this global function (or a name in the caller's globals) are
    recorded as call_function leaves rather than traced through. Returns its argument."""
    if callable(fn_or_name):
        name = fn_or_name.__name__
        if name.startswith("<"):
            raise NotImplementedError("tessera.fx.wrap: a lambda has no global name to patch")
    elif isinstance(fn_or_name, str):
        name = fn_or_name
    else:
        raise TypeError("tessera.fx.wrap: expected a function or the name of one")
    caller = sys._getframe(1)
    if caller.f_code.co_name != "<module>":
        raise NotImplementedError("tessera.fx.wrap must be called at the top level of a module")
    _wrapped_names.append((caller.f_globals, name))
    return fn_or_name


def _patch_targets():
    """The namespaces whose public callables a trace intercepts."""
    import tessera
    import tessera.nn.functional
    mods = [tessera, tessera.nn.functional, math]
    for sub in ("special", "linalg", "fft"):
        m = getattr(tessera, sub, None)
        if isinstance(m, types.ModuleType):
            mods.append(m)
    return mods


def _interceptable(v):
    return isinstance(v, (types.FunctionType, types.BuiltinFunctionType)) and not getattr(v, "_fx_original", None)


class _Patcher:
    """Sets attributes and dict entries, and puts every one back on exit (also after an error)."""

    def __init__(self):
        self._undo = []

    def setattr(self, obj, name, value):
        had = name in obj.__dict__
        self._undo.append((obj, name, obj.__dict__.get(name), had, True))
        setattr(obj, name, value)

    def setitem(self, d, name, value):
        self._undo.append((d, name, d.get(name), name in d, False))
        d[name] = value

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        while self._undo:
            obj, name, old, had, is_attr = self._undo.pop()
            if is_attr:
                if had:
                    setattr(obj, name, old)
                else:
                    delattr(obj, name)
            elif had:
                obj[name] = old
            else:
                obj.pop(name, None)
        return False


class Tracer:
    """Records a module's forward (or a function) as a Graph. Subclasses override is_leaf_module to
    choose which modules stay call_module nodes."""

    def __init__(self, autowrap_modules=(math,), autowrap_functions=()):
        self.autowrap_modules = tuple(autowrap_modules)
        self.autowrap_functions = tuple(autowrap_functions)
        self.graph = None
        self.root = None

    # ---- hooks a subclass may override
    def is_leaf_module(self, m, module_qualified_name):
        """tessera.nn's own modules (other than Sequential) are leaves; user modules are traced through."""
        from tessera.nn.modules.container import Sequential
        return type(m).__module__.startswith("tessera.nn") and not isinstance(m, Sequential)

    def path_of_module(self, mod):
        name = self._module_paths.get(id(mod))
        if name is None:
            raise NameError(f"module {type(mod).__name__} is not installed as a submodule of the traced root")
        return name

    def call_module(self, m, forward, args, kwargs):
        """A call of submodule m: a call_module node for a leaf, else its forward traced inline."""
        qualname = self.path_of_module(m)
        if not self.is_leaf_module(m, qualname):
            return forward(*args, **kwargs)
        return self.create_proxy("call_module", qualname, args, kwargs)

    def getattr(self, attr, attr_val, parameter_proxy_cache):
        """module.attr read during tracing: parameters and buffers of the root become get_attr nodes."""
        if isinstance(attr_val, _Tensor):
            qualname = self._tensor_paths.get(id(attr_val))
            if qualname is not None:
                if qualname not in parameter_proxy_cache:
                    parameter_proxy_cache[qualname] = self.create_proxy("get_attr", qualname, (), {})
                return parameter_proxy_cache[qualname]
        return attr_val

    def create_arg(self, a):
        """a as a node argument: Proxies become their nodes, tensors get_attr nodes, containers are
        rebuilt; other values must be constants generated code can write."""
        if isinstance(a, Proxy):
            return a.node
        if isinstance(a, Node):
            return a
        if isinstance(a, tuple):
            items = [self.create_arg(x) for x in a]
            return type(a)(*items) if hasattr(a, "_fields") else tuple(items)
        if isinstance(a, list):
            return [self.create_arg(x) for x in a]
        if isinstance(a, dict):
            return {k: self.create_arg(v) for k, v in a.items()}
        if isinstance(a, slice):
            return slice(self.create_arg(a.start), self.create_arg(a.stop), self.create_arg(a.step))
        if isinstance(a, _Tensor):
            qualname = self._tensor_paths.get(id(a))
            if qualname is None:  # a tensor made during the trace: kept on the root as a constant
                k = 0
                while hasattr(self.root, f"_tensor_constant{k}"):
                    k += 1
                qualname = f"_tensor_constant{k}"
                setattr(self.root, qualname, a)
                self._tensor_paths[id(a)] = qualname
            return self.create_node("get_attr", qualname, (), {})
        if isinstance(a, Module):
            raise RuntimeError(f"tessera.fx: a module ({type(a).__name__}) cannot be an argument of a traced call")
        return a

    def create_node(self, kind, target, args, kwargs, name=None, type_expr=None):
        return self.graph.create_node(kind, target, args, kwargs, name=name, type_expr=type_expr)

    def create_proxy(self, kind, target, args, kwargs, name=None, type_expr=None, proxy_factory_fn=None):
        node = self.create_node(kind, target, self.create_arg(tuple(args)), self.create_arg(dict(kwargs or {})),
                                name, type_expr)
        return self.proxy(node) if proxy_factory_fn is None else proxy_factory_fn(node)

    def proxy(self, node):
        return Proxy(node, self)

    # ---- tracing
    def trace(self, root, concrete_args=None):
        """The Graph of root's forward (root a Module) or of root (a function)."""
        if isinstance(root, GraphModule):  # retracing: its generated forward has the real signature
            self.root = root
            fn = root._forward
            fn_globals = {}
        elif isinstance(root, Module):
            self.root = root
            fn = type(root).forward
            fn_globals = getattr(fn, "__globals__", {})
        elif callable(root):
            self.root = Module()
            fn = root
            fn_globals = getattr(root, "__globals__", {})
        else:
            raise TypeError(f"tessera.fx.symbolic_trace: expected a Module or a function, got {type(root).__name__}")
        self.graph = Graph(tracer_cls=type(self))
        self._module_paths = {id(m): name for name, m in self.root.named_modules(remove_duplicate=False)}
        self._tensor_paths = {}
        for name, t in self.root.named_buffers(remove_duplicate=False):
            self._tensor_paths.setdefault(id(t), name)
        for name, p in self.root.named_parameters(remove_duplicate=False):
            self._tensor_paths.setdefault(id(p), name)
        args, kwargs = self._placeholders(fn, isinstance(root, Module), dict(concrete_args or {}))
        with _Patcher() as patcher:
            self._patch(patcher, fn_globals)
            result = fn(*args, **kwargs)
        self.create_node("output", "output", (self.create_arg(result),), {})
        return self.graph

    def _placeholders(self, fn, is_method, concrete):
        sig = inspect.signature(fn)
        params = list(sig.parameters.values())
        if is_method:
            params = params[1:]
        unknown = set(concrete) - {p.name for p in params}
        if unknown:
            raise TypeError(f"tessera.fx.symbolic_trace: concrete_args names {sorted(unknown)}, which forward lacks")
        args, kwargs = [self.root] if is_method else [], {}
        for p in params:
            default = _NO_DEFAULT if p.default is inspect.Parameter.empty else p.default
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                if p.name in concrete:
                    raise NotImplementedError("tessera.fx.symbolic_trace: concrete_args for *args or **kwargs")
                stars = "*" if p.kind == p.VAR_POSITIONAL else "**"
                node = self.graph.placeholder(stars + p.name)
                if p.kind == p.VAR_POSITIONAL:  # torch.fx passes one Proxy standing for the whole tuple
                    args.append(self.proxy(node))
                continue
            meta = {"kw_only": True} if p.kind == p.KEYWORD_ONLY else None
            if p.name in concrete:
                # specialised: the value itself runs through forward; the parameter stays in the signature
                self.graph.placeholder(p.name, default_value=default, meta=meta)
                value = concrete[p.name]
            else:
                value = self.proxy(self.graph.placeholder(p.name, default_value=default, meta=meta))
            if p.kind == p.KEYWORD_ONLY:
                kwargs[p.name] = value
            else:
                args.append(value)
        return args, kwargs

    def _patch(self, patcher, fn_globals):
        tracer = self
        originals = {}
        for mod in _patch_targets():
            if mod is math and math not in self.autowrap_modules:
                continue
            for name, v in list(vars(mod).items()):
                if not name.startswith("_") and _interceptable(v):
                    w = originals.get(id(v))
                    if w is None:
                        w = originals[id(v)] = _recording(v)
                    patcher.setattr(mod, name, w)
        for f in self.autowrap_functions:
            originals.setdefault(id(f), _recording(f))
        # names bound by `from tessera import relu` in the modules whose code the trace runs
        globals_seen = {id(fn_globals): fn_globals} if fn_globals else {}
        for m in self.root.modules():
            fwd = getattr(type(m), "forward", None)
            g = getattr(fwd, "__globals__", None)
            if g is not None and not type(m).__module__.startswith("tessera."):
                globals_seen[id(g)] = g
        for g in globals_seen.values():
            for name, v in list(g.items()):
                if id(v) in originals and originals[id(v)] is not v:
                    patcher.setitem(g, name, originals[id(v)])
        for g, name in _wrapped_names:
            v = g.get(name, getattr(builtins, name, None))
            if v is None:
                raise NameError(f"tessera.fx.wrap: '{name}' is not defined where wrap was called")
            patcher.setitem(g, name, _recording(v))

        orig_call = Module.__call__
        orig_getattr = Module.__getattr__
        cache = {}

        def module_call(mod, *args, **kwargs):
            return tracer.call_module(mod, lambda *a, **k: orig_call(mod, *a, **k), args, kwargs)

        def module_getattr(mod, name):
            return tracer.getattr(name, orig_getattr(mod, name), cache)
        patcher.setattr(Module, "__call__", module_call)
        patcher.setattr(Module, "__getattr__", module_getattr)


class GraphAppendingTracer(Tracer):
    """The tracer of a Proxy made on a bare node: records into that node's graph."""

    def __init__(self, graph):
        super().__init__()
        self.graph = graph
        self.root = Module()
        self._tensor_paths = {}
        self._module_paths = {}


def symbolic_trace(root, concrete_args=None):
    """A GraphModule recording root's forward (root a Module) or root itself (a function)."""
    tracer = Tracer()
    graph = tracer.trace(root, concrete_args)
    name = type(root).__name__ if isinstance(root, Module) else root.__name__
    return GraphModule(tracer.root, graph, name)
