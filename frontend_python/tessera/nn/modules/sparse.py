"""Embedding layers live in misc.py; this file exists so `torch.nn.modules.sparse` resolves."""
from tessera.nn.modules.misc import Embedding, EmbeddingBag  # noqa: F401

__all__ = []
