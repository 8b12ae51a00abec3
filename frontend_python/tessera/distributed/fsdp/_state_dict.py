"""full_state_dict(module): the state_dict of a model that fully_shard sharded, with every sharded
parameter gathered to its full tensor (a collective: call it on every rank). module.state_dict()
itself holds each rank's shards, as torch's holds DTensors."""


def full_state_dict(module, rank0_only=False):
    """{name: full tensor} on every rank (rank0_only: on rank 0, and {} elsewhere)."""
    import tessera
    from ._fully_shard import FSDPModule
    full_of = {}
    with tessera.no_grad():
        for sub in module.modules():
            state = getattr(sub, "_fsdp_state", None) if isinstance(sub, FSDPModule) else None
            if state is None:
                continue
            for shard, full in zip(state.shards, state.gather(state.shards)):
                full_of[id(shard)] = full
    named = {}
    for name, p in module.named_parameters(remove_duplicate=False):
        named[name] = p
    state_dict = module.state_dict()
    for name in list(state_dict):
        p = named.get(name)
        if p is not None and id(p) in full_of:
            state_dict[name] = full_of[id(p)]
    if rank0_only:
        import tessera.distributed as dist
        return state_dict if dist.get_rank() == 0 else {}
    return state_dict
