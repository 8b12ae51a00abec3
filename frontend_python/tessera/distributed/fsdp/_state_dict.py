"""State dicts of a model that fully_shard sharded. module.state_dict() itself holds each rank's
shards (what torch's holds as DTensors); full_state_dict() gathers every sharded parameter to its
full tensor (a collective: call it on every rank), and load_full_state_dict() takes such a dict
back, each rank keeping its rows (no communication)."""


def _sharded_states(module):
    from ._fully_shard import FSDPModule
    for sub in module.modules():
        state = getattr(sub, "_fsdp_state", None) if isinstance(sub, FSDPModule) else None
        if state is not None:
            yield state


def full_state_dict(module, rank0_only=False):
    """{name: full tensor} on every rank (rank0_only: on rank 0, and {} elsewhere)."""
    import tessera
    full_of = {}
    with tessera.no_grad():
        for state in _sharded_states(module):
            for shard, full in zip(state.shards, state.gather(state.shards)):
                full_of[id(shard)] = full
    named = dict(module.named_parameters(remove_duplicate=False))
    state_dict = module.state_dict()
    for name in list(state_dict):
        p = named.get(name)
        if p is not None and id(p) in full_of:
            state_dict[name] = full_of[id(p)]
    if rank0_only:
        import tessera.distributed as dist
        return state_dict if dist.get_rank() == 0 else {}
    return state_dict


def load_full_state_dict(module, state_dict, strict=True):
    """Loads full tensors (as full_state_dict() or an unsharded model's state_dict() gives them):
    each sharded parameter takes this rank's rows; the rest loads as load_state_dict does."""
    entry_of = {}
    for state in _sharded_states(module):
        for entry, shard in zip(state.entries, state.shards):
            entry_of[id(shard)] = (entry, shard)
    named = dict(module.named_parameters(remove_duplicate=False))
    local = {}
    for name, value in state_dict.items():
        p = named.get(name)
        if p is None or id(p) not in entry_of:
            local[name] = value
            continue
        entry, shard = entry_of[id(p)]
        if tuple(value.shape) != entry.shape:
            raise RuntimeError(f"load_full_state_dict: size mismatch for {name}: copying a param with shape "
                               f"{tuple(value.shape)}, the shape in the current model is {entry.shape}")
        rows = value.reshape(entry.rows, *entry.row_shape)
        local[name] = rows[entry.start:entry.start + entry.local_rows]
    return module.load_state_dict(local, strict=strict)
