"""tessera.utils: data loading (tessera.utils.data) and activation checkpointing
(tessera.utils.checkpoint, loaded on first use)."""
import importlib as _importlib

from tessera.utils import data

__all__ = ["checkpoint", "data"]


def __getattr__(name):
    if name == "checkpoint":
        return _importlib.import_module("tessera.utils.checkpoint")
    raise AttributeError(f"module 'tessera.utils' has no attribute {name!r}")
