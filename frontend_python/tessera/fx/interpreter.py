"""Interpreter and Transformer, as torch.fx's: run a GraphModule node by node through methods a
subclass can override, or rebuild its graph through them."""
from tessera.fx.graph import Graph, _NO_DEFAULT, _map_nodes
from tessera.fx.graph_module import GraphModule, _get_qualified
from tessera.fx._symbolic_trace import Proxy, Tracer


class Interpreter:
    """Runs module's graph: run_node dispatches to placeholder, get_attr, call_function,
    call_method, call_module and output, each called with (target, args, kwargs)."""

    def __init__(self, module, garbage_collect_values=True, graph=None):
        self.module = module
        self.graph = graph if graph is not None else module.graph
        self.garbage_collect_values = garbage_collect_values
        self.env = {}
        # after which node each value is last read, so run() can drop it there
        self.user_to_last_uses = {}
        seen = set()
        for node in reversed(self.graph.nodes):
            for used in node.all_input_nodes:
                if used not in seen:
                    seen.add(used)
                    self.user_to_last_uses.setdefault(node, []).append(used)

    def run(self, *args, initial_env=None, enable_io_processing=True):
        self.env = dict(initial_env or {})
        self.args_iter = iter(args)
        for node in self.graph.nodes:
            if node in self.env:
                continue
            self.env[node] = self.run_node(node)
            if self.garbage_collect_values:
                for used in self.user_to_last_uses.get(node, ()):
                    self.env.pop(used, None)
            if node.op == "output":
                return self.env[node]
        return None

    def run_node(self, n):
        args, kwargs = self.fetch_args_kwargs_from_env(n)
        return getattr(self, n.op)(n.target, args, kwargs)

    def fetch_args_kwargs_from_env(self, n):
        return self.map_nodes_to_values(n.args, n), self.map_nodes_to_values(n.kwargs, n)

    def map_nodes_to_values(self, args, n):
        def value(node):
            if node not in self.env:
                raise RuntimeError(f"Interpreter: node '{n.name}' reads '{node.name}', which has no value yet")
            return self.env[node]
        return _map_nodes(args, value)

    def fetch_attr(self, target):
        try:
            return _get_qualified(self.module, target)
        except AttributeError:
            raise RuntimeError(f"Interpreter: the module has no attribute '{target}'") from None

    # ---- one method per op
    def placeholder(self, target, args, kwargs):
        if target.startswith("**"):
            return {}
        if target.startswith("*"):
            return tuple(self.args_iter)
        try:
            return next(self.args_iter)
        except StopIteration:
            if args:
                return args[0]
            raise RuntimeError(f"Interpreter: expected a value for the argument '{target}'") from None

    def get_attr(self, target, args, kwargs):
        return self.fetch_attr(target)

    def call_function(self, target, args, kwargs):
        return target(*args, **kwargs)

    def call_method(self, target, args, kwargs):
        self_obj, *rest = args
        return getattr(self_obj, target)(*rest, **kwargs)

    def call_module(self, target, args, kwargs):
        return self.fetch_attr(target)(*args, **kwargs)

    def output(self, target, args, kwargs):
        return args[0]


class _TransformerTracer(Tracer):
    """Records into the Transformer's new graph; every module call stays one call_module node."""

    def __init__(self, graph, root):
        super().__init__()
        self.graph = graph
        self.root = root
        self._module_paths = {}
        self._tensor_paths = {}

    def is_leaf_module(self, m, qualname):
        return True


class Transformer(Interpreter):
    """Rebuilds module's graph: each method returns a Proxy in a new graph, so an override can
    record something else (`return super().call_function(ts.gelu, args, kwargs)`) or compute on
    the Proxies. transform() returns the new GraphModule."""

    def __init__(self, module):
        super().__init__(module, garbage_collect_values=False)
        self.new_graph = Graph()
        self.tracer = _TransformerTracer(self.new_graph, module)

    def placeholder(self, target, args, kwargs):
        default = args[0] if args else _NO_DEFAULT
        return Proxy(self.new_graph.placeholder(target, default_value=default), self.tracer)

    def get_attr(self, target, args, kwargs):
        return self.tracer.create_proxy("get_attr", target, args, kwargs)

    def call_function(self, target, args, kwargs):
        return self.tracer.create_proxy("call_function", target, args, kwargs)

    def call_method(self, target, args, kwargs):
        return self.tracer.create_proxy("call_method", target, args, kwargs)

    def call_module(self, target, args, kwargs):
        return self.tracer.create_proxy("call_module", target, args, kwargs)

    def transform(self):
        result = self.run()
        self.new_graph.output(self.tracer.create_arg(result))
        return GraphModule(self.module, self.new_graph)
