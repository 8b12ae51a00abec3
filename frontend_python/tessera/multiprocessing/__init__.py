"""tessera.multiprocessing: Python's multiprocessing, with tensors that cross processes through
shared memory instead of being copied (as torch.multiprocessing).

Importing it registers reductions with multiprocessing's pickler: a CPU tensor put on a Queue,
or passed to a Process, moves its storage into shared memory (Tensor.share_memory_) and is sent
as a file descriptor, so every process reads and writes the same memory (Hogwild training with
`model.share_memory()`). Plain `pickle` and `tessera.save` still copy the data.
"""
import multiprocessing
from multiprocessing import *  # noqa: F401,F403 - the standard module's names, as torch re-exports them

from tessera.multiprocessing import reductions
from tessera.multiprocessing.spawn import ProcessContext, ProcessExitedException, ProcessRaisedException, spawn, \
    start_processes

__all__ = ["set_sharing_strategy", "get_sharing_strategy", "get_all_sharing_strategies", "spawn", "start_processes",
           "ProcessContext", "ProcessRaisedException", "ProcessExitedException"]
__all__ += multiprocessing.__all__

# Only descriptors: a memory file without a name leaks nothing when a process dies.
_SHARING_STRATEGIES = {"file_descriptor"}
_sharing_strategy = "file_descriptor"


def get_all_sharing_strategies():
    return set(_SHARING_STRATEGIES)


def get_sharing_strategy():
    return _sharing_strategy


def set_sharing_strategy(new_strategy):
    """Only "file_descriptor" exists here (PyTorch's "file_system" names files in /dev/shm, which a
    dying process can leak)."""
    global _sharing_strategy
    if new_strategy not in _SHARING_STRATEGIES:
        raise ValueError(f"set_sharing_strategy: expected one of {sorted(_SHARING_STRATEGIES)}, got {new_strategy!r}")
    _sharing_strategy = new_strategy


reductions.init_reductions()
