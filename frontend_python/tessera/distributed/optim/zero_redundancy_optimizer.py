"""ZeroRedundancyOptimizer (torch.distributed.optim): ZeRO stage 1. The parameters are split
across the ranks of a process group; each rank keeps optimizer state only for its own shard and
steps only that shard with a local instance of `optimizer_class`, then every shard is broadcast
from its owner so all ranks end the step with the same parameters. The gradients must already be
the same on every rank (DistributedDataParallel averages them).

The split is torch's: per parameter group, parameters from the largest down, each to the rank that
holds the fewest elements so far. state_dict() is torch's format (global parameter indices) and
needs consolidate_state_dict(to=rank) on every rank first; load_state_dict() gives each rank the
state of its own shard."""
import copy

from tessera.optim.optimizer import Optimizer

_WHERE = "ZeroRedundancyOptimizer"


def _dist():
    import tessera.distributed as dist
    return dist


def _checked_params(params):
    """params as a list of tensors or of parameter-group dicts (torch's checks and messages)."""
    import tessera
    if isinstance(params, tessera.Tensor):
        raise TypeError(f"params argument should be an iterable of Tensors, but got {type(params).__name__}")
    try:
        params = list(params)
    except TypeError as e:
        raise TypeError(f"params argument should be an iterable of Tensors, but got {type(params).__name__}") from e
    if len(params) == 0:
        raise ValueError(f"{_WHERE} did not receive any parameters")
    all_tensors = all(isinstance(p, tessera.Tensor) for p in params)
    all_dicts = all(isinstance(p, dict) for p in params)
    if not (all_tensors or all_dicts):
        raise TypeError("params should be an iterable of Tensors or an iterable of dicts (parameter groups), got "
                        f"{[type(p).__name__ for p in params]}")
    return params


class ZeroRedundancyOptimizer(Optimizer):
    def __init__(self, params, optimizer_class, process_group=None, parameters_as_bucket_view=False,
                 overlap_with_ddp=False, **defaults):
        if overlap_with_ddp:
            raise NotImplementedError(f"{_WHERE}: overlap_with_ddp=True is not supported here (it steps shards "
                                      "from a DDP communication hook); got overlap_with_ddp=True")
        if not isinstance(optimizer_class, type) or not issubclass(optimizer_class, Optimizer):
            raise TypeError(f"{_WHERE}: optimizer_class must be an Optimizer subclass, got {optimizer_class!r}")
        params = _checked_params(params)
        self.initialized = False
        Optimizer.__init__(self, params, defaults)
        dist = _dist()
        from tessera.distributed._c10d import _resolve
        pg = _resolve(process_group, _WHERE)  # ValueError before init_process_group, as torch
        self.process_group = pg
        self.world_size = pg.size()
        self.rank = pg.rank()
        self.global_rank = dist.get_global_rank(pg, self.rank)
        self.parameters_as_bucket_view = parameters_as_bucket_view
        self._optim_defaults = defaults
        self._optim_constructor = optimizer_class
        self._clear_cache()
        self.optim = optimizer_class(self._partition_parameters()[self.rank], **defaults)
        self._sync_param_groups(self.optim.param_groups, self.param_groups)
        self._all_state_dicts = []
        self.initialized = True

    # ---------------------------------------------------------------- the partition
    def _clear_cache(self):
        self._partition_parameters_cache = []
        self._param_to_rank_cache = {}
        self._index_to_param_cache = []
        self._param_to_index_cache = {}

    def _partition_parameters(self):
        """[rank][group] -> a copy of the parameter group holding that rank's parameters."""
        if not self._partition_parameters_cache:
            per_rank = [[] for _ in range(self.world_size)]
            sizes = [0] * self.world_size
            for group in self.param_groups:
                mine = [[] for _ in range(self.world_size)]
                for param in sorted(group["params"], key=lambda t: t.numel(), reverse=True):
                    rank = sizes.index(min(sizes))
                    mine[rank].append(param)
                    sizes[rank] += param.numel()
                for rank in range(self.world_size):
                    shard = copy.copy(group)
                    shard["params"] = mine[rank]
                    per_rank[rank].append(shard)
            self._partition_parameters_cache = per_rank
        return self._partition_parameters_cache

    @property
    def _param_to_rank(self):
        if not self._param_to_rank_cache:
            for rank, groups in enumerate(self._partition_parameters()):
                for group in groups:
                    for p in group["params"]:
                        self._param_to_rank_cache[p] = rank
        return self._param_to_rank_cache

    @property
    def _index_to_param(self):
        if not self._index_to_param_cache:
            self._index_to_param_cache = [p for group in self.param_groups for p in group["params"]]
        return self._index_to_param_cache

    @property
    def _param_to_index(self):
        if not self._param_to_index_cache:
            self._param_to_index_cache = {p: i for i, p in enumerate(self._index_to_param)}
        return self._param_to_index_cache

    @staticmethod
    def _sync_param_groups(source, destination):
        """Copies the hyper-parameters (everything but "params") group by group."""
        if len(source) != len(destination):
            raise RuntimeError(f"{_WHERE}: mismatch between the number of source ({len(source)}) and destination "
                               f"({len(destination)}) parameter groups")
        for src, dst in zip(source, destination):
            for key, value in src.items():
                if key != "params":
                    dst[key] = value

    def add_param_group(self, param_group):
        super().add_param_group(param_group)
        if getattr(self, "initialized", False):
            self._clear_cache()
            groups = self._partition_parameters()[self.rank]
            if len(groups) == len(self.optim.param_groups) + 1:
                self.optim.add_param_group(groups[-1])

    # ---------------------------------------------------------------- stepping
    def step(self, closure=None, **kwargs):
        """Steps this rank's shard, then broadcasts every shard from its owner. Returns the loss
        the closure computed (when given)."""
        self._sync_param_groups(self.param_groups, self.optim.param_groups)  # e.g. an LR scheduler changed them
        loss = self.optim.step(**kwargs) if closure is None else self.optim.step(closure=closure, **kwargs)
        self._sync_param_groups(self.optim.param_groups, self.param_groups)
        self._sync_params()
        return loss

    def _sync_params(self):
        import tessera
        dist = _dist()
        works = []
        with tessera.no_grad():
            for rank, groups in enumerate(self._partition_parameters()):
                src = dist.get_global_rank(self.process_group, rank)
                params = [p for group in groups for p in group["params"] if p.requires_grad]
                if not params:
                    continue
                if self.parameters_as_bucket_view:  # one collective per shard: flattened, then copied back
                    flat = tessera.cat([p.detach().reshape(-1) for p in params])
                    works.append((dist.broadcast(flat, src=src, group=self.process_group, async_op=True),
                                  flat, params))
                else:
                    for p in params:
                        works.append((dist.broadcast(p.detach(), src=src, group=self.process_group, async_op=True),
                                      None, None))
            for work, flat, params in works:
                work.wait()
                if flat is not None:
                    offset = 0
                    for p in params:
                        p.detach().copy_(flat[offset:offset + p.numel()].view(p.shape))
                        offset += p.numel()

    # ---------------------------------------------------------------- state
    def consolidate_state_dict(self, to=0):
        """Collects every rank's shard state on rank `to` (a collective: call it on every rank)."""
        dist = _dist()
        if isinstance(to, bool) or not isinstance(to, int) or not 0 <= to < self.world_size:
            raise ValueError(f"{_WHERE}.consolidate_state_dict: to must be a rank of the group "
                             f"(0..{self.world_size - 1}), got {to!r}")
        self._sync_param_groups(self.param_groups, self.optim.param_groups)
        gathered = [None] * self.world_size if self.rank == to else None
        dist.gather_object(self.optim.state_dict(), gathered, dst=dist.get_global_rank(self.process_group, to),
                           group=self.process_group)
        self._all_state_dicts = gathered if self.rank == to else []

    def state_dict(self):
        """The whole optimizer's state in torch's format; only on the rank consolidated to."""
        if not self._all_state_dicts:
            raise RuntimeError("Optimizer state has not been consolidated on this rank. Please call "
                               f"`consolidate_state_dict(to={self.rank})` on all ranks beforehand if you meant to "
                               "save the global state.")
        state_dict = super().state_dict()
        state_dict["state"] = {}
        for rank, local in enumerate(self._all_state_dicts):
            shards = self._partition_parameters()[rank]
            if len(local["param_groups"]) != len(shards):
                raise RuntimeError(f"{_WHERE}: rank {rank} sent {len(local['param_groups'])} parameter groups, "
                                   f"expected {len(shards)}")
            for local_group, shard in zip(local["param_groups"], shards):
                for local_index, param in zip(local_group["params"], shard["params"]):
                    if local_index in local["state"]:
                        state_dict["state"][self._param_to_index[param]] = local["state"][local_index]
        state_dict["state"] = dict(sorted(state_dict["state"].items()))
        return state_dict

    def load_state_dict(self, state_dict):
        """Loads a state_dict() (from any world size with the same parameters): each rank keeps the
        state of the parameters it owns."""
        state_dict = dict(state_dict)
        state = {}
        for index, value in state_dict["state"].items():
            key = int(index) if isinstance(index, str) and index.isdigit() else index
            param = self._index_to_param[key]
            state[key] = value if self._param_to_rank[param] == self.rank else None
        state_dict["state"] = {k: v for k, v in state.items() if v is not None}
        super().load_state_dict(state_dict)   # hyper-parameters and this rank's state, cast to the parameters
        self._clear_cache()
        own = {p for groups in self._partition_parameters()[self.rank] for p in groups["params"]}
        self.optim.state.clear()
        for p, value in self.state.items():
            if p in own:
                self.optim.state[p] = value
        self._sync_param_groups(self.param_groups, self.optim.param_groups)
