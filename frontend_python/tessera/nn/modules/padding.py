"""Padding layers: ConstantPad1d/2d/3d, ZeroPad1d/2d/3d, ReflectionPad1d/2d/3d, ReplicationPad1d/2d/3d,
CircularPad1d/2d/3d, over F.pad."""
from tessera.nn import functional as F
from tessera.nn.modules.module import Module

__all__ = []


class _Pad(Module):
    _mode = "constant"
    _dims = 1

    def __init__(self, padding, value=None):
        super().__init__()
        self.padding = tuple(padding) if isinstance(padding, (tuple, list)) else (int(padding),) * (2 * self._dims)
        if len(self.padding) != 2 * self._dims:
            raise ValueError(f"{type(self).__name__}: expected padding of {2 * self._dims} values, got "
                             f"{len(self.padding)}")
        self.value = value

    def forward(self, input):
        return F.pad(input, self.padding, self._mode, self.value)

    def extra_repr(self):
        return f"{self.padding}" if self._mode != "constant" else f"padding={self.padding}, value={self.value}"


def _pad_class(name, mode, dims, value_arg):
    def __init__(self, padding, *args):
        _Pad.__init__(self, padding, *args) if value_arg else _Pad.__init__(self, padding)

    def extra_repr(self):
        return f"padding={self.padding}, value={self.value}" if value_arg else f"{self.padding}"

    cls = type(name, (_Pad,), {"_mode": mode, "_dims": dims, "__init__": __init__, "extra_repr": extra_repr,
                               "__module__": __name__})
    __all__.append(name)
    return cls


ConstantPad1d = _pad_class("ConstantPad1d", "constant", 1, True)
ConstantPad2d = _pad_class("ConstantPad2d", "constant", 2, True)
ConstantPad3d = _pad_class("ConstantPad3d", "constant", 3, True)
ReflectionPad1d = _pad_class("ReflectionPad1d", "reflect", 1, False)
ReflectionPad2d = _pad_class("ReflectionPad2d", "reflect", 2, False)
ReflectionPad3d = _pad_class("ReflectionPad3d", "reflect", 3, False)
ReplicationPad1d = _pad_class("ReplicationPad1d", "replicate", 1, False)
ReplicationPad2d = _pad_class("ReplicationPad2d", "replicate", 2, False)
ReplicationPad3d = _pad_class("ReplicationPad3d", "replicate", 3, False)
CircularPad1d = _pad_class("CircularPad1d", "circular", 1, False)
CircularPad2d = _pad_class("CircularPad2d", "circular", 2, False)
CircularPad3d = _pad_class("CircularPad3d", "circular", 3, False)


def _zero_pad(name, dims):
    def __init__(self, padding):
        _Pad.__init__(self, padding, 0.0)

    def extra_repr(self):
        return f"{self.padding}"

    cls = type(name, (_Pad,), {"_mode": "constant", "_dims": dims, "__init__": __init__, "extra_repr": extra_repr,
                               "__module__": __name__})
    __all__.append(name)
    return cls


ZeroPad1d = _zero_pad("ZeroPad1d", 1)
ZeroPad2d = _zero_pad("ZeroPad2d", 2)
ZeroPad3d = _zero_pad("ZeroPad3d", 3)
