"""torch.func.functional_call and stack_module_state: a module run with parameters and buffers
given as tensors (so transforms can differentiate or batch them)."""

import tessera
from tessera import _C

__all__ = ["functional_call", "stack_module_state"]


def _owner(module, dotted):
    *path, attr = dotted.split(".")
    for part in path:
        module = getattr(module, part)
    return module, attr


def _check_names(module, tensors, known):
    unknown = [k for k in tensors if k not in known]
    missing = [k for k in known if k not in tensors]
    if unknown or missing:
        raise RuntimeError(f"Error(s) in reparametrizing for {type(module).__name__}:\n"
                           + (f"\tUnexpected key(s): {', '.join(map(repr, unknown))}.\n" if unknown else "")
                           + (f"\tMissing key(s): {', '.join(map(repr, missing))}." if missing else ""))


def _swap_in(module, tensors):
    """Puts `tensors` in place of the module's parameters and buffers (a name that is neither
    becomes a plain attribute); returns what restores them."""
    saved = []
    try:
        for name, value in tensors.items():
            owner, attr = _owner(module, name)
            store = owner._parameters if attr in owner._parameters else owner._buffers if attr in owner._buffers else None
            if store is None:
                saved.append((owner.__dict__, attr, owner.__dict__.get(attr, _MISSING)))
                owner.__dict__[attr] = value
                continue
            saved.append((store, attr, store[attr]))
            store[attr] = value
    except BaseException:
        _restore(saved)
        raise
    return saved


def _restore(saved):
    for store, attr, old in reversed(saved):
        if old is _MISSING:
            store.pop(attr, None)
        else:
            store[attr] = old


_MISSING = object()


def functional_call(module, parameter_and_buffer_dicts, args=None, kwargs=None, *, tie_weights=True, strict=False):
    """Calls `module(*args, **kwargs)` with its parameters and buffers replaced, for this call only,
    by the tensors of `parameter_and_buffer_dicts` (a dict by dotted name, or a sequence of dicts)."""
    if isinstance(parameter_and_buffer_dicts, dict):
        tensors = dict(parameter_and_buffer_dicts)
    elif isinstance(parameter_and_buffer_dicts, (list, tuple)):
        tensors = {}
        for d in parameter_and_buffer_dicts:
            duplicates = set(tensors) & set(d)
            if duplicates:
                raise ValueError(f"{sorted(duplicates)} appeared in multiple dictionaries; behavior of "
                                 "functional call is ambiguous")
            tensors.update(d)
    else:
        raise ValueError(f"Expected parameter_and_buffer_dicts to be a dict, or a list/tuple of dicts, but got "
                         f"{type(parameter_and_buffer_dicts)}")
    # One walk of the module serves the weight tying and the strict check (a walk costs as much
    # as a small layer's forward, and ensembles call this once per step).
    if tie_weights or strict:
        named = list(module.named_parameters(remove_duplicate=False)) + list(module.named_buffers(remove_duplicate=False))
        if tie_weights:  # a weight shared by two names takes the value given for either
            by_id = {}
            for name, p in named:
                by_id.setdefault(id(p), []).append(name)
            for names in by_id.values():
                if len(names) > 1:
                    given = [n for n in names if n in tensors]
                    if given:
                        for n in names:
                            tensors.setdefault(n, tensors[given[0]])
        if strict:
            _check_names(module, tensors, dict(named))
    if args is None:
        args = ()
    elif not isinstance(args, tuple):
        args = (args,)
    saved = _swap_in(module, tensors)
    try:
        return module(*args, **(kwargs or {}))
    finally:
        _restore(saved)


def stack_module_state(models):
    """(params, buffers): each parameter and buffer of `models` (same architecture) stacked along a new
    leading dim, for vmap over functional_call (model ensembling). Stacked parameters are new leaves
    that require grad when the originals do."""
    models = list(models)
    if not models:
        raise RuntimeError("stack_module_state: Expected at least one model, got 0.")
    if not (all(m.training for m in models) or not any(m.training for m in models)):
        raise RuntimeError("stack_module_state: Expected all models to have the same training/eval mode.")
    first = type(models[0])
    if not all(type(m) is first for m in models):
        raise RuntimeError("stack_module_state: Expected all models to be of the same class.")

    def stacked(named):
        out = {}
        for name, _ in named(models[0]):
            out[name] = tessera.stack([dict(named(m))[name].detach() for m in models])
        return out

    params = stacked(lambda m: m.named_parameters())
    for name, p in models[0].named_parameters():
        if p.requires_grad:
            params[name].requires_grad_()
    buffers = stacked(lambda m: m.named_buffers())
    return params, buffers


del _C
