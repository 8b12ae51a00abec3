"""tessera.ops.<namespace>.<name>: every registered operator, built-in or defined by a plugin
at run time, callable as ts.ops.aten.add(x, y) or ts.ops.test.double_it(x). Resolved lazily
against _C.op_names() (re-read when a name is not found, so operators a plugin defines later
appear); built-ins are in the "aten" namespace."""
from tessera import _C

_call = _C.call_op
_names = None


def _op_names(refresh=False):
    global _names
    if _names is None or refresh:
        _names = frozenset(_C.op_names())
    return _names


def _qualified(ns, name):
    return name if ns == "aten" else f"{ns}::{name}"


class OpOverloadPacket:
    """All overloads of one operator; calling it lets _C.call_op pick the overload."""
    __slots__ = ("_qualname", "_ns", "__name__")

    def __init__(self, ns, name):
        self._ns = ns
        self._qualname = _qualified(ns, name)
        self.__name__ = name

    def __call__(self, *args, **kwargs):
        return _call(self._qualname, args, kwargs)

    @property
    def schemas(self):
        """The schema strings of every overload."""
        return list(_C.op_schemas(self._qualname))

    def overloads(self):
        """The overload names ("Tensor", "Scalar", "out", ... ; "default" for the unnamed one)."""
        out = []
        for s in self.schemas:
            head = s[: s.index("(")]
            head = head.split("::")[-1]
            out.append(head.split(".", 1)[1] if "." in head else "default")
        return out

    @property
    def __doc__(self):
        return "\n".join(self.schemas)

    def __repr__(self):
        return f"<tessera.ops.{self._ns}.{self.__name__}>"

    def __getattr__(self, overload):
        """One overload: ts.ops.aten.add.Tensor, ts.ops.aten.relu.default."""
        if overload.startswith("__") or overload not in self.overloads():
            raise AttributeError(f"tessera.ops.{self._ns}.{self.__name__} has no overload '{overload}' "
                                 f"(it has: {', '.join(self.overloads())})")
        return OpOverload(self, overload)


class OpOverload:
    """One overload of an operator, called with exactly its schema (no overload resolution)."""
    __slots__ = ("_name", "overloadpacket", "_overload", "_qualified_repr", "__name__")

    def __init__(self, packet, overload):
        self.overloadpacket = packet
        self._overload = overload
        self._name = packet._qualname if overload == "default" else f"{packet._qualname}.{overload}"
        self._qualified_repr = f"tessera.ops.{packet._ns}.{packet.__name__}.{overload}"
        self.__name__ = f"{packet.__name__}.{overload}"

    def __call__(self, *args, **kwargs):
        return _call(self._name, args, kwargs)

    def name(self):
        """The operator's full name, as the dispatcher knows it ("add.Tensor")."""
        return self._name

    # Two handles of one operator are equal (graphs rebuilt from the IR make new ones; tables such
    # as run_decompositions' are keyed by the user's).
    def __eq__(self, other):
        return isinstance(other, OpOverload) and other._name == self._name

    def __hash__(self):
        return hash(("OpOverload", self._name))

    @property
    def _schema(self):
        head = self._name.split("::")[-1]
        for schema in self.overloadpacket.schemas:
            if schema.split("::")[-1].startswith(head + "("):
                return schema
        raise RuntimeError(f"tessera.ops: no schema for {self._name}")

    def arguments(self):
        """[(name, keyword_only)] of the schema's arguments, in order."""
        return _schema_arguments(self._schema)

    def __repr__(self):
        return self._qualified_repr


def _schema_arguments(schema):
    inner = schema[schema.index("(") + 1: schema.rindex(") ->")]
    parts, depth, current = [], 0, ""
    for ch in inner:
        if ch in "[(":
            depth += 1
        elif ch in "])":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(current.strip())
            current = ""
        else:
            current += ch
    if current.strip():
        parts.append(current.strip())
    out, keyword_only = [], False
    for p in parts:
        if p == "*":
            keyword_only = True
            continue
        out.append((p.split("=")[0].split()[-1], keyword_only))
    return out


def op_overload(full_name):
    """The OpOverload of a full operator name as a graph records it ("add.Tensor", "ns::op")."""
    ns, rest = full_name.split("::", 1) if "::" in full_name else ("aten", full_name)
    name, overload = rest.split(".", 1) if "." in rest else (rest, "default")
    return OpOverload(OpOverloadPacket(ns, name), overload)


class _Namespace:
    def __init__(self, ns):
        self._ns = ns

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        q = _qualified(self._ns, name)
        if q not in _op_names() and q not in _op_names(refresh=True):
            raise AttributeError(f"tessera.ops.{self._ns} has no operator '{name}' (registered in this namespace: "
                                 f"{', '.join(dir(self)) or 'none'})")
        packet = OpOverloadPacket(self._ns, name)
        setattr(self, name, packet)
        return packet

    def __dir__(self):
        prefix = "" if self._ns == "aten" else self._ns + "::"
        out = []
        for n in _op_names(refresh=True):
            if self._ns == "aten":
                if "::" not in n:
                    out.append(n)
            elif n.startswith(prefix):
                out.append(n[len(prefix):])
        return sorted(out)

    def __repr__(self):
        return f"<tessera.ops.{self._ns}>"


class _Ops:
    """The root: attribute access makes a namespace."""

    def __getattr__(self, ns):
        if ns.startswith("__"):
            raise AttributeError(ns)
        space = _Namespace(ns)
        setattr(self, ns, space)
        return space

    def __dir__(self):
        spaces = {"aten"}
        for n in _op_names(refresh=True):
            if "::" in n:
                spaces.add(n.split("::", 1)[0])
        return sorted(spaces)

    def __repr__(self):
        return "<tessera.ops>"


ops = _Ops()
