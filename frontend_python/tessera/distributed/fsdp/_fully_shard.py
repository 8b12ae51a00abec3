"""fully_shard(module): torch 2.x's FSDP2 entry point.

The parameters of `module` (less those of submodules that fully_shard was already applied to) are
sharded across the process group on dim 0 (_shard_layout.py): between forwards, module.weight and
friends ARE this rank's shards (nn.Parameters), so an optimizer built afterwards from
model.parameters() steps the shards, and module.state_dict() holds the local shards (what torch's
DTensors hold locally; full_state_dict() gathers full tensors). Before the module's forward, one
all_gather puts the full parameters in their place; after it, the shards go back. In backward, the
gradients are reduce-scattered (AVG) into the shards' .grad. With reshard_after_forward (the
default), the full parameters are freed after forward: what autograd saves of them is packed as a
reference (saved_tensors_hooks), and backward all-gathers them again, once per module, when it
first needs them; with reshard_after_forward=False the autograd graph keeps them until backward.
As in torch, every rank must start from the same parameters (same seed, or a broadcast); nothing
is broadcast here.

Apply it bottom-up (layers, then the root), as torch does; the module's class becomes
FSDP<Class>, a subclass of FSDPModule and the original class."""
from tessera.nn.modules.module import Module

from tessera.autograd.graph import saved_tensors_hooks

from ._shard_layout import ShardLayout
from ._unshard import AllGatherShards

_WHERE = "fully_shard"


class FSDPModule:
    """Mixed into a module's class by fully_shard: what torch's FSDPModule offers."""

    def unshard(self, async_op=False):
        """Puts the full parameters in place now (without autograd) until reshard()."""
        import tessera
        state = self._fsdp_state
        with tessera.no_grad():
            state.install(state.gather(state.shards))
        return None

    def reshard(self):
        """Puts the shards back in place."""
        self._fsdp_state.install(self._fsdp_state.shards)

    def set_requires_gradient_sync(self, requires_gradient_sync, *, recurse=True):
        """False: backward keeps the full gradients locally (accumulating) instead of reduce-scattering;
        the next backward with it True reduces their sum (torch's gradient accumulation)."""
        for module in (self.modules() if recurse else [self]):
            if isinstance(module, FSDPModule):
                module._fsdp_state.requires_gradient_sync = bool(requires_gradient_sync)

    def clip_grad_norm_(self, max_norm, norm_type=2.0):
        """Scales the gradients of the whole (sharded) model so that their joint norm is at most
        max_norm; returns the norm before clipping. A collective: nn.utils.clip_grad_norm_ on the
        shards would see only this rank's part of the norm (torch's DTensors make it global there;
        FSDP1 had this method)."""
        import math
        import tessera
        import tessera.distributed as dist
        norm_type = float(norm_type)
        states = [m._fsdp_state for m in self.modules() if isinstance(m, FSDPModule) and m._fsdp_state is not None]
        group = states[0].process_group if states else None
        sharded = {id(s) for st in states for s in st.shards}
        grads = [s.grad for st in states for s in st.shards if s.grad is not None]
        replicated = [p.grad for p in self.parameters() if id(p) not in sharded and p.grad is not None]
        with tessera.no_grad():
            def local(gs):
                if not gs:
                    return 0.0
                if math.isinf(norm_type):
                    return max(float(g.abs().max()) if g.numel() else 0.0 for g in gs)
                return sum(float((g.double().abs() ** norm_type).sum()) for g in gs)
            if math.isinf(norm_type):
                total = tessera.tensor([max(local(grads), local(replicated))], dtype=tessera.float64)
                if group is not None:
                    dist.all_reduce(total, op=dist.ReduceOp.MAX, group=group)
                norm = float(total[0])
            else:
                total = tessera.tensor([local(grads)], dtype=tessera.float64)
                if group is not None:
                    dist.all_reduce(total, group=group)
                norm = (float(total[0]) + local(replicated)) ** (1.0 / norm_type)
            coef = min(float(max_norm) / (norm + 1e-6), 1.0)
            for g in grads + replicated:
                g.mul_(coef)
        return tessera.tensor(norm, dtype=(grads + replicated)[0].dtype if grads + replicated else tessera.float32)

    def set_reshard_after_forward(self, reshard_after_forward, recurse=True):
        for module in (self.modules() if recurse else [self]):
            if isinstance(module, FSDPModule):
                module._fsdp_reshard_after_forward = reshard_after_forward


_fsdp_classes = {}


def _fsdp_class(cls):
    if cls not in _fsdp_classes:
        _fsdp_classes[cls] = type(f"FSDP{cls.__name__}", (FSDPModule, cls), {"__module__": cls.__module__})
    return _fsdp_classes[cls]


def _managed_parameters(module):
    """[(parameter, [(owner module, attribute)])] that this call manages: the module's own and its
    submodules', less what a nested fully_shard already manages; a parameter shared by several
    attributes is managed once."""
    skip = [name + "." for name, sub in module.named_modules() if sub is not module and isinstance(sub, FSDPModule)]
    by_id, order = {}, []
    for name, sub in module.named_modules():
        if any((name + ".").startswith(prefix) for prefix in skip):
            continue
        for attribute, p in sub._parameters.items():
            if p is None:
                continue
            if id(p) not in by_id:
                by_id[id(p)] = (p, [])
                order.append(id(p))
            by_id[id(p)][1].append((sub, attribute))
    return [by_id[i] for i in order]


def _pre_forward(module, args):
    import tessera
    state = module._fsdp_state
    if tessera.is_grad_enabled() and any(s.requires_grad for s in state.shards):
        fulls = AllGatherShards.apply(state, *state.shards)
        if module._fsdp_reshard_after_forward:
            hooks = saved_tensors_hooks(*state.regather_hooks(fulls))
            hooks.__enter__()
            module._fsdp_saved_hooks = hooks
    else:
        with tessera.no_grad():
            fulls = state.gather(state.shards)
    state.install(fulls)
    return None


def _post_forward(module, args, output):
    hooks = module.__dict__.pop("_fsdp_saved_hooks", None)
    if hooks is not None:
        hooks.__exit__(None, None, None)
    module._fsdp_state.install(module._fsdp_state.shards)
    return None


def fully_shard(module, *, mesh=None, reshard_after_forward=True, shard_placement_fn=None, mp_policy=None,
                offload_policy=None, ignored_params=None, process_group=None):
    """Shards `module`'s parameters across the default process group (or `process_group`); returns
    the module, whose class is now FSDP<Class>."""
    if isinstance(module, (list, tuple)):
        raise NotImplementedError(f"{_WHERE}: a list of modules sharing one group is not supported here; apply "
                                  "fully_shard to each")
    if not isinstance(module, Module):
        raise TypeError(f"{_WHERE}: expected an nn.Module, got {type(module).__name__}")
    for name, value in (("mesh", mesh), ("shard_placement_fn", shard_placement_fn), ("mp_policy", mp_policy),
                        ("offload_policy", offload_policy), ("ignored_params", ignored_params)):
        if value is not None:
            raise NotImplementedError(f"{_WHERE}: {name} is not supported here (parameters are sharded on dim 0 over "
                                      f"one process group); got {value!r}")
    if isinstance(module, FSDPModule):
        raise ValueError(f"{_WHERE}: fully_shard was already applied to this {type(module).__name__}")
    from tessera.distributed._c10d import _resolve
    process_group = _resolve(process_group, _WHERE)  # ValueError before init_process_group, as torch
    managed = _managed_parameters(module)
    module.__class__ = _fsdp_class(type(module))
    module._fsdp_reshard_after_forward = reshard_after_forward
    if not managed:  # a root whose parameters all live in sharded children: nothing of its own to move
        module._fsdp_state = None
        return module
    module._fsdp_state = ShardLayout(managed, process_group)
    module.register_forward_pre_hook(_pre_forward)
    module.register_forward_hook(_post_forward, always_call=True)
    return module
