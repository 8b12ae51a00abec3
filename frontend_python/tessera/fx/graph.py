"""Graph and Node: a list of operator calls in execution order, with their users.

The ops are torch.fx's: placeholder, get_attr, call_function, call_method, call_module and
output. Graphs captured by ts.compile use placeholder/get_attr/call_function only; graphs from
ts.fx.symbolic_trace use all six."""
import builtins
import contextlib
import keyword
import math
import operator
import sys

_OPS = ("placeholder", "get_attr", "call_function", "call_method", "call_module", "output")
_NO_DEFAULT = object()  # a placeholder without a default value

# Names the generated code reads, or Python's own: a node never takes them, so code stays valid.
_RESERVED = set(keyword.kwlist) | set(dir(builtins)) | {"self", "tessera", "operator", "math", "device", "inf",
                                                        "nan", "torch"}

# Operators the generated code writes as Python expressions (torch.fx's code does the same).
_BINARY = {operator.add: "+", operator.sub: "-", operator.mul: "*", operator.truediv: "/", operator.floordiv: "//",
           operator.mod: "%", operator.pow: "**", operator.matmul: "@", operator.lshift: "<<",
           operator.rshift: ">>", operator.and_: "&", operator.or_: "|", operator.xor: "^", operator.eq: "==",
           operator.ne: "!=", operator.lt: "<", operator.le: "<=", operator.gt: ">", operator.ge: ">="}
_UNARY = {operator.neg: "-", operator.pos: "+", operator.invert: "~"}
# Public namespaces searched for a readable name of a call_function target, in this order.
_PUBLIC_MODULES = ("tessera", "tessera.nn.functional", "tessera.special", "tessera.linalg", "tessera.fft", "math",
                   "operator")


class Node:
    """One step of a Graph: op is one of placeholder, get_attr, call_function, call_method,
    call_module or output. Setting args or kwargs keeps the users of the nodes they name right."""

    def __init__(self, graph, name, op, target, args=(), kwargs=None, meta=None):
        self.graph = graph
        self.name = name
        self.op = op
        self.target = target
        self.meta = dict(meta or {})
        self.users = {}
        self._args, self._kwargs = (), {}
        self._set_inputs(tuple(args), dict(kwargs or {}))

    def _set_inputs(self, args, kwargs):
        for used in self.all_input_nodes:
            used.users.pop(self, None)
        self._args, self._kwargs = args, kwargs
        for used in self.all_input_nodes:
            used.users[self] = None

    @property
    def args(self):
        return self._args

    @args.setter
    def args(self, value):
        self._set_inputs(tuple(value), self._kwargs)

    @property
    def kwargs(self):
        return self._kwargs

    @kwargs.setter
    def kwargs(self, value):
        self._set_inputs(self._args, dict(value))

    def update_arg(self, idx, arg):
        args = list(self._args)
        args[idx] = arg
        self.args = args

    def update_kwarg(self, key, arg):
        self.kwargs = {**self._kwargs, key: arg}

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
            elif isinstance(a, slice):
                visit((a.start, a.stop, a.step))
        visit(self._args)
        visit(self._kwargs)
        return found

    @property
    def next(self):
        nodes = self.graph._nodes
        k = nodes.index(self)
        return nodes[k + 1] if k + 1 < len(nodes) else None

    @property
    def prev(self):
        nodes = self.graph._nodes
        k = nodes.index(self)
        return nodes[k - 1] if k > 0 else None

    def replace_all_uses_with(self, replacement, delete_user_cb=lambda user: True, propagate_meta=False):
        """Makes every user of this node (that delete_user_cb accepts) use `replacement` instead;
        returns those users."""
        if propagate_meta:
            for k, v in self.meta.items():
                replacement.meta.setdefault(k, v)
        users = [u for u in self.users if delete_user_cb(u)]
        for user in users:
            user.replace_input_with(self, replacement)
        return users

    def replace_input_with(self, old, new):
        swap = lambda n: new if n is old else n  # noqa: E731
        self._set_inputs(_map_nodes(self._args, swap), _map_nodes(self._kwargs, swap))

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
        mapped = tuple(_map_nodes(v, fn) for v in value)
        return type(value)(*mapped) if hasattr(value, "_fields") else mapped  # namedtuples keep their type
    if isinstance(value, list):
        return [_map_nodes(v, fn) for v in value]
    if isinstance(value, dict):
        return {k: _map_nodes(v, fn) for k, v in value.items()}
    if isinstance(value, slice):
        return slice(_map_nodes(value.start, fn), _map_nodes(value.stop, fn), _map_nodes(value.step, fn))
    return value


def map_arg(value, fn):
    """Applies fn to every Node inside value (tuples, lists, dicts and slices are rebuilt)."""
    return _map_nodes(value, fn)


def _public_name(target):
    """'tessera.relu', 'tessera.nn.functional.gelu', 'math.sqrt', ...: a dotted name under which
    generated code finds target, or None."""
    name = getattr(target, "__name__", None)
    if not isinstance(name, str) or name.startswith("<"):
        return None
    own = getattr(target, "__module__", None)
    candidates = list(_PUBLIC_MODULES)
    if own in candidates:  # F.relu should read tessera.nn.functional.relu even if tessera.relu is the same
        candidates.remove(own)
        candidates.insert(0, own)
    for mod_name in candidates:
        mod = sys.modules.get(mod_name)
        if mod is not None and getattr(mod, name, None) is target:
            return f"{mod_name}.{name}"
    if own == "builtins" and getattr(builtins, name, None) is target:
        return name
    return None


def _target_name(target):
    if target is operator.getitem:
        return "operator.getitem"
    if isinstance(target, str):
        return target
    return (getattr(target, "_qualified_repr", None) or _public_name(target) or getattr(target, "__qualname__", None)
            or repr(target))


def _attr_expr(base, qualname):
    """self.a.b, or getattr(self.layers, "0") where a part is no identifier."""
    expr = base
    for part in qualname.split("."):
        expr = f"{expr}.{part}" if part.isidentifier() and not keyword.iskeyword(part) else f"getattr({expr}, {part!r})"
    return expr


class Graph:
    """An ordered list of Nodes."""

    def __init__(self, owning_module=None, tracer_cls=None):
        self._nodes = []
        self._names = set()
        self._insert = None  # where create_node puts a node: None (the end) or ("before"|"after", node)
        self.owning_module = owning_module
        self.code_globals = {}

    @property
    def nodes(self):
        return list(self._nodes)

    def find_nodes(self, *, op, target=None):
        return [n for n in self._nodes if n.op == op and (target is None or n.target == target)]

    def _unique(self, base):
        base = "".join(c if c.isalnum() or c == "_" else "_" for c in base) or "node"
        if base[0].isdigit():
            base = "_" + base
        name, k = base, 1
        while name in self._names or name in _RESERVED or (name.startswith("_fn") and name[3:].isdigit()):
            name = f"{base}_{k}"
            k += 1
        self._names.add(name)
        return name

    def create_node(self, op, target, args=(), kwargs=None, name=None, type_expr=None, meta=None):
        if op not in _OPS:
            raise ValueError(f"Graph.create_node: op must be one of {', '.join(_OPS)}, got {op!r}")
        node = Node(self, self._unique(name or _default_name(op, target)), op, target, args, kwargs, meta)
        if type_expr is not None:
            node.type = type_expr
        if self._insert is None:
            self._nodes.append(node)
        else:
            where, anchor = self._insert
            k = self._nodes.index(anchor)
            self._nodes.insert(k if where == "before" else k + 1, node)
            if where == "after":  # the next node goes after this one, so nodes keep the order they were made in
                self._insert = ("after", node)
        return node

    @contextlib.contextmanager
    def _inserting(self, where, node):
        saved = self._insert
        self._insert = None if node is None else (where, node)
        try:
            yield
        finally:
            self._insert = saved

    def inserting_before(self, node=None):
        """`with graph.inserting_before(n):` new nodes go before n (at the start when n is None)."""
        if node is None:
            return self._inserting("before", self._nodes[0]) if self._nodes else self._inserting("before", None)
        return self._inserting("before", node)

    def inserting_after(self, node=None):
        """`with graph.inserting_after(n):` new nodes go after n, in the order they are made."""
        if node is None:
            return self._inserting("after", None)
        return self._inserting("after", node)

    def placeholder(self, name, type_expr=None, default_value=_NO_DEFAULT, meta=None):
        args = () if default_value is _NO_DEFAULT else (default_value,)
        return self.create_node("placeholder", name, args, name=name.lstrip("*"), type_expr=type_expr, meta=meta)

    def get_attr(self, qualified_name, type_expr=None, meta=None):
        return self.create_node("get_attr", qualified_name, type_expr=type_expr, meta=meta)

    def call_function(self, the_function, args=(), kwargs=None, type_expr=None, meta=None):
        return self.create_node("call_function", the_function, args, kwargs, type_expr=type_expr, meta=meta)

    def call_method(self, method_name, args=(), kwargs=None, type_expr=None, meta=None):
        return self.create_node("call_method", method_name, args, kwargs, type_expr=type_expr, meta=meta)

    def call_module(self, module_name, args=(), kwargs=None, type_expr=None, meta=None):
        return self.create_node("call_module", module_name, args, kwargs, type_expr=type_expr, meta=meta)

    def output(self, result, type_expr=None):
        return self.create_node("output", "output", (result,), name="output", type_expr=type_expr)

    def node_copy(self, node, arg_transform=lambda n: n):
        """A copy of node (from any graph) in this one, its inputs mapped by arg_transform."""
        args = _map_nodes(node.args, arg_transform)
        kwargs = _map_nodes(node.kwargs, arg_transform)
        return self.create_node(node.op, node.target, args, kwargs, name=node.name, meta=node.meta)

    def erase_node(self, node):
        if node.users:
            raise RuntimeError(f"Graph.erase_node: node '{node.name}' still has users {list(node.users)}")
        for used in node.all_input_nodes:
            used.users.pop(node, None)
        self._nodes.remove(node)
        self._names.discard(node.name)

    def _is_impure(self, node):
        if node.op in ("placeholder", "output"):
            return True
        if node.op == "call_function":
            return bool(node.meta.get("mutates"))
        if node.op == "call_method":  # an in-place method (add_, relu_) is kept for its effect
            return node.target.endswith("_") and not node.target.endswith("__")
        if node.op == "call_module":
            mod = self.owning_module
            try:
                for part in node.target.split("."):
                    mod = getattr(mod, part)
            except AttributeError:
                return False
            return bool(getattr(mod, "_is_impure", False))
        return False

    def eliminate_dead_code(self):
        """Removes nodes whose results nobody uses, keeping placeholders, the output and in-place calls."""
        changed = False
        for node in reversed(self.nodes):
            if not node.users and not self._is_impure(node):
                self.erase_node(node)
                changed = True
        return changed

    def lint(self):
        """Checks that every node's inputs are defined before it, and that they belong to this graph."""
        seen = set()
        for node in self._nodes:
            if node.op not in _OPS:
                raise RuntimeError(f"Graph.lint: node '{node.name}' has unknown op {node.op!r}")
            for used in node.all_input_nodes:
                if used.graph is not self:
                    raise RuntimeError(f"Graph.lint: node '{node.name}' uses '{used.name}' of another graph")
                if used not in seen:
                    raise RuntimeError(f"Graph.lint: node '{node.name}' uses '{used.name}' before it is defined")
            if node.op in ("call_method", "call_module", "get_attr") and not isinstance(node.target, str):
                raise RuntimeError(f"Graph.lint: node '{node.name}' ({node.op}) needs a string target")
            seen.add(node)

    def python_code(self, root_module="self"):
        """The Python source of `forward` for this graph. Targets with no public name (a lambda,
        a local function) are named _fn0, _fn1, ... in the code and listed in `code_globals`,
        which the code must run with."""
        self.code_globals = {}

        def target_name(target):
            if target is operator.getitem or getattr(target, "_qualified_repr", None):
                return _target_name(target)
            public = _public_name(target)
            if public is not None and public.split(".")[0] in ("tessera", "math", "operator"):
                return public
            if public is not None and "." not in public:  # a builtin (len, ...)
                return public
            for name, known in self.code_globals.items():
                if known is target:
                    return name
            name = f"_fn{len(self.code_globals)}"
            self.code_globals[name] = target
            return name

        params = []
        for n in self._nodes:
            if n.op != "placeholder":
                continue
            if n.meta.get("kw_only") and not builtins.any(p.startswith("*") for p in params):
                params.append("*")  # keyword-only parameters stay keyword-only
            if isinstance(n.target, str) and n.target.startswith("*"):
                params.append(n.target[:-len(n.target.lstrip("*"))] + n.name)
            elif n.args:
                params.append(f"{n.name}={_source(n.args[0])}")
            else:
                params.append(n.name)
        lines = [f"def forward({', '.join([root_module] + params)}):"]
        for n in self._nodes:
            if n.op == "get_attr":
                lines.append(f"    {n.name} = {_attr_expr(root_module, n.target)}")
            elif n.op == "call_module":
                call_args = [_source(a) for a in n.args] + [f"{k}={_source(v)}" for k, v in n.kwargs.items()]
                lines.append(f"    {n.name} = {_attr_expr(root_module, n.target)}({', '.join(call_args)})")
            elif n.op == "call_method":
                call_args = [_source(a) for a in n.args[1:]] + [f"{k}={_source(v)}" for k, v in n.kwargs.items()]
                lines.append(f"    {n.name} = {_source(n.args[0])}.{n.target}({', '.join(call_args)})")
            elif n.op == "call_function":
                expr = _infix(n)
                if expr is None:
                    call_args = [_source(a) for a in n.args] + [f"{k}={_source(v)}" for k, v in n.kwargs.items()]
                    expr = f"{target_name(n.target)}({', '.join(call_args)})"
                if n.meta.get("grad_enabled", True) is False:  # called under no_grad when captured
                    lines.append("    with tessera.no_grad():")
                    lines.append(f"        {n.name} = {expr}")
                else:
                    lines.append(f"    {n.name} = {expr}")
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


def _infix(n):
    """`x + y`, `-x`, `x[0]`, `x.shape` for the operators Python writes as expressions; None otherwise."""
    if n.kwargs:
        return None
    if n.target in _BINARY and len(n.args) == 2:
        return f"{_source(n.args[0])} {_BINARY[n.target]} {_source(n.args[1])}"
    if n.target in _UNARY and len(n.args) == 1:
        return f"{_UNARY[n.target]}{_source(n.args[0])}"
    if n.target is operator.getitem and len(n.args) == 2:
        return f"{_source(n.args[0])}[{_index_source(n.args[1])}]"
    if n.target is builtins.getattr and len(n.args) == 2 and isinstance(n.args[1], str) and n.args[1].isidentifier():
        return f"{_source(n.args[0])}.{n.args[1]}"
    return None


def _index_source(idx):
    """x[:, 0] rather than x[(slice(None, None, None), 0)]."""
    def one(i):
        if isinstance(i, slice):
            parts = ["" if v is None else _source(v) for v in (i.start, i.stop, i.step)]
            return ":".join(parts[:2]) if i.step is None else ":".join(parts)
        if i is Ellipsis:
            return "..."
        return _source(i)
    if isinstance(idx, tuple) and not hasattr(idx, "_fields"):
        if not idx:
            return "()"
        return ", ".join(one(i) for i in idx) + ("," if len(idx) == 1 else "")
    return one(idx)


def _default_name(op, target):
    if op == "call_function":
        if target is operator.getitem:
            return "getitem"
        return getattr(target, "__name__", None) or str(target)
    if isinstance(target, str):
        return target.replace(".", "_")
    return str(target)


def _source(a):
    """A Python expression for an argument in generated code."""
    if isinstance(a, Node):
        return a.name
    if isinstance(a, tuple) and not hasattr(a, "_fields"):
        inner = ", ".join(_source(x) for x in a)
        return f"({inner},)" if len(a) == 1 else f"({inner})"
    if isinstance(a, list):
        return "[" + ", ".join(_source(x) for x in a) + "]"
    if isinstance(a, dict):
        return "{" + ", ".join(f"{_source(k)}: {_source(v)}" for k, v in a.items()) + "}"
    if isinstance(a, slice):
        return f"slice({_source(a.start)}, {_source(a.stop)}, {_source(a.step)})"
    if isinstance(a, float):
        if math.isnan(a):
            return "float('nan')"
        if a in (float("inf"), float("-inf")):
            return f"float('{a}')"
    return repr(a)
