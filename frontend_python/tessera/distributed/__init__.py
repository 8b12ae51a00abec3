"""tessera.distributed: torch.distributed's API over process-group backends that are plugins
(libtessera_gloo.so for CPU tensors; libtessera_nccl.so for CUDA tensors), stores in C++
(TCPStore, FileStore, HashStore, PrefixStore) and the launcher (python -m tessera.distributed.run).
Every wait has a timeout that names what it waited for."""
from ._c10d import (GroupMember, destroy_process_group, get_backend, get_default_store, get_global_rank,
                    get_group_rank, get_process_group_ranks, get_rank, get_world_size, group, init_process_group,
                    is_available, is_initialized, new_group)
from ._collectives import (P2POp, _all_gather_base, _reduce_scatter_base, all_gather, all_gather_into_tensor,
                           all_reduce, all_to_all, all_to_all_single, barrier, batch_isend_irecv, broadcast, gather,
                           irecv, isend, monitored_barrier, recv, reduce, reduce_scatter, reduce_scatter_tensor,
                           scatter, send)
from ._object_collectives import all_gather_object, broadcast_object_list, gather_object, scatter_object_list
from ._process_group import (Backend, DistBackendError, DistError, DistNetworkError, DistStoreError, ProcessGroup,
                             ReduceOp, Work, default_pg_timeout)
from ._store import FileStore, HashStore, PrefixStore, Store, TCPStore


def __getattr__(name):
    # DDP's gradient bucket type (torch.distributed.GradBucket), imported on first use: it lives
    # with the reducer in nn.parallel.
    if name == "GradBucket":
        from ..nn.parallel._grad_bucket import GradBucket
        return GradBucket
    raise AttributeError(f"module 'tessera.distributed' has no attribute {name!r}")


def is_gloo_available():
    from .. import _C
    try:
        return bool(_C._process_group_backend_devices("gloo"))  # loads the plugin when it is there
    except Exception:
        return False


def is_nccl_available():
    from .. import _C
    try:
        return bool(_C._process_group_backend_devices("nccl"))
    except Exception:
        return False


def is_mpi_available():
    return False


def is_torchelastic_launched():
    import os
    return os.getenv("TORCHELASTIC_RUN_ID") is not None
