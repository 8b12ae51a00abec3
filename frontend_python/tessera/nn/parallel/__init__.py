"""tessera.nn.parallel: DataParallel as a single-device wrapper (one process drives one device here)
and DistributedDataParallel over tessera.distributed's process groups."""
from tessera.nn.parallel.data_parallel import DataParallel  # noqa: F401
from tessera.nn.parallel.distributed import DistributedDataParallel  # noqa: F401

__all__ = ["DataParallel", "DistributedDataParallel"]
