"""Padding layers: ConstantPad1d/2d/3d, ZeroPad1d/2d/3d, ReflectionPad1d/2d/3d, ReplicationPad1d/2d/3d,
CircularPad1d/2d/3d, over F.pad."""
from tessera.nn import functional as F
from tessera.nn.modules.module import Module

__all__ = []


class _Pad(Module):
    _mode = "constant"
    _dims = 1
    _takes_value = False  # ConstantPad*d take (padding, value); the others padding alone

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
        return f"padding={self.padding}, value={self.value}" if self._takes_value else f"{self.padding}"


def _pad_class(name, mode, dims, fixed_value=None):
    """A padding module class; ZeroPad*d are constant padding with fixed_value 0."""
    takes_value = mode == "constant" and fixed_value is None

    def __init__(self, padding, *value):
        _Pad.__init__(self, padding, *value) if takes_value else _Pad.__init__(self, padding, fixed_value)

    cls = type(name, (_Pad,), {"_mode": mode, "_dims": dims, "_takes_value": takes_value, "__init__": __init__,
                               "__module__": __name__})
    __all__.append(name)
    return cls


ConstantPad1d = _pad_class("ConstantPad1d", "constant", 1)
ConstantPad2d = _pad_class("ConstantPad2d", "constant", 2)
ConstantPad3d = _pad_class("ConstantPad3d", "constant", 3)
ZeroPad1d = _pad_class("ZeroPad1d", "constant", 1, fixed_value=0.0)
ZeroPad2d = _pad_class("ZeroPad2d", "constant", 2, fixed_value=0.0)
ZeroPad3d = _pad_class("ZeroPad3d", "constant", 3, fixed_value=0.0)
ReflectionPad1d = _pad_class("ReflectionPad1d", "reflect", 1)
ReflectionPad2d = _pad_class("ReflectionPad2d", "reflect", 2)
ReflectionPad3d = _pad_class("ReflectionPad3d", "reflect", 3)
ReplicationPad1d = _pad_class("ReplicationPad1d", "replicate", 1)
ReplicationPad2d = _pad_class("ReplicationPad2d", "replicate", 2)
ReplicationPad3d = _pad_class("ReplicationPad3d", "replicate", 3)
CircularPad1d = _pad_class("CircularPad1d", "circular", 1)
CircularPad2d = _pad_class("CircularPad2d", "circular", 2)
CircularPad3d = _pad_class("CircularPad3d", "circular", 3)
