"""Sequential, ModuleList, ModuleDict, ParameterList."""

__all__ = ["Container", "ModuleDict", "ModuleList", "ParameterDict", "ParameterList", "Sequential"]
from collections import OrderedDict
import operator
import warnings

from tessera.nn.modules.module import Module


class Container(Module):
    """torch's deprecated Module with its children passed as keyword arguments."""

    def __init__(self, **kwargs):
        super().__init__()
        warnings.warn("`nn.Container` is deprecated. All of its functionality is now implemented in `nn.Module`. "
                      "Subclass that instead.", FutureWarning, stacklevel=2)
        for key, value in kwargs.items():
            self.add_module(key, value)


def _index(idx, n, kind):
    idx = operator.index(idx)
    if not -n <= idx < n:
        raise IndexError(f"index {idx} is out of range for {kind} of length {n}")
    return idx % n


class Sequential(Module):
    """Calls its modules in order, each on the previous one's output. Sequential(m1, m2, ...) or
    Sequential(OrderedDict(name=module, ...))."""

    def __init__(self, *args):
        super().__init__()
        if len(args) == 1 and isinstance(args[0], OrderedDict):
            for key, module in args[0].items():
                self.add_module(key, module)
        else:
            for idx, module in enumerate(args):
                self.add_module(str(idx), module)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(OrderedDict(list(self._modules.items())[idx]))
        return list(self._modules.values())[_index(idx, len(self), "Sequential")]

    def __setitem__(self, idx, module):
        key = list(self._modules.keys())[_index(idx, len(self), "Sequential")]
        setattr(self, key, module)

    def __delitem__(self, idx):
        keys = list(self._modules.keys())
        if isinstance(idx, slice):
            for key in keys[idx]:
                delattr(self, key)
        else:
            delattr(self, keys[_index(idx, len(self), "Sequential")])
        # keep the numbering contiguous, as torch does
        items = list(self._modules.items())
        self._modules.clear()
        for i, (k, m) in enumerate(items):
            self._modules[str(i) if k.isdigit() else k] = m

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def append(self, module):
        self.add_module(str(len(self)), module)
        return self

    def extend(self, sequential):
        for m in sequential:
            self.append(m)
        return self

    def insert(self, index, module):
        n = len(self._modules)
        if not -n <= index <= n:
            raise IndexError(f"Index out of range: {index}")
        if index < 0:
            index += n
        mods = list(self._modules.values())
        mods.insert(index, module)
        self._modules.clear()
        for i, m in enumerate(mods):
            self.add_module(str(i), m)
        return self

    def forward(self, input):
        for module in self._modules.values():
            input = module(input)
        return input


class ModuleList(Module):
    """A list of modules, registered (so their parameters are found) but not called."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(list(self._modules.values())[idx])
        return self._modules[str(_index(idx, len(self), "ModuleList"))]

    def __setitem__(self, idx, module):
        setattr(self, str(_index(idx, len(self), "ModuleList")), module)

    def __delitem__(self, idx):
        keys = list(self._modules.keys())
        for k in (keys[idx] if isinstance(idx, slice) else [keys[_index(idx, len(self), "ModuleList")]]):
            del self._modules[k]
        mods = list(self._modules.values())
        self._modules.clear()
        for i, m in enumerate(mods):
            self._modules[str(i)] = m

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __iadd__(self, modules):
        return self.extend(modules)

    def __add__(self, other):
        return ModuleList(list(self) + list(other))

    def append(self, module):
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules):
        for m in modules:
            self.append(m)
        return self

    def insert(self, index, module):
        mods = list(self._modules.values())
        mods.insert(index, module)
        self._modules.clear()
        for i, m in enumerate(mods):
            self.add_module(str(i), m)

    def forward(self, *args):
        raise NotImplementedError("ModuleList is not callable; iterate over it and call its modules")


class ModuleDict(Module):
    """An ordered dict of modules, registered under their keys."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key):
        return self._modules[key]

    def __setitem__(self, key, module):
        self.add_module(key, module)

    def __delitem__(self, key):
        del self._modules[key]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def __contains__(self, key):
        return key in self._modules

    def clear(self):
        self._modules.clear()

    def pop(self, key):
        v = self[key]
        del self[key]
        return v

    def keys(self):
        return self._modules.keys()

    def items(self):
        return self._modules.items()

    def values(self):
        return self._modules.values()

    def update(self, modules):
        items = modules.items() if hasattr(modules, "items") else modules
        for entry in items:
            if not isinstance(entry, (tuple, list)) or len(entry) != 2:
                raise ValueError("ModuleDict.update: expected a mapping or an iterable of (key, module) pairs")
            self[entry[0]] = entry[1]

    def forward(self, *args):
        raise NotImplementedError("ModuleDict is not callable; index it and call its modules")


def _as_parameter(value):
    """A tensor stored in a ParameterList/Dict becomes a Parameter (as torch: plain tensors are
    wrapped); anything else is kept as a plain attribute."""
    from tessera.nn.parameter import Parameter
    from tessera import Tensor
    if isinstance(value, Tensor) and not isinstance(value, Parameter):
        return Parameter(value)
    return value


class ParameterList(Module):
    """A list of parameters, registered under "0", "1", ... (so parameters() and state_dict find them)."""

    def __init__(self, values=None):
        super().__init__()
        self._size = 0
        if values is not None:
            self.extend(values)

    def _set(self, i, value):
        value = _as_parameter(value)
        from tessera.nn.parameter import Parameter
        if isinstance(value, Parameter):
            self.register_parameter(str(i), value)
        else:
            self._parameters.pop(str(i), None)
            self.__dict__[str(i)] = value

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return ParameterList([self[i] for i in range(len(self))[idx]])
        i = _index(idx, len(self), "ParameterList")
        return self._parameters.get(str(i), self.__dict__.get(str(i)))

    def __setitem__(self, idx, value):
        self._set(_index(idx, len(self), "ParameterList"), value)

    def __len__(self):
        return self._size

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def __iadd__(self, values):
        return self.extend(values)

    def __dir__(self):
        return [k for k in super().__dir__() if not k.isdigit()]

    def append(self, value):
        self._size += 1
        self._set(self._size - 1, value)
        return self

    def extend(self, values):
        for v in values:
            self.append(v)
        return self

    def extra_repr(self):
        return "\n".join(f"({i}): {_describe(p)}" for i, p in enumerate(self))

    def forward(self, *args):
        raise NotImplementedError("ParameterList is not callable; index it")


class ParameterDict(Module):
    """An ordered dict of parameters, registered under their keys."""

    def __init__(self, parameters=None):
        super().__init__()
        self._keys = {}
        if parameters is not None:
            self.update(parameters)

    def __getitem__(self, key):
        if key not in self._keys:
            raise KeyError(key)
        return self._parameters.get(key, self.__dict__.get(key))

    def __setitem__(self, key, value):
        if not isinstance(key, str):
            raise TypeError(f"ParameterDict: keys must be str, got {type(key).__name__}")
        self._keys[key] = None
        value = _as_parameter(value)
        from tessera.nn.parameter import Parameter
        if isinstance(value, Parameter):
            self.register_parameter(key, value)
        else:
            self._parameters.pop(key, None)
            self.__dict__[key] = value

    def __delitem__(self, key):
        del self._keys[key]
        self._parameters.pop(key, None)
        self.__dict__.pop(key, None)

    def __len__(self):
        return len(self._keys)

    def __iter__(self):
        return iter(self._keys)

    def __contains__(self, key):
        return key in self._keys

    def keys(self):
        return self._keys.keys()

    def items(self):
        return [(k, self[k]) for k in self._keys]

    def values(self):
        return [self[k] for k in self._keys]

    def get(self, key, default=None):
        return self[key] if key in self else default

    def pop(self, key):
        v = self[key]
        del self[key]
        return v

    def clear(self):
        for k in list(self._keys):
            del self[k]

    def update(self, parameters):
        items = parameters.items() if hasattr(parameters, "items") else parameters
        for entry in items:
            if not isinstance(entry, (tuple, list)) or len(entry) != 2:
                raise ValueError("ParameterDict.update: expected a mapping or an iterable of (key, parameter) pairs")
            self[entry[0]] = entry[1]

    def extra_repr(self):
        return "\n".join(f"({k}): {_describe(p)}" for k, p in self.items())

    def forward(self, *args):
        raise NotImplementedError("ParameterDict is not callable; index it")


def _describe(p):
    from tessera import Tensor
    if not isinstance(p, Tensor):
        return f"Object of type: {type(p).__name__}"
    size = "x".join(str(s) for s in p.shape)
    return f"Parameter containing: [{p.dtype} of size {size}]"

