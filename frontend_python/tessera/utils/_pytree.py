"""Pytrees as torch.utils._pytree: nested tuples, lists, dicts, namedtuples and OrderedDicts whose
leaves are anything else. None is a node with no children (so it is never a leaf)."""
import collections

__all__ = ["TreeSpec", "LeafSpec", "tree_flatten", "tree_unflatten", "tree_map", "tree_map_only", "tree_leaves",
           "tree_structure", "register_pytree_node", "tree_all", "tree_any"]

# type -> (flatten(obj) -> (children, context), unflatten(children, context) -> obj)
SUPPORTED_NODES = {}


def register_pytree_node(cls, flatten_fn, unflatten_fn, *, serialized_type_name=None, to_dumpable_context=None,
                         from_dumpable_context=None, flatten_with_keys_fn=None):
    """Makes instances of `cls` nodes: flatten_fn(obj) -> (children, context), unflatten_fn(children, context)."""
    if cls in SUPPORTED_NODES:
        raise ValueError(f"{cls} is already registered as pytree node.")
    SUPPORTED_NODES[cls] = (flatten_fn, unflatten_fn)


def _is_namedtuple(obj):
    return isinstance(obj, tuple) and hasattr(type(obj), "_fields")


register_pytree_node(tuple, lambda t: (list(t), None), lambda c, _: tuple(c))
register_pytree_node(list, lambda t: (list(t), None), lambda c, _: list(c))
register_pytree_node(dict, lambda d: (list(d.values()), list(d.keys())), lambda c, keys: dict(zip(keys, c)))
register_pytree_node(collections.OrderedDict, lambda d: (list(d.values()), list(d.keys())),
                     lambda c, keys: collections.OrderedDict(zip(keys, c)))
register_pytree_node(type(None), lambda n: ([], None), lambda c, _: None)


def _node_type(obj):
    if _is_namedtuple(obj):
        return "namedtuple"
    t = type(obj)
    return t if t in SUPPORTED_NODES else None


class TreeSpec:
    """The structure of a pytree: its node type, context, and children's specs."""

    def __init__(self, type, context, children_specs):
        self.type = type
        self.context = context
        self.children_specs = children_specs
        self.num_leaves = sum(c.num_leaves for c in children_specs)
        self.num_children = len(children_specs)

    def is_leaf(self):
        return False

    def unflatten(self, leaves):
        return tree_unflatten(leaves, self)

    def __eq__(self, other):
        return (isinstance(other, TreeSpec) and type(self) is type(other) and self.type == other.type
                and self.context == other.context and self.children_specs == other.children_specs)

    def __hash__(self):
        return hash((self.type, repr(self.context), tuple(self.children_specs)))

    def __repr__(self):
        name = self.type if isinstance(self.type, str) else self.type.__name__
        if self.type == "namedtuple":
            name = self.context.__name__
        return f"TreeSpec({name}, {self.context if self.type != 'namedtuple' else None}, " \
               f"[{', '.join(repr(c) for c in self.children_specs)}])"


class LeafSpec(TreeSpec):
    def __init__(self):
        super().__init__(None, None, [])
        self.num_leaves = 1

    def is_leaf(self):
        return True

    def __repr__(self):
        return "*"


# The walks are module-level functions, not closures that call themselves: such a closure is a
# reference cycle holding the leaves (every tensor of a vmap's inputs or outputs) until the cyclic
# garbage collector runs, so a vmap's 100 MB result would outlive its last reference.
def _flatten_into(node, is_leaf, leaves):
    kind = None if (is_leaf is not None and is_leaf(node)) else _node_type(node)
    if kind is None:
        leaves.append(node)
        return LeafSpec()
    if kind == "namedtuple":
        return TreeSpec("namedtuple", type(node), [_flatten_into(c, is_leaf, leaves) for c in node])
    children, context = SUPPORTED_NODES[kind][0](node)
    return TreeSpec(kind, context, [_flatten_into(c, is_leaf, leaves) for c in children])


def _unflatten_from(spec, it):
    if spec.is_leaf():
        return next(it)
    children = [_unflatten_from(c, it) for c in spec.children_specs]
    if spec.type == "namedtuple":
        return spec.context(*children)
    return SUPPORTED_NODES[spec.type][1](children, spec.context)


def tree_flatten(tree, is_leaf=None):
    """(leaves, spec): the leaves in order and the structure to rebuild the tree from them."""
    leaves = []
    spec = _flatten_into(tree, is_leaf, leaves)
    return leaves, spec


def tree_unflatten(leaves, treespec):
    leaves = list(leaves)
    if len(leaves) != treespec.num_leaves:
        raise ValueError(f"treespec.unflatten(leaves): `leaves` has length {len(leaves)} but the spec refers to a "
                         f"pytree that holds {treespec.num_leaves} items ({treespec}).")
    return _unflatten_from(treespec, iter(leaves))


def tree_leaves(tree, is_leaf=None):
    return tree_flatten(tree, is_leaf)[0]


def tree_structure(tree, is_leaf=None):
    return tree_flatten(tree, is_leaf)[1]


def tree_map(func, tree, *rests, is_leaf=None):
    leaves, spec = tree_flatten(tree, is_leaf)
    others = [tree_flatten(r, is_leaf)[0] for r in rests]
    return tree_unflatten([func(*xs) for xs in zip(leaves, *others)], spec)


def tree_map_only(type_or_types, func, tree, is_leaf=None):
    return tree_map(lambda x: func(x) if isinstance(x, type_or_types) else x, tree, is_leaf=is_leaf)


def tree_all(pred, tree, is_leaf=None):
    return all(map(pred, tree_leaves(tree, is_leaf)))


def tree_any(pred, tree, is_leaf=None):
    return any(map(pred, tree_leaves(tree, is_leaf)))
