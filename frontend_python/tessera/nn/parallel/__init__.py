"""tessera.nn.parallel: DataParallel as a single-device wrapper (one process drives one device here),
its pieces (scatter, gather, replicate, parallel_apply) with single-device semantics, and
DistributedDataParallel over tessera.distributed's process groups."""
from tessera.nn.parallel.data_parallel import DataParallel  # noqa: F401
from tessera.nn.parallel.distributed import DistributedDataParallel  # noqa: F401
from tessera.nn.parallel.parallel_apply import parallel_apply  # noqa: F401
from tessera.nn.parallel.replicate import replicate  # noqa: F401
from tessera.nn.parallel.scatter_gather import gather, scatter  # noqa: F401

__all__ = ["DataParallel", "DistributedDataParallel", "gather", "parallel_apply", "replicate", "scatter"]
