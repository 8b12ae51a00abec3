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
