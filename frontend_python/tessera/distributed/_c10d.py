"""The default process group and the groups made from it: init_process_group, new_group,
destroy_process_group and the rank/size queries (torch.distributed.distributed_c10d's state)."""
from datetime import timedelta

from ._process_group import Backend, ProcessGroup, default_pg_timeout
from ._rendezvous import rendezvous
from ._store import PrefixStore, Store


class GroupMember:
    """GroupMember.WORLD is the default group once initialised; NON_GROUP_MEMBER stands for a group
    this rank is not in (collectives on it do nothing and return None, as in torch)."""
    WORLD = None
    NON_GROUP_MEMBER = object()


class group:
    WORLD = None


class _World:
    def __init__(self):
        self.default = None
        self.store = None
        self.groups = {}  # ProcessGroup -> its global ranks
        self.group_count = 0


_world = _World()


def is_available():
    return True


def is_initialized():
    return _world.default is not None


def _require_init(where):
    if _world.default is None:
        raise ValueError(f"{where}: Default process group has not been initialized, please make sure to call "
                         "init_process_group.")


def _resolve(group_arg, where):
    """The ProcessGroup a call acts on, or None when this rank is not in it."""
    _require_init(where)
    if group_arg is None or group_arg is GroupMember.WORLD:
        return _world.default
    if group_arg is GroupMember.NON_GROUP_MEMBER:
        return None
    if not isinstance(group_arg, ProcessGroup):
        raise TypeError(f"{where}: group must be a ProcessGroup made by init_process_group or new_group, "
                        f"got {type(group_arg).__name__}")
    if group_arg not in _world.groups:
        raise ValueError(f"{where}: the group was destroyed")
    return group_arg


def _backend_for(backend, where):
    if backend is None or str(backend).lower() in ("", "undefined"):
        return "gloo"
    name = str(backend).lower()
    if ":" in name:  # "cpu:gloo,cuda:nccl": the CPU entry, the only device gloo serves here
        pairs = dict(p.split(":", 1) for p in name.split(",") if ":" in p)
        name = pairs.get("cpu", next(iter(pairs.values())))
    if name not in ("gloo", "nccl") and name not in _backend_names():
        raise ValueError(f"{where}: unknown backend {backend!r}; available: gloo, nccl (when built), or a plugin "
                         f"libtessera_<name>.so that registers a process-group backend")
    return name


def _backend_names():
    from .. import _C
    return _C._process_group_backends()


def init_process_group(backend=None, init_method=None, timeout=None, world_size=-1, rank=-1, store=None,
                       group_name="", pg_options=None, device_id=None):
    """Initialises the default process group, as torch.distributed.init_process_group."""
    if _world.default is not None:
        raise ValueError("trying to initialize the default process group twice!")
    if timeout is None:
        timeout = default_pg_timeout
    if not isinstance(timeout, timedelta):
        raise TypeError(f"init_process_group: timeout must be a datetime.timedelta, got {type(timeout).__name__}")
    if store is not None and init_method is not None:
        raise ValueError("Cannot specify both init_method and store.")
    backend = _backend_for(backend, "init_process_group")
    if store is not None:
        if not isinstance(store, Store):
            raise TypeError(f"init_process_group: store must be a tessera.distributed Store, got {type(store).__name__}")
        if world_size <= 0:
            raise ValueError("world_size must be positive if using store")
        if rank < 0:
            raise ValueError("rank must be non-negative if using store")
        if rank >= world_size:
            raise ValueError(f"init_process_group: rank {rank} is not in a world of size {world_size}")
    else:
        store, rank, world_size = rendezvous(init_method or "env://", rank, world_size, timeout)
    pg = ProcessGroup(backend, PrefixStore("default_pg", store), rank, world_size, range(world_size), timeout,
                      group_name or "0")
    _world.default = pg
    _world.store = store
    _world.groups = {pg: list(range(world_size))}
    _world.group_count = 1
    GroupMember.WORLD = pg
    group.WORLD = pg


def destroy_process_group(group=None):
    """Ends a group (None: every group and the default one)."""
    if group is None or group is GroupMember.WORLD:
        for pg in list(_world.groups):
            pg._impl.shutdown()
        _world.default = None
        _world.store = None
        _world.groups = {}
        GroupMember.WORLD = None
        globals()["group"].WORLD = None
        return
    if group is GroupMember.NON_GROUP_MEMBER:
        return
    pg = _resolve(group, "destroy_process_group")
    pg._impl.shutdown()
    del _world.groups[pg]


def new_group(ranks=None, timeout=None, backend=None, pg_options=None, use_local_synchronization=False,
              group_desc=None, device_id=None):
    """A group of some ranks. Every rank of the world calls it, in the same order, as in torch."""
    _require_init("new_group")
    world_size = _world.default.size()
    me = _world.default.rank()
    ranks = list(range(world_size)) if ranks is None else sorted(int(r) for r in ranks)
    if len(set(ranks)) != len(ranks):
        raise ValueError(f"new_group: ranks must be distinct, got {ranks}")
    for r in ranks:
        if not 0 <= r < world_size:
            raise ValueError(f"new_group: rank {r} is not in the world of size {world_size}")
    number = _world.group_count
    _world.group_count += 1
    if me not in ranks:
        return GroupMember.NON_GROUP_MEMBER
    backend = _backend_for(backend or _world.default.name(), "new_group")
    pg = ProcessGroup(backend, PrefixStore(f"group_{number}", _world.store), ranks.index(me), len(ranks), ranks,
                      timeout or _world.default._timeout, str(number))
    _world.groups[pg] = ranks
    return pg


def get_rank(group=None):
    if group is GroupMember.NON_GROUP_MEMBER:
        return -1
    if not is_initialized():
        raise ValueError("Default process group has not been initialized, please make sure to call init_process_group.")
    return _resolve(group, "get_rank").rank()


def get_world_size(group=None):
    if group is GroupMember.NON_GROUP_MEMBER:
        return -1
    if not is_initialized():
        raise ValueError("Default process group has not been initialized, please make sure to call init_process_group.")
    return _resolve(group, "get_world_size").size()


def get_backend(group=None):
    return Backend(_resolve(group, "get_backend").name())


def get_process_group_ranks(group):
    pg = _resolve(group, "get_process_group_ranks")
    return list(_world.groups[pg])


def get_global_rank(group, group_rank):
    ranks = get_process_group_ranks(group)
    if not 0 <= group_rank < len(ranks):
        raise ValueError(f"get_global_rank: group rank {group_rank} is not in a group of size {len(ranks)}")
    return ranks[group_rank]


def get_group_rank(group, global_rank):
    ranks = get_process_group_ranks(group)
    if global_rank not in ranks:
        raise ValueError(f"get_group_rank: global rank {global_rank} is not part of the group")
    return ranks.index(global_rank)


def _group_rank(pg, global_rank, where, what):
    """A collective's src/dst: global ranks, as in torch."""
    ranks = _world.groups[pg]
    if global_rank not in ranks:
        raise ValueError(f"{where}: {what}={global_rank} is not a rank of the group (its ranks: {ranks})")
    return ranks.index(global_rank)


def get_default_store():
    _require_init("the default store")
    return _world.store
