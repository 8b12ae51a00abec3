"""Batch normalisation layers live in normalization.py; this file exists so torch's import path
`torch.nn.modules.batchnorm` resolves, and exports SyncBatchNorm (statistics over a process group)."""
from tessera.nn.modules.normalization import BatchNorm1d, BatchNorm2d, BatchNorm3d  # noqa: F401
from tessera.nn.modules._sync_batchnorm import SyncBatchNorm

__all__ = ["SyncBatchNorm"]
