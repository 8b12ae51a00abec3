"""Flatten and Unflatten live in misc.py; this file exists so `torch.nn.modules.flatten` resolves."""
from tessera.nn.modules.misc import Flatten, Unflatten  # noqa: F401

__all__ = []
