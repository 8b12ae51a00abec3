"""Plugins: load one by path, list the loaded ones, describe an operator's kernels.

    >>> import tessera as ts
    >>> ts.plugins.list()[0].name
    'cpu'
"""
import builtins
import os

from tessera import _C

_list = builtins.list


class PluginInfo:
    """What a loaded plugin is and what it registered. Also readable as a mapping (info["name"])."""
    __slots__ = ("name", "version", "abi", "path", "devices", "kernels", "operators_defined")

    def __init__(self, d):
        self.name = d["name"]
        self.version = d["version"]
        self.abi = d["abi"]
        self.path = d["path"]
        self.devices = _list(d.get("devices", ()))
        self.kernels = d.get("kernels", 0)
        self.operators_defined = _list(d.get("operators_defined", ()))

    @property
    def num_operators_defined(self):
        return len(self.operators_defined)

    def __getitem__(self, key):
        if key not in self.__slots__:
            raise KeyError(key)
        return getattr(self, key)

    def keys(self):
        return _list(self.__slots__)

    def to_dict(self):
        return {k: getattr(self, k) for k in self.__slots__}

    def __eq__(self, other):
        return isinstance(other, PluginInfo) and self.to_dict() == other.to_dict()

    __hash__ = None

    def __repr__(self):
        return (f"PluginInfo(name={self.name!r}, version={self.version!r}, abi={self.abi!r}, devices={self.devices}, "
                f"kernels={self.kernels}, operators_defined={len(self.operators_defined)}, path={self.path!r})")


def load(path):
    """Loads the plugin at `path` (a no-op when already loaded) and returns its PluginInfo.
    Raises tessera.PluginError (a RuntimeError) naming the plugin and the reason when refused."""
    info = PluginInfo(_C.plugins_load(os.fspath(path)))
    from tessera import _ops

    _ops._op_names(refresh=True)  # operators it defines appear under tessera.ops
    return info


def load_named(name):
    """Loads libtessera_<name>.so from the plugin search path (a no-op when a plugin of that name
    is loaded) and returns its PluginInfo. With lazy loading off, this is how a plugin gets in."""
    if not _C.plugins_load_named(name):
        raise PluginError(f"no plugin libtessera_{name}.so on the plugin search path {_C.plugins_search_path()}")
    from tessera import _ops

    _ops._op_names(refresh=True)
    return next(p for p in list() if p.name == name)


def set_lazy_loading(enabled):
    """Strict mode when False: only the plugins loaded explicitly (load, load_named) serve; a
    device type, autograd or the profiler whose plugin is not loaded raises PluginError naming
    it instead of loading it. True (the default) loads plugins on first need."""
    _C.set_lazy_loading(bool(enabled))


def is_lazy_loading_enabled():
    return _C.lazy_loading_enabled()


def list():
    """The loaded plugins, in load order."""
    return [PluginInfo(d) for d in _C.plugins_list()]


def operators():
    """The schema of every registered operator overload, sorted, in PyTorch's schema language
    ("add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor"); plugins' own operators
    appear once their plugin is loaded."""
    return sorted(schema for name in _C.op_names() for schema in _C.op_schemas(name))


def describe(name=None):
    """Which kernel is registered for which dispatch key (and by which plugin) for every overload
    of an operator base name ("add"), or for one overload ("add.Tensor"), with its kind (primitive
    or composite). Without a name: the count of primitive and composite overloads."""
    if name is not None:
        return _C.plugins_describe(name)
    kinds = {"primitive": 0, "composite": 0}
    for schema in operators():
        overload = schema.split("(")[0]
        kinds["composite" if "kind: composite" in _C.plugins_describe(overload) else "primitive"] += 1
    total = kinds["primitive"] + kinds["composite"]
    return f"{total} operator overloads: {kinds['primitive']} primitives, {kinds['composite']} composites"


PluginError = _C.PluginError
