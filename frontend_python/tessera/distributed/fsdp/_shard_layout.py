"""The parameters one fully_shard call manages, and how they travel. Each parameter is split on
dim 0 into world_size chunks of ceil(rows / world_size) rows (torch FSDP2's Shard(0)); rank r keeps
its rows, unpadded (the last ranks may hold fewer, or none). A collective moves all of a module's
parameters at once: every chunk, padded, is laid side by side in one flat buffer per rank, so
all_gather_into_tensor gives [rank 0's chunks | rank 1's chunks | ...] and reduce_scatter_tensor
takes the same layout back."""
import math


def _dist():
    import tessera.distributed as dist
    return dist


class _Entry:
    """One parameter: where it lives (every module attribute naming it) and its geometry."""

    def __init__(self, homes, full, world, rank):
        self.homes = homes                      # [(module, attribute name)]
        self.shape = tuple(full.shape)
        self.rows = self.shape[0] if self.shape else 1
        self.row_shape = self.shape[1:] if self.shape else ()
        self.row_numel = math.prod(self.row_shape)
        self.chunk_rows = math.ceil(self.rows / world) if self.rows else 0
        self.chunk_numel = self.chunk_rows * self.row_numel
        start = min(rank * self.chunk_rows, self.rows)
        self.local_rows = min(start + self.chunk_rows, self.rows) - start
        self.start = start
        self.offset = 0                         # set by the layout: where its chunk sits in the flat buffer


class _Regathered:
    """Marks a packed saved tensor as a view of a full parameter to gather again in backward."""


class ShardLayout:
    def __init__(self, homes_by_param, process_group):
        self.process_group = process_group
        self.world = process_group.size()
        self.rank = process_group.rank()
        self.requires_gradient_sync = True
        self.pending_grads = None               # unsharded gradients accumulated while sync is off
        self._regathered = None                 # full parameters gathered again for backward
        self.entries = []
        self.shards = []
        dtypes = {str(p.dtype) for p, _ in homes_by_param}
        if len(dtypes) > 1:
            raise TypeError(f"fully_shard: the parameters one call manages must share a dtype, got {sorted(dtypes)}; "
                            "apply fully_shard to submodules so each call holds one dtype")
        offset = 0
        for param, homes in homes_by_param:
            entry = _Entry(homes, param, self.world, self.rank)
            entry.offset = offset
            offset += entry.chunk_numel
            self.entries.append(entry)
            self.shards.append(self._make_shard(param, entry))
        self.total = offset
        first = homes_by_param[0][0]
        self.dtype, self.device = first.dtype, first.device
        self.install(self.shards)

    @staticmethod
    def _make_shard(param, entry):
        from tessera.nn.parameter import Parameter
        rows = param.detach().reshape(entry.rows, *entry.row_shape)
        local = rows[entry.start:entry.start + entry.local_rows].clone()
        return Parameter(local, requires_grad=param.requires_grad)

    def install(self, tensors):
        """Makes every module attribute of each parameter name `tensors[i]` (shards or full tensors)."""
        from tessera.nn.modules.module import STATE_VERSION
        STATE_VERSION[0] += 1  # what was compiled against the old attributes must not be reused
        for entry, t in zip(self.entries, tensors):
            for module, name in entry.homes:
                module._parameters[name] = t

    # ---------------------------------------------------------------- reshard after forward
    def regather_hooks(self, fulls):
        """(pack, unpack) for saved_tensors_hooks around the module's forward: a saved tensor that is
        one of `fulls` (or a view of one) is packed as (index, geometry) without holding it, and
        unpacked from the full parameters gathered again, once, when backward first needs them. The
        hooks hold no full parameter themselves (they outlive forward in what autograd saved)."""
        by_storage = {full.data_ptr(): (i, full.dtype) for i, full in enumerate(fulls) if full.numel()}

        def pack(tensor):
            i, dtype = by_storage.get(tensor.data_ptr() - tensor.storage_offset() * tensor.element_size(), (None, None))
            if i is None or tensor.dtype != dtype:
                return tensor
            return (_Regathered, i, tuple(tensor.shape), tuple(tensor.stride()), tensor.storage_offset())

        def unpack(packed):
            if not (isinstance(packed, tuple) and packed and packed[0] is _Regathered):
                return packed
            _, i, shape, stride, offset = packed
            return self.regathered()[i].as_strided(shape, stride, offset)
        return pack, unpack

    def regathered(self):
        """The full parameters for backward, all-gathered on first use (AllGatherShards.backward
        drops them)."""
        if self._regathered is None:
            import tessera
            with tessera.no_grad():
                self._regathered = self.gather(self.shards)
        return self._regathered

    # ---------------------------------------------------------------- the collectives
    def gather(self, shards):
        """The full parameters (fresh tensors) from every rank's shards."""
        import tessera
        send = tessera.zeros(self.total, dtype=self.dtype, device=self.device)
        for entry, shard in zip(self.entries, shards):
            n = entry.local_rows * entry.row_numel
            if n:
                send[entry.offset:entry.offset + n].copy_(shard.detach().reshape(-1))
        received = tessera.empty(self.world * self.total, dtype=self.dtype, device=self.device)
        _dist().all_gather_into_tensor(received, send, group=self.process_group)
        by_rank = received.view(self.world, self.total)
        fulls = []
        for entry in self.entries:
            chunks = by_rank[:, entry.offset:entry.offset + entry.chunk_numel]
            rows = chunks.reshape(self.world * entry.chunk_rows, *entry.row_shape)[:entry.rows]
            fulls.append(rows.reshape(entry.shape).clone())
        return fulls

    def reduce_scatter(self, grads):
        """Each rank's shard of the gradients averaged over ranks (None where no gradient came)."""
        import tessera
        self._regathered = None  # backward is done with this module's full parameters
        if self.pending_grads is not None:
            grads = [p if g is None else (g if p is None else g + p) for g, p in zip(grads, self.pending_grads)]
            self.pending_grads = None
        if all(g is None for g in grads):
            return [None] * len(grads)
        send = tessera.zeros(self.world, self.total, dtype=self.dtype, device=self.device)
        for entry, grad in zip(self.entries, grads):
            if grad is None or not entry.chunk_numel:
                continue
            rows = grad.reshape(entry.rows, entry.row_numel)
            padding = self.world * entry.chunk_rows - entry.rows
            if padding:
                rows = tessera.cat([rows, tessera.zeros(padding, entry.row_numel, dtype=rows.dtype,
                                                        device=rows.device)])
            send[:, entry.offset:entry.offset + entry.chunk_numel].copy_(rows.reshape(self.world, entry.chunk_numel))
        received = tessera.zeros(self.total, dtype=self.dtype, device=self.device)
        dist = _dist()
        dist.reduce_scatter_tensor(received, send.reshape(-1), op=dist.ReduceOp.AVG, group=self.process_group)
        out = []
        for entry, grad in zip(self.entries, grads):
            n = entry.local_rows * entry.row_numel
            local = received[entry.offset:entry.offset + n].reshape(entry.local_rows, *entry.row_shape).clone()
            out.append(None if grad is None else local)
        return out

    def accumulate_unsynced(self, grads):
        """With gradient sync off: keep the unsharded gradients for the next synced backward."""
        self._regathered = None
        if self.pending_grads is None:
            self.pending_grads = [None if g is None else g.clone() for g in grads]
        else:
            self.pending_grads = [p if g is None else (g.clone() if p is None else p + g)
                                  for g, p in zip(grads, self.pending_grads)]
