"""Graph and Node: a list of operator calls in execution order, with their users."""
import operator


class Node:
    """One step of a Graph: op is "placeholder", "get_attr", "call_function" or "output"."""

    def __init__(self, graph, name, op, target, args=(), kwargs=None, meta=None):
        self.graph = graph
        self.name = name
        self.op = op
        self.target = target
        self.args = tuple(args)
        self.kwargs = dict(kwargs or {})
        self.meta = dict(meta or {})
        self.users = {}
        for used in self.all_input_nodes:
            used.users[self] = None

    @property
    def all_input_nodes(self):
        found = []

        def visit(a):
            if isinstance(a, Node):
                if a not in found:
                    found.append(a)
            elif isinstance(a, (list, tuple)):
                for x in a:
                    visit(x)
            elif isinstance(a, dict):
                for x in a.values():
                    visit(x)
        visit(self.args)
        visit(self.kwargs)
        return found

    def replace_all_uses_with(self, replacement):
        """Makes every user of this node use `replacement` instead; returns those users."""
        users = list(self.users)
        for user in users:
            user.args = _map_nodes(user.args, lambda n: replacement if n is self else n)
            user.kwargs = _map_nodes(user.kwargs, lambda n: replacement if n is self else n)
            replacement.users[user] = None
        self.users.clear()
        return users

    def format_target(self):
        if self.op == "call_function":
            return _target_name(self.target)
        return str(self.target)

    def __repr__(self):
        return self.name


def _map_nodes(value, fn):
    if isinstance(value, Node):
        return fn(value)
    if isinstance(value, tuple):
        return tuple(_map_nodes(v, fn) for v in value)
    if isinstance(value, list):
        return [_map_nodes(v, fn) for v in value]
    if isinstance(value, dict):
        return {k: _map_nodes(v, fn) for k, v in value.items()}
    return value


def _target_name(target):
    if target is operator.getitem:
        return "operator.getitem"
    return getattr(target, "_qualified_repr", None) or getattr(target, "__qualname__", None) or repr(target)


class Graph:
    """An ordered list of Nodes."""

    def __init__(self):
        self._nodes = []
        self._names = set()

    @property
    def nodes(self):
        return list(self._nodes)

    def _unique(self, base):
        base = "".join(c if c.isalnum() or c == "_" else "_" for c in base) or "node"
        if base[0].isdigit():
            base = "_" + base
        name, k = base, 1
        while name in self._names:
            name = f"{base}_{k}"
            k += 1
        self._names.add(name)
        return name

    def create_node(self, op, target, args=(), kwargs=None, name=None, meta=None):
        if op not in ("placeholder", "get_attr", "call_function", "output"):
            raise ValueError(f"Graph.create_node: op must be placeholder, get_attr, call_function or output, got {op!r}")
        node = Node(self, self._unique(name or _default_name(op, target)), op, target, args, kwargs, meta)
        self._nodes.append(node)
        return node

    def placeholder(self, name, meta=None):
        return self.create_node("placeholder", name, name=name, meta=meta)

    def get_attr(self, qualified_name, meta=None):
        return self.create_node("get_attr", qualified_name, name=qualified_name, meta=meta)

    def call_function(self, target, args=(), kwargs=None, meta=None):
        return self.create_node("call_function", target, args, kwargs, meta=meta)

    def output(self, result):
        return self.create_node("output", "output", (result,), name="output")

    def erase_node(self, node):
        if node.users:
            raise RuntimeError(f"Graph.erase_node: node '{node.name}' still has users {list(node.users)}")
        for used in node.all_input_nodes:
            used.users.pop(node, None)
        self._nodes.remove(node)
        self._names.discard(node.name)

    def eliminate_dead_code(self):
        """Removes call_function nodes whose results nobody uses (in-place calls are kept)."""
        changed = False
        for node in reversed(self.nodes):
            if node.op == "call_function" and not node.users and not node.meta.get("mutates"):
                self.erase_node(node)
                changed = True
        return changed

    def lint(self):
        """Checks that every node's inputs are defined before it."""
        seen = set()
        for node in self._nodes:
            for used in node.all_input_nodes:
                if used not in seen:
                    raise RuntimeError(f"Graph.lint: node '{node.name}' uses '{used.name}' before it is defined")
            seen.add(node)

    def python_code(self, root_module="self"):
        """The Python source of `forward` for this graph. Targets that are plain Python functions
        (a lambda, a local function) are named _fn0, _fn1, ... in the code and listed in
        `code_globals`, which the code must run with."""
        self.code_globals = {}

        def target_name(target):
            if target is operator.getitem or getattr(target, "_qualified_repr", None):
                return _target_name(target)
            for name, known in self.code_globals.items():
                if known is target:
                    return name
            name = f"_fn{len(self.code_globals)}"
            self.code_globals[name] = target
            return name
        placeholders = [n.name for n in self._nodes if n.op == "placeholder"]
        lines = [f"def forward({', '.join([root_module] + placeholders)}):"]
        for n in self._nodes:
            if n.op == "get_attr":
                lines.append(f"    {n.name} = {root_module}.{n.target}")
            elif n.op == "call_function":
                call_args = [_source(a) for a in n.args] + [f"{k}={_source(v)}" for k, v in n.kwargs.items()]
                if n.target is operator.getitem:
                    lines.append(f"    {n.name} = {_source(n.args[0])}[{_source(n.args[1])}]")
                elif n.meta.get("grad_enabled", True) is False:  # called under no_grad when captured
                    lines.append("    with tessera.no_grad():")
                    lines.append(f"        {n.name} = {target_name(n.target)}({', '.join(call_args)})")
                else:
                    lines.append(f"    {n.name} = {target_name(n.target)}({', '.join(call_args)})")
            elif n.op == "output":
                lines.append(f"    return {_source(n.args[0])}")
        return "\n".join(lines) + "\n"

    def print_tabular(self):
        """Prints opcode, name, target, args and kwargs of every node."""
        rows = [("opcode", "name", "target", "args", "kwargs")]
        for n in self._nodes:
            rows.append((n.op, n.name, n.format_target(), str(_source(n.args)), str(n.kwargs)))
        widths = [max(len(r[i]) for r in rows) for i in range(5)]
        for k, r in enumerate(rows):
            print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
            if k == 0:
                print("  ".join("-" * w for w in widths))

    def __str__(self):
        return self.python_code()


def _default_name(op, target):
    if op == "call_function":
        if target is operator.getitem:
            return "getitem"
        return getattr(target, "__name__", None) or str(target)
    return str(target)


def _source(a):
    """A Python expression for an argument in generated code."""
    if isinstance(a, Node):
        return a.name
    if isinstance(a, tuple):
        inner = ", ".join(_source(x) for x in a)
        return f"({inner},)" if len(a) == 1 else f"({inner})"
    if isinstance(a, list):
        return "[" + ", ".join(_source(x) for x in a) + "]"
    if isinstance(a, float):
        if a != a:
            return "float('nan')"
        if a in (float("inf"), float("-inf")):
            return f"float('{a}')"
    return repr(a)
