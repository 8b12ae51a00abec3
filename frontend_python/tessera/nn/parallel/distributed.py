"""DistributedDataParallel: one replica of a module per process; gradients are averaged across the
process group during backward, so every replica takes the same optimizer step (torch's
torch.nn.parallel.DistributedDataParallel).

At construction, parameters and buffers are broadcast from rank 0 (after checking that every rank
holds the same parameter shapes). Each forward under grad sync broadcasts the buffers from rank 0
first (broadcast_buffers) and readies the reducer (_reducer.py), which averages the gradients in
buckets while backward runs. no_sync() lets gradients accumulate locally; the first synced backward
after it averages the sum. The wrapped module is .module, so state_dict keys carry torch's
"module." prefix."""
import contextlib

from tessera.nn.modules.module import Module
from tessera.nn.parallel._bucket_assignment import UNLIMITED, compute_bucket_assignment_by_size
from tessera.nn.parallel._reducer import Reducer

_MB = 1024 * 1024
_DEFAULT_BUCKET_CAP_MB = 25
_DEFAULT_FIRST_BUCKET_BYTES = 1 * _MB
_BROADCAST_BUCKET_BYTES = 250 * _MB


def _dist():
    import tessera.distributed as dist
    return dist


def _broadcast_coalesced(tensors, process_group, bucket_bytes, src=0):
    """Broadcasts `tensors` from the group's rank `src` in place, flattened together per dtype and
    device in chunks of at most bucket_bytes: a few collectives instead of one per tensor."""
    import tessera
    dist = _dist()
    groups = {}
    for t in tensors:
        groups.setdefault((str(t.dtype), str(t.device)), []).append(t)
    with tessera.no_grad():
        for same_kind in groups.values():
            chunk, size = [], 0
            for t in same_kind + [None]:
                if t is not None and (not chunk or size + t.numel() * t.element_size() <= bucket_bytes):
                    chunk.append(t)
                    size += t.numel() * t.element_size()
                    continue
                flat = tessera.cat([c.reshape(-1) for c in chunk])
                dist.broadcast(flat, group=process_group, group_src=src)
                offset = 0
                for c in chunk:
                    c.copy_(flat[offset:offset + c.numel()].view(c.shape))
                    offset += c.numel()
                chunk, size = ([t], t.numel() * t.element_size()) if t is not None else ([], 0)


def _verify_param_shapes_across_processes(process_group, params):
    """Every rank must wrap the same model: the same number of parameters with the same shapes and
    dtypes (torch checks this before its first broadcast)."""
    dist = _dist()
    mine = [(tuple(p.shape), str(p.dtype)) for p in params]
    everyone = [None] * process_group.size()
    dist.all_gather_object(everyone, mine, group=process_group)
    rank = process_group.rank()
    for other, theirs in enumerate(everyone):
        if len(theirs) != len(mine):
            raise RuntimeError(f"DDP expects same model across all ranks, but Rank {rank} has {len(mine)} params, "
                               f"while rank {other} has inconsistent {len(theirs)} params.")
        for i, (a, b) in enumerate(zip(mine, theirs)):
            if a != b:
                raise RuntimeError(f"DDP expects same model across all ranks: params[{i}] in this process with sizes "
                                   f"{list(a[0])} ({a[1]}) appears not to match sizes of the same param in process "
                                   f"{other}: {list(b[0])} ({b[1]}).")


def _tensors_in(value):
    """The tensors in a forward's output (nested lists, tuples and dicts)."""
    import tessera
    if isinstance(value, tessera.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _tensors_in(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _tensors_in(v)]
    return []


class DistributedDataParallel(Module):
    """DistributedDataParallel(module, ...): torch's arguments; bucket_cap_mb caps a gradient bucket
    (25 MiB; the first bucket reduced is 1 MiB unless bucket_cap_mb is given), find_unused_parameters
    lets parameters the forward did not use count as ready, static_graph assumes the same used
    parameters every iteration, gradient_as_bucket_view leaves .grad as a view of its bucket.
    mixed_precision, device_mesh and delayed all-reduce are not supported."""

    def __init__(self, module, device_ids=None, output_device=None, dim=0, broadcast_buffers=True, init_sync=True,
                 process_group=None, bucket_cap_mb=None, find_unused_parameters=False, check_reduction=False,
                 gradient_as_bucket_view=False, static_graph=False, delay_all_reduce_named_params=None,
                 param_to_hook_all_reduce=None, mixed_precision=None, device_mesh=None,
                 forward_sync_buffers=None):
        super().__init__()
        where = "DistributedDataParallel"
        if not isinstance(module, Module):
            raise TypeError(f"{where}: module must be an nn.Module, got {type(module).__name__}")
        for name, value in (("delay_all_reduce_named_params", delay_all_reduce_named_params),
                            ("param_to_hook_all_reduce", param_to_hook_all_reduce),
                            ("mixed_precision", mixed_precision), ("device_mesh", device_mesh)):
            if value is not None:
                raise NotImplementedError(f"{where}: {name} is not supported here; got {value!r}")
        dist = _dist()
        if process_group is None:
            from tessera.distributed._c10d import _resolve
            process_group = _resolve(None, where)  # ValueError before init_process_group, as torch
        self.process_group = process_group
        ignored = set(getattr(module, "_ddp_params_and_buffers_to_ignore", ()))
        self.parameters_to_ignore = ignored
        self._module_parameters = [p for n, p in module.named_parameters() if n not in ignored]
        if not any(p.requires_grad for p in self._module_parameters):
            raise RuntimeError("DistributedDataParallel is not needed when a module doesn't have any parameter that "
                               "requires a gradient.")
        if device_ids is not None and len(device_ids) > 1:
            raise ValueError("device_ids can only be None or contain a single element.")
        device_types = {p.device.type for p in self._module_parameters}
        if len(device_types) != 1:
            raise ValueError("DistributedDataParallel's input module must be on the same type of devices, but input "
                             f"module parameters locate in {device_types}.")
        self.device_type = next(iter(device_types))
        if self.device_type == "cpu" and (device_ids or output_device is not None):
            raise ValueError("DistributedDataParallel device_ids and output_device arguments only work with "
                             "single-device/multiple-device GPU modules or CPU modules, but got device_ids "
                             f"{device_ids}, output_device {output_device}, and module parameters "
                             f"{ {p.device for p in self._module_parameters} }.")
        self.device_ids = None if self.device_type == "cpu" or not device_ids else list(device_ids)
        self.output_device = None if self.device_ids is None else (output_device if output_device is not None
                                                                    else self.device_ids[0])
        self.dim = dim
        self.module = module
        self.device = self._module_parameters[0].device
        sync_buffers = broadcast_buffers if broadcast_buffers is not None else True
        self.broadcast_buffers = self.forward_sync_buffers = (
            forward_sync_buffers if forward_sync_buffers is not None else sync_buffers)
        self.find_unused_parameters = find_unused_parameters
        self.gradient_as_bucket_view = gradient_as_bucket_view
        self.require_backward_grad_sync = True
        self.require_forward_param_sync = True
        if bucket_cap_mb is not None and (isinstance(bucket_cap_mb, bool) or not isinstance(bucket_cap_mb, (int, float))
                                          or bucket_cap_mb <= 0):
            raise ValueError(f"{where}: bucket_cap_mb must be a positive number, got {bucket_cap_mb!r}")
        self.bucket_bytes_cap = int((bucket_cap_mb if bucket_cap_mb is not None else _DEFAULT_BUCKET_CAP_MB) * _MB)
        # the first (last-ready) bucket is small so its all-reduce starts early; a cap set by hand holds for all
        self.first_bucket_bytes_cap = _DEFAULT_FIRST_BUCKET_BYTES if bucket_cap_mb is None else self.bucket_bytes_cap
        self.broadcast_bucket_size = _BROADCAST_BUCKET_BYTES

        self._join = None  # the join() context this rank is in, if any
        parameters = self._params_for_reducer()
        if init_sync:
            _verify_param_shapes_across_processes(process_group, parameters)
            self._sync_module_states(src=0, buffers=sync_buffers)
        self.static_graph = False
        limits = ([UNLIMITED] if static_graph or not find_unused_parameters
                  else [self.first_bucket_bytes_cap, self.bucket_bytes_cap])
        assignment = compute_bucket_assignment_by_size(parameters, limits)
        # reversed: the parameters used last in forward get their gradients first in backward
        self.reducer = Reducer(parameters, [list(b) for b, _ in reversed(assignment)], process_group,
                               find_unused_parameters, gradient_as_bucket_view, self.first_bucket_bytes_cap,
                               self.bucket_bytes_cap)
        if static_graph:
            self._set_static_graph()

    def _params_for_reducer(self):
        """Parameters that need a gradient, module by module, each once (shared ones too)."""
        seen, params = set(), []
        for module_name, sub in self.module.named_modules():
            for name, p in sub.named_parameters(recurse=False):
                full = f"{module_name}.{name}" if module_name else name
                if p.requires_grad and full not in self.parameters_to_ignore and id(p) not in seen:
                    seen.add(id(p))
                    params.append(p)
        return params

    def _sync_module_states(self, src, buffers=None):
        """Parameters (and buffers, with broadcast_buffers) from group rank `src` to every rank."""
        states = [p.detach() for n, p in self.module.named_parameters() if n not in self.parameters_to_ignore]
        if self.broadcast_buffers if buffers is None else buffers:
            states += [b.detach() for b in self._module_buffers()]
        _broadcast_coalesced(states, self.process_group, self.broadcast_bucket_size, src)

    def _module_buffers(self):
        return [b for n, b in self.module.named_buffers() if n not in self.parameters_to_ignore]

    def _set_static_graph(self):
        """The graph (which parameters are used, and in what order) is the same every iteration."""
        if self.static_graph:
            import warnings
            warnings.warn("You've set static_graph to be True, no need to set it again.", stacklevel=2)
            return
        self.static_graph = True
        self.reducer.set_static_graph()

    def will_sync_module_buffers(self):
        return self.require_forward_param_sync and self.broadcast_buffers and len(self._module_buffers()) > 0

    def _sync_buffers(self, src=0):
        _broadcast_coalesced([b.detach() for b in self._module_buffers()], self.process_group,
                             self.broadcast_bucket_size, src)

    def forward(self, *inputs, **kwargs):
        import tessera
        syncing = tessera.is_grad_enabled() and self.require_backward_grad_sync
        if syncing:
            self.reducer.ensure_prior_reduction_finished()
        join = self._join
        if join is not None:  # tell the ranks that ran out of data that this one has not (_join.py)
            join.notify()
        if tessera.is_grad_enabled():
            self.reducer.rebuild_buckets()
        if self.will_sync_module_buffers():
            if join is None:
                self._sync_buffers()
            else:  # rank 0 may have joined: the highest rank still training has the buffers
                from tessera.nn.parallel._join import find_common_rank
                self._sync_buffers(src=find_common_rank(self, True))
        if join is not None:
            join.global_requires_sync(joined=False)
        output = self.module(*inputs, **kwargs)
        if syncing:
            self.require_forward_param_sync = True
            self.reducer.prepare_for_backward(_tensors_in(output) if self.find_unused_parameters else [])
        else:
            self.require_forward_param_sync = False
        return output

    def join(self, divide_by_initial_world_size=True, enable=True, throw_on_early_termination=False):
        """A context for training on uneven inputs: ranks that run out of data keep matching the
        collectives of those still training, until all are done (_join.py)."""
        from tessera.nn.parallel._join import Join
        return Join(self, enable, throw_on_early_termination, divide_by_initial_world_size)

    @contextlib.contextmanager
    def no_sync(self):
        """Gradients of forward/backward passes run inside accumulate locally; the first synced
        backward after it averages the accumulated sum across ranks."""
        previous = self.require_backward_grad_sync
        self.require_backward_grad_sync = False
        try:
            yield
        finally:
            self.require_backward_grad_sync = previous

    def register_comm_hook(self, state, hook):
        """hook(state, bucket: GradBucket) -> a future (wait() gives the reduced flat tensor, or None
        when the hook reduced bucket.buffer() in place) replaces the all-reduce of each bucket; the
        gradients reach it unscaled, so the hook does the averaging (see
        tessera.distributed.algorithms.ddp_comm_hooks.default_hooks). Once, before training."""
        import inspect
        if not callable(hook):
            raise TypeError("Communication hook must be callable.")
        try:
            arity = len(inspect.signature(hook).parameters)
        except (TypeError, ValueError):
            arity = 2
        if arity != 2:
            raise TypeError(f"DistributedDataParallel.register_comm_hook: the hook must take (state, bucket), got "
                            f"{arity} parameters")
        if self.reducer.comm_hook is not None:
            raise RuntimeError("register_comm_hook or register_builtin_comm_hook can only be called once.")
        if self.reducer.num_iterations > 0:
            raise RuntimeError("DistributedDataParallel.register_comm_hook: register the hook before the first "
                               "backward; got one after the first iteration")
        self.reducer.comm_hook = (state, hook)

    def _get_bucket_indices(self):
        """The parameter indices in each gradient bucket, in the order the buckets are reduced."""
        return self.reducer.bucket_indices()

    @staticmethod
    def _set_params_and_buffers_to_ignore_for_model(module, params_and_buffers_to_ignore):
        module._ddp_params_and_buffers_to_ignore = list(params_and_buffers_to_ignore)
