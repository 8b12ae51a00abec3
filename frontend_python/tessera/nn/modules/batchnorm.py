"""Batch normalisation layers live in normalization.py; this file exists so torch's import path
`torch.nn.modules.batchnorm` resolves."""
from tessera.nn.modules.normalization import BatchNorm1d, BatchNorm2d  # noqa: F401

__all__ = []
