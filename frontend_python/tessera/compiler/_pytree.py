"""Flattening nested arguments and results (tuples, lists, dicts) into leaves and back,
with a path per leaf ("args[0]", "kwargs['x']") for guard messages."""


class Spec:
    """How leaves fold back into the original structure; hashable, so guards can key on it."""
    __slots__ = ("kind", "meta", "children", "_hash")

    def __init__(self, kind, meta, children):
        self.kind = kind          # "leaf", "tuple", "list", "dict"
        self.meta = meta          # dict keys (a tuple) for "dict"
        self.children = children  # tuple of Spec
        self._hash = hash((kind, meta, children))

    def __eq__(self, other):
        return isinstance(other, Spec) and self._hash == other._hash and (
            self.kind, self.meta, self.children) == (other.kind, other.meta, other.children)

    def __hash__(self):
        return self._hash

    def __repr__(self):
        return f"Spec({self.kind}, {self.meta}, {self.children})"


LEAF = Spec("leaf", None, ())


def flatten(obj, path="", leaves=None, paths=None):
    """(leaves, paths, spec) of a nested structure."""
    if leaves is None:
        leaves, paths = [], []
    if isinstance(obj, (tuple, list)) and (type(obj) in (tuple, list)):
        children = tuple(flatten(x, f"{path}[{i}]", leaves, paths)[2] for i, x in enumerate(obj))
        return leaves, paths, Spec("tuple" if type(obj) is tuple else "list", None, children)
    if type(obj) is dict:
        keys = tuple(obj)
        children = tuple(flatten(obj[k], f"{path}[{k!r}]", leaves, paths)[2] for k in keys)
        return leaves, paths, Spec("dict", keys, children)
    leaves.append(obj)
    paths.append(path)
    return leaves, paths, LEAF


def unflatten(leaves, spec):
    """The structure `spec` describes, filled with `leaves` in order."""
    it = iter(leaves)

    def build(s):
        if s.kind == "leaf":
            return next(it)
        items = [build(c) for c in s.children]
        if s.kind == "tuple":
            return tuple(items)
        if s.kind == "list":
            return items
        return dict(zip(s.meta, items))
    return build(spec)
