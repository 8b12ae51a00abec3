"""tessera.distributed.fsdp: fully sharded data parallel with torch 2.x's FSDP2 API,
fully_shard(module) (see _fully_shard.py for what is sharded, gathered and reduced, and when)."""
from ._fully_shard import FSDPModule, fully_shard  # noqa: F401
from ._state_dict import full_state_dict, load_full_state_dict  # noqa: F401

__all__ = ["FSDPModule", "fully_shard", "full_state_dict", "load_full_state_dict"]
