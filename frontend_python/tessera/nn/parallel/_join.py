"""DistributedDataParallel.join(): training on uneven inputs (torch's Join with DDP's join hook).

Inside the context, each forward of a rank that still has data first all-reduces a 1 (so the
others can count who is left). A rank that runs out of data leaves the with-block and, in its
__exit__, shadows the collectives of every iteration the others still run: it all-reduces a 0
(the count), takes part in the bucket rebuild and the buffer broadcast, learns whether the others'
backward syncs, and if so all-reduces zero-filled gradient buckets (and the unused-parameter map) in
the same order. When the count is 0 every rank has joined; then the last rank to join (ties: the
highest) broadcasts its parameters and buffers, since the ranks that joined early stopped stepping."""


def _dist():
    import tessera.distributed as dist
    return dist


def find_common_rank(ddp, candidate):
    """The highest rank for which `candidate` holds (every rank calls it)."""
    import tessera
    dist = _dist()
    rank = ddp.process_group.rank()
    value = tessera.tensor([rank if candidate else -1], dtype=tessera.int64)
    dist.all_reduce(value, op=dist.ReduceOp.MAX, group=ddp.process_group)
    common = int(value.item())
    if common < 0:
        raise RuntimeError("DistributedDataParallel.join: no rank qualified as the authoritative copy")
    return common


class Join:
    def __init__(self, ddp, enable=True, throw_on_early_termination=False, divide_by_initial_world_size=True):
        self.ddp = ddp
        self.enable = enable
        self.throw_on_early_termination = throw_on_early_termination
        self.divide_by_initial_world_size = divide_by_initial_world_size

    def __enter__(self):
        if self.ddp._join is not None:
            raise RuntimeError("DistributedDataParallel.join: already inside a join context for this module")
        if self.enable:
            self.ddp._join = self
        return self

    # ---------------------------------------------------------------- a rank that still has data
    def notify(self):
        """Before each forward: count the ranks that have not joined; the gradient divisor follows."""
        import tessera
        dist = _dist()
        group = self.ddp.process_group
        ones = tessera.ones(1)
        dist.all_reduce(ones, group=group)
        if self.throw_on_early_termination:
            zeros = tessera.zeros(1)
            dist.all_reduce(zeros, group=group)
            if zeros.item():
                raise RuntimeError("Detected at least one rank that exhausted inputs. Throwing across all ranks.")
        active = int(ones.item())
        self.ddp.reducer.set_divisor(group.size() if self.divide_by_initial_world_size else active)

    def global_requires_sync(self, joined):
        import tessera
        flag = tessera.tensor([0.0 if joined or not self.ddp.require_backward_grad_sync else 1.0])
        _dist().all_reduce(flag, group=self.ddp.process_group)
        return flag.item() != 0

    # ---------------------------------------------------------------- a rank out of data
    def __exit__(self, exc_type, exc, traceback):
        self.ddp._join = None
        self.ddp.reducer.set_divisor(self.ddp.process_group.size())
        if not self.enable or exc_type is not None:
            return False
        import tessera
        dist = _dist()
        ddp, group = self.ddp, self.ddp.process_group
        is_last_joiner = True
        while True:
            count = tessera.zeros(1)
            dist.all_reduce(count, group=group)
            if count.item() == 0:
                break
            if self.throw_on_early_termination:
                dist.all_reduce(tessera.ones(1), group=group)
                raise RuntimeError(f"Rank {group.rank()} exhausted all inputs.")
            self._shadow_one_iteration()
            is_last_joiner = False
        ddp._sync_module_states(src=find_common_rank(ddp, is_last_joiner))
        return False

    def _shadow_one_iteration(self):
        ddp = self.ddp
        ddp.reducer.rebuild_buckets()
        if ddp.will_sync_module_buffers():
            ddp._sync_buffers(src=find_common_rank(ddp, False))
        should_sync = self.global_requires_sync(joined=True)
        ddp.require_forward_param_sync = should_sync
        if should_sync:
            ddp.reducer.shadow_backward()
