"""The layers of tessera.nn, one file per family as in torch.nn.modules. Each file lists its public
names in __all__; this package re-exports all of them."""
import importlib as _importlib

# The families, in torch.nn.modules' file names (so `from torch.nn.modules.conv import Conv2d` resolves).
_FAMILIES = [
    "module", "linear", "conv", "pooling", "fold", "normalization", "batchnorm", "instancenorm", "activation",
    "dropout", "sparse", "flatten", "misc", "container", "loss", "transformer", "padding", "upsampling",
    "pixelshuffle", "channelshuffle", "distance", "rnn", "adaptive", "lazy", "linear_cross_entropy_options",
]

__all__ = []
for _name in _FAMILIES:
    _module = _importlib.import_module(f"{__name__}.{_name}")
    for _public in getattr(_module, "__all__", ()):
        globals()[_public] = getattr(_module, _public)
        __all__.append(_public)
del _name, _module, _public
