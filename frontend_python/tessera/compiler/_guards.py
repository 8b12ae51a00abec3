"""Guards: what must hold for a compiled graph to be reused. A call's guard key collects the
argument structure, each tensor's dtype, device, shape, strides and requires_grad, which
arguments are the same tensor, the values of non-tensor arguments, grad mode, the autocast
regions in force (a graph captured under autocast holds its casts), and (for a module) every
submodule's `training` flag and the identity of its parameters and buffers.
A key that matches no cached entry recompiles; `explain_miss` says which part changed."""
import tessera
from tessera.autograd.grad_mode import is_grad_enabled
from tessera._C import _guard_signature
from tessera.amp.autocast_mode import autocast_state
from tessera.compiler._pytree import LEAF, flatten
from tessera.nn.modules.module import STATE_VERSION


def _tensor_guard(t):
    return (t.dtype, t.device, tuple(t.shape), t.stride(), t.requires_grad)


def _value_guard(v):
    try:
        hash(v)
        return (type(v), v)
    except TypeError:
        return (type(v), id(v))  # an unhashable object: the same object


_module_states = {}  # id(module) -> (STATE_VERSION when computed, state)


def module_state(module):
    """(training flags, parameter and buffer identities) of a module tree, or None; recomputed
    only when some module changed since (nn.modules.module.STATE_VERSION)."""
    if module is None:
        return None
    version = STATE_VERSION[0]
    cached = _module_states.get(id(module))
    if cached is not None and cached[0] == version and cached[2] is module:
        return cached[1]
    training = tuple(m.training for m in module.modules())
    tensors = tuple(id(t) for t in module.parameters()) + tuple(id(b) for b in module.buffers())
    _module_states[id(module)] = (version, (training, tensors), module)
    return training, tensors


def fast_key(args, module):
    """The guard key of a call whose arguments are all tensors (no kwargs), or None."""
    signature = _guard_signature(args)
    if signature is None:
        return None
    return signature, is_grad_enabled(), autocast_state(), module_state(module)


def guard_key(args, kwargs, module):
    """(key, leaves, paths): the hashable guard key of a call and its flattened arguments."""
    leaves, paths, spec = flatten((args, kwargs))
    parts, first_position = [], {}
    for i, leaf in enumerate(leaves):
        if isinstance(leaf, tessera.Tensor):
            alias = first_position.setdefault(id(leaf), i)
            parts.append(_tensor_guard(leaf) + (alias,))
        else:
            parts.append(_value_guard(leaf))
    key = (spec, tuple(parts), is_grad_enabled(), module_state(module), autocast_state())
    return key, leaves, paths


def _contiguous_strides(shape):
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(size, 1)
    return tuple(reversed(strides))


def size_free(key):
    """The key without the sizes of tensors: what must still hold once sizes are dynamic. A
    tensor keeps its rank, which dims are 0 or 1 (they specialise, as in PyTorch: a size-1 dim
    broadcasts), and whether it is contiguous (else its exact strides)."""
    spec, parts, grad, module, autocast = key
    free = []
    for part in parts:
        if isinstance(part[0], type):
            free.append(part)
            continue
        dtype, device, shape, stride, requires_grad, alias = part
        layout = "contiguous" if _same_strides(shape, stride) else (tuple(shape), tuple(stride))
        free.append((dtype, device, tuple(s if s in (0, 1) else None for s in shape), layout, requires_grad, alias))
    return spec, tuple(free), grad, module, autocast


def _same_strides(shape, stride):
    return all(a == b for a, b, n in zip(_contiguous_strides(shape), stride, shape) if n > 1)


_TENSOR_FIELDS = ("dtype", "device", "shape", "stride", "requires_grad", "is the same tensor as argument")


def _path_name(path):
    # flatten((args, kwargs)) paths start with [0] for args and [1] for kwargs
    if path.startswith("[0]"):
        return "args" + path[3:]
    if path.startswith("[1]"):
        return "kwargs" + path[3:]
    return path


def explain_miss(old, new, paths):
    """One line naming the first guard of `old` that `new` fails."""
    o_spec, o_parts, o_grad, o_module, o_autocast = old
    n_spec, n_parts, n_grad, n_module, n_autocast = new
    if o_spec != n_spec:
        return "the structure of the arguments changed (a different number or nesting of arguments)"
    for path, a, b in zip(paths, o_parts, n_parts):
        if a == b:
            continue
        name = _path_name(path)
        if isinstance(a[0], type) or isinstance(b[0], type):  # a non-tensor argument
            if a[0] is not b[0]:
                return f"{name} changed type from {a[0].__name__} to {b[0].__name__}"
            return f"{name} changed value from {a[1]!r} to {b[1]!r}"
        for field, x, y in zip(_TENSOR_FIELDS, a, b):
            if x != y:
                if field == "shape":
                    return f"{name}: tensor size changed from {list(x)} to {list(y)}"
                if field == "stride":
                    return f"{name}: tensor strides changed from {list(x)} to {list(y)}"
                return f"{name}: tensor {field} changed from {x} to {y}"
    if o_grad != n_grad:
        return f"grad mode changed from {'enabled' if o_grad else 'disabled'} to {'enabled' if n_grad else 'disabled'}"
    if o_autocast != n_autocast:
        return f"autocast changed from {_autocast_text(o_autocast)} to {_autocast_text(n_autocast)}"
    if o_module != n_module:
        if o_module[0] != n_module[0]:
            return "a submodule's training flag changed (train()/eval())"
        return "the module's parameters or buffers were replaced by other tensors"
    return "no guard changed"


def _autocast_text(regions):
    return ", ".join(f"on for {device} in {dtype}" for device, dtype in regions) if regions else "off"


def describe(key, paths):
    """The guards of a key as readable lines (for explain())."""
    spec, parts, grad, module, autocast = key
    lines = []
    for path, part in zip(paths, parts):
        name = _path_name(path)
        if isinstance(part[0], type):
            lines.append(f"{name} == {part[1]!r}" if part[0] is not object else f"{name} is the same object")
        else:
            dtype, device, shape, stride, rg, alias = part
            lines.append(f"{name}: Tensor dtype={dtype} device={device} size={list(shape)} stride={list(stride)} "
                         f"requires_grad={rg}")
    lines.append(f"grad mode {'enabled' if grad else 'disabled'}")
    lines.append(f"autocast {_autocast_text(autocast)}")
    if module is not None:
        lines.append(f"module: {len(module[0])} training flags and {len(module[1])} parameter/buffer identities")
    return lines
